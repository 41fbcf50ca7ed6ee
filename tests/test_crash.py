"""kill -9 during a real ingest (or delete) leaves the index exactly as before or exactly as after the batch."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

from neardup import Index, IndexBusy, Settings
from neardup.delete import CRASH_POINTS as DELETE_POINTS
from neardup.delete import Selection, delete
from neardup.faults import POINTS
from neardup.ingest import ingest
from neardup.maintenance.check import check_index
from neardup.query import run_sql
from neardup.rebuild import rebuild_fingerprints

from .conftest import FIXTURES, run_cli, words_text, write_jsonl
from .snapshot import content, snapshot

BATCH = str(FIXTURES / "crawl" / "sample.warc.gz")
BEFORE_COMMIT = {"batch-start", "after-first-chunk", "before-pairs", "duckdb-before-commit"}
#: an ingest fills its postings' transaction while the catalog commits: a kill there lands before or after
EITHER = {"lmdb-mid-write"}


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    base = root / "base"
    ingest(Index(base), str(FIXTURES / "text" / "docs.jsonl"))
    ref = root / "ref"
    shutil.copytree(base, ref)
    ingest(Index(ref), BATCH)
    before, after = snapshot(base), snapshot(ref)
    assert len(after["documents"]) > len(before["documents"])
    return root, base, before, after


def _killed_at(root, base, point: str, *command: str):
    """A copy of ``base`` after ``neardup COMMAND --index COPY ...`` killed at ``point``, and its
    state as the next opening (which repairs a half-done write) sees it."""
    trial = root / f"trial-{command[0]}-{point}"
    shutil.copytree(base, trial)
    p = run_cli(command[0], "--index", str(trial), *command[1:], env={"NEARDUP_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    state = snapshot(trial)
    assert not (trial / "batch.pending").exists()
    return trial, state


def _killed_after(trial, base, delay: float, before, after, *command: str) -> str:
    """A copy of ``base`` at ``trial``, ``neardup COMMAND --index trial ...`` killed after ``delay``
    seconds: which of ``before``/``after`` the reopened copy is (it must be one of them)."""
    shutil.copytree(base, trial)
    env = {**os.environ}
    env.pop("NEARDUP_CRASH_AT", None)
    code = "from neardup.cli.app import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, command[0], "--index", str(trial), *command[1:]], env=env,
                            stdout=subprocess.DEVNULL)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = snapshot(trial)
    assert state in (before, after), f"kill after {delay}s left a state that is neither before nor after"
    return "after" if state == after else "before"


@pytest.mark.parametrize("point", POINTS)
def test_kill_at_each_point(states, point):
    root, base, before, after = states
    trial, state = _killed_at(root, base, point, "ingest", "--quiet", BATCH)
    if point in EITHER:
        assert state in (before, after)
    else:
        assert state == (before if point in BEFORE_COMMIT else after)
    # and the index stays usable: ingesting the batch again converges on the reference
    ingest(Index(trial), BATCH)
    assert snapshot(trial)["documents"] == after["documents"]


def test_kill_at_random_times(tmp_path):
    rnd = random.Random(7)
    recs = [{"url": f"https://e.org/{i}", "text": " ".join(f"w{rnd.randrange(50000)}" for _ in range(300))} for i in range(12000)]
    big = write_jsonl(tmp_path / "big.jsonl", recs)
    base = tmp_path / "base"
    ingest(Index(base), str(FIXTURES / "text" / "docs.jsonl"))
    before = snapshot(base)
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    ingest(Index(ref), str(big))
    after = snapshot(ref)
    outcomes = []
    for k, delay in enumerate([0.3, 0.9, 1.5, 2.5, 4.0]):
        outcomes.append(_killed_after(tmp_path / f"t{k}", base, delay, before, after, "ingest", "-q", str(big)))
    # the early kills land mid-batch (the batch takes seconds); the late ones may land after it
    assert outcomes[0] == "before", outcomes


def test_readers_are_refused_clearly_while_a_writer_holds_the_catalog(tmp_path):
    idx = tmp_path / "idx"
    ingest(Index(idx), str(FIXTURES / "text" / "docs.jsonl"))
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from neardup import Index\n"
         "with Index(sys.argv[1]).writer() as w:\n"
         "    print('ready', flush=True); time.sleep(60)\n", str(idx)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == b"ready"
        with pytest.raises(IndexBusy, match=rf"pid {holder.pid}"):
            run_sql(Index(idx), "SELECT count(*) FROM documents")
        p = run_cli("sql", "--index", str(idx), "SELECT 1")
        assert p.returncode == 4 and b"in use by" in p.stderr
    finally:
        holder.kill()
        holder.wait()
    assert run_sql(Index(idx), "SELECT count(*) AS n FROM documents").to_pylist() == [{"n": 96}]


@pytest.mark.parametrize("point", ["batch-start", "lmdb-mid-write", "rebuild-postings-done"])
def test_kill_during_rebuild(tmp_path, point):
    base = tmp_path / "base"
    settings = Settings(methods=("shingles", "minhash", "a0", "a2", "a6_36"), minhash_perms=8)
    ingest(Index(base), str(FIXTURES / "text" / "docs.jsonl"), create_with=settings)
    ingest(Index(base), BATCH)
    before = snapshot(base)
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    rebuild_fingerprints(Index(ref))
    after = snapshot(ref)
    trial = tmp_path / "trial"
    shutil.copytree(base, trial)
    p = run_cli("rebuild", "--index", str(trial), env={"NEARDUP_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    state = snapshot(trial)
    assert state == (before if point == "batch-start" else after)
    with Index(trial).reader() as con:
        a2 = con.execute("SELECT * FROM fp_a2 ORDER BY doc_id").fetchall()
    with Index(ref).reader() as con:
        assert a2 == (con.execute("SELECT * FROM fp_a2 ORDER BY doc_id").fetchall() if point != "batch-start" else a2)


def test_kill_in_the_second_batch_of_a_sliced_input_keeps_the_first_and_a_rerun_completes(tmp_path):
    """An input bigger than --batch-mb is committed as several batches: a crash keeps the whole
    batches before it, and ingesting the input again adds the rest, as one run would have."""
    folder = tmp_path / "in"  # a folder is read in chunks of 4096 files: three batches of 1 MB
    folder.mkdir()
    for i in range(9000):
        (folder / f"{i:05d}.txt").write_text(words_text(40, i % 3000))
    src = str(folder)
    ref = tmp_path / "ref"
    run_cli("ingest", "--quiet", "--index", str(ref), "--batch-mb", "1", src, check=True)
    trial = tmp_path / "trial"
    p = run_cli("ingest", "--quiet", "--index", str(trial), "--batch-mb", "1", src, env={"NEARDUP_CRASH_AT": "duckdb-before-commit@2"})
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    first = snapshot(trial)
    full = snapshot(ref)
    assert len(full["batches"]) == 3
    assert first["batches"] == full["batches"][:1]
    assert first["documents"] == full["documents"][: len(first["documents"])]
    run_cli("ingest", "--quiet", "--index", str(trial), "--batch-mb", "1", src, check=True)
    again = snapshot(trial)
    assert content(again) == content(full)  # the same documents, fingerprints, postings and pairs

    def clusters(state):  # (method, size, support, members), whatever batch made them
        return sorted((c[1], c[2], c[3], tuple(c[-1])) for c in state["clusters"])

    assert clusters(again) == clusters(full)


def test_kill_in_the_batch_after_a_second_crawl_ends_one_keeps_the_first_and_a_rerun_completes(tmp_path):
    """An input holding two crawls of one site (``ingest._ends_before``): its first 8 MB block holds
    the first crawl and the start of the second, the next block the rest of the second, whose
    older versions the first batch added, so the first batch ends there though its budget is not
    reached. A crash in the second keeps the first, and ingesting the input again adds the rest,
    as one run would have."""
    first = [{"url": f"https://site.example/p{i}", "text": words_text(80, i)} for i in range(9000)]
    second = [{"url": r["url"], "text": r["text"] + " " + words_text(8, 20000 + i, prefix="e")} for i, r in enumerate(first)]
    src = str(write_jsonl(tmp_path / "two.jsonl", first + second))
    assert 8 << 20 < os.path.getsize(src) < 20e6 / 1.25  # two blocks; an eighth of 20 MB is under the first
    ref = tmp_path / "ref"
    run_cli("ingest", "--quiet", "--index", str(ref), "--batch-mb", "20", src, check=True)
    trial = tmp_path / "trial"
    p = run_cli("ingest", "--quiet", "--index", str(trial), "--batch-mb", "20", src, env={"NEARDUP_CRASH_AT": "duckdb-before-commit@2"})
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    kept, full = snapshot(trial), snapshot(ref)
    assert len(full["batches"]) == 2 and 9000 < full["batches"][0][2] < 18000  # n_docs: the first block's
    assert kept["batches"] == full["batches"][:1]

    def but_latest(rows):  # the second batch marks some of the first's rows as not latest
        return [d[:6] + d[7:] for d in rows]

    assert but_latest(kept["documents"]) == but_latest(full["documents"][: len(kept["documents"])])
    with Index(trial).reader() as con:  # what the first batch committed is whole: one latest version a url
        assert con.execute("SELECT count(*) FROM (SELECT url FROM documents GROUP BY url "
                           "HAVING count(*) FILTER (WHERE is_latest) <> 1)").fetchall() == [(0,)]
    run_cli("ingest", "--quiet", "--index", str(trial), "--batch-mb", "20", src, check=True)
    again = snapshot(trial)
    assert content(again) == content(full)
    with Index(trial).reader() as con:
        assert con.execute("SELECT version, is_latest, count(*) FROM documents GROUP BY ALL ORDER BY ALL").fetchall() == [
            (1, False, 9000), (2, True, 9000)]


# -- a delete batch ------------------------------------------------------------

DELETE_BEFORE_COMMIT = {"batch-start", "duckdb-before-commit"}


@pytest.fixture(scope="module")
def delete_states(tmp_path_factory):
    """An index of the text fixtures and the crawl, before and after deleting the crawl's batch."""
    root = tmp_path_factory.mktemp("crash-delete")
    base = root / "base"
    ingest(Index(base), str(FIXTURES / "text" / "docs.jsonl"))
    ingest(Index(base), str(FIXTURES / "text" / "chain.jsonl"))
    ingest(Index(base), BATCH)
    ref = root / "ref"
    shutil.copytree(base, ref)
    delete(Index(ref), Selection(batch=3))
    before, after = snapshot(base), snapshot(ref)
    assert len(after["documents"]) < len(before["documents"])
    return root, base, before, after


