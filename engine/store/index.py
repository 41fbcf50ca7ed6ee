"""An index folder: the DuckDB catalog plus the LMDB postings, kept consistent.

Layout of ``DIR``::

    catalog.duckdb      the catalog (source of truth; public SQL contract)
    postings/           LMDB environment (inverted index, derived from the catalog)
    writer.lock         flock()ed by the one writer; holds who it is
    batch.pending       exists while a batch is being written

Write protocol of a batch (``Writer``), chosen so that ``kill -9`` anywhere
leaves the index as before or as after the batch:

1. take the writer lock, create ``batch.pending``;
2. write documents, rejects and the ``batches`` row in ONE DuckDB transaction
   and commit it: this commit is the moment the batch happens;
3. append the batch's postings in ONE LMDB write transaction that also
   records ``applied_batch`` (filled in a thread while step 2 commits, and
   committed only after it: ``PostingsWrite``);
4. remove ``batch.pending``, release the lock. DuckDB is not checkpointed
   per batch: its write-ahead log is durable, readers replay it, and DuckDB
   checkpoints by itself once the log passes 16 MB (a checkpoint per batch
   rewrote the table's last, growing row group every time); a batch whose
   commit took the log past that checkpoints it on a cursor while step 3
   runs (``Writer.checkpoint_beside``), not alone at the next statement; so does
   the last batch of a write, whatever its log's size. When the writer
   is done (the end of a command), it checkpoints once, so that the catalog
   file alone holds everything committed.

A crash before 2 commits leaves nothing (DuckDB drops the open transaction on
recovery). A crash after 2 leaves postings behind the catalog; whoever opens
the index next sees ``batch.pending`` (or postings behind the catalog: LMDB
skips the metadata flush, so a system crash may undo its last commit) and,
under the writer lock, re-derives the missing postings from the catalog rows
(postings are a pure function of them, see ``neardup.keys``) before doing
anything else.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import numpy as np

from .. import memory, storage
from ..errors import IndexLocked, IndexNotFound, NeardupError, PostingsDamaged, StorageError
from ..keys import batch_postings
from ..settings import Settings
from ..sqlfiles import query
from . import catalog
from .postings import LmdbPostings, Postings
from .runs import RUN_TABLES

LOCK_FILE = "writer.lock"
PENDING_FILE = "batch.pending"
POSTINGS_DIR = "postings"
#: a posting table only releases before the rare-values concept search wrote
OLD_LAYOUT_TABLE = "concept_prefix"
#: tables only older releases wrote: postings holding one are re-derived in today's layout. ``concept_prefix``:
#: before the rare-values concept search; ``val:minhash32``: the agreement filter's values before they were
#: one byte per position in blocks of rows (``val:minhash8``)
OLD_LAYOUT_TABLES = (OLD_LAYOUT_TABLE, "val:minhash32")


#: tables today's layout writes with every document (``neardup.keys``): postings holding documents (a
#: ``url`` table) without one of them are an older release's
NEW_LAYOUT_TABLES = ("val:docinfo",)


def old_layout(postings: LmdbPostings) -> str | None:
    """What marks the postings as an older release's: the first table of ``OLD_LAYOUT_TABLES`` they
    hold, or one of ``NEW_LAYOUT_TABLES`` they lack although they hold documents; None for today's."""
    have = set(postings.tables()) | set(postings._tables(values=True))
    old = next((t for t in OLD_LAYOUT_TABLES if t in have), None)
    if old is None and "url" in have:
        old = next((f"{t} (missing)" for t in NEW_LAYOUT_TABLES if t not in have), None)
    if old is None:  # a table kept as runs (``store.runs``) that an older release kept in LMDB
        old = next((f"{t} (in LMDB)" for t in sorted(set(postings._tables()) & RUN_TABLES)), None)
    return old
#: what the index keeps after a storage fault at each step of a writer (the end of a StorageError's hint)
KEEPS_NOTHING = "Nothing in the index was changed"
KEEPS_OPEN = ("The index keeps its last committed state (`neardup sql` reads it); an interrupted write is finished "
              "by the next writer that can")
KEEPS_WRITE = ("The write that failed was rolled back: the index keeps everything committed before it, and the next "
               "write works once the cause is fixed")
KEEPS_POSTINGS = ("The batch is committed in the catalog (`neardup sql` sees it); its postings are re-derived from the "
                  "catalog by the next write (or `neardup rebuild --postings`) once the cause is fixed")
