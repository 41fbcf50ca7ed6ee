"""neardup: a near-duplicate document engine over an embedded DuckDB catalog and LMDB postings."""

from __future__ import annotations

#: written here only: pyproject.toml reads it (its ``dynamic`` version), so importing neardup reads no
#: package metadata (``importlib.metadata``: its imports took 15-20 ms of the CLI's start, before
#: the commands' module loads with the garbage collector off; DuckDB imports it later, inside that)
__version__ = "0.1.0"

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
