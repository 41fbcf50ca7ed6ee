"""Storage and OS faults, and mutated inputs (issue 14, items 4 and 7).

``FAULTS`` is the table of storage faults: where each is injected (the point
where the engine opens or writes a file), the command run, the exit code and
message the user sees, and the state the index keeps — ``before`` (as before
the command: nothing of the batch), or ``after`` (the batch is committed in
the catalog and its postings are re-derived by the next opening, as after a
crash at that point, tests/test_crash.py). Every case then checks that the
next ingest works. The faults are injected in-process (root ignores permission
bits, and tests cannot count on mounting file systems); the ``real`` tests
below reproduce the main ones on a real full tmpfs, a read-only bind mount and
a folder made read-only with ``chmod -R a-w`` for a process without root's
file-permission override, where the machine allows it.

The fuzz test feeds mutated fixture bytes (bits flipped, bytes inserted,
deleted, the file cut) to each reader through ``neardup.ingest``: no
exception but a NeardupError for a whole-file problem, and every record read
is a document, unchanged, skipped or a reject.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import itertools
import os
import shutil
import signal
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import lmdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neardup import Index, InputError, NeardupError
from neardup import storage
from neardup.cli.app import app
from neardup.errors import CatalogDamaged, PostingsDamaged, StorageError
from neardup.ingest import ingest
from neardup.maintenance.check import check_index
from neardup.store import catalog as catalog_module
from neardup.store import index as index_module
from neardup.store.postings import LmdbPostings

from .conftest import FIXTURES, run_cli
from .snapshot import content, snapshot

BASE = FIXTURES / "text" / "docs.jsonl"
BATCH = FIXTURES / "text" / "chain.jsonl"
runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def states(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("faults")
    base = root / "base"
    ingest(Index(base), str(BASE))
    ref = root / "ref"
    shutil.copytree(base, ref)
    ingest(Index(ref), str(BATCH))
    before, after = snapshot(base), snapshot(ref)
    assert len(after["documents"]) > len(before["documents"])
    return {"base": base, "before": before, "after": after}


@pytest.fixture
def trial(states, tmp_path) -> Path:
    dst = tmp_path / "idx"
    shutil.copytree(states["base"], dst)
    return dst


# -- where faults are injected ---------------------------------------------------------
# Each takes the monkeypatch context and installs one fault; the messages and exception
# types are those DuckDB, LMDB and the OS give for the real fault (see the ``real`` tests).

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT


def os_open_fails(name: str, err: int) -> Callable:
    """``os.open`` of ``name`` for writing fails (the writer lock)."""

    def install(m: pytest.MonkeyPatch) -> None:
        real = os.open

        def fake(path, flags, *args, **kw):
            if os.path.basename(os.fspath(path)) == name and flags & _WRITE_FLAGS:
                raise OSError(err, os.strerror(err), os.fspath(path))
            return real(path, flags, *args, **kw)

        m.setattr(os, "open", fake)

    return install


def pending_fails(err: int, at: str = "open") -> Callable:
    """Creating ``batch.pending`` fails (``at="open"``), or making it durable does (``at="fsync"``,
    as a full disk does: the file is created, its bytes do not fit)."""

    def install(m: pytest.MonkeyPatch) -> None:
        real_open, real_fsync = open, os.fsync
        fds: set[int] = set()

        def fake_open(path, mode="r", *args, **kw):
            if os.path.basename(os.fspath(path)) == index_module.PENDING_FILE and "w" in mode:
                if at == "open":
                    raise OSError(err, os.strerror(err), os.fspath(path))
                fh = real_open(path, mode, *args, **kw)
                fds.add(fh.fileno())
                return fh
            return real_open(path, mode, *args, **kw)

        def fake_fsync(fd):
            if fd in fds:
                raise OSError(err, os.strerror(err))
            return real_fsync(fd)

        m.setattr(index_module, "open", fake_open, raising=False)
        m.setattr(os, "fsync", fake_fsync)

    return install


def duckdb_connect_fails(words: str) -> Callable:
    """DuckDB cannot open the catalog read-write (``read_only=True`` still opens)."""

    def install(m: pytest.MonkeyPatch) -> None:
        real = duckdb.connect

        def refuse(database):
            raise duckdb.IOException(f'IO Error: Cannot open file "{database}": {words}')

        class Attaching:  # the writer's connection: it attaches the catalog (with its row-group size)
            def __init__(self, con):
                self._con = con

            def __getattr__(self, name):
                return getattr(self._con, name)

            def execute(self, sql, *args, **kw):
                if sql.lstrip().upper().startswith("ATTACH") and "READ_ONLY" not in sql.upper():
                    refuse(sql.split("'")[1])
                return self._con.execute(sql, *args, **kw)

        def fake(database=":memory:", read_only=False, **kw):
            if read_only:
                return real(database, read_only=read_only, **kw)
            if database != ":memory:":
                refuse(database)
            return Attaching(real(database, **kw))

        m.setattr(catalog_module.duckdb, "connect", fake)

    return install


class _Connection:
    """A writer's DuckDB connection whose COMMIT or CHECKPOINT fails like a full disk."""

    def __init__(self, con, path: Path, fail: str):
        self._con, self._path, self._fail = con, path, fail

    def __getattr__(self, name):
        return getattr(self._con, name)

    def cursor(self):  # a connection of its own (the checkpoint beside the postings' write uses one)
        return _Connection(self._con.cursor(), self._path, self._fail)

    def execute(self, sql, *args, **kw):
        word = sql.strip().upper() if isinstance(sql, str) else ""
        if word == "COMMIT" == self._fail:
            self._con.execute("ROLLBACK")  # DuckDB ends the transaction when its commit fails
            raise duckdb.TransactionException(f'TransactionContext Error: Failed to commit: Could not write file '
                                              f'"{self._path}.wal": No space left on device')
        if word == "CHECKPOINT" == self._fail:
            raise duckdb.IOException(f'IO Error: Could not write file "{self._path}": No space left on device')
        return self._con.execute(sql, *args, **kw)


