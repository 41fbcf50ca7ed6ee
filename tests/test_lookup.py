"""``neardup query`` and ``Index.query``: the pairs an ingest would add, found without writing anything."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neardup import Index, IndexBusy, PostingsDamaged, Settings
from neardup.cli.app import app
from neardup.ingest import ingest
from neardup.lookup.match import SCHEMA
from neardup.lookup.run import query_input
from neardup.settings import METHODS, parse_pairs

from .conftest import FIXTURES, write_jsonl

runner = CliRunner()


def texts(n_base: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Indexed records (base texts of random words, some with near copies) and a pool of query
    records: near copies of indexed texts at several distances, unrelated texts, too-short ones."""
    rnd = random.Random(seed)
    vocab = [f"w{i}" for i in range(2000)]

    def sentences(ws: list[str]) -> str:
        return " ".join(" ".join(ws[j : j + 8]) + "." for j in range(0, len(ws), 8))

    def variant(ws: list[str], rate: float) -> list[str]:
        v = list(ws)
        for _ in range(int(len(v) * rate)):
            v[rnd.randrange(len(v))] = rnd.choice(vocab)
        return v[: int(len(v) * rnd.uniform(0.9, 1.0))] if rnd.random() < 0.3 else v

    bases = [[rnd.choice(vocab) for _ in range(100 + rnd.randrange(60))] for _ in range(n_base)]
    indexed = [sentences(b) for b in bases] + [sentences(variant(b, 0.04)) for b in bases[: n_base // 2]]
    pool = [sentences(variant(rnd.choice(bases), rnd.choice((0.0, 0.01, 0.03, 0.06, 0.12)))) for _ in range(30)]
    pool += [sentences([rnd.choice(vocab) for _ in range(120)]) for _ in range(5)]
    pool += [sentences(rnd.sample(vocab, 6)) for _ in range(2)]  # fewer words than min_words: rejects
    return ([{"url": f"https://idx.example/{i}", "text": t} for i, t in enumerate(indexed)],
            [{"url": f"https://query.example/{i}", "text": t} for i, t in enumerate(pool)])


def every_method(**kw) -> Settings:
    methods = tuple(METHODS)
    return Settings(methods=methods, pairs=parse_pairs("all", methods), bottomk=32, minhash_perms=64, **kw)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """Two indexes of the same records in two batches: default settings, and every method and pair method."""
    root = tmp_path_factory.mktemp("lookup")
    indexed, pool = texts(24, seed=3)
    out = {}
    for name, s in (("default", Settings()), ("every", every_method())):
        idx = Index(root / name)
        ingest(idx, str(write_jsonl(root / f"{name}-1.jsonl", indexed[:20])), create_with=s)
        ingest(idx, str(write_jsonl(root / f"{name}-2.jsonl", indexed[20:])))
        out[name] = idx
    return out, pool


def found_by_query(result) -> set[tuple]:
    return {(r["url"], r["doc_id"], r["method"], r["similarity"]) for r in result.to_pylist() if r["doc_id"] is not None}


def added_by_ingest(idx: Index, records: list[dict], work: Path) -> set[tuple]:
    """The pairs an ingest of ``records`` adds against the documents indexed before it (on a copy)."""
    copy = work / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(idx.path, copy)
    res = ingest(Index(copy), str(write_jsonl(work / "records.jsonl", records)))
    with Index(copy).reader() as con:
        return set(con.execute(
            "SELECT d.url, x.doc_a, x.method, x.similarity FROM duplicates x JOIN documents d ON d.doc_id = x.doc_b "
            "WHERE x.batch_id = ? AND x.doc_a < (SELECT first_doc_id FROM batches WHERE batch_id = ?)",
            [res.batch_id, res.batch_id]).fetchall())


def folder_state(path: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(path)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["default", "every"])
@settings(max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_query_pairs_are_the_pairs_an_ingest_adds(indexes, tmp_path, name, data):
    idxs, pool = indexes
    idx = idxs[name]
    records = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=10, unique_by=lambda r: r["url"]))
    before = folder_state(idx.path)
    got = idx.query([r["text"] for r in records], [r["url"] for r in records])
    assert folder_state(idx.path) == before  # nothing written, not even touched
    want = added_by_ingest(idx, records, tmp_path)
    assert found_by_query(got) == want
    # the same through an input file, read as ingest reads it
    path = write_jsonl(tmp_path / "q.jsonl", records)
    assert found_by_query(next(query_input(idx, str(path)))) == want


def test_the_pool_holds_pairs_of_every_kind(indexes, tmp_path):
    """The property above is not vacuous: the whole pool pairs by many methods, and some records pair with nothing."""
    idxs, pool = indexes
    got = idxs["every"].query([r["text"] for r in pool], [r["url"] for r in pool])
    methods = {r["method"] for r in got.to_pylist() if r["method"]}
    assert {"jaccard", "simhash", "minhash", "bottomk", "a0", "a2", "a6", "a11", "a12"} <= methods
    alone = [r for r in got.to_pylist() if r["doc_id"] is None and r["reject"] is None]
    assert alone


def test_every_text_gets_rows_in_order_exact_copies_pair_at_one(indexes):
    idxs, pool = indexes
    idx = idxs["default"]
    with idx.reader() as con:
        doc_id, url, text = con.execute("SELECT doc_id, url, text FROM documents ORDER BY doc_id LIMIT 1").fetchall()[0]
    unrelated = " ".join(f"zz{i}." for i in range(40))
    got = idx.query([text, "two words", None, unrelated], urls=["a", "b", "c", "d"])
    assert got.schema == SCHEMA
    rows = got.to_pylist()
    assert [r["query"] for r in rows][:1] == [0]
    copy = [r for r in rows if r["query"] == 0]
    # the exact copy pairs with the indexed text (and possibly with its indexed near copy) by both default methods
    assert {"method": "jaccard", "similarity": 1.0, "doc_id": doc_id, "doc_url": url} in [
        {k: r[k] for k in ("method", "similarity", "doc_id", "doc_url")} for r in copy]
    assert {r["method"] for r in copy} == {"jaccard", "simhash"}
    assert [r["method"] for r in copy] == sorted((r["method"] for r in copy), key=["jaccard", "simhash"].index)
    by = {r["query"]: r for r in rows if r["query"] != 0}
    assert by[1]["reject"] == "too short: 2 words (< 10) (url b)" and by[1]["url"] == "b"
    assert by[2]["reject"] == "empty text (no words) (url c)"
    assert by[3]["reject"] is None and by[3]["doc_id"] is None and by[3]["method"] is None and by[3]["url"] == "d"
    assert [r["query"] for r in rows] == sorted(r["query"] for r in rows)


def test_partners_carry_their_incremental_clusters(indexes):
    idxs, _ = indexes
    idx = idxs["default"]
    with idx.reader() as con:
        doc_id, text = con.execute(
            "SELECT m.doc_id, any_value(d.text) FROM cluster_members m JOIN clusters c USING (cluster_id) JOIN documents d "
            "USING (doc_id) GROUP BY m.doc_id HAVING count(DISTINCT c.method) = 2 ORDER BY m.doc_id LIMIT 1").fetchall()[0]
        want = sorted(con.execute("SELECT c.method, c.cluster_id FROM cluster_members m JOIN clusters c USING (cluster_id) "
                                  "WHERE m.doc_id = ?", [doc_id]).fetchall())
    rows = [r for r in idx.query([text]).to_pylist() if r["doc_id"] == doc_id]
    assert rows and all(sorted((c["method"], c["cluster_id"]) for c in r["clusters"]) == want for r in rows)
    assert {m for m, _ in want} == {"concept", "components"}


def test_the_same_query_gives_the_same_table(indexes):
    idxs, pool = indexes
    t = [r["text"] for r in pool]
    assert idxs["every"].query(t).equals(idxs["every"].query(t))


def test_an_empty_index_answers_every_record_without_partners(tmp_path):
    idx = Index(tmp_path / "idx")
    with idx.writer(create_with=Settings()):
        pass
    rows = idx.query([" ".join(f"w{i}" for i in range(30))]).to_pylist()
    assert [(r["query"], r["doc_id"], r["reject"]) for r in rows] == [(0, None, None)]


def test_a_query_works_beside_a_reader_and_is_refused_while_a_writer_works(indexes):
    idxs, pool = indexes
    idx = idxs["default"]
    code = ("import sys, time, duckdb; from neardup import Index\n"
            "if sys.argv[2] == 'read':\n"
            "    con = duckdb.connect(sys.argv[1] + '/catalog.duckdb', read_only=True); print('ready', flush=True); time.sleep(60)\n"
            "else:\n"
            "    with Index(sys.argv[1]).writer() as w: print('ready', flush=True); time.sleep(60)\n")
    for mode in ("read", "write"):
        holder = subprocess.Popen([sys.executable, "-c", code, str(idx.path), mode], stdout=subprocess.PIPE)
        try:
            assert holder.stdout.readline().strip() == b"ready"
            if mode == "read":
                assert idx.query([pool[0]["text"]]).num_rows >= 1
            else:
                with pytest.raises(IndexBusy, match=rf"pid {holder.pid}"):
                    idx.query([pool[0]["text"]])
        finally:
            holder.kill()
            holder.wait()


def test_postings_missing_or_behind_the_catalog_are_refused(tmp_path):
    """A query needs postings holding every committed batch (a missing partner would go unseen)."""
    indexed, pool = texts(6, seed=5)
    one, two = Index(tmp_path / "one"), Index(tmp_path / "two")
    ingest(one, str(write_jsonl(tmp_path / "1.jsonl", indexed[:4])))
    shutil.copytree(one.path, two.path)
    ingest(two, str(write_jsonl(tmp_path / "2.jsonl", indexed[4:])))
    shutil.rmtree(two.postings_path)
    with pytest.raises(PostingsDamaged, match="postings are missing"):
        two.query([pool[0]["text"]])
    shutil.copytree(one.postings_path, two.postings_path)  # postings of batch 1 beside a catalog of batches 1-2
    with pytest.raises(PostingsDamaged, match="hold batches up to 1, the catalog up to 2"):
        two.query([pool[0]["text"]])
    r = cli(str(write_jsonl(tmp_path / "q.jsonl", pool[:1])), "--index", str(two.path))
    assert r.exit_code == 6 and "rebuild --postings" in r.output


# -- the command line ---------------------------------------------------------


def cli(*args: str):
    return runner.invoke(app, ["query", *args])


def test_cli_jsonl_and_csv_give_one_row_per_record_partner_and_method(indexes, tmp_path):
    idxs, pool = indexes
    idx = idxs["default"]
    records = pool[:6] + [{"url": "https://query.example/bad", "text": "short text"}]
    path = write_jsonl(tmp_path / "q.jsonl", records)
    path.write_bytes(path.read_bytes() + b'{"url": "x", "text": \n')  # a malformed last line
    r = cli(str(path), "--index", str(idx.path), "--format", "jsonl")
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    want = idx.query([x["text"] for x in records], [x["url"] for x in records]).to_pylist()
    answered = [x for x in lines if x["reject"] is None]
    assert [{k: v for k, v in x.items() if k not in ("source", "record")} for x in answered] == [
        {k: v for k, v in x.items() if k not in ("source", "record")} for x in want if x["reject"] is None]
    assert {x["record"] for x in answered} == {f"line {i + 1}" for i in range(6)}
    rejects = [x for x in lines if x["reject"] is not None]
    assert [(x["record"], x["url"]) for x in rejects] == [("line 7", "https://query.example/bad"), ("line 8", None)]
    assert "malformed JSON" in rejects[1]["reject"] and rejects[1]["query"] is None
    assert f"rejected {path}: line 8: malformed JSON" in r.stderr
    assert f"rejected {path}: line 7: too short" in r.stderr
    assert "8 records" in r.stderr and "2 rejected" in r.stderr
    c = cli(str(path), "--index", str(idx.path), "--format", "csv")
    assert c.exit_code == 0
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(c.stdout)))
    assert len(rows) == len(lines)
    for x, y in zip(rows, lines):
        assert x["doc_id"] == ("" if y["doc_id"] is None else str(y["doc_id"]))
        assert x["clusters"] == " ".join(f"{k['method']}:{k['cluster_id']}" for k in y["clusters"] or ())