@pytest.mark.parametrize("point", DELETE_POINTS)
def test_kill_a_delete_at_each_point(delete_states, point):
    root, base, before, after = delete_states
    trial, state = _killed_at(root, base, point, "delete", "--batch", "3")  # a half-written delete: all postings re-derived
    assert state == (before if point in DELETE_BEFORE_COMMIT else after)
    assert check_index(Index(trial), full=True).ok
    # and the index stays usable: the delete again (or nothing left to delete), then an ingest
    run_cli("delete", "--index", str(trial), "--batch", "3", check=True)
    assert snapshot(trial)["documents"] == after["documents"]
    ingest(Index(trial), BATCH)
    assert check_index(Index(trial), full=True).ok


def test_kill_a_delete_at_random_times(tmp_path):
    rnd = random.Random(11)
    recs = [{"url": f"https://e.org/{i}", "text": " ".join(f"w{rnd.randrange(50000)}" for _ in range(300))} for i in range(6000)]
    big = write_jsonl(tmp_path / "big.jsonl", recs)
    base = tmp_path / "base"
    ingest(Index(base), str(FIXTURES / "text" / "docs.jsonl"))
    ingest(Index(base), str(big))
    before = snapshot(base)
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    delete(Index(ref), Selection(batch=2))
    after = snapshot(ref)
    outcomes = []
    for k, delay in enumerate([0.3, 1.0, 2.0, 3.5]):
        outcomes.append(_killed_after(tmp_path / f"t{k}", base, delay, before, after, "delete", "--batch", "2"))
    # the delete takes seconds (about 3 on a quiet machine): the first kill lands before its commit
    assert outcomes[0] == "before", outcomes