class _CursorFails(_Connection):
    """A writer's connection whose own statements work and whose cursors' ``fail`` fails."""

    def execute(self, sql, *args, **kw):
        return self._con.execute(sql, *args, **kw)


def duckdb_write_fails(statement: str) -> Callable:
    """The writer's ``COMMIT`` or ``CHECKPOINT`` hits a full disk."""

    def install(m: pytest.MonkeyPatch) -> None:
        real = catalog_module.connect

        def fake(path, read_only, holder=None):
            con = real(path, read_only, holder)
            return con if read_only else _Connection(con, path, statement)

        m.setattr(catalog_module, "connect", fake)

    return install


def checkpoint_beside_fails(m: pytest.MonkeyPatch) -> None:
    """The checkpoint a batch runs beside the write of its postings (``Writer.checkpoint_beside``,
    made due at any size of the log, on a cursor) hits a full disk; the command's own checkpoint
    at its end would work."""
    real = catalog_module.connect

    def fake(path, read_only, holder=None):
        con = real(path, read_only, holder)
        return con if read_only else _CursorFails(con, path, "CHECKPOINT")

    m.setattr(index_module, "LOG_CHECKPOINT", -1)
    m.setattr(catalog_module, "connect", fake)


def lmdb_open_fails(exc: type, words: str) -> Callable:
    """LMDB cannot open the postings for writing."""

    def install(m: pytest.MonkeyPatch) -> None:
        real = lmdb.open

        def fake(path, *args, readonly=False, **kw):
            if not readonly:
                raise exc(f"{path}: {words}")
            return real(path, *args, readonly=readonly, **kw)

        m.setattr(lmdb, "open", fake)

    return install


def lmdb_write_fails(exc: type, words: str, free: int | None = None) -> Callable:
    """The postings' write transaction fails (``free``: what the file system then has free)."""

    def install(m: pytest.MonkeyPatch) -> None:
        def fake(self, *args, **kw):
            raise exc(words)

        m.setattr(LmdbPostings, "_write", fake)
        if free is not None:
            m.setattr(storage, "_free_bytes", lambda path: free)

    return install


