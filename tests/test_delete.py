"""`neardup delete`: documents removed as if they had never been ingested, in one atomic batch."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neardup import Index, QueryRefused, Settings
from neardup.cli.app import app
from neardup.concepts import brute_force, mine
from neardup.delete import Selection, delete
from neardup.errors import SelectionError
from neardup.ingest import ingest
from neardup.maintenance.check import check_index
from neardup.query import run_sql
from neardup.settings import parse_pairs
from neardup.store.postings import LmdbPostings

from .conftest import FIXTURES, write_jsonl
from .snapshot import snapshot

runner = CliRunner()
DOCS = str(FIXTURES / "text" / "docs.jsonl")
CRAWL = str(FIXTURES / "crawl" / "sample.warc.gz")
CHAIN = str(FIXTURES / "text" / "chain.jsonl")

#: small sketches so that short generated texts make concept clusters; a statistics-based method too
SMALL = Settings(methods=("shingles", "bottomk", "minhash", "simhash", "a2"), bottomk=16, minhash_perms=32, threshold=0.7,
                 pairs=("jaccard", "simhash", "bottomk", "a2"), concept_support=12)


def cli(*args: str):
    return runner.invoke(app, list(args))


def tree(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            if not f.endswith(".lock"):
                out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def view(path: Path) -> dict:
    """What must not depend on whether deleted documents were ever ingested: by url and version, not doc id."""
    with Index(path).reader() as con:
        key = {d: (u, v) for d, u, v in con.execute("SELECT doc_id, url, version FROM documents").fetchall()}
        docs = sorted(con.execute("SELECT url, version, is_latest, content_hash, text, n_words FROM documents").fetchall())
        pairs = sorted((m, key[a], key[b], round(s, 12)) for a, b, m, s in con.execute("SELECT doc_a, doc_b, method, similarity FROM duplicates").fetchall())
        clusters = sorted((m, s, tuple(sorted(key[d] for d in ms))) for m, s, ms in con.execute(
            "SELECT c.method, c.support, list(m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id) GROUP BY c.cluster_id, c.method, c.support").fetchall())
        terms = sorted(con.execute("SELECT * FROM term_stats").fetchall())
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'fp_%' ORDER BY 1").fetchall()]
        fps = {}
        for t in tables:
            cols = [c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND column_name <> 'doc_id' ORDER BY column_index", [t]).fetchall()]
            fps[t] = sorted((key[r[0]], *r[1:]) for r in con.execute(f"SELECT doc_id, {', '.join(cols)} FROM {t}").fetchall())
    p = LmdbPostings(Index(path).postings_path, readonly=True)
    try:
        dump = p.dump()
    finally:
        p.close()
    postings = {}
    for table, entries in dump.items():
        if table == "concept_frequent":  # keyed to each batch's first doc id
            postings[table] = sorted((k, key[i]) for k, ids in entries.items() for i in ids)
        elif table.startswith("val:"):
            postings[table] = sorted((key[i], v) for i, v in entries.items())
        else:
            postings[table] = sorted((k, key[i]) for k, ids in entries.items() for i in ids)
    return {"documents": docs, "pairs": pairs, "clusters": clusters, "term_stats": terms, "fingerprints": fps, "postings": postings}


def assert_same(a: dict, b: dict) -> None:
    for part in a:
        assert a[part] == b[part], part


def assert_checks(path: Path) -> None:
    r = check_index(Index(path), full=True)
    assert r.ok, [(f.check, f.detail) for f in r.findings if f.status != "ok"]


# -- generated corpora ----------------------------------------------------------

VOCAB = [f"t{i}" for i in range(600)]


def _text(rnd: random.Random, n: int) -> list[str]:
    return [rnd.choice(VOCAB) for _ in range(n)]


def _edit(rnd: random.Random, words: list[str], edits: int) -> list[str]:
    w = list(words)
    for _ in range(edits):
        w[rnd.randrange(len(w))] = rnd.choice(VOCAB)
    return w


def corpora(seed: int, n_a: int, n_b: int, n_c: int) -> tuple[list[dict], list[dict], list[dict]]:
    """A, B and C with near-duplicates across them, exact copies, and new versions of A's urls in B and C."""
    rnd = random.Random(seed)
    a = [{"url": f"https://a.example.org/{i}", "words": _text(rnd, rnd.randrange(40, 70))} for i in range(n_a)]

    def later(prefix: str, n: int, older: list[dict]) -> list[dict]:
        out = []
        for i in range(n):
            kind = rnd.random()
            if kind < 0.45 and older:  # a near-duplicate of an older document
                w = _edit(rnd, rnd.choice(older)["words"], rnd.randrange(0, 7))
            elif kind < 0.6 and out:  # of one of the same corpus
                w = _edit(rnd, rnd.choice(out)["words"], rnd.randrange(1, 4))
            else:
                w = _text(rnd, rnd.randrange(40, 70))
            out.append({"url": f"https://{prefix}.example.org/{i}", "words": w})
        for d in rnd.sample(a, k=min(len(a), rnd.randrange(0, 3))):  # new versions of A's urls
            out.append({"url": d["url"], "words": _edit(rnd, d["words"], rnd.randrange(1, 6))})
        return out

    b = later("b", n_b, a)
    c = later("c", n_c, a + b)
    return a, b, c


