"""neardup: a near-duplicate document engine over an embedded DuckDB catalog and LMDB postings."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("neardup")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+source"

from .errors import (  # noqa: E402
    BadRecord,
    CatalogDamaged,
    IndexBusy,
    IndexLocked,
    IndexNotFound,
    InputError,
    NeardupError,
    PostingsDamaged,
    QueryError,
    QueryRefused,
    SchemaTooNew,
    SettingsMismatch,
    StorageError,
)
from .settings import Settings  # noqa: E402


def __getattr__(name: str):
    """``ReadOptions`` and ``Index`` (the store's, which also answers queries), imported on first
    use: ``import neardup`` itself loads neither Arrow nor DuckDB (the CLI sets up the process
    before they load: ``neardup.memory.one_malloc_arena``)."""
    if name == "ReadOptions":
        from .readers import ReadOptions

        return ReadOptions
    if name == "Index":
        from .lookup import Index

        return Index
    raise AttributeError(f"module 'neardup' has no attribute {name!r}")

__all__ = [
    "__version__",
    "BadRecord",
    "CatalogDamaged",
    "Index",
    "IndexBusy",
    "IndexLocked",
    "IndexNotFound",
    "InputError",
    "NeardupError",
    "PostingsDamaged",
    "QueryError",
    "QueryRefused",
    "ReadOptions",
    "SchemaTooNew",
    "Settings",
    "SettingsMismatch",
    "StorageError",
]