def lmdb_map_cannot_grow(m: pytest.MonkeyPatch) -> None:
    """Every write finds the map full: ``apply_batch`` doubles it until LMDB cannot map it (ENOMEM
    at 128 TB of address space on Linux; the fake gives up after 64 attempts anyway)."""
    calls = itertools.count()

    def fake(self, *args, **kw):
        if next(calls) > 64:
            raise lmdb.MemoryError("mdb_env_set_mapsize: Cannot allocate memory")
        raise lmdb.MapFullError("mdb_put: MDB_MAP_FULL: Environment mapsize limit reached")

    m.setattr(LmdbPostings, "_write", fake)


@dataclass
class Fault:
    id: str
    inject: Callable[[pytest.MonkeyPatch], None]
    command: tuple[str, ...]  # after `neardup`; the index and the batch are added
    code: int
    message: tuple[str, ...]  # each in the error output
    state: str  # "before" or "after"


INGEST = ("ingest", "-q")
EVALUATE = ("evaluate", "--pooled", "--support-sweep", "none", "--bits", "none")
REBUILD = ("rebuild", "-q")
POSTINGS = ("rebuild", "--postings", "-q")
READ_ONLY = ("the file system is read-only", "remount it read-write", "Nothing in the index was changed")
DENIED = ("permission denied while", "chmod -R u+w")
FULL = ("no space left on the device", "free space")
ROLLED_BACK = "The write that failed was rolled back"
COMMITTED = "The batch is committed in the catalog"

FAULTS = [
    # a read-only folder or one this user may not write: the first file a writer opens for writing
    Fault("lock-read-only-ingest", os_open_fails("writer.lock", errno.EROFS), INGEST, 8, (*READ_ONLY, "writer.lock"), "before"),
    Fault("lock-read-only-evaluate", os_open_fails("writer.lock", errno.EROFS), EVALUATE, 8, READ_ONLY, "before"),
    Fault("lock-read-only-rebuild", os_open_fails("writer.lock", errno.EROFS), REBUILD, 8, READ_ONLY, "before"),
    Fault("lock-read-only-rebuild-postings", os_open_fails("writer.lock", errno.EROFS), POSTINGS, 8, READ_ONLY, "before"),
    Fault("lock-denied-ingest", os_open_fails("writer.lock", errno.EACCES), INGEST, 8, (*DENIED, "writer.lock"), "before"),
    Fault("lock-denied-rebuild", os_open_fails("writer.lock", errno.EACCES), REBUILD, 8, DENIED, "before"),
    # the folder is not writable but its files are (chmod a-w DIR): batch.pending cannot be created
    Fault("pending-denied-ingest", pending_fails(errno.EACCES), INGEST, 8, (*DENIED, "batch.pending", ROLLED_BACK), "before"),
    Fault("pending-denied-rebuild", pending_fails(errno.EACCES), REBUILD, 8, (*DENIED, "batch.pending"), "before"),
    Fault("pending-denied-rebuild-postings", pending_fails(errno.EACCES), POSTINGS, 8, DENIED, "before"),
    Fault("pending-disk-full-ingest", pending_fails(errno.ENOSPC, at="fsync"), INGEST, 8, (*FULL, ROLLED_BACK), "before"),
    # DuckDB cannot open the catalog read-write (a reader's read-only open still works)
    Fault("catalog-read-only-ingest", duckdb_connect_fails("Read-only file system"), INGEST, 8,
          ("catalog.duckdb: cannot write while opening the catalog for writing", "the file system is read-only"), "before"),
    Fault("catalog-denied-evaluate", duckdb_connect_fails("Permission denied"), EVALUATE, 8,
          ("catalog.duckdb: permission denied while opening the catalog for writing",), "before"),
    Fault("catalog-denied-rebuild", duckdb_connect_fails("Permission denied"), REBUILD, 8, DENIED, "before"),
    # LMDB cannot open the postings for writing
    Fault("postings-denied-ingest", lmdb_open_fails(lmdb.ReadonlyError, "Permission denied"), INGEST, 8,
          ("postings: permission denied while opening the index for writing",), "before"),
    Fault("postings-read-only-ingest", lmdb_open_fails(lmdb.Error, "Read-only file system"), INGEST, 8,
          ("postings: cannot write while opening the index for writing", "read-only"), "before"),
    Fault("postings-read-only-rebuild-postings", lmdb_open_fails(lmdb.Error, "Read-only file system"), POSTINGS, 8,
          READ_ONLY[:2], "before"),
    # a full disk when DuckDB commits the batch: nothing of it stays
    Fault("commit-disk-full-ingest", duckdb_write_fails("COMMIT"), INGEST, 8,
          ("catalog.duckdb.wal: no space left on the device while writing to the index", ROLLED_BACK), "before"),
    Fault("commit-disk-full-rebuild", duckdb_write_fails("COMMIT"), REBUILD, 8, (*FULL, ROLLED_BACK), "before"),
    # ... at the checkpoint that ends a command: everything is committed already
    Fault("checkpoint-disk-full-ingest", duckdb_write_fails("CHECKPOINT"), INGEST, 8,
          ("catalog.duckdb: no space left on the device while checkpointing the catalog", "Everything is committed"), "after"),
    Fault("checkpoint-beside-disk-full-ingest", checkpoint_beside_fails, INGEST, 8,
          ("catalog.duckdb: no space left on the device while checkpointing the catalog", "Everything is committed"), "after"),
    Fault("checkpoint-disk-full-evaluate", duckdb_write_fails("CHECKPOINT"), EVALUATE, 8, ("Everything is committed",), "before"),
    # ... when the postings are written, after the catalog commit: the batch stays, the postings follow
    Fault("postings-disk-full-ingest", lmdb_write_fails(lmdb.DiskError, "mdb_txn_commit: No space left on device"), INGEST, 8,
          ("postings: no space left on the device while writing the postings of batch 2", COMMITTED), "after"),
    Fault("postings-eio-full-disk-ingest", lmdb_write_fails(lmdb.Error, "mdb_txn_commit: Input/output error", free=0), INGEST, 8,
          ("no space left on the device", "(0 bytes free) (mdb_txn_commit: Input/output error)", COMMITTED), "after"),
    Fault("postings-eio-ingest", lmdb_write_fails(lmdb.Error, "mdb_txn_commit: Input/output error", free=10**9), INGEST, 8,
          ("postings: I/O error while writing the postings of batch 2", "neardup check --index", COMMITTED), "after"),
    Fault("postings-map-cannot-grow-ingest", lmdb_map_cannot_grow, INGEST, 8,
          ("the postings' memory map cannot grow", "ulimit -v", COMMITTED), "after"),
    Fault("postings-disk-full-rebuild-postings", lmdb_write_fails(lmdb.DiskError, "mdb_txn_commit: No space left on device"),
          POSTINGS, 8, ("no space left on the device while re-deriving the postings",), "before"),
]