def _write(path: Path, docs: list[dict]) -> str:
    return str(write_jsonl(path, [{"url": d["url"], "text": " ".join(d["words"]) + "."} for d in docs]))


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n_a=st.integers(2, 10), n_b=st.integers(1, 10), n_c=st.integers(1, 6))
def test_ingest_a_and_b_then_delete_b_is_ingest_a(tmp_path_factory, seed, n_a, n_b, n_c):
    tmp = tmp_path_factory.mktemp("prop")
    a, b, c = corpora(seed, n_a, n_b, n_c)
    fa, fb, fc = _write(tmp / "a.jsonl", a), _write(tmp / "b.jsonl", b), _write(tmp / "c.jsonl", c)
    only_a, both = tmp / "a", tmp / "ab"
    ingest(Index(only_a), fa, create_with=SMALL)
    ingest(Index(both), fa, create_with=SMALL)
    ingest(Index(both), fb)
    res = delete(Index(both), Selection(batch=2))
    assert res.n_docs == len({d["url"] + " ".join(d["words"]) for d in b} - {d["url"] + " ".join(d["words"]) for d in a})
    assert_same(view(both), view(only_a))
    assert_checks(both)
    # the postings as later batches see them: ingesting C finds the same new pairs and clusters
    ingest(Index(only_a), fc)
    ingest(Index(both), fc)
    assert_same(view(both), view(only_a))
    assert_checks(both)


def test_the_fixtures_with_every_pair_method(tmp_path):
    """The fixture crawl deleted from an index of the text fixtures, with every pair method and the lexical ones."""
    methods = ("shingles", "bottomk", "minhash", "simhash", "a0", "a2", "a6", "a7", "a12", "lexical")
    s = Settings(methods=methods, pairs=parse_pairs("all", methods))
    only, both = tmp_path / "a", tmp_path / "ab"
    for p in (only, both):
        ingest(Index(p), DOCS, create_with=s)
        ingest(Index(p), CHAIN)
    ingest(Index(both), CRAWL)
    assert view(both) != view(only)
    delete(Index(both), Selection(batch=3))
    assert_same(view(both), view(only))
    assert_checks(both)
    for p in (only, both):
        ingest(Index(p), str(FIXTURES / "crawl" / "sample.wet.gz"))
    assert_same(view(both), view(only))
    assert_checks(both)


# -- any subset: the clusters of what is left -----------------------------------


def _remaining_clusters(path: Path, k: int) -> tuple[set, set]:
    with Index(path).reader() as con:
        sk = {d: list(s) for d, s in con.execute("SELECT doc_id, sketch FROM fp_bottomk").fetchall()}
        pairs = con.execute("SELECT doc_a, doc_b FROM duplicates WHERE method = 'jaccard'").fetchall()
    # the maximal sets by listing every subset when that is cheap, else by mining from scratch (which
    # tests/test_clusters.py checks against the listing and against pyfim)
    concept = brute_force(sk, k) if len(sk) <= 14 else {(c.members, c.support) for c in mine({d: np.array(v, np.uint64) for d, v in sk.items()}, k)}
    g = nx.Graph(pairs)
    comps = {tuple(sorted(c)) for c in nx.connected_components(g) if len(c) > 1}
    return concept, comps