KEEPS_REBUILD = ("The catalog is as committed; the postings are re-derived from it by the next write (or `neardup "
                 "rebuild --postings`) once the cause is fixed")
KEEPS_CHECKPOINT = ("Everything is committed (the catalog's log, catalog.duckdb.wal, holds the last writes); the next "
                    "write folds the log into catalog.duckdb")
#: DuckDB's memory limit for a writer (its buffer pool; larger operators spill to ``catalog.duckdb.tmp``)
WRITER_DUCKDB_MEMORY = 1_000_000_000  # bytes, at the default memory plan (neardup.memory)
#: the size of DuckDB's log past which it checkpoints by itself at its next commit (its default
#: ``wal_autocheckpoint``); ``Writer.checkpoint_beside`` checkpoints such a log beside other work
LOG_CHECKPOINT = 16 * 2**20


class WriterLock:
    """An exclusive ``flock`` on ``DIR/writer.lock``; the kernel drops it when the holder dies."""

    def __init__(self, folder: Path):
        self.path = folder / LOCK_FILE
        self.fd: int | None = None

    def acquire(self, read_only_ok: bool = False) -> None:
        """Take the lock or raise ``IndexLocked``; a lock file that cannot be opened for writing is a
        ``StorageError``. With ``read_only_ok`` (commands that change nothing), an existing lock file
        is locked through a read-only descriptor, and on a read-only file system without one no
        lock is needed (no one can write there)."""
        with storage.guard(self.path, "taking the writer lock", KEEPS_NOTHING, index=self.path.parent):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                if not (read_only_ok and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)):
                    raise
                try:
                    fd = os.open(self.path, os.O_RDONLY)
                except FileNotFoundError:
                    if exc.errno != errno.EROFS:
                        raise exc from None
                    return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise IndexLocked(f"{self.path.parent}: another writer holds the index: {self.holder()}") from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300],
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        try:  # who holds the lock is for messages only: a full disk or a read-only descriptor goes without it
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        except OSError:
            pass
        self.fd = fd

    def holder(self) -> str:
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        if not info:
            return "an unknown process"
        return f"pid {info.get('pid')} on {info.get('host')} ({info.get('command')}), since {info.get('since')}"

    def is_held(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:  # missing, or unreadable to this user: a writer's own open tells
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):  # a read-only descriptor (``read_only_ok``)
                os.ftruncate(self.fd, 0)
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


class Index:
    """Handle on an index folder. Cheap to make; opens nothing until asked."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.catalog_path = self.path / catalog.CATALOG_FILE
        self.postings_path = self.path / POSTINGS_DIR
        #: set by ``reader``: the error that kept it from repairing an interrupted write, else None
        self.unrepaired: NeardupError | None = None

    def exists(self) -> bool:
        return self.catalog_path.exists()

    def require(self) -> None:
        if not self.exists():
            raise IndexNotFound(f"{self.path}: no neardup index here (no {catalog.CATALOG_FILE})")

    @contextlib.contextmanager
    def writer(self, create_with: Settings | None = None, rebuild_postings: bool = False) -> Iterator[Writer]:
        """Exclusive write access; repairs a half-written batch first.

        With ``create_with``, a missing index is created with those settings.
        With ``rebuild_postings``, the postings are thrown away and re-derived
        from the catalog on opening (marked as a pending ``rebuild`` first, so
        a crash leaves that for the next open), whatever state they are in.
        """
        if not self.exists():
            if create_with is None:
                self.require()
            with storage.guard(self.path, "creating the index folder", KEEPS_NOTHING, index=self.path):
                self.path.mkdir(parents=True, exist_ok=True)
        lock = WriterLock(self.path)
        lock.acquire()
        try:
            w = Writer(self, lock)
            done = False
            try:
                with storage.guard(self.path, "opening the index for writing", KEEPS_OPEN, index=self.path):
                    if rebuild_postings:  # marked first: a crash after the removal leaves the rebuild to the next open
                        catalog.connect(self.catalog_path, read_only=True).close()  # nothing is removed unless it opens
                        w.begin_batch(kind="rebuild")
                        shutil.rmtree(self.postings_path, ignore_errors=True)
                    w.open(create_with)
                with storage.guard(self.path, "writing to the index", KEEPS_WRITE, index=self.path):
                    yield w
                with storage.guard(self.catalog_path, "checkpointing the catalog", KEEPS_CHECKPOINT, index=self.path):
                    w.checkpoint()  # the catalog file holds everything committed once the command ends
                    done = True
            finally:
                if done:
                    with storage.guard(self.path, "closing the index", KEEPS_CHECKPOINT, index=self.path):
                        w.close()
                else:
                    w.close(quiet=True)  # the error that got us here is the one to report
        finally:
            lock.release()

    @contextlib.contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only catalog connection (repairs a crashed batch first when it can).

        A reader that cannot repair (a read-only folder, a full disk, no write permission, damaged
        postings) reads the catalog as it is: the last committed state, since a batch commits in
        one catalog transaction. ``unrepaired`` is then the error that stopped the repair.
        """
        self.require()
        lock = WriterLock(self.path)
        held = lock.is_held()
        self.unrepaired = None
        if (self.path / PENDING_FILE).exists() and not held:
            try:
                with self.writer():
                    pass
            except (StorageError, PostingsDamaged) as exc:
                self.unrepaired = exc
            except IndexLocked:
                held = True  # a writer began meanwhile: it repairs
        holder = lock.holder() if held else None
        con = catalog.connect(self.catalog_path, read_only=True, holder=holder)
        try:
            with storage.guard(self.catalog_path, "reading the catalog", index=self.path):
                catalog.check_schema(con)
                yield con
        finally:
            con.close()

    def settings(self) -> Settings:
        with self.reader() as con:
            return Settings.from_dict(catalog.read_settings(con))