def test_kill_during_a_background_run_merge_leaves_the_index_before_or_after(tmp_path, monkeypatch):
    """An index left with a run merge due (every merge left to the background while it was built):
    the next ingest starts it beside its batch, and a kill while it writes leaves the index as
    before or after that batch; the next writer removes the merge's files and a rerun converges."""
    import neardup.readers.base as base_mod
    import neardup.store.runs as runs_mod
    from neardup.faults import COMPACT_POINT
    from neardup.store.postings import LmdbPostings

    monkeypatch.setattr(runs_mod, "INLINE_MERGE", 0)
    monkeypatch.setattr(base_mod, "CHUNK_RECORDS", 16)
    base = tmp_path / "base"
    ingest(Index(base), BATCH, batch_mb=0.2)
    ingest(Index(base), str(FIXTURES / "generated" / "corpus.jsonl"))  # a batch as large as the runs before it
    p = LmdbPostings(Index(base).postings_path, readonly=True)
    try:
        assert any(runs_mod.merge_count([n for _, n in p.runs.manifest(t)]) > 1 for t in p.runs.tables())
    finally:
        p.close()
    more = str(FIXTURES / "text" / "docs.jsonl")
    before = snapshot(base)
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    ingest(Index(ref), more)
    after = snapshot(ref)
    trial = tmp_path / "trial"
    shutil.copytree(base, trial)
    p = run_cli("ingest", "--quiet", "--index", str(trial), more, env={"NEARDUP_CRASH_AT": COMPACT_POINT})
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    assert snapshot(trial) in (before, after)
    ingest(Index(trial), more)
    assert content(snapshot(trial)) == content(after)
    p = LmdbPostings(Index(trial).postings_path, readonly=True)
    try:
        named = {f"{t}.{s_}" for t in p.runs.tables() for s_, _ in p.runs.manifest(t)}
    finally:
        p.close()
    assert {f.name.rsplit(".", 1)[0] for f in (Index(trial).postings_path / "runs").iterdir()} == named