def test_cli_table_reads_stdin_and_names_partners(indexes):
    idxs, pool = indexes
    data = "".join(json.dumps(x) + "\n" for x in pool[:3]).encode()
    r = runner.invoke(app, ["query", "-", "--index", str(idxs["default"].path)], input=data)
    assert r.exit_code == 0, r.output
    want = idxs["default"].query([x["text"] for x in pool[:3]]).to_pylist()
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in r.stdout.splitlines() if line.startswith("│")]
    starts = [c for c in cells if c[3] or c[2] == "(none)"]  # a row's first line (long urls are folded onto more lines)
    assert [(c[2].split()[0], c[3]) for c in starts] == [
        (str(x["doc_id"]) if x["doc_id"] is not None else "(none)", x["method"] or "") for x in want]
    n_with = len({x["query"] for x in want if x["doc_id"] is not None})
    assert f"3 records: {n_with} with indexed partners, {3 - n_with} without, 0 rejected" in r.stdout


def test_cli_errors(indexes, tmp_path):
    idxs, _ = indexes
    assert cli(str(FIXTURES / "text" / "docs.jsonl"), "--index", str(tmp_path / "none")).exit_code == 3
    assert cli(str(tmp_path / "missing.jsonl"), "--index", str(idxs["default"].path)).exit_code == 2
    r = cli(str(FIXTURES / "text" / "docs.jsonl"), "--index", str(idxs["default"].path), "--format", "xml")
    assert r.exit_code == 2 and "unknown --format" in r.output


