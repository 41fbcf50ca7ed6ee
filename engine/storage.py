"""Storage faults as ``NeardupError``s: what went wrong, on which file, and what to do.

The index folder can fail a writer or a reader in a few ways, and each comes
from a different layer: the operating system (``OSError`` with an errno),
DuckDB (an ``IOException`` whose text holds the system's message, or a
damaged-file message), LMDB (an ``lmdb.Error`` subclass, a full disk
reported as an I/O error). ``convert`` turns any of them, or a chain of them
(an exception raised while handling another, e.g. a ROLLBACK after a
failed COMMIT), into one of

* ``StorageError`` (exit 8) of a ``kind``: ``READ_ONLY`` (a read-only file
  system), ``NO_PERMISSION``, ``DISK_FULL``, ``IO_ERROR``, ``MAP_FULL`` (LMDB's
  memory map cannot grow) or ``OS_ERROR`` (any other system error), naming the file and saying what to do and what
  the index keeps;
* ``CatalogDamaged`` (exit 7): ``catalog.duckdb`` is not a DuckDB file or a
  block in use fails its checksum;
* ``PostingsDamaged`` (exit 6): LMDB cannot open or read ``postings/``.

``guard`` applies ``convert`` to whatever escapes a block; exceptions it does
not recognise (programming errors) pass unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import lmdb

from .errors import CatalogDamaged, NeardupError, PostingsDamaged, StorageError

READ_ONLY = "read-only"
NO_PERMISSION = "permission denied"
DISK_FULL = "disk full"
IO_ERROR = "I/O error"
MAP_FULL = "map full"
OS_ERROR = "os error"
KINDS = (READ_ONLY, NO_PERMISSION, DISK_FULL, IO_ERROR, MAP_FULL, OS_ERROR)

_ERRNO_KIND = {
    errno.EROFS: READ_ONLY,
    errno.EACCES: NO_PERMISSION,
    errno.EPERM: NO_PERMISSION,
    errno.ENOSPC: DISK_FULL,
    errno.EDQUOT: DISK_FULL,
    errno.EFBIG: DISK_FULL,
    errno.EIO: IO_ERROR,
}
#: DuckDB and LMDB report a system error as its text (``strerror``) inside their own message
_TEXT_KIND = {os.strerror(e): k for e, k in _ERRNO_KIND.items()}
#: DuckDB's words for a damaged catalog file
_DAMAGED = ("not a valid DuckDB database file", "Corrupt database file", "does not match stored checksum",
            "Failed to read database header", "database file is corrupt")
#: DuckDB's exception types that can carry a storage fault (a damaged block is a plain ``duckdb.Error``);
#: the others (conversion, binder, parser, ...) are about the statement, whatever their text says
_DUCKDB_STORAGE = (duckdb.IOException, duckdb.FatalException, duckdb.TransactionException, duckdb.InternalException,
                   duckdb.OutOfMemoryException)
#: LMDB's errors for a damaged environment
_LMDB_DAMAGED = (lmdb.InvalidError, lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.VersionMismatchError,
                 lmdb.IncompatibleError, lmdb.BadChecksumError, lmdb.PanicError)
#: below this many free bytes, an I/O error on a write is taken for a full disk (LMDB reports ENOSPC as EIO)
NEARLY_FULL = 1 << 20


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then the exception it was raised from or while handling, and so on."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _free_bytes(path: Path) -> int | None:
    p = path
    while True:
        try:
            return shutil.disk_usage(p).free
        except OSError:
            if p.parent == p:
                return None
            p = p.parent


def _size(n: int | None) -> str:
    if n is None:
        return "an unknown amount"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} bytes"


def _message_path(text: str) -> str | None:
    """The file a DuckDB (``file "X"``) or LMDB (``X: message``) error names."""
    m = re.search(r'file "([^"]+)"', text)
    if m:
        return m.group(1)
    m = re.match(r"(/[^:]+): ", text)
    return m.group(1) if m else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _library_text(text: str, where: Path) -> str:
    """DuckDB's or LMDB's message without what the error message says anyway: the path it starts with
    (LMDB) and the error class words (DuckDB's ``IO Error: ``)."""
    if text.startswith(f"{where}: "):
        text = text[len(str(where)) + 2 :]
    return re.sub(r"^(?:[A-Za-z]+ )?(?:Error|FATAL Error|TransactionContext Error): ", "", text)


def _kind_in_text(text: str) -> str | None:
    for words, kind in _TEXT_KIND.items():
        if words in text:
            return kind
    return None


def _reading(doing: str) -> bool:
    """Whether ``doing`` only reads (``guard``'s words: "reading ...", "opening the catalog", "running the query")."""
    return doing.startswith(("reading", "running the query")) or doing == "opening the catalog"


def storage_error(kind: str, path: str | os.PathLike, doing: str, detail: str = "", keeps: str = "",
                  index: str | os.PathLike | None = None) -> StorageError:
    """The ``StorageError`` of ``kind`` on ``path`` while ``doing``; ``keeps`` says what the index keeps."""
    path = Path(path)
    folder = Path(index) if index is not None else (path if path.is_dir() else path.parent)
    keeps = f" {keeps.rstrip('.')}." if keeps else ""
    if kind == READ_ONLY:
        msg = f"{path}: cannot write while {doing}: the file system is read-only"
        hint = (f"commands that write (ingest, rebuild, evaluate, init) need {folder} on a writable file system: remount "
                f"it read-write or copy the folder to one; `neardup sql`, `info` and `check` read a read-only index."
                if index is not None else f"choose a folder on a writable file system, or remount {folder} read-write.")
    elif kind == NO_PERMISSION and _reading(doing):
        msg = f"{path}: permission denied while {doing}"
        hint = f"run neardup as a user who may read {folder}, or give read access (`chmod -R a+rX {folder}`)."
    elif kind == NO_PERMISSION:
        msg = f"{path}: permission denied while {doing}"
        hint = (f"run neardup as a user who may write {folder} (its owner), or give write access "
                f"(`chmod -R u+w {folder}`); `neardup sql` and `info` need read access only."
                if index is not None else f"choose a folder you may write, or give write access to {folder}.")
    elif kind == DISK_FULL:
        free = _free_bytes(path)
        msg = f"{path}: no space left on the device while {doing} ({_size(free)} free)"
        hint = ("free space on that file system, or move the index to a bigger one, then run the command again."
                if index is not None else "free space on that file system, or choose a folder on another one.")
    elif kind == MAP_FULL:
        msg = f"{path}: the postings' memory map cannot grow while {doing}"
        hint = ("LMDB maps the whole postings file into the process's address space and doubles the map when it "
                "fills: free memory or raise the process's address-space limit (`ulimit -v`), then run the command again.")
    elif kind == IO_ERROR:
        msg = f"{path}: I/O error while {doing}"
        hint = "the disk or file system failed a read or write: check it (dmesg)" + (
            f", then run `neardup check --index {folder}`." if index is not None else ".")
    else:
        msg = f"{path}: {detail or 'system error'} while {doing}"
        hint = "fix the cause named above, then run the command again."
    hint += keeps
    if detail and kind != OS_ERROR and detail not in _TEXT_KIND:  # the library's own words, unless only the system's
        msg += f" ({detail})"
    return StorageError(msg, hint=hint, path=str(path), kind=kind)


def _damaged(cls, path: str | os.PathLike, what: str, detail: str, hint: str):
    path = Path(path)
    return cls(f"{path}: the {what} damaged ({detail})", hint=hint, path=str(path), detail=detail)


def catalog_damaged(path: str | os.PathLike, detail: str, index: str | os.PathLike | None = None) -> CatalogDamaged:
    folder = Path(index) if index is not None else Path(path).parent
    return _damaged(CatalogDamaged, path, "catalog is", detail,
                    f"run `neardup check --index {folder}` to see what is damaged, then restore the index folder from a backup "
                    "(`neardup backup` makes one): the catalog is the source of truth and nothing can re-derive it")


def postings_damaged(path: str | os.PathLike, detail: str, index: str | os.PathLike | None = None) -> PostingsDamaged:
    folder = Path(index) if index is not None else Path(path).parent
    return _damaged(PostingsDamaged, path, "postings are", detail,
                    f"run `neardup rebuild --postings --index {folder}`: it re-derives the postings from the catalog "
                    "(`neardup sql` and `info` keep working meanwhile)")


def _one(exc: BaseException, path: Path, doing: str, keeps: str, index) -> NeardupError | None:
    """``exc`` alone as a NeardupError, or None when it is not a storage fault."""
    if isinstance(exc, NeardupError):
        return exc
    if isinstance(exc, OSError):
        where = Path(exc.filename) if exc.filename else path
        kind = _ERRNO_KIND.get(exc.errno or 0, OS_ERROR)
        detail = (exc.strerror or _first_line(exc)) if kind == OS_ERROR else ""  # the kind's words say it
        if kind == IO_ERROR and (_free_bytes(where) or 0) < NEARLY_FULL:
            kind = DISK_FULL
        return storage_error(kind, where, doing, detail, keeps, index)
    if isinstance(exc, lmdb.Error):
        text = _first_line(exc)
        where = Path(_message_path(text) or path)
        text = _library_text(text, where)
        if isinstance(exc, _LMDB_DAMAGED):
            return postings_damaged(where, text, index)
        kind = _kind_in_text(text)
        if isinstance(exc, lmdb.DiskError):
            kind = DISK_FULL
        elif isinstance(exc, (lmdb.MapFullError, lmdb.MemoryError)):
            kind = MAP_FULL  # the map could not grow (LmdbPostings doubles it when it fills)
        if kind in (None, IO_ERROR) and (_free_bytes(where) or 0) < NEARLY_FULL:
            kind = DISK_FULL  # LMDB reports a short write to a full disk as EIO
        return storage_error(kind or OS_ERROR, where, doing, text, keeps, index)
    if type(exc) is duckdb.Error or isinstance(exc, _DUCKDB_STORAGE):
        text = _first_line(exc)
        where = Path(_message_path(text) or path)
        text = _library_text(text, where)
        if any(words in text for words in _DAMAGED):
            return catalog_damaged(where, text, index)
        kind = _kind_in_text(text)
        if kind is not None:
            return storage_error(kind, where, doing, text, keeps, index)
        if isinstance(exc, duckdb.IOException):
            return storage_error(OS_ERROR, where, doing, text, keeps, index)
    return None


def convert(exc: BaseException, path: str | os.PathLike, doing: str, keeps: str = "",
            index: str | os.PathLike | None = None) -> NeardupError | None:
    """``exc`` (or the first exception of its chain that is a storage fault) as a NeardupError; None when
    none is. A DuckDB connection that a fatal error invalidated is reported by that error's cause."""
    path = Path(path)
    fatal = None
    for e in _chain(exc):
        if not isinstance(e, Exception):
            return None  # KeyboardInterrupt, SystemExit: never turned into an error message
        found = _one(e, path, doing, keeps, index)
        if found is not None:
            return found
        if fatal is None and isinstance(e, duckdb.FatalException):
            fatal = e
    if fatal is not None:
        return storage_error(OS_ERROR, path, doing, _first_line(fatal), keeps, index)
    return None


@contextlib.contextmanager
def guard(path: str | os.PathLike, doing: str, keeps: str = "", index: str | os.PathLike | None = None) -> Iterator[None]:
    """Turn a storage fault escaping the block into its NeardupError (``convert``); anything else passes."""
    try:
        yield
    except Exception as exc:
        err = convert(exc, path, doing, keeps, index)
        if err is None or err is exc:
            raise
        raise err from exc