def _clusters(path: Path) -> tuple[set, set]:
    with Index(path).reader() as con:
        rows = con.execute("SELECT c.method, c.support, list(m.doc_id ORDER BY m.doc_id) FROM clusters c "
                           "JOIN cluster_members m USING (cluster_id) GROUP BY c.cluster_id, c.method, c.support").fetchall()
    return {(tuple(ms), s) for m, s, ms in rows if m == "concept"}, {tuple(ms) for m, _, ms in rows if m == "components"}


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), n=st.integers(3, 12), data=st.data())
def test_deleting_any_subset_leaves_the_clusters_of_what_is_left(tmp_path_factory, seed, n, data):
    tmp = tmp_path_factory.mktemp("subset")
    a, b, _ = corpora(seed, n, n, 1)
    idx = tmp / "i"
    ingest(Index(idx), _write(tmp / "a.jsonl", a), create_with=SMALL)
    ingest(Index(idx), _write(tmp / "b.jsonl", b))
    with Index(idx).reader() as con:
        ids = [d for (d,) in con.execute("SELECT doc_id FROM documents ORDER BY doc_id").fetchall()]
        pairs_before = set(con.execute("SELECT doc_a, doc_b, method, similarity FROM duplicates").fetchall())
    gone = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
    res = delete(Index(idx), Selection(where=f"doc_id IN ({', '.join(map(str, gone))})"))
    assert res.n_docs == len(gone)
    with Index(idx).reader() as con:
        left = {d for (d,) in con.execute("SELECT doc_id FROM documents").fetchall()}
        pairs_after = set(con.execute("SELECT doc_a, doc_b, method, similarity FROM duplicates").fetchall())
    assert left == set(ids) - set(gone)
    assert pairs_after == {p for p in pairs_before if p[0] in left and p[1] in left}
    concept, comps = _clusters(idx)
    want_concept, want_comps = _remaining_clusters(idx, SMALL.support)
    assert comps == want_comps
    assert concept == want_concept
    assert_checks(idx)


# -- exact small cases ----------------------------------------------------------


def _words(seed: int, n: int = 30) -> str:
    return " ".join(f"v{(seed * 7919 + i * 31) % 100003}" for i in range(n)) + "."


def _versions(path: Path) -> list[tuple]:
    return run_sql(Index(path), "SELECT url, version, is_latest, text FROM documents ORDER BY url, version").to_pylist()


def test_deleting_the_latest_version_makes_the_previous_one_latest_again(tmp_path):
    idx = tmp_path / "i"
    ingest(Index(idx), str(write_jsonl(tmp_path / "1.jsonl", [{"url": "u", "text": _words(1)}, {"url": "w", "text": _words(9)}])))
    ingest(Index(idx), str(write_jsonl(tmp_path / "2.jsonl", [{"url": "u", "text": _words(2)}])))
    ingest(Index(idx), str(write_jsonl(tmp_path / "3.jsonl", [{"url": "u", "text": _words(3)}])))
    assert [(r["version"], r["is_latest"]) for r in _versions(idx) if r["url"] == "u"] == [(1, False), (2, False), (3, True)]
    delete(Index(idx), Selection(batch=3))
    assert [(r["version"], r["is_latest"], r["text"]) for r in _versions(idx) if r["url"] == "u"] == [(1, False, _words(1)), (2, True, _words(2))]
    ingest(Index(idx), str(write_jsonl(tmp_path / "3.jsonl", [{"url": "u", "text": _words(3)}])))
    # a middle version: the later ones are renumbered, as if it had never been ingested
    delete(Index(idx), Selection(where="url = 'u' AND version = 2"))
    assert [(r["version"], r["is_latest"], r["text"]) for r in _versions(idx) if r["url"] == "u"] == [(1, False, _words(1)), (2, True, _words(3))]
    # --url takes every version
    r = cli("delete", "--index", str(idx), "--url", "u")
    assert r.exit_code == 0, r.output
    assert "deleted 2 document(s) of 1 url(s)" in r.output
    assert [r["url"] for r in _versions(idx)] == ["w"]
    assert_checks(idx)
    # and the url is new again: its next text is version 1
    ingest(Index(idx), str(write_jsonl(tmp_path / "4.jsonl", [{"url": "u", "text": _words(3)}])))
    assert [(r["version"], r["is_latest"]) for r in _versions(idx) if r["url"] == "u"] == [(1, True)]


