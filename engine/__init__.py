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
from .readers import ReadOptions  # noqa: E402
from .settings import Settings  # noqa: E402
from .lookup import Index  # noqa: E402  (the store's Index, which also answers queries)

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
