"""A process that ends at once (the CLI) leaves its last connection and writer lock to its exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from neardup import Index, IndexLocked
from neardup.ingest import ingest
from neardup.store import leftover
from neardup.store.index import WriterLock

from .conftest import run_cli, words_text, write_jsonl


@pytest.fixture
def leaving():
    leftover.leave_to_exit()
    try:
        yield
    finally:
        leftover._leaving = False
        leftover.close_left()


def _holds_writer_lock_elsewhere(index_dir) -> bool:
    """Whether another process finds the writer lock taken."""
    code = ("import sys; from neardup.store.index import WriterLock; from neardup import IndexLocked\n"
            "l = WriterLock(__import__('pathlib').Path(sys.argv[1]))\n"
            "try:\n    l.acquire()\nexcept IndexLocked:\n    sys.exit(3)\nl.release()")
    return subprocess.run([sys.executable, "-c", code, str(index_dir)], timeout=120).returncode == 3


def test_without_leaving_a_writer_closes_everything(tmp_path, index_dir):
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(30)}])
    ingest(Index(index_dir), str(src))
    assert leftover.left() == 0
    assert not _holds_writer_lock_elsewhere(index_dir)


def test_a_left_writer_keeps_its_lock_until_this_process_opens_the_index_again(tmp_path, index_dir, leaving):
    a = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(30)}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"url": "b", "text": words_text(30, seed=1)}])
    assert ingest(Index(index_dir), str(a)).n_docs == 1
    assert leftover.left() == 2  # the catalog's connection, then the writer lock
    # another process is told a writer holds the index (not that DuckDB's lock is taken)
    assert _holds_writer_lock_elsewhere(index_dir)
    # this process writes again: what it left is closed first, in order
    assert ingest(Index(index_dir), str(b)).n_docs == 1
    assert leftover.left() == 2
    # a reader in this process too
    with Index(index_dir).reader() as con:
        assert leftover.left() == 0
        assert con.execute("SELECT url FROM documents ORDER BY doc_id").fetchall() == [("a",), ("b",)]
    assert leftover.left() == 1  # the reader's connection
    leftover.close_left()
    assert not _holds_writer_lock_elsewhere(index_dir)


def test_a_held_lock_is_still_refused_while_something_is_left(tmp_path, index_dir, leaving):
    a = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(30)}])
    ingest(Index(index_dir), str(a))
    other = WriterLock(index_dir)
    other.acquire()  # closes what was left, then takes the lock
    try:
        assert leftover.left() == 0
        with pytest.raises(IndexLocked):
            ingest(Index(index_dir), str(a))
    finally:
        other.release()


def test_the_cli_leaves_its_catalog_to_the_exit_and_the_index_is_whole(tmp_path, index_dir):
    a = write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": words_text(40, seed=i)} for i in range(5)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"url": "u0", "text": words_text(40, seed=0)}, {"url": "x", "text": words_text(40, seed=9)}])
    run_cli("ingest", "-q", "--index", str(index_dir), str(a), str(b), check=True)  # two writers in one process
    assert not (index_dir / "catalog.duckdb.wal").exists() or (index_dir / "catalog.duckdb.wal").stat().st_size == 0
    r = run_cli("check", "--index", str(index_dir), check=True)
    assert b"all is well" in r.stdout
    with Index(index_dir).reader() as con:
        assert con.execute("SELECT count(*) FROM documents").fetchall() == [(6,)]