def test_batch_deletes_the_versions_it_added_and_later_versions_stay(tmp_path):
    idx = tmp_path / "i"
    ingest(Index(idx), str(write_jsonl(tmp_path / "1.jsonl", [{"url": "u", "text": _words(1)}, {"url": "w", "text": _words(5)}])))
    ingest(Index(idx), str(write_jsonl(tmp_path / "2.jsonl", [{"url": "u", "text": _words(2)}])))
    delete(Index(idx), Selection(batch=1))
    assert _versions(idx) == [{"url": "u", "version": 1, "is_latest": True, "text": _words(2)}]
    assert_checks(idx)


def test_the_delete_batch_is_recorded(tmp_path):
    idx = tmp_path / "i"
    ingest(Index(idx), DOCS)
    ingest(Index(idx), CRAWL)
    n_crawl = run_sql(Index(idx), "SELECT count(*) AS n FROM documents WHERE batch_id = 2").to_pylist()[0]["n"]
    res = delete(Index(idx), Selection(batch=2))
    assert res.batch_id == 3 and res.n_docs == n_crawl
    rows = run_sql(Index(idx), "SELECT batch_id, source, kind, status, n_docs, n_deleted, first_doc_id FROM batches ORDER BY batch_id").to_pylist()
    assert [r["kind"] for r in rows] == ["ingest", "ingest", "delete"]
    assert rows[2] == {"batch_id": 3, "source": "delete --batch 2", "kind": "delete", "status": "committed", "n_docs": 0,
                       "n_deleted": n_crawl, "first_doc_id": None}
    dd = run_sql(Index(idx), "SELECT count(*) AS n, min(batch_id) AS b, max(deleted_by) AS by FROM deleted_documents").to_pylist()
    assert dd == [{"n": n_crawl, "b": 2, "by": 3}]
    changes = run_sql(Index(idx), "SELECT method, change, count(*) AS n FROM cluster_changes WHERE batch_id = 3 GROUP BY ALL ORDER BY ALL").to_pylist()
    assert {(c["method"], c["change"]) for c in changes} >= {("components", "removed"), ("concept", "removed")}
    # new ids do not reuse the deleted ones
    ingest(Index(idx), str(write_jsonl(tmp_path / "n.jsonl", [{"url": "new", "text": _words(4)}])))
    first = run_sql(Index(idx), "SELECT first_doc_id AS f FROM batches WHERE batch_id = 4").to_pylist()[0]["f"]
    assert first == run_sql(Index(idx), "SELECT max(last_doc_id) AS m FROM batches WHERE batch_id = 2").to_pylist()[0]["m"] + 1
    assert_checks(idx)


def test_deleting_then_ingesting_again_gives_back_the_same_content(tmp_path):
    only, idx = tmp_path / "ref", tmp_path / "i"
    ingest(Index(only), DOCS)
    ingest(Index(only), CRAWL)
    ingest(Index(idx), DOCS)
    ingest(Index(idx), CRAWL)
    delete(Index(idx), Selection(batch=2))
    ingest(Index(idx), CRAWL)
    assert_same(view(idx), view(only))


def test_url_not_in_the_index_is_an_error_and_nothing_changes(tmp_path):
    idx = tmp_path / "i"
    ingest(Index(idx), DOCS)
    url = run_sql(Index(idx), "SELECT min(url) AS u FROM documents").to_pylist()[0]["u"]
    Index(idx).settings()  # the writer's end-of-command state: checkpointed
    before = snapshot(idx)
    r = cli("delete", "--index", str(idx), "--url", url, "--url", "https://nowhere.example/x")
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert "1 url(s) not in the index: https://nowhere.example/x" in out and "nothing was deleted" in out
    assert snapshot(idx) == before
    with pytest.raises(SelectionError):
        delete(Index(idx), Selection(urls=("nope",)))