def test_cli_on_fixtures_reports_what_an_ingest_of_them_adds(tmp_path):
    """The labelled corpus made from the sample documents, against an index of those documents."""
    idx = Index(tmp_path / "idx")
    ingest(idx, str(FIXTURES / "text" / "docs.jsonl"))
    corpus = str(FIXTURES / "generated" / "corpus.jsonl")
    r = cli(corpus, "--index", str(idx.path), "--format", "jsonl")
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    copy = tmp_path / "copy"
    shutil.copytree(idx.path, copy)
    res = ingest(Index(copy), corpus)
    assert res.n_docs == len({x["query"] for x in rows}) == 153  # every record is added (new urls)
    with Index(copy).reader() as con:
        want = set(con.execute(
            "SELECT d.record, x.doc_a, x.method, x.similarity FROM duplicates x JOIN documents d ON d.doc_id = x.doc_b "
            "WHERE x.batch_id = ? AND x.doc_a < (SELECT first_doc_id FROM batches WHERE batch_id = ?)",
            [res.batch_id, res.batch_id]).fetchall())
    assert len({rec for rec, *_ in want}) > 20
    assert {(x["record"], x["doc_id"], x["method"], x["similarity"]) for x in rows if x["doc_id"] is not None} == want


@pytest.mark.parametrize("name", ["default", "every"])
def test_an_input_paired_in_parts_gives_the_pairs_of_an_ingest_in_as_many_batches(indexes, tmp_path, name):
    """``--batch-mb``: parts of an input are paired one after the other, as ingest commits its batches."""
    idxs, pool = indexes
    idx = idxs[name]
    path = tmp_path / "q"  # a folder of files of 4 records: a chunk each, and a part (a batch) each with a tiny budget
    path.mkdir()
    for k in range(0, len(pool), 4):
        write_jsonl(path / f"{k:03d}.jsonl", pool[k : k + 4])
    parts = list(query_input(idx, str(path), part_mb=1e-9))
    assert len(parts) == -(-len(pool) // 4)
    got = {(r["url"], r["doc_id"], r["method"], r["similarity"]) for t in parts for r in t.to_pylist() if r["doc_id"] is not None}
    whole = {(r["url"], r["doc_id"], r["method"], r["similarity"])
             for r in next(query_input(idx, str(path))).to_pylist() if r["doc_id"] is not None}
    copy = tmp_path / "copy"
    shutil.copytree(idx.path, copy)
    first = ingest(Index(copy), str(path), batch_mb=1e-9)
    assert len(first.batch_ids) == len(parts)
    with Index(copy).reader() as con:
        want = set(con.execute(
            "SELECT d.url, x.doc_a, x.method, x.similarity FROM duplicates x JOIN documents d ON d.doc_id = x.doc_b "
            "WHERE x.batch_id >= ? AND x.doc_a < (SELECT first_doc_id FROM batches WHERE batch_id = ?)",
            [first.batch_ids[0], first.batch_ids[0]]).fetchall())
    assert got == want
    if name == "default":  # without collection statistics the parts change nothing
        assert got == whole


@pytest.mark.parametrize("name", ["default", "every"])
def test_a_held_lookup_answers_each_query_as_a_fresh_one(indexes, name):
    """``Index.lookup()``: one open index, many queries, each as ``Index.query`` answers it (the
    statistics a query's records add do not leak into the next)."""
    idxs, pool = indexes
    idx = idxs[name]
    groups = [pool[:12], pool[12:13], pool[13:30], pool[:12]]
    want = [idx.query([r["text"] for r in g], [r["url"] for r in g]) for g in groups]
    with idx.lookup() as q:
        got = [q.query([r["text"] for r in g], [r["url"] for r in g]) for g in groups]
    assert all(a.equals(b) for a, b in zip(got, want))
    assert got[0].equals(got[3])
    with pytest.raises(RuntimeError, match="not open"):
        q.query(["x"])


def test_writers_are_refused_while_a_lookup_is_held(indexes, tmp_path):
    from .conftest import run_cli

    idxs, pool = indexes
    copy = tmp_path / "copy"
    shutil.copytree(idxs["default"].path, copy)
    path = write_jsonl(tmp_path / "q.jsonl", pool[:2])
    with Index(copy).lookup() as q:
        p = run_cli("ingest", "--index", str(copy), str(path))
        assert p.returncode == 4 and b"in use" in p.stderr
        assert q.query([pool[0]["text"]]).num_rows >= 1
    assert run_cli("ingest", "--index", str(copy), str(path)).returncode == 0


def test_cli_csv_of_an_input_without_records_is_the_header(indexes, tmp_path):
    idxs, _ = indexes
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    r = cli(str(empty), "--index", str(idxs["default"].path), "--format", "csv")
    assert r.exit_code == 0 and r.stdout == ",".join(("query", "source", "record", "url", "doc_id", "doc_url", "method",
                                                      "similarity", "clusters", "reject")) + "\n"
    assert "0 records" in r.stderr


def test_html_texts_are_compared_by_their_visible_text(indexes):
    idxs, _ = indexes
    idx = idxs["default"]
    with idx.reader() as con:
        doc_id, text = con.execute("SELECT doc_id, text FROM documents ORDER BY doc_id LIMIT 1").fetchall()[0]
    page = f"<html><head><style>p {{color: red}}</style><script>var x = 1;</script></head><body><p>{text}</p></body></html>"
    as_html = [r for r in idx.query([page], html=True).to_pylist() if r["doc_id"] == doc_id]
    assert {(r["method"], r["similarity"]) for r in as_html} == {("jaccard", 1.0), ("simhash", 1.0)}
    as_text = [r for r in idx.query([page]).to_pylist() if r["doc_id"] == doc_id and r["method"] == "jaccard"]
    assert not as_text or as_text[0]["similarity"] < 1.0  # the markup's words count when it is taken as plain text


def test_html_queries_fingerprint_the_text_the_index_does(tmp_path):
    """An index made with ``--content main`` (the default) fingerprints each page's main content;
    a query of the same crawl must too, so every page finds its own indexed copy at 1.0."""
    crawl = str(FIXTURES / "crawl" / "sample.warc.gz")
    idx = Index(tmp_path / "idx")
    ingest(idx, crawl)
    with idx.reader() as con:
        mains = dict(con.execute("SELECT url, doc_id FROM documents WHERE content = 'main' AND main_text <> text").fetchall())
    assert len(mains) > 5  # pages whose main content is not their whole text
    r = cli(crawl, "--index", str(idx.path), "--format", "jsonl")
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    own = {(x["url"], x["doc_id"]) for x in rows if x["method"] == "jaccard" and x["similarity"] == 1.0}
    assert {(u, d) for u, d in mains.items()} <= own