class CatalogNotCommitted(Exception):
    """What a ``PostingsWrite`` raises in its thread to abandon its write (the catalog's commit failed)."""


class PostingsWrite:
    """A batch's postings written in a thread while the caller updates the clusters and commits the catalog.

    The LMDB transaction is filled beside the clusters' update and DuckDB's commit (which compresses
    and writes the batch's rows on about one core) but commits only after ``catalog_committed()``: the order of the write
    protocol (catalog first, postings second) is kept, and ``abandon()`` (the catalog's commit
    failed) aborts it. ``result()`` waits for the write and raises what it raised."""

    def __init__(self, writer: Writer, batch_id: int, postings: dict[str, tuple[np.ndarray, np.ndarray]]):
        import threading

        from ..pipeline import Beside

        self._committed = threading.Event()
        #: set once the write has passed its last crash point before LMDB's commit (or has ended)
        self.filled = threading.Event()
        self._ok = False
        self._passed = False

        def write() -> None:
            try:
                writer.apply_postings(batch_id, postings, self._ready)
            finally:
                self.filled.set()

        self._job = Beside(write, "neardup-postings")

    def _ready(self) -> None:
        from ..faults import crashpoint

        self._committed.wait()
        if not self._ok:
            raise CatalogNotCommitted()
        if not self._passed:  # the crash point once, even when a full map makes the write start again
            self._passed = True
            crashpoint("duckdb-after-commit")
        # (LMDB's crash point "lmdb-before-commit" follows at once, in this thread, which holds the
        # interpreter's lock until then: a checkpoint waiting for this cannot start before it)
        self.filled.set()

    def catalog_committed(self) -> None:
        self._ok = True
        self._committed.set()

    def abandon(self) -> None:
        """The catalog did not commit: the write is aborted, and waited for."""
        self._committed.set()
        self._job.join()

    def result(self) -> None:
        self._job.result()