@pytest.mark.parametrize("args,message", [
    ([], "give exactly one of --url, --batch or --where (got none of them)"),
    (["--batch", "1", "--where", "true"], "(got --batch and --where)"),
    (["--batch", "7"], "no batch 7 in the index (it has batches 1..1)"),
    (["--where", "1=1; DROP TABLE documents"], "refused: --where holds ';'"),
    (["--where", "true -- and the rest"], "refused: --where holds a comment"),
    (["--where", "true) OR (doc_id > 0"], "refused: --where closes a parenthesis it did not open"),
    (["--where", "(true"], "refused: --where leaves a parenthesis open"),
    (["--where", "  "], "refused: --where is empty"),
    (["--where", "doc_id IN (SELECT 1 FROM read_csv('/etc/passwd'))"], "refused: --where reaches outside the catalog"),
    (["--where", "url"], "--where failed"),
    (["--where", "nope = 1"], "--where failed: Binder Error"),
])
def test_bad_selections_are_clear_errors_and_change_nothing(tmp_path, args, message):
    idx = tmp_path / "i"
    ingest(Index(idx), DOCS)
    before = snapshot(idx)
    r = cli("delete", "--index", str(idx), *args)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    out = " ".join(r.output.split())
    assert f"error: {message}" in out or message in out, r.output
    assert "hint:" in out
    assert snapshot(idx) == before


def test_where_is_checked_before_anything_is_opened():
    with pytest.raises(QueryRefused):
        Selection(where="1; DROP TABLE documents").check()
    Selection(where="url LIKE '%;%' AND text <> ')'").check()  # ; and ) inside strings are text


def test_empty_selection_is_a_message_and_no_batch(tmp_path):
    idx = tmp_path / "i"
    ingest(Index(idx), DOCS)
    r = cli("delete", "--index", str(idx), "--where", "n_words < 0")
    assert r.exit_code == 0, r.output
    assert "nothing to delete" in r.output
    assert run_sql(Index(idx), "SELECT count(*) AS n FROM batches").to_pylist() == [{"n": 1}]
    delete(Index(idx), Selection(batch=1))
    again = delete(Index(idx), Selection(batch=1))  # what batch 1 added is gone already
    assert again.n_docs == 0 and again.batch_id is None
    assert run_sql(Index(idx), "SELECT count(*) AS n FROM batches").to_pylist() == [{"n": 2}]


def test_dry_run_lists_what_would_go_and_changes_nothing(tmp_path):
    idx = tmp_path / "i"
    ingest(Index(idx), DOCS)
    ingest(Index(idx), CRAWL)
    Index(idx).settings()
    before = tree(idx)
    r = cli("delete", "--index", str(idx), "--where", "url LIKE 'https://mirror.example.net/%'", "--dry-run", "--show", "3")
    assert r.exit_code == 0, r.output
    n = run_sql(Index(idx), "SELECT count(*) AS n, count(DISTINCT url) AS u FROM documents WHERE url LIKE 'https://mirror.example.net/%'").to_pylist()[0]
    assert n["n"] > 3
    assert f"would delete {n['n']} document(s) of {n['u']} url(s)" in r.output
    first = run_sql(Index(idx), "SELECT url FROM documents WHERE url LIKE 'https://mirror.example.net/%' ORDER BY url, doc_id LIMIT 3").to_pylist()
    lines = [ln.strip() for ln in r.output.splitlines() if ln.startswith("  https://")]
    assert [ln.split(" (version")[0] for ln in lines] == [f["url"] for f in first]
    assert f"... and {n['n'] - 3} more" in r.output and "nothing was changed (--dry-run)" in r.output
    assert tree(idx) == before


