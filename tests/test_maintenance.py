"""``neardup backup`` and ``neardup check`` (neardup.maintenance), and ``rebuild --postings``."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import lmdb
import numpy as np
import pytest

from neardup.errors import IndexLocked, IndexNotFound
from neardup.ingest import ingest
from neardup.keys import BATCH_TABLES, batch_postings, fingerprint_postings
from neardup.maintenance.backup import BackupDestination, backup
from neardup.maintenance.check import EXIT_CATALOG, EXIT_POSTINGS, OK, PROBLEM, SKIPPED, check_index
from neardup.neighbours import FREQUENT_TABLE
from neardup.rebuild import rebuild_postings
from neardup.store.index import Index, WriterLock
from neardup.store.postings import VALUES, LmdbPostings

from .conftest import run_cli, words_text, write_jsonl
from .snapshot import snapshot


def _corpus(folder: Path) -> tuple[Path, Path, Path]:
    """2,000 documents (one batch: the catalog's middle is then a data block), 100 near copies
    of some of them (pairs and clusters), and a third small batch for later."""
    folder.mkdir(parents=True, exist_ok=True)
    a = write_jsonl(folder / "a.jsonl", [{"url": f"https://e.org/{i}", "text": words_text(300, seed=i)} for i in range(2000)])
    b = write_jsonl(folder / "b.jsonl", [{"url": f"https://copy.org/{i}", "text": words_text(300, seed=i) + " extra words here."}
                                          for i in range(0, 2000, 20)])
    c = write_jsonl(folder / "c.jsonl", [{"url": f"https://late.org/{i}", "text": words_text(200, seed=5000 + i)} for i in range(30)])
    return a, b, c


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("maint")
    a, b, c = _corpus(root / "in")
    idx = root / "base"
    ingest(Index(idx), str(a))
    ingest(Index(idx), str(b))
    return {"index": idx, "late": c, "state": snapshot(idx)}


@pytest.fixture
def copy(base, tmp_path) -> Path:
    dst = tmp_path / "idx"
    shutil.copytree(base["index"], dst)
    return dst


def _problems(report) -> dict[str, str]:
    return {f.check: f.detail for f in report.findings if f.status == PROBLEM}


def _by_check(report, name: str):
    return [f for f in report.findings if f.check == name]


# -- check: a clean index ------------------------------------------------------


@pytest.mark.parametrize("full", [False, True])
def test_a_clean_index_passes(base, full):
    r = check_index(Index(base["index"]), full=full)
    assert r.ok and r.exit_code == 0, _problems(r)
    assert all(f.status == OK for f in r.findings), [(f.check, f.status, f.detail) for f in r.findings]
    assert r.documents == 2100
    assert r.documents_checked == (2100 if full else 1000)
    content = _by_check(r, "postings content")[0].detail
    assert ("every table holds exactly the entries implied" in content) == full
    assert snapshot(base["index"]) == base["state"]  # the check changed nothing


def test_the_check_refuses_a_missing_index_and_waits_for_or_refuses_a_writer(copy, tmp_path):
    with pytest.raises(IndexNotFound):
        check_index(Index(tmp_path / "nothing"))
    lock = WriterLock(copy)
    lock.acquire()
    try:
        with pytest.raises(IndexLocked, match="another writer holds the index") as exc:
            check_index(Index(copy))
        assert "--wait" in exc.value.hint
        threading.Timer(0.3, lock.release).start()
        assert check_index(Index(copy), wait=30).ok
    finally:
        lock.release()


# -- check: planted faults -----------------------------------------------------


def test_zeroed_16k_in_the_middle_of_the_catalog_is_found(copy):
    path = copy / "catalog.duckdb"
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 2)
        before = fh.read(16384)
        # the fixture is built so that the middle of the file is data in use: zeroing zeros would prove nothing
        assert before.count(0) < 4096, "the middle of the fixture's catalog is no longer data; enlarge the fixture"
        fh.seek(size // 2)
        fh.write(b"\0" * 16384)
    r = check_index(Index(copy))
    assert r.exit_code == EXIT_CATALOG
    bad = [f for f in r.findings if f.check == "catalog data" and f.status == PROBLEM]
    assert len(bad) == 1
    assert "cannot be read" in bad[0].detail and "checksum" in bad[0].detail
    assert "restore" in bad[0].repair and "neardup backup" in bad[0].repair
    assert _by_check(r, "postings content")[0].status == SKIPPED


def test_a_catalog_that_does_not_open_is_found(copy):
    with open(copy / "catalog.duckdb", "r+b") as fh:
        fh.write(b"\0" * 16384)
    r = check_index(Index(copy))
    assert r.exit_code == EXIT_CATALOG
    assert "cannot be opened" in _problems(r)["catalog file"]


def test_deleted_postings_are_reported_missing_and_rebuilt(copy, base):
    shutil.rmtree(copy / "postings")
    r = check_index(Index(copy))
    assert r.exit_code == EXIT_POSTINGS
    assert _problems(r) == {"postings": "postings/ is missing"}
    assert "neardup rebuild --postings" in _by_check(r, "postings")[0].repair
    assert rebuild_postings(Index(copy)).batches == 2
    assert check_index(Index(copy), full=True).ok
    assert snapshot(copy) == base["state"]


def _remove_from_runs(index: Path, table: str, doc_id: int) -> tuple[int, int]:
    """Drop every entry of a document from a table kept as runs (``store.runs``), behind the
    catalog's back; returns (entries dropped, the smallest key)."""
    from neardup.store.postings import LmdbPostings

    p = LmdbPostings(index / "postings")
    try:
        k, v = p.runs.lookup(table, None)
        mine = np.sort(k[v == doc_id])
        meta = p._db("__meta__")
        with p.env.begin(write=True) as txn:
            p.runs.remove(txn, meta, table, np.array([doc_id], dtype=np.uint64))
        p.runs.after_commit()
    finally:
        p.close()
    assert mine.size, f"no entry of doc {doc_id} in {table}"
    return int(mine.size), int(mine[0])


@pytest.mark.parametrize("table", ["url", "lsh"])
@pytest.mark.parametrize("full", [False, True])
def test_a_removed_posting_entry_is_found(copy, full, table):
    """A document's entries missing from a table kept as runs in files (``url``, ``lsh``)."""
    n, key = _remove_from_runs(copy, table, 1)  # doc 1 starts the first sampled run
    r = check_index(Index(copy), full=full)
    assert r.exit_code == EXIT_POSTINGS
    detail = _problems(r)["postings content"]
    assert f"{table} {n} missing (e.g. key {key:#018x} of doc 1)" in detail
    assert "rebuild --postings" in _by_check(r, "postings content")[0].repair
    rebuild_postings(Index(copy))
    assert check_index(Index(copy), full=True).ok


def test_a_removed_value_is_found(copy):
    env = lmdb.open(str(copy / "postings"), max_dbs=64, map_size=1 << 30)
    with env.begin(write=True, db=env.open_db(b"v2val/shingles")) as txn:
        assert txn.delete((5).to_bytes(8, "big"))
    env.close()
    assert "val:shingles 1 missing (e.g. doc 5)" in _problems(check_index(Index(copy)))["postings content"]


def test_a_stray_entry_is_found_by_the_full_check(copy):
    from neardup.store.postings import LmdbPostings

    p = LmdbPostings(copy / "postings")
    with p.env.begin(write=True) as txn:  # one more run holding one (key, id) no document implies
        p.runs.add(txn, p._db("__meta__"), "url", np.array([12345], np.uint64), np.array([7], np.uint64))
    p.runs.after_commit()
    p.close()
    assert check_index(Index(copy)).ok  # a key no document implies is not looked up by the sample
    detail = _problems(check_index(Index(copy), full=True))["postings content"]
    assert "url 1 unexpected" in detail


def test_a_leftover_batch_pending_is_found(copy):
    (copy / "batch.pending").write_text("batch 12345")
    r = check_index(Index(copy))
    assert r.exit_code == EXIT_POSTINGS
    assert _problems(r) == {"interrupted write": "batch.pending is left over (batch 12345): a write stopped before it "
                                                 "finished, so its postings may be missing"}
    assert (copy / "batch.pending").exists()  # the check repairs nothing
    rebuild_postings(Index(copy))
    assert check_index(Index(copy)).ok


def _crash_in_lmdb(index: Path, src: Path) -> None:
    """A real ingest killed after its catalog commit, before its postings commit."""
    p = run_cli("ingest", "--quiet", "--index", str(index), str(src), env={"NEARDUP_CRASH_AT": "lmdb-before-commit"})
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()


def test_postings_behind_the_catalog_are_found(copy, base):
    _crash_in_lmdb(copy, base["late"])
    r = check_index(Index(copy))
    assert _problems(r) == {
        "interrupted write": "batch.pending is left over (batch " + (copy / "batch.pending").read_text().split()[1]
                             + "): a write stopped before it finished, so its postings may be missing",
        "postings applied": "behind the catalog: applied up to batch 2, the catalog has committed batches up to 3",
    }
    assert "catalog log" not in _problems(r)
    # as after a system crash that undid LMDB's last commit: no marker, postings behind
    (copy / "batch.pending").unlink()
    r = check_index(Index(copy))
    assert list(_problems(r)) == ["postings applied"] and r.exit_code == EXIT_POSTINGS
    assert "rebuild --postings" in _by_check(r, "postings applied")[0].repair
    # the batches the postings do hold are still compared, and are right
    assert _by_check(r, "postings content")[0].status == OK


def test_postings_ahead_of_the_catalog_are_found(copy):
    env = lmdb.open(str(copy / "postings"), max_dbs=64, map_size=1 << 30)
    with env.begin(write=True, db=env.open_db(b"__meta__")) as txn:
        txn.put(b"applied_batch_v2", b"9")
    env.close()
    assert "ahead of the catalog" in _problems(check_index(Index(copy)))["postings applied"]


def test_inconsistent_catalog_rows_are_found(copy):
    import duckdb

    con = duckdb.connect(str(copy / "catalog.duckdb"))
    con.execute("UPDATE batches SET n_docs = n_docs + 1 WHERE batch_id = 2")
    con.execute("UPDATE documents SET is_latest = false WHERE doc_id = 3")
    con.execute("DELETE FROM documents WHERE doc_id = (SELECT max(doc_a) FROM duplicates)")
    con.execute("CHECKPOINT")
    con.close()
    r = check_index(Index(copy))
    p = _problems(r)
    assert "batch 2 says it added 101 document(s), documents holds 100" in p["batches and documents"]
    assert p["document versions"] == "1 url(s) without versions 1..n and exactly one latest (e.g. https://e.org/2)"
    assert "not of two known documents" in p["duplicate pairs"]
    assert r.exit_code == EXIT_CATALOG
    assert "neardup rebuild" in _by_check(r, "duplicate pairs")[0].repair


def test_sampled_runs_see_per_document_postings_as_the_batch_does(base):
    """The sampled check derives the postings of runs of documents; every table but BATCH_TABLES
    must then hold, per document, what the derivation of the whole batch holds."""
    assert BATCH_TABLES == (FREQUENT_TABLE,)
    idx = Index(base["index"])
    s = idx.settings()
    with idx.reader() as con:
        lo, hi = con.execute("SELECT first_doc_id, last_doc_id FROM batches WHERE batch_id = 2").fetchall()[0]
        whole = batch_postings(con, 2, s)
        parts = [fingerprint_postings(con, a, b, s) for a, b in ((lo, lo + 36), (lo + 37, hi))]
    for table, (keys, vals) in whole.items():
        if table in BATCH_TABLES or table in ("url", "content", "val:docinfo"):  # from the documents rows
            continue
        got = [p[table] for p in parts if table in p]
        if table.startswith(VALUES):
            assert dict(zip(np.asarray(keys).tolist(), vals)) == {k: v for g in got for k, v in zip(np.asarray(g[0]).tolist(), g[1])}
        else:
            assert set(zip(np.asarray(keys).tolist(), np.asarray(vals).tolist())) == \
                {x for g in got for x in zip(np.asarray(g[0]).tolist(), np.asarray(g[1]).tolist())}, table


# -- backup ----------------------------------------------------------------------


def test_backup_copies_everything_and_the_copy_checks_and_ingests(base, tmp_path):
    dest = tmp_path / "backups" / "b1"
    r = backup(Index(base["index"]), dest)
    assert r.check is not None and r.check.ok, _problems(r.check)
    assert not r.finished and r.repaired == []
    assert sorted(p.name for p in dest.iterdir()) == ["catalog.duckdb", "postings", "writer.lock"]
    assert not list(dest.parent.glob(".*partial*"))
    assert snapshot(dest) == base["state"]
    assert check_index(Index(dest), full=True).ok
    ingest(Index(dest), str(base["late"]))  # the copy is an index of its own
    assert check_index(Index(dest), full=True).ok
    assert len(snapshot(dest)["documents"]) == 2130
    assert snapshot(base["index"]) == base["state"]


def test_backup_while_readers_hold_the_catalog_and_the_postings(base, tmp_path):
    reader = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, duckdb, lmdb\n"
         f"con = duckdb.connect({str(base['index'] / 'catalog.duckdb')!r}, read_only=True)\n"
         f"env = lmdb.open({str(base['index'] / 'postings')!r}, readonly=True, max_dbs=64)\n"
         "txn = env.begin()\n"
         "print(con.execute('SELECT count(*) FROM documents').fetchall()[0][0], flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "2100"  # the reader holds its connection and a read transaction
        with Index(base["index"]).reader() as con:  # and so does this process
            r = backup(Index(base["index"]), tmp_path / "b")
            assert con.execute("SELECT count(*) FROM documents").fetchall()[0][0] == 2100
    finally:
        reader.communicate("", timeout=60)
    assert r.check.ok
    assert snapshot(tmp_path / "b") == base["state"]


def test_backup_refuses_a_used_destination_and_a_held_lock(base, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    with pytest.raises(BackupDestination, match="not empty") as exc:
        backup(Index(base["index"]), full)
    assert exc.value.exit_code == 2 and "never overwrites" in exc.value.hint
    (tmp_path / "file").write_text("x")
    with pytest.raises(BackupDestination, match="not a folder"):
        backup(Index(base["index"]), tmp_path / "file")
    with pytest.raises(BackupDestination, match="inside the index"):
        backup(Index(base["index"]), base["index"] / "backup")
    with pytest.raises(IndexNotFound):
        backup(Index(tmp_path / "nothing"), tmp_path / "b0")
    empty = tmp_path / "empty"
    empty.mkdir()
    lock = WriterLock(base["index"])
    lock.acquire()
    try:
        with pytest.raises(IndexLocked):
            backup(Index(base["index"]), empty)
        assert list(empty.iterdir()) == [] and not list(tmp_path.glob(".*partial*"))
        threading.Timer(0.3, lock.release).start()
        r = backup(Index(base["index"]), empty, wait=30, check=False)  # an empty folder is fine
    finally:
        lock.release()
    assert r.check is None and r.locked_seconds >= 0
    assert snapshot(empty) == base["state"]


def test_backup_of_a_crashed_index_is_whole_and_repaired(copy, base, tmp_path):
    _crash_in_lmdb(copy, base["late"])
    assert (copy / "batch.pending").exists() and (copy / "catalog.duckdb.wal").exists()
    r = backup(Index(copy), tmp_path / "b")
    assert r.finished and r.repaired == [3]
    assert r.check.ok, _problems(r.check)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["catalog.duckdb", "postings", "writer.lock"]
    assert (copy / "batch.pending").exists()  # the original is left as it was
    assert snapshot(tmp_path / "b") == snapshot(copy)  # reading the original repairs it the same way


# -- the commands ----------------------------------------------------------------


def test_cli_check_backup_and_rebuild_postings(copy, tmp_path):
    from typer.testing import CliRunner

    from neardup.cli.app import app

    runner = CliRunner()
    r = runner.invoke(app, ["check", "--index", str(copy)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0].startswith("ok       catalog file: catalog.duckdb opens")
    assert "all is well (13 checks" in r.output
    shutil.rmtree(copy / "postings")
    r = runner.invoke(app, ["check", "--index", str(copy), "--full"])
    assert r.exit_code == EXIT_POSTINGS
    assert "problem  postings: postings/ is missing\n         repair: run `neardup rebuild --postings`" in r.output
    assert "1 problem(s)" in r.output and "exit code 6" in r.output
    r = runner.invoke(app, ["rebuild", "--index", str(copy), "--postings"])
    assert r.exit_code == 0 and "re-derived the postings of 2 batch(es)" in r.output
    assert runner.invoke(app, ["check", "--index", str(copy), "--full"]).exit_code == 0

    r = runner.invoke(app, ["backup", "--index", str(copy), str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "backed up" in r.output and "the copy checks ok" in r.output
    r = runner.invoke(app, ["backup", "--index", str(copy), str(tmp_path / "b")])
    assert r.exit_code == 2 and "the folder is not empty" in r.output and "hint:" in r.output
    lock = WriterLock(copy)
    lock.acquire()
    try:
        for cmd in (["backup", "--index", str(copy), str(tmp_path / "c")], ["check", "--index", str(copy)]):
            r = runner.invoke(app, cmd)
            assert r.exit_code == 4 and "another writer holds the index" in r.output and "--wait" in r.output
    finally:
        lock.release()
    with open(copy / "catalog.duckdb", "r+b") as fh:  # a damaged index: the backup says so
        fh.seek(fh.seek(0, 2) // 2)
        fh.write(b"\0" * 16384)
    r = runner.invoke(app, ["backup", "--index", str(copy), str(tmp_path / "d")])
    assert r.exit_code == EXIT_CATALOG and "problem  catalog data" in r.output


def test_backup_copies_long_posting_lists(tmp_path):
    """700 pages sharing a frame: some posting lists outgrow an LMDB page (a sub-tree of duplicates),
    on which LMDB's compacting copy crashed the process."""
    rnd = __import__("random").Random(3)
    frame = " ".join(f"frame{rnd.randrange(400)}" for _ in range(120))
    src = write_jsonl(tmp_path / "f.jsonl", [{"url": f"https://f.org/{i}", "text": frame + " " + words_text(60, seed=i)} for i in range(700)])
    idx = tmp_path / "idx"
    ingest(Index(idx), str(src))
    p = LmdbPostings(idx / "postings", readonly=True)
    longest = max(int(np.unique(p._lookup(t, None)[0], return_counts=True)[1].max()) for t in p.tables())
    p.close()
    assert longest >= 600  # 600 8-byte ids do not fit in one 4 KB page
    p = subprocess.run([sys.executable, "-c", "import sys; from neardup.maintenance.backup import backup; from neardup.store.index import Index; "
                        f"r = backup(Index({str(idx)!r}), {str(tmp_path / 'b')!r}); sys.exit(r.check.exit_code)"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    assert snapshot(tmp_path / "b") == snapshot(idx)
