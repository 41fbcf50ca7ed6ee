"""The ``content`` setting: HTML fingerprinted from its main content or its full text."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings as hsettings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neardup import Index, ReadOptions, Settings, SettingsMismatch
from neardup.cli.app import app
from neardup.evaluate import evaluate
from neardup.ingest import ingest
from neardup.prepare import fingerprinted_text
from neardup.readers.content import FINGERPRINTED, main_content
from neardup.rebuild import rebuild_fingerprints

from .conftest import FIXTURES, words_text, write_jsonl
from .warcs import write_warc

runner = CliRunner()

#: a page: its title, a navigation header, a sidebar, the article in <main>, a footer
PAGE = """<!doctype html><html><head><title>{title}</title></head><body>
<header><nav><ul>{nav}</ul></nav></header>
<div class="sidebar"><p>{side}</p></div>
<main><article><h1>{title}</h1>{body}</article></main>
<footer><p>{foot}</p></footer></body></html>"""

ARTICLE = ["The northern rivers run cold and fast through the granite valleys every spring.",
           "Salmon climb them each autumn, and the villages along the banks still fish in the old way."]


def page(title: str, paragraphs: list[str], frame: str = "f", frame_words: int = 40) -> str:
    """A page whose frame (navigation, sidebar, footer) has about ``3 * frame_words`` words named by ``frame``."""
    seed = sum(map(ord, frame)) * 101  # frames of other names differ in every word
    nav_words = words_text(frame_words, seed, prefix=f"{frame}nav").replace(".", "").split()
    nav = "".join(f"<li><a href='/{w}'>{w}</a></li>" for w in nav_words)
    return PAGE.format(title=title, nav=nav, side=words_text(frame_words, seed, prefix=f"{frame}side"),
                       body="".join(f"<p>{p}</p>" for p in paragraphs), foot=words_text(frame_words, seed, prefix=f"{frame}foot"))


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def sql(idx: Path, q: str) -> list[dict]:
    r = invoke("sql", "--index", idx, "--format", "json", q)
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in r.output.splitlines() if line.strip()]


# -- the setting ---------------------------------------------------------------------------

def test_the_setting_round_trips_and_defaults_to_main(tmp_path):
    assert Settings().content == "main"
    for c in ("main", "full"):
        s = Settings(content=c)
        assert Settings.from_dict(s.to_dict()) == s
        idx = tmp_path / c
        r = invoke("init", "--index", idx, "--content", c)
        assert r.exit_code == 0, r.output
        assert Index(idx).settings().content == c
        assert sql(idx, "SELECT value FROM settings WHERE key = 'content'") == [{"value": json.dumps(c)}]


def test_settings_stored_before_the_setting_existed_read_as_full():
    d = Settings().to_dict()
    del d["content"]
    assert Settings.from_dict(d).content == "full"


def test_an_unknown_content_is_refused(tmp_path):
    with pytest.raises(SettingsMismatch, match="unknown content 'body'"):
        Settings(content="body")
    r = invoke("init", "--index", tmp_path / "idx", "--content", "body")
    assert r.exit_code == 2
    assert "unknown content 'body'" in r.output
    assert not (tmp_path / "idx" / "catalog.duckdb").exists()


def test_content_given_to_ingest_must_match_the_index(tmp_path):
    idx = tmp_path / "idx"
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "u1", "text": page("One", ARTICLE)}])
    assert invoke("ingest", "--index", idx, "--html", "--content", "full", src).exit_code == 0
    r = invoke("ingest", "--index", idx, "--html", "--content", "main", src)
    assert r.exit_code == 2
    assert "content='main' (index has 'full')" in r.output
    assert invoke("ingest", "--index", idx, "--html", "--content", "full", src).exit_code == 0  # the same setting is fine
    assert sql(idx, "SELECT count(*) AS n FROM documents") == [{"n": 1}]


# -- what is fingerprinted -------------------------------------------------------------------

def test_main_and_full_on_a_small_page_exactly(tmp_path):
    html = page("Rivers of the north", ARTICLE, frame_words=16)
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "u1", "text": html}])
    rows = {}
    for c in ("main", "full"):
        idx = tmp_path / c
        assert invoke("ingest", "--index", idx, "--html", "--content", c, src).exit_code == 0
        rows[c] = sql(idx, "SELECT content, main_text, text, n_words, n_sentences FROM documents")[0]
    main = "Rivers of the north\n" + "\n".join(ARTICLE)
    assert rows["main"]["content"] == "main"
    assert rows["main"]["main_text"] == main
    assert rows["main"]["n_words"] == 4 + 13 + 17
    assert rows["main"]["n_sentences"] == 3
    assert rows["full"]["content"] == "full"
    assert rows["full"]["main_text"] is None
    # the full text is stored the same under both settings: title, the frame's words and the article
    assert rows["main"]["text"] == rows["full"]["text"]
    full = rows["full"]["text"]
    assert full.startswith("Rivers of the north\nfnav") and main.split("\n", 1)[1] in full and "ffoot" in full
    assert rows["full"]["n_words"] == len(full.replace(".", " ").replace(",", " ").split())


def test_too_little_main_content_falls_back_to_the_full_text(tmp_path):
    short = page("Short", ["Only five words live here."])
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "short", "text": short}, {"url": "long", "text": page("Long", ARTICLE)},
                                            {"url": "plain", "text": words_text(30)}])
    idx = tmp_path / "idx"
    assert invoke("ingest", "--index", idx, "--html", src).exit_code == 0
    got = {r["url"]: r for r in sql(idx, "SELECT url, content, main_text IS NULL AS no_main, n_words, text FROM documents")}
    assert got["short"]["content"] == "fallback" and got["short"]["no_main"]
    assert got["short"]["n_words"] > 100  # the full text's words, frame included
    assert got["long"]["content"] == "main" and not got["long"]["no_main"]
    # --html makes every record HTML: a plain text parses as one text node, its own main content
    assert got["plain"]["content"] == "main"
    plain = write_jsonl(tmp_path / "b.jsonl", [{"url": "plain2", "text": words_text(30)}])
    assert invoke("ingest", "--index", idx, plain).exit_code == 0  # not HTML: the full text, as it is
    assert sql(idx, "SELECT content, main_text FROM documents WHERE url = 'plain2'") == [{"content": "full", "main_text": None}]


def test_a_page_with_no_words_anywhere_is_still_rejected(tmp_path):
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "empty", "text": "<html><body><main><p>hi</p></main></body></html>"}])
    idx = tmp_path / "idx"
    assert invoke("ingest", "--index", idx, "--html", src).exit_code == 0
    assert sql(idx, "SELECT count(*) AS n FROM documents") == [{"n": 0}]
    assert "too short: 1 words" in sql(idx, "SELECT reason FROM rejects")[0]["reason"]


@hsettings(max_examples=60)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 25)), st.integers(1, 40)), min_size=1, max_size=12),
       st.integers(1, 15))
def test_the_fingerprinted_text_is_main_exactly_when_it_has_min_words(rows, min_words):
    """Per record: ``main`` iff it was HTML and its main content has >= min_words words; the normal
    form is then the main content's, else the full text's; main_text only where main."""
    full = [" ".join(f"full{i}w{j}" for j in range(n_full)) for i, (_, n_full) in enumerate(rows)]
    main = [None if m is None else " ".join(f"Main{i}W{j}" for j in range(m)) for i, (m, _) in enumerate(rows)]
    batch = pa.RecordBatch.from_pydict({"content": pa.array(full, pa.large_string()), "main": pa.array(main, pa.large_string())})
    normal, kind, kept = fingerprinted_text(batch, Settings(min_words=min_words))
    for i, (m, _) in enumerate(rows):
        expect = "full" if m is None else ("main" if m >= min_words else "fallback")
        assert kind[i].as_py() == expect
        assert expect in FINGERPRINTED
        assert normal[i].as_py() == (main[i].lower() if expect == "main" else full[i])
        assert kept[i].as_py() == (main[i] if expect == "main" else None)


def test_an_unparseable_page_gets_no_main_content():
    assert main_content(page("x", ARTICLE)) is not None
    assert main_content(b"<p>bytes</p>") is None  # resiliparse refuses bytes: the page keeps its full text


# -- pairs: one article under two frames, two articles under one frame -----------------------

def _framed_corpus(tmp_path: Path) -> Path:
    body_x = [words_text(60, seed=1, prefix="x")]
    pages = [
        ("https://a.example/x", page("X", body_x, frame="ash", frame_words=250)),
        ("https://b.example/x", page("X", body_x, frame="elm", frame_words=250)),
        ("https://a.example/y", page("Y", [words_text(60, seed=2, prefix="y")], frame="ash", frame_words=250)),
        ("https://a.example/z", page("Z", [words_text(60, seed=3, prefix="z")], frame="ash", frame_words=250)),
    ]
    return write_warc(tmp_path / "site.warc.gz", [(u, h.encode("utf-8"), "text/html; charset=utf-8") for u, h in pages])


@pytest.mark.parametrize("content, expected", [
    ("main", [("https://a.example/x", "https://b.example/x")]),
    ("full", [("https://a.example/x", "https://a.example/y"), ("https://a.example/x", "https://a.example/z"),
              ("https://a.example/y", "https://a.example/z")]),
])
def test_main_content_pairs_the_article_not_the_frame(tmp_path, content, expected):
    warc = _framed_corpus(tmp_path)
    idx = tmp_path / "idx"
    r = invoke("ingest", "--index", idx, "--content", content, warc)
    assert r.exit_code == 0, r.output
    pairs = sql(idx, "SELECT least(url_a, url_b) AS a, greatest(url_a, url_b) AS b FROM duplicate_urls "
                     "WHERE method = 'jaccard' ORDER BY a, b")
    assert [(p["a"], p["b"]) for p in pairs] == expected
    kinds = sql(idx, "SELECT DISTINCT content FROM documents")
    assert kinds == [{"content": content}]


def test_rebuild_recomputes_from_the_fingerprinted_text(tmp_path):
    warc = _framed_corpus(tmp_path)
    idx = tmp_path / "idx"
    assert invoke("ingest", "--index", idx, warc).exit_code == 0
    q = "SELECT doc_id, unpack_hashes(hashes)::VARCHAR AS h FROM fp_shingles ORDER BY doc_id"
    before = sql(idx, q)
    pairs = sql(idx, "SELECT doc_a, doc_b, similarity FROM duplicates ORDER BY ALL")
    rebuild_fingerprints(Index(idx))
    assert sql(idx, q) == before
    assert sql(idx, "SELECT doc_a, doc_b, similarity FROM duplicates ORDER BY ALL") == pairs
    # the one jaccard pair is the article under two frames, which only the main content pairs
    assert sql(idx, "SELECT url_a, url_b FROM duplicate_urls WHERE method = 'jaccard'") == [
        {"url_a": "https://a.example/x", "url_b": "https://b.example/x"}]


def test_html_files_and_the_api_take_the_setting(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "a.html").write_text(page("A", ARTICLE), encoding="utf-8")
    (folder / "b.txt").write_text(words_text(20), encoding="utf-8")
    idx = Index(tmp_path / "idx")
    res = ingest(idx, str(folder), ReadOptions(), create_with=Settings(content="main"))
    assert res.n_docs == 2
    with idx.reader() as con:
        got = dict(con.execute("SELECT regexp_extract(url, '[ab][.][a-z]+$'), content FROM documents").fetchall())
    assert got == {"a.html": "main", "b.txt": "full"}
    assert np.all(np.array([k in FINGERPRINTED for k in got.values()]))


# -- generate: one page under two site frames ------------------------------------------------

GEN_INPUTS = [str(FIXTURES / "text" / "docs.jsonl"), str(FIXTURES / "crawl" / "sample.wet.gz")]


def test_generate_writes_reframed_pages_as_gold_pairs_that_evaluate_scores(tmp_path):
    out = tmp_path / "gen"
    r = invoke("generate", *GEN_INPUTS, "--out", out, "--max-words", 300, "--reframed", 8, "--html-pages")
    assert r.exit_code == 0, r.output
    assert "16 reframed pages (HTML pages)" in r.output
    gold = list(csv.DictReader(open(out / "pairs.csv", encoding="utf-8")))
    reframed = {(g["url_a"], g["url_b"]) for g in gold if g["relation"] == "reframed~reframed"}
    assert len(reframed) == 8
    docs = {d["url"]: d for d in csv.DictReader(open(out / "documents.csv", encoding="utf-8"))}
    corpus = {json.loads(line)["url"]: json.loads(line)["text"] for line in open(out / "corpus.jsonl", encoding="utf-8")}
    for a, b in reframed:
        ea, eb = json.loads(docs[a]["edits"])[0], json.loads(docs[b]["edits"])[0]
        assert {ea["site"], eb["site"]} == {0, 1} and ea["content"] == eb["content"]
        # the same article, two different frames
        (head_a, main_a, foot_a), (head_b, main_b, foot_b) = (re.split("</?main>", corpus[u]) for u in (a, b))
        assert main_a == main_b and head_a != head_b and foot_a != foot_b
    clusters = {}
    for row in csv.DictReader(open(out / "clusters.csv", encoding="utf-8")):
        clusters.setdefault(row["cluster"], set()).add(row["url"])
    assert {frozenset(p) for p in reframed} <= {frozenset(m) for m in clusters.values()}

    found, recall = {}, {}
    for c in ("main", "full"):
        idx = tmp_path / c
        assert invoke("ingest", "--index", idx, "--html", "--content", c, out / "corpus.jsonl").exit_code == 0
        pairs = sql(idx, "SELECT least(url_a, url_b) AS a, greatest(url_a, url_b) AS b FROM duplicate_urls WHERE method = 'jaccard'")
        found[c] = {(p["a"], p["b"]) for p in pairs}
        ev = evaluate(Index(idx), str(out / "pairs.csv"), supports=())
        recall[c] = ev.comparator["jaccard"]["recall"]
    assert reframed <= found["main"]  # every page under its two frames is found with main content
    assert not reframed & found["full"]  # and none with the frame in the text (the frames are 200 words)
    assert recall["main"] > recall["full"]


def test_generate_without_the_new_options_is_unchanged(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert invoke("generate", *GEN_INPUTS, "--out", a, "--max-words", 300).exit_code == 0
    assert invoke("generate", *GEN_INPUTS, "--out", b, "--max-words", 300, "--reframed", 0).exit_code == 0
    for name in ("corpus.jsonl", "pairs.csv", "documents.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes() == (FIXTURES / "generated" / name).read_bytes()


def test_pooled_evaluation_verifies_the_fingerprinted_text(tmp_path):
    """The article under two frames verifies by edit similarity of the main contents (1.0); its full
    texts, frames included, would not (the frames differ)."""
    warc = _framed_corpus(tmp_path)
    idx = tmp_path / "idx"
    assert invoke("ingest", "--index", idx, warc).exit_code == 0
    ev = evaluate(Index(idx), pooled=True, supports=(), bits=())
    assert ev.pooled["jaccard"]["pairs"] == 1 and ev.pooled["jaccard"]["precision"] == 1.0
    full = sql(idx, "SELECT text FROM documents WHERE url LIKE '%/x' ORDER BY url")
    from neardup.evaluate import text_similarity

    assert text_similarity(full[0]["text"], full[1]["text"]) < 0.8


def test_an_index_made_before_the_setting_keeps_fingerprinting_the_full_text(tmp_path):
    """Migration 008 on a catalog of schema 7: its rows and its settings say full, and so does
    the next ingest of HTML into it."""
    import duckdb

    idx = tmp_path / "idx"
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "old", "text": page("Old", ARTICLE)}])
    assert invoke("ingest", "--index", idx, "--html", "--content", "full", src).exit_code == 0
    con = duckdb.connect(str(idx / "catalog.duckdb"))  # back to how schema 7 left it
    con.execute("DROP VIEW latest_documents")
    con.execute("ALTER TABLE documents DROP COLUMN main_text")
    con.execute("ALTER TABLE documents DROP COLUMN content")
    con.execute("CREATE VIEW latest_documents AS SELECT * FROM documents WHERE is_latest")
    con.execute("DELETE FROM settings WHERE key = 'content'")
    con.execute("DELETE FROM schema_migrations WHERE version = 8")
    con.close()
    assert Index(idx).settings().content == "full"  # read-only, before any migration
    new = write_jsonl(tmp_path / "b.jsonl", [{"url": "new", "text": page("New", ARTICLE)}])
    assert invoke("ingest", "--index", idx, "--html", new).exit_code == 0
    assert sql(idx, "SELECT url, content, main_text FROM latest_documents ORDER BY url") == [
        {"url": "new", "content": "full", "main_text": None}, {"url": "old", "content": "full", "main_text": None}]
    assert sql(idx, "SELECT value FROM settings WHERE key = 'content'") == [{"value": '"full"'}]


@pytest.mark.parametrize("setting", ["main", "full"])
def test_texts_from_worker_processes_are_the_same(tmp_path, monkeypatch, setting):
    """A big chunk's texts (full and main) come from worker processes (selectolax and resiliparse
    hold the GIL): the documents, pairs and clusters are those of the extraction in the process itself."""
    import neardup.readers.content as content

    src = str(FIXTURES / "crawl" / "sample.warc.gz")
    ingest(Index(tmp_path / "here"), src, create_with=Settings(content=setting))
    started = []
    real_submit = content.ContentPool.submit

    def counting(self, html, main):
        out = real_submit(self, html, main)
        started.append(self._pool is not None)
        return out

    monkeypatch.setattr(content, "POOL_MIN_CHARS", 0)
    monkeypatch.setattr(content.ContentPool, "submit", counting)
    ingest(Index(tmp_path / "pool"), src, create_with=Settings(content=setting))
    assert started and all(started)
    q = ("SELECT url, content, text, main_text FROM documents ORDER BY url", "SELECT * FROM duplicate_urls ORDER BY ALL",
         "SELECT c.method, c.size, c.support FROM clusters c ORDER BY ALL")
    for one in q:
        assert sql(tmp_path / "pool", one) == sql(tmp_path / "here", one)


def test_content_workers_end_when_the_ingest_is_killed(tmp_path):
    """kill -9 of the process that started them leaves no worker behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import sys, time\n"
        "import neardup.readers.content as c\n"
        "c.POOL_MIN_CHARS = 0\n"
        "pool = c.ContentPool()\n"
        "import pyarrow as pa\n"
        "pool.submit(pa.array(['<html><body><main><p>' + 'words ' * 50 + '</p></main></body></html>']), True)()\n"
        "print(' '.join(str(p) for p in pool._pool._processes), flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    workers = [int(p) for p in proc.stdout.readline().split()]
    assert workers
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as fh:  # a zombie waiting for init to reap it is gone too
            return fh.read().split(") ")[-1][0] != "Z"

    deadline = time.monotonic() + 10
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in workers)