def test_cli_delete_on_the_fixtures_and_check_passes(tmp_path):
    idx = tmp_path / "i"
    assert cli("ingest", "--quiet", "--index", str(idx), DOCS).exit_code == 0
    assert cli("ingest", "--quiet", "--index", str(idx), CRAWL).exit_code == 0
    pairs = run_sql(Index(idx), "SELECT method, count(*) AS n FROM duplicates WHERE batch_id = 2 GROUP BY method ORDER BY method").to_pylist()
    r = cli("delete", "--index", str(idx), "--batch", "2")
    assert r.exit_code == 0, r.output
    assert "batch 3: deleted" in r.output
    assert "pairs removed: " + ", ".join(f"{p['method']} {p['n']}" for p in pairs) in " ".join(r.output.split())
    c = cli("check", "--full", "--index", str(idx))
    assert c.exit_code == 0, c.output
    assert "all is well" in c.output
    n = run_sql(Index(idx), "SELECT n_deleted FROM batches WHERE batch_id = 3").column("n_deleted")[0].as_py()
    info = cli("info", "--index", str(idx))
    assert info.exit_code == 0 and n > 0
    assert f"-{n}" in info.output and "(delete)" in " ".join(info.output.split())


@pytest.mark.parametrize("statement", ["DELETE FROM documents WHERE doc_id = 1", "DROP TABLE documents",
                                       "UPDATE documents SET url = 'x'", "INSERT INTO settings VALUES ('x', '1')"])
def test_sql_refuses_writes_and_points_to_delete(tmp_path, statement):
    idx = tmp_path / "i"
    ingest(Index(idx), DOCS)
    r = cli("sql", "--index", str(idx), "--", statement)
    assert r.exit_code == 2
    out = " ".join(r.output.split())
    assert "is not a read-only query; to remove documents" in out and "`neardup delete --url URL | --batch N | --where CONDITION`" in out


def test_lexical_statistics_lose_the_deleted_terms(tmp_path):
    s = Settings(methods=("shingles", "minhash", "a2"), minhash_perms=8, pairs=("jaccard",))
    idx, ref = tmp_path / "i", tmp_path / "ref"
    for p in (idx, ref):
        ingest(Index(p), str(write_jsonl(tmp_path / "1.jsonl", [{"url": "a", "text": "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo"}])), create_with=s)
    ingest(Index(idx), str(write_jsonl(tmp_path / "2.jsonl", [{"url": "b", "text": "alpha bravo charlie zulu yankee xray whiskey victor uniform tango sierra"}])))
    stats = run_sql(Index(idx), "SELECT term, df FROM term_stats WHERE term IN ('alpha', 'zulu') ORDER BY term").to_pylist()
    assert stats == [{"term": "alpha", "df": 2}, {"term": "zulu", "df": 1}]
    delete(Index(idx), Selection(urls=("b",)))
    assert run_sql(Index(idx), "SELECT * FROM term_stats ORDER BY term").to_pylist() == run_sql(Index(ref), "SELECT * FROM term_stats ORDER BY term").to_pylist()
    assert run_sql(Index(idx), "SELECT n_docs, max_cf FROM collection_stats").to_pylist() == [{"n_docs": 1, "max_cf": 1}]


def test_postings_removal_matches_in_memory_and_lmdb(tmp_path):
    from neardup.store.postings import MemoryPostings

    mem, disk = MemoryPostings(), LmdbPostings(tmp_path / "p")
    try:
        first = {"t": (np.array([5, 5, 6], np.uint64), np.array([1, 2, 2], np.uint64)),
                 "val:x": (np.array([1, 2], np.uint64), [b"aa", b"bb"])}
        for p in (mem, disk):
            p.apply_batch(1, first)
            p.apply_batch(2, {"t": (np.array([5, 7], np.uint64), np.array([3, 3], np.uint64)), "val:x": (np.array([3], np.uint64), [b"cc"])})
            p.remove_batch(3, {"t": (np.array([5, 6, 9], np.uint64), np.array([2, 2, 2], np.uint64)), "val:x": (np.array([2], np.uint64), [b"bb"])},
                           {"f": (np.array([8], np.uint64), np.array([3], np.uint64))}, max_doc_id=3)
            p.remove_batch(3, {"t": (np.array([5], np.uint64), np.array([1], np.uint64))})  # already applied: ignored
        assert mem.dump() == disk.dump() == {"f": {8: [3]}, "t": {5: [1, 3], 7: [3]}, "val:x": {1: "6161", 3: "6363"}}
        assert mem.applied_batch() == disk.applied_batch() == 3 and disk._max_id() == 3
    finally:
        disk.close()