class Writer:
    """What a writer holds: the read-write catalog connection and the postings."""

    def __init__(self, index: Index, lock: WriterLock):
        self.index = index
        self.lock = lock
        self.con: duckdb.DuckDBPyConnection | None = None
        self.postings: Postings | None = None
        self.settings: Settings | None = None
        self.repaired: list[int] = []

    def open(self, create_with: Settings | None) -> None:
        path = self.index.catalog_path
        # a new index's catalog: a copy of an empty one of this schema, when one can be kept
        fresh = not path.exists() and not Path(str(path) + ".wal").exists() and catalog.from_template(path)
        self.con = catalog.connect(path, read_only=False)
        self.con.execute("PRAGMA disable_checkpoint_on_shutdown")  # see the module docstring, step 4
        # DuckDB's buffer pool would otherwise keep every block a batch reads or a checkpoint rewrites, up
        # to 80% of RAM: the process's memory would follow the catalog's size, not the batch
        self.con.execute(f"SET memory_limit = '{memory.current().scaled(WRITER_DUCKDB_MEMORY)}B'")
        catalog.migrate(self.con)
        if fresh:
            catalog.stamp_migrations(self.con)
        stored = catalog.read_settings(self.con)
        if not stored:
            s = create_with or Settings()
            catalog.write_settings(self.con, s.to_dict())
            stored = s.to_dict()
        self.settings = Settings.from_dict(stored)
        self.postings = LmdbPostings(self.index.postings_path)
        last = self.con.execute(query("catalog", "last_committed_batch")).fetchall()[0][0]
        if (self.index.path / PENDING_FILE).exists() or self.postings.applied_batch() != last:
            self.repair()
        elif old_layout(self.postings) is not None:
            # postings of an older release (concept prefix keys): re-derive them in today's layout
            self.rebuild_postings()
            self.con.execute("CHECKPOINT")

    def checkpoint(self) -> None:
        """Write DuckDB's log into the catalog file (a copy of ``catalog.duckdb`` alone is then whole),
        then drop the file's pages from the page cache (``catalog.drop_cached``)."""
        if self.con is not None:
            self.con.execute("CHECKPOINT")
            catalog.drop_cached(self.index.catalog_path)

    @contextlib.contextmanager
    def checkpoint_beside(self, last: "PostingsWrite | None" = None) -> Iterator[None]:
        """Checkpoint the catalog in a thread while the body runs, when its log has passed
        ``LOG_CHECKPOINT`` (the next statement would otherwise checkpoint it, alone): after a
        batch's commit, beside the LMDB write of its postings. ``last``: the postings write of the
        last batch of the write, whose end checkpoints, alone: then the log is checkpointed whatever
        its size, once that write has passed its crash points (``PostingsWrite.filled``), beside its
        LMDB commit (a crash there leaves the log as it leaves it without this). The body must not use
        ``con``; the checkpoint is waited for when it ends (and its error, if any, raised then, after
        the body's own); the catalog file's pages are then dropped from the page cache
        (``catalog.drop_cached``)."""
        import threading

        wal = Path(str(self.index.catalog_path) + ".wal")
        try:
            big = self.con is not None and wal.stat().st_size > LOG_CHECKPOINT
        except OSError:
            big = False
        if not big and (last is None or self.con is None):
            yield
            return
        cur = catalog.cursor(self.con)
        failed: list[BaseException] = []

        def run() -> None:
            try:
                if not big and last is not None:
                    last.filled.wait()
                cur.execute("CHECKPOINT")
            except BaseException as exc:  # raised by the caller's thread below
                failed.append(exc)

        t = threading.Thread(target=run, name="neardup-checkpoint", daemon=True)
        t.start()
        try:
            yield
        finally:
            t.join()
            cur.close()
        if failed:
            with storage.guard(self.index.catalog_path, "checkpointing the catalog", KEEPS_CHECKPOINT, index=self.index.path):
                raise failed[0]
        catalog.drop_cached(self.index.catalog_path)

    def close(self, quiet: bool = False) -> None:
        """Close the postings and the catalog connection; ``quiet``: ignore errors doing so (the
        caller is already reporting one)."""
        postings, con = self.postings, self.con
        self.postings = self.con = None
        close_postings = functools.partial(postings.close, finish=not quiet) if postings is not None else None
        for closing in ([close_postings] if postings is not None else []) + ([con.close] if con is not None else []):
            try:
                closing()
            except Exception:
                if not quiet:
                    raise

    # -- batch protocol -------------------------------------------------
    def begin_batch(self, kind: str = "batch") -> None:
        """Mark a batch (or a ``rebuild``) as in progress, durably, before anything is written."""
        pending = self.index.path / PENDING_FILE
        with open(pending, "w") as fh:
            fh.write(f"{kind} {os.getpid()}")
            fh.flush()
            os.fsync(fh.fileno())
        if kind == "batch" and self.postings is not None:
            self.postings.compact()  # due run merges go on beside the batch

    def apply_postings(self, batch_id: int, postings: dict[str, tuple[np.ndarray, np.ndarray]],
                       ready: Callable[[], None] | None = None) -> None:
        """Append a batch's postings (``Postings.apply_batch``), a storage fault reported as the
        index's."""
        assert self.postings is not None
        with storage.guard(self.index.postings_path, f"writing the postings of batch {batch_id}", KEEPS_POSTINGS,
                           index=self.index.path):
            self.postings.apply_batch(batch_id, postings, ready)

    def write_postings(self, batch_id: int, postings: dict[str, tuple[np.ndarray, np.ndarray]]) -> PostingsWrite:
        """Start writing a batch's postings beside the catalog's commit (``PostingsWrite``)."""
        assert self.postings is not None
        return PostingsWrite(self, batch_id, postings)

    def finish_batch(self, batch_id: int | None,
                     postings: dict[str, tuple[np.ndarray, np.ndarray]] | PostingsWrite | None,
                     timings: dict[str, float] | None = None) -> None:
        """After the catalog commit: append postings (or wait for a ``PostingsWrite`` to end), clear
        the marker."""
        from ..faults import crashpoint

        assert self.postings is not None and self.con is not None
        t0 = time.perf_counter()
        if isinstance(postings, PostingsWrite):
            postings.result()
            crashpoint("lmdb-after-commit")
        elif batch_id is not None:
            crashpoint("duckdb-after-commit")
            self.apply_postings(batch_id, postings or {})
            crashpoint("lmdb-after-commit")
        t1 = time.perf_counter()
        crashpoint("before-done")
        if timings is not None:
            timings["postings"] = timings.get("postings", 0.0) + t1 - t0
        (self.index.path / PENDING_FILE).unlink(missing_ok=True)

    def finish_delete(self, batch_id: int, removed: dict[str, tuple[np.ndarray, np.ndarray]],
                      added: dict[str, tuple[np.ndarray, np.ndarray]], max_doc_id: int) -> None:
        """After a delete batch's catalog commit (``neardup delete``): remove its documents' postings
        in one LMDB transaction, clear the marker. A crash before that transaction commits leaves the
        postings to ``repair``, which re-derives them all (the deleted rows are gone from the catalog)."""
        from ..faults import crashpoint

        assert self.postings is not None
        crashpoint("duckdb-after-commit")
        with storage.guard(self.index.postings_path, f"removing postings in delete batch {batch_id}", KEEPS_POSTINGS,
                           index=self.index.path):
            self.postings.remove_batch(batch_id, removed, added, max_doc_id)
        crashpoint("lmdb-after-commit")
        crashpoint("before-done")
        (self.index.path / PENDING_FILE).unlink(missing_ok=True)

    def repair(self) -> list[int]:
        """Bring the postings up to the catalog after a crash; returns the batches re-applied."""
        with storage.guard(self.index.postings_path, "re-deriving the postings of an interrupted write", KEEPS_REBUILD,
                           index=self.index.path):
            return self._repair()

    def _repair(self) -> list[int]:
        assert self.postings is not None and self.con is not None
        last = self.con.execute(query("catalog", "last_committed_batch")).fetchall()[0][0]
        applied = self.postings.applied_batch()
        try:
            kind = (self.index.path / PENDING_FILE).read_text().split()[0]
        except (OSError, IndexError):
            kind = "batch"
        deletes = self.con.execute(query("delete", "delete_batches_after"), [applied]).fetchall()[0][0]
        if applied > last or kind == "rebuild" or deletes:
            # The catalog is the truth; postings ahead of it can only be rebuilt, and so can those of a
            # delete batch (the rows its postings came from are gone from the catalog).
            self.rebuild_postings()
        else:
            for (b,) in self.con.execute(query("catalog", "committed_batches_after"), [applied]).fetchall():
                self.postings.apply_batch(b, self.batch_postings(b))
                self.repaired.append(b)
        self.con.execute("CHECKPOINT")
        (self.index.path / PENDING_FILE).unlink(missing_ok=True)
        return self.repaired

    def batch_postings(self, batch_id: int, fingerprints: dict | None = None, written=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        assert self.con is not None and self.settings is not None
        return batch_postings(self.con, batch_id, self.settings, fingerprints, written)

    def rebuild_postings(self) -> None:
        """Throw the postings away and re-derive them from every committed batch."""
        with storage.guard(self.index.postings_path, "re-deriving the postings", KEEPS_REBUILD, index=self.index.path):
            self._rebuild_postings()

    def _rebuild_postings(self) -> None:
        assert self.con is not None
        if self.postings is not None:
            self.postings.close()
        shutil.rmtree(self.index.postings_path, ignore_errors=True)
        self.postings = LmdbPostings(self.index.postings_path)
        for (b,) in self.con.execute(query("catalog", "committed_batches_after"), [0]).fetchall():
            self.postings.apply_batch(b, self.batch_postings(b))
            self.repaired.append(b)
        from ..faults import crashpoint

        crashpoint("rebuild-postings-done")
