"""``neardup backup``: a consistent copy of an index folder, taken while readers go on.

How the copy stays consistent:

1. the writer lock is taken (``writer_lock``), so no batch, rebuild or crash
   repair can start until the copy is done; a held lock is waited for up to
   ``wait`` seconds (0 by default: refused at once with ``IndexLocked``, exit
   4, naming the writer). Readers are not disturbed.
2. a read-only DuckDB connection is opened on the catalog and kept open while
   the files are copied: DuckDB's own file lock then keeps out any read-write
   connection that does not go through neardup's lock (``IndexBusy`` if one
   is open already).
3. ``catalog.duckdb`` is copied as a file: nobody can write it now, and a
   writer checkpoints when it ends, so the file holds every committed batch.
   A ``catalog.duckdb.wal`` (left by a writer that was stopped before its
   checkpoint) and a ``batch.pending`` are copied with it.
4. ``postings/`` is copied by LMDB itself (``mdb_env_copy``), a snapshot
   under one read transaction, and its ``runs/`` files (``store.runs``:
   immutable, and no writer runs while the lock is held) as files. Not compacting: the compacting copy of the
   LMDB that py-lmdb bundles (0.9.36 in py-lmdb 3.0) crashes the process
   (SIGSEGV) on a ``MDB_DUPSORT | MDB_DUPFIXED`` database as soon as one
   key's duplicates outgrow a page, which every sizeable index has.
5. the lock is released; the copy is written to a hidden sibling folder of
   DEST, synced, and renamed to DEST, so DEST never holds half a backup.

When the copy is not whole by itself (a log or ``batch.pending`` came along,
or its postings lag the catalog, as after a crash), it is opened once as a
writer: DuckDB checkpoints its log and the postings are re-derived from the
catalog, the repair the original's next writer would do. Last, the copy is
checked (``neardup check``, sampled) unless ``check=False``.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import lmdb

from ..errors import NeardupError
from ..sqlfiles import query
from ..store import catalog
from ..store.index import PENDING_FILE, POSTINGS_DIR, Index
from ..storage import guard
from ..store.postings import LmdbPostings
from . import writer_lock
from .check import CheckReport, check_index


class BackupDestination(NeardupError):
    """``neardup backup`` was given a destination it will not write to."""

    hint = "name a new folder or an empty one, outside the index; a backup never overwrites anything"
    exit_code = 2


@dataclass
class BackupResult:
    source: str
    dest: str
    catalog_bytes: int = 0
    postings_bytes: int = 0
    #: whether the index had postings to copy
    postings: bool = True
    #: a catalog log or ``batch.pending`` came along: the copy was opened as a writer to make it whole
    finished: bool = False
    #: batches whose postings that repair re-derived in the copy
    repaired: list[int] = field(default_factory=list)
    #: how long writers were kept waiting
    locked_seconds: float = 0.0
    seconds: float = 0.0
    #: the check of the copy (None when not asked for)
    check: CheckReport | None = None


def backup(index: Index, dest: str | os.PathLike, wait: float = 0.0, check: bool = True) -> BackupResult:
    """Copy ``index`` into ``dest`` (a new or empty folder); see the module docstring."""
    t0 = time.perf_counter()
    index.require()
    dest = Path(dest)
    _refuse_unless_empty(index, dest)
    tmp = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    res = BackupResult(str(index.path), str(dest))
    with guard(dest, f"backing up {index.path} to {dest}", "The index is unchanged; the partial copy was removed"):
        _copy(index, dest, tmp, wait, res)
    if check:
        res.check = check_index(Index(dest))
    res.seconds = time.perf_counter() - t0
    return res


def _copy(index: Index, dest: Path, tmp: Path, wait: float, res: BackupResult) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.mkdir()
        with writer_lock(index, wait):
            t_lock = time.perf_counter()
            con = catalog.connect(index.catalog_path, read_only=True)  # shuts out DuckDB writers while we copy
            try:
                last = int(con.execute(query("catalog", "last_committed_batch")).fetchall()[0][0])
                extras = _copy_files(index, tmp)
                res.catalog_bytes = (tmp / catalog.CATALOG_FILE).stat().st_size
                res.postings = index.postings_path.is_dir()
                if res.postings:
                    res.postings_bytes = _copy_postings(index.postings_path, tmp / POSTINGS_DIR)
            finally:
                con.close()
            res.locked_seconds = time.perf_counter() - t_lock
        if extras or _applied(tmp / POSTINGS_DIR) != last:
            with Index(tmp).writer() as w:  # replays the log, re-derives missing postings, checkpoints
                res.repaired = list(w.repaired)
            res.finished = True
        _sync(tmp)
        os.rename(tmp, dest)  # replaces an empty DEST
        _fsync_path(dest.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _refuse_unless_empty(index: Index, dest: Path) -> None:
    if dest.exists() and not dest.is_dir():
        raise BackupDestination(f"{dest}: exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()):
        raise BackupDestination(f"{dest}: the folder is not empty")
    src = index.path.resolve()
    target = dest.resolve()
    if target == src or src in target.parents:
        raise BackupDestination(f"{dest}: is inside the index folder {index.path}")


def _copy_files(index: Index, tmp: Path) -> list[str]:
    """Copy the catalog (and its log and ``batch.pending``, when present); returns the extras copied."""
    shutil.copyfile(index.catalog_path, tmp / catalog.CATALOG_FILE)
    extras = []
    for name in (catalog.CATALOG_FILE + ".wal", PENDING_FILE):
        if (index.path / name).exists():
            shutil.copyfile(index.path / name, tmp / name)
            extras.append(name)
    return extras


def _copy_postings(src: Path, dst: Path) -> int:
    """LMDB's own copy of the environment (one read transaction: a snapshot); returns its size."""
    try:
        env = lmdb.open(str(src), readonly=True, lock=True, max_dbs=64, subdir=True)
    except lmdb.Error:
        # lock.mdb cannot be written (a read-only folder): no LMDB writer can run while neardup's
        # writer lock is held, so the environment is read without LMDB's reader table
        env = lmdb.open(str(src), readonly=True, lock=False, max_dbs=64, subdir=True)
    try:
        env.set_mapsize(0)  # adopt the size the writer grew the map to
        dst.mkdir()
        env.copy(str(dst), compact=False)  # never compact=True: see the module docstring
    finally:
        env.close()
    runs = src / "runs"  # the tables kept as sorted runs (store.runs): immutable files, no writer can run now
    if runs.is_dir():
        shutil.copytree(runs, dst / "runs")
    return sum(f.stat().st_size for f in dst.rglob("*") if f.is_file())


def _applied(postings: Path) -> int:
    """The batch the copied postings are applied up to (-1 when there are none)."""
    if not postings.is_dir():
        return -1
    p = LmdbPostings(postings, readonly=True)
    try:
        return p.applied_batch()
    finally:
        p.close()


def _sync(folder: Path) -> None:
    for f in folder.rglob("*"):
        if f.is_file():
            _fsync_path(f)
    for d in [folder, *(d for d in folder.rglob("*") if d.is_dir())]:
        _fsync_path(d)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