def _run(fault: Fault, index: Path):
    args = [*fault.command, "--index", index]
    if fault.command[0] == "ingest":
        args.append(BATCH)
    return cli(*args)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_storage_fault(states, trial, fault):
    with pytest.MonkeyPatch.context() as m:
        fault.inject(m)
        r = _run(fault, trial)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)  # no traceback
    assert r.exit_code == fault.code, r.output
    out = flat(r.output)
    assert out.startswith("error: "), out
    for words in fault.message:
        assert words in out, (words, out)
    assert "hint: " in out
    # the index keeps a whole state (the first reader repairs what a writer left)
    assert snapshot(trial) == states[fault.state]
    assert not (trial / "batch.pending").exists()
    # and the next ingest works
    r = cli(*INGEST, "--index", trial, BATCH)
    assert r.exit_code == 0, r.output
    assert content(snapshot(trial)) == content(states["after"])
    assert check_index(Index(trial), full=True).ok


def test_the_fault_kinds_are_exit_code_8_and_documented():
    assert StorageError.exit_code == 8 and CatalogDamaged.exit_code == 7 and PostingsDamaged.exit_code == 6
    doc = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    table = doc.split("| exit code | meaning |", 1)[1].split("\n\n", 1)[0]
    assert "| 8 |" in table and "read-only" in table and "disk" in table