def test_an_index_from_before_delete_checks_and_migrates(tmp_path):
    """A catalog without migration 9 (no deleted_documents, no batches.kind) checks as before; the first
    write adds them and a delete works."""
    import duckdb

    idx = tmp_path / "i"
    ingest(Index(idx), DOCS)
    con = duckdb.connect(str(idx / "catalog.duckdb"))
    con.execute("DROP TABLE deleted_documents")
    con.execute("ALTER TABLE batches DROP COLUMN kind")
    con.execute("ALTER TABLE batches DROP COLUMN n_deleted")
    con.execute("DELETE FROM schema_migrations WHERE version = 9")
    con.close()
    assert_checks(idx)
    r = cli("delete", "--index", str(idx), "--where", "doc_id = 1", "--dry-run")
    assert r.exit_code == 0 and "would delete 1 document(s)" in r.output, r.output
    delete(Index(idx), Selection(where="doc_id = 1"))
    assert run_sql(Index(idx), "SELECT kind, n_deleted FROM batches ORDER BY batch_id").to_pylist() == [
        {"kind": "ingest", "n_deleted": 0}, {"kind": "delete", "n_deleted": 1}]
    assert_checks(idx)


@pytest.mark.parametrize("where", ["doc_id = (SELECT min(doc_id) FROM documents WHERE batch_id = 2)",
                                   "batch_id = 2 AND doc_id % 3 = 0",
                                   "batch_id = 2 AND doc_id > (SELECT min(doc_id) FROM documents WHERE batch_id = 2)"])
def test_batch_wide_frequent_values_follow_what_the_batch_keeps(tmp_path, where):
    """concept_frequent (values many documents of one batch hold, keyed to its first document) is what
    the documents left imply: its first document deleted, a third of it, all but the first."""
    idx = tmp_path / "i"
    ingest(Index(idx), DOCS, create_with=Settings(content="full"))  # the whole pages, frame included
    ingest(Index(idx), CRAWL)
    p = LmdbPostings(Index(idx).postings_path, readonly=True)
    try:
        assert p.dump().get("concept_frequent"), "the crawl's frame makes frequent values"
    finally:
        p.close()
    delete(Index(idx), Selection(where=where))
    assert_checks(idx)  # --full: every table's entries, concept_frequent included, as the catalog implies


@given(st.lists(st.integers(1, 50_000), min_size=0, max_size=300, unique=True), st.integers(1, 500), st.integers(1, 3000))
def test_spans_cover_every_deleted_id_in_bounded_disjoint_ranges(ids, gap, most):
    from neardup.delete.postings import spans

    ids = np.array(sorted(ids), dtype=np.int64)
    got = spans(ids, gap, most)
    assert all(lo <= hi and hi - lo < most for lo, hi in got)
    assert all(a[1] < b[0] for a, b in zip(got, got[1:]))
    assert all(any(lo <= i <= hi for lo, hi in got) for i in ids.tolist())
    assert all(np.any((ids >= lo) & (ids <= hi)) for lo, hi in got)  # no range without a deleted id


def test_rebuild_after_a_delete_recomputes_only_the_documents_left(tmp_path):
    """Deleted ids leave gaps in the batches' id ranges: a rebuild must not write rows for them."""
    from neardup.rebuild import rebuild_fingerprints

    methods = ("shingles", "bottomk", "minhash", "simhash", "a2", "a7", "lexical")
    idx = tmp_path / "i"
    ingest(Index(idx), DOCS, create_with=Settings(methods=methods, pairs=parse_pairs("all", methods)))
    ingest(Index(idx), CRAWL)
    delete(Index(idx), Selection(where="doc_id % 4 = 1"))
    before = view(idx)
    rebuild_fingerprints(Index(idx))
    after = view(idx)
    for t, rows in after["fingerprints"].items():
        assert len(rows) == len(after["documents"]) or not rows, t
    # what does not depend on the collection statistics is as it was
    keep = [m for m in ("jaccard", "simhash", "bottomk") if any(p[0] == m for p in before["pairs"])]
    assert keep
    assert [p for p in after["pairs"] if p[0] in keep] == [p for p in before["pairs"] if p[0] in keep]
    assert [c for c in after["clusters"]] == [c for c in before["clusters"]]
    assert_checks(idx)