# -- damaged files ----------------------------------------------------------------------


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", [("sql", "SELECT count(*) FROM documents"), ("info",), INGEST, EVALUATE, REBUILD, POSTINGS])
def test_a_zeroed_catalog_header_is_a_clear_error_from_every_command(trial, command):
    with open(trial / "catalog.duckdb", "r+b") as fh:
        fh.write(b"\0" * 16384)
    files = _digest(trial)
    args = [*command, "--index", trial] + ([BATCH] if command[0] == "ingest" else [])
    r = cli(*args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 7, r.output
    out = flat(r.output)
    assert f"{trial / 'catalog.duckdb'}: the catalog is damaged (" in out
    assert "not a valid DuckDB database file" in out
    assert f"neardup check --index {trial}" in out and "restore the index folder from a backup" in out and "neardup backup" in out
    assert _digest(trial) == files  # nothing was written


def _zero_a_documents_block(index: Path) -> None:
    """Zero 16 KB of the first 256 KB block that holds documents' texts and nothing else read on opening
    (a scan of the texts fails, reading ``settings`` does not)."""
    path = index / "catalog.duckdb"
    size, block, header = path.stat().st_size, 262144, 3 * 4096
    original = path.read_bytes()

    def fails(sql: str) -> bool:
        try:
            con = duckdb.connect(str(path), read_only=True)
            try:
                con.execute(sql).fetchall()
            finally:
                con.close()
        except duckdb.Error:
            return True
        return False

    for start in range(header, size - 16384, block):
        with open(path, "r+b") as fh:
            fh.seek(start + 8)
            fh.write(b"\0" * 16384)
        if fails("SELECT sum(length(text)) FROM documents") and not fails("SELECT count(*) FROM settings"):
            return
        path.write_bytes(original)
    pytest.fail("no block of the catalog holds only documents' texts")


def test_a_damaged_catalog_block_is_a_catalog_error_not_a_query_error(trial):
    _zero_a_documents_block(trial)
    r = cli("sql", "--index", trial, "SELECT sum(length(text)) FROM documents")
    assert r.exit_code == 7, r.output
    out = flat(r.output)
    assert "the catalog is damaged (Corrupt database file" in out and "neardup check" in out
    assert cli("sql", "--index", trial, "SELECT count(*) FROM settings").exit_code == 0  # the damage is where it is
    assert cli("sql", "--index", trial, "SELECT count(*) FROM no_such_table").exit_code == 2  # a bad query stays a query error
    assert cli("check", "--index", trial).exit_code == 7


def test_damaged_postings_stop_writers_with_the_repair_and_leave_readers_alone(states, trial):
    with open(trial / "postings" / "data.mdb", "r+b") as fh:
        fh.write(b"\0" * 16384)
    r = cli(*INGEST, "--index", trial, BATCH)
    assert r.exit_code == 6, r.output
    out = flat(r.output)
    assert "postings: the postings are damaged (MDB_INVALID" in out and f"neardup rebuild --postings --index {trial}" in out
    r = cli("sql", "--index", trial, "SELECT count(*) AS n FROM documents", "--format", "csv")
    assert r.exit_code == 0 and r.stdout.split() == ["n", str(len(states["before"]["documents"]))], r.output
    r = cli("info", "--index", trial)
    assert r.exit_code == 0, r.output
    assert "postings cannot be read (MDB_INVALID: File is not an LMDB file): run `neardup rebuild --postings`" in flat(r.output)
    assert cli("check", "--index", trial).exit_code == 6
    assert cli(*POSTINGS, "--index", trial).exit_code == 0
    assert snapshot(trial) == states["before"]
    assert cli(*INGEST, "--index", trial, BATCH).exit_code == 0
    assert content(snapshot(trial)) == content(states["after"])


# -- readers while a writer died mid-batch ---------------------------------------------------


@pytest.fixture
def killed(trial) -> Path:
    """A writer killed after its catalog commit: batch.pending and the catalog's log are left."""
    p = run_cli(*INGEST, "--index", str(trial), str(BATCH), env={"NEARDUP_CRASH_AT": "duckdb-after-commit"})
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    assert (trial / "batch.pending").exists() and (trial / "catalog.duckdb.wal").exists()
    return trial


READER_BLOCKED = [
    ("read-only", os_open_fails("writer.lock", errno.EROFS), "the file system is read-only"),
    ("denied", os_open_fails("writer.lock", errno.EACCES), "permission denied"),
    ("postings-disk-full", lmdb_write_fails(lmdb.DiskError, "mdb_txn_commit: No space left on device"), "no space left"),
]


@pytest.mark.parametrize("why,inject,words", READER_BLOCKED, ids=[c[0] for c in READER_BLOCKED])
def test_readers_read_the_last_committed_state_when_they_cannot_repair(states, killed, why, inject, words):
    n_after = len(states["after"]["documents"])
    with pytest.MonkeyPatch.context() as m:
        inject(m)
        r = cli("sql", "--index", killed, "SELECT count(*) AS n FROM documents", "--format", "csv")
        assert r.exit_code == 0, r.output
        assert r.stdout.split() == ["n", str(n_after)]  # the killed writer's batch was committed: it is there
        out = flat(r.stderr)
        assert "note: an interrupted write could not be repaired here" in out and words in out
        assert "this is the last committed state" in out
        r = cli("info", "--index", killed)
        assert r.exit_code == 0, r.output
        assert "postings up to batch 1" in r.output and "could not be repaired here" in r.output
        # the engine's reader too, with the reason
        idx = Index(killed)
        with idx.reader() as con:
            assert con.execute("SELECT count(*) FROM documents").fetchall()[0][0] == n_after
        assert isinstance(idx.unrepaired, StorageError) and words in str(idx.unrepaired)
        assert (killed / "batch.pending").exists()  # nothing could be repaired
        if why != "postings-disk-full":  # a writer stops at once, with the same reason
            r = cli(*INGEST, "--index", killed, BATCH)
            assert r.exit_code == 8 and words in flat(r.output), r.output
    assert snapshot(killed) == states["after"]  # the first reader that can repairs
    assert not (killed / "batch.pending").exists()


# -- the real faults, where the machine allows them ---------------------------------------------


def _run_root(*cmd: str) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def can_mount(tmp_path_factory) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    probe = tmp_path_factory.mktemp("probe")
    if not _run_root("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)):
        return False
    _run_root("umount", str(probe))
    return True


@contextlib.contextmanager
def mounted(*args: str, at: Path):
    at.mkdir(parents=True, exist_ok=True)
    assert _run_root("mount", *args, str(at)), f"mount {args} {at}"
    try:
        yield at
    finally:
        _run_root("umount", "-l", str(at))


def _fill(folder: Path, leave: int) -> Path:
    """A file taking all but ``leave`` bytes of the file system's free space."""
    filler = folder / "filler"
    free = shutil.disk_usage(folder).free
    with open(filler, "wb") as fh:
        fh.truncate(0)
        fh.write(b"\1" * max(free - leave, 0))
    return filler


def test_real_full_disk_at_the_catalog_commit(states, tmp_path, can_mount):
    if not can_mount:
        pytest.skip("needs root and permission to mount a tmpfs")
    with mounted("-t", "tmpfs", "-o", "size=12m", "tmpfs", at=tmp_path / "disk") as disk:
        idx = disk / "idx"
        shutil.copytree(states["base"], idx)
        filler = _fill(disk, leave=16384)  # the batch's log needs about 66 KB
        r = cli(*INGEST, "--index", idx, BATCH)
        assert r.exit_code == 8, r.output
        out = flat(r.output)
        assert "catalog.duckdb.wal: no space left on the device while writing to the index" in out
        assert "No space left on device" in out and ROLLED_BACK in out
        assert snapshot(idx) == states["before"]
        filler.unlink()
        assert cli(*INGEST, "--index", idx, BATCH).exit_code == 0
        assert content(snapshot(idx)) == content(states["after"])


def test_real_full_disk_at_the_postings(states, tmp_path, can_mount):
    if not can_mount:
        pytest.skip("needs root and permission to mount a tmpfs")
    idx = tmp_path / "idx"
    shutil.copytree(states["base"], idx)
    saved = tmp_path / "saved"
    shutil.copytree(idx / "postings", saved)
    with mounted("-t", "tmpfs", "-o", "size=4m", "tmpfs", at=idx / "postings") as postings:
        for f in saved.iterdir():
            (shutil.copytree if f.is_dir() else shutil.copy2)(f, postings / f.name)
        filler = _fill(postings, leave=8192)
        r = cli(*INGEST, "--index", idx, BATCH)
        assert r.exit_code == 8, r.output
        out = flat(r.output)
        # LMDB reports the short write to a full tmpfs as EIO: the free space tells it was the disk
        assert "postings: no space left on the device while writing the postings of batch 2" in out, out
        assert COMMITTED in out
        r = cli("sql", "--index", idx, "SELECT count(*) AS n FROM documents", "--format", "csv")
        assert r.exit_code == 0 and r.stdout.split() == ["n", str(len(states["after"]["documents"]))], r.output
        assert "could not be repaired here" in r.stderr
        filler.unlink()
        assert snapshot(idx) == states["after"]
        assert cli(*INGEST, "--index", idx, BATCH).exit_code == 0
        assert check_index(Index(idx), full=True).ok


def test_real_read_only_folder_with_an_interrupted_write(states, killed, tmp_path, can_mount):
    if not can_mount:
        pytest.skip("needs root and permission to mount")
    view = tmp_path / "view"
    view.mkdir()
    with mounted("--bind", str(killed), at=view):
        assert _run_root("mount", "-o", "remount,ro,bind", str(view))
        for command in (INGEST, EVALUATE, REBUILD, POSTINGS):
            r = cli(*command, "--index", view, *([BATCH] if command is INGEST else []))
            assert r.exit_code == 8, (command, r.output)
            assert "writer.lock: cannot write while taking the writer lock: the file system is read-only" in flat(r.output)
        r = cli("sql", "--index", view, "SELECT count(*) AS n FROM documents", "--format", "csv")
        assert r.exit_code == 0 and r.stdout.split() == ["n", str(len(states["after"]["documents"]))], r.output
        assert "could not be repaired here" in r.output and "read-only" in r.output
        assert cli("info", "--index", view).exit_code == 0
        r = cli("check", "--index", view)
        assert r.exit_code == 6 and "batch.pending is left over" in r.output, r.output  # check reads a read-only index
        r = cli("backup", "--index", view, tmp_path / "copy")
        assert r.exit_code == 0, r.output
        assert snapshot(tmp_path / "copy") == states["after"]
    assert snapshot(killed) == states["after"]


def test_real_chmod_a_w_for_a_process_without_root_s_override(states, trial):
    """``chmod -R a-w`` bites root only without CAP_DAC_OVERRIDE: the commands run with it dropped."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv")
    drop = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    if subprocess.run([*drop, "true"], capture_output=True).returncode != 0:
        pytest.skip("setpriv cannot drop capabilities here")
    for p in [trial, *trial.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        code = "from neardup.cli.app import main; main()"
        env = {k: v for k, v in os.environ.items() if k != "NEARDUP_CRASH_AT"}

        def neardup(*args):
            return subprocess.run([*drop, sys.executable, "-c", code, *map(str, args)], capture_output=True, env=env, timeout=300)

        p = neardup(*INGEST, "--index", trial, BATCH)
        assert p.returncode == 8, p.stderr.decode()
        err = flat(p.stderr.decode())
        assert "writer.lock: permission denied while taking the writer lock" in err and "chmod -R u+w" in err
        p = neardup("sql", "--index", trial, "SELECT count(*) AS n FROM documents", "--format", "csv")
        assert p.returncode == 0 and p.stdout.decode().split() == ["n", str(len(states["before"]["documents"]))]
        assert neardup("check", "--index", trial).returncode == 0
    finally:
        for p in [trial, *trial.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
    assert snapshot(trial) == states["before"]


# -- mutated inputs ---------------------------------------------------------------------------


def _gzip_members(data: bytes, n: int) -> bytes:
    """The first ``n`` gzip members of a multi-member file."""
    end = 0
    for _ in range(n):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        d.decompress(data[end:])
        end = len(data) - len(d.unused_data)
        if not d.unused_data:
            break
    return data[:end]


def _parquet(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def _samples() -> dict[str, list[tuple[str, bytes]]]:
    """Small pieces of the fixtures, per reader: (file name, bytes)."""
    warc = _gzip_members((FIXTURES / "crawl" / "sample.warc.gz").read_bytes(), 9)
    wet = _gzip_members((FIXTURES / "crawl" / "sample.wet.gz").read_bytes(), 6)
    lines = (FIXTURES / "text" / "docs.jsonl").read_bytes().splitlines(keepends=True)[:12]
    jsonl = b"".join(lines)
    html = (FIXTURES / "html" / "libffi8" / "Thread-Safety.html").read_bytes()
    text = (FIXTURES / "html" / "gettext" / "copyright.txt").read_bytes()
    table = pq.read_table(FIXTURES / "text" / "docs.parquet").slice(0, 12)
    return {
        "warc": [("sample.warc.gz", warc), ("sample.warc", gzip.decompress(warc)), ("sample.wet.gz", wet)],
        "jsonl": [("docs.jsonl", jsonl), ("docs.jsonl.gz", gzip.compress(jsonl, mtime=0)),
                  ("docs.jsonl.zst", zstandard.ZstdCompressor().compress(jsonl))],
        "parquet": [("docs.parquet", _parquet(table.to_pylist()))],
        "html": [("page.html", html), ("page.html.gz", gzip.compress(html, mtime=0)), ("copyright.txt", text)],
    }


SAMPLES = _samples()
#: examples per reader (NEARDUP_FUZZ_EXAMPLES=1000 for a longer search)
FUZZ_EXAMPLES = int(os.environ.get("NEARDUP_FUZZ_EXAMPLES", "30"))

_position = st.integers(min_value=0, max_value=2**31)
MUTATION = st.one_of(
    st.tuples(st.just("flip"), _position, st.integers(0, 7)),
    st.tuples(st.just("insert"), _position, st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("delete"), _position, st.integers(1, 512)),
    st.tuples(st.just("truncate"), _position, st.none()),
)


def mutate(data: bytes, ops) -> bytes:
    b = bytearray(data)
    for op, pos, arg in ops:
        if op == "flip" and b:
            b[pos % len(b)] ^= 1 << arg
        elif op == "insert":
            p = pos % (len(b) + 1)
            b[p:p] = arg
        elif op == "delete" and b:
            p = pos % len(b)
            del b[p : p + arg]
        elif op == "truncate":
            del b[pos % (len(b) + 1) :]
    return bytes(b)


@pytest.mark.parametrize("reader", sorted(SAMPLES))
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_input_is_indexed_or_rejected_record_by_record(reader, tmp_path_factory, data):
    name, original = data.draw(st.sampled_from(SAMPLES[reader]), label="file")
    ops = data.draw(st.lists(MUTATION, min_size=1, max_size=4), label="mutations")
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / name
    path.write_bytes(mutate(original, ops))
    seen = {"records": 0}

    def progress(records: int, nbytes: int) -> None:
        seen["records"] += records

    idx = folder / "idx"
    try:
        res = ingest(Index(idx), str(path), progress=progress)
    except NeardupError as exc:
        # only a problem with the whole file may stop the ingest, before anything is written
        assert isinstance(exc, InputError), repr(exc)
        assert not (idx / "catalog.duckdb").exists() or not snapshot(idx)["batches"]
        return
    # every record read is a document, unchanged (same url and text earlier in the file), skipped or a reject
    assert seen["records"] == res.n_docs + res.n_unchanged + res.n_skipped + res.n_rejected, res
    with Index(idx).reader() as con:
        docs = con.execute("SELECT count(*) FROM documents").fetchall()[0][0]
        rejects = con.execute("SELECT source, record, reason FROM rejects").fetchall()
        batches = con.execute("SELECT status, n_docs, n_rejected, n_skipped FROM batches").fetchall()
    assert docs == res.n_docs
    assert len(rejects) == res.n_rejected
    assert all(src and rec and why for src, rec, why in rejects), rejects
    assert [tuple(b) for b in batches] == [("committed", res.n_docs, res.n_rejected, res.n_skipped)]
    assert not (idx / "batch.pending").exists()
    shutil.rmtree(folder)
