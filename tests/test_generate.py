"""`neardup generate`: labelled corpora whose every variant carries exactly the edits it lists."""

from __future__ import annotations

import csv
import json
from collections import Counter
from itertools import combinations
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein
from typer.testing import CliRunner

from neardup import Index, ReadOptions
from neardup.cli.app import app
from neardup.exact import brute_force, jaccard, shingle_sets
from neardup.generate import KINDS, GenerateError, GenerateOptions, generate
from .conftest import FIXTURES, ROOT, write_jsonl

TEXT = [str(FIXTURES / "text" / "docs.jsonl"), str(FIXTURES / "crawl" / "sample.wet.gz")]
#: The committed labelled fixture is made from these, with these options (fixtures/README.md).
FIXTURE_INPUTS = ["fixtures/text/docs.jsonl", "fixtures/crawl/sample.wet.gz"]
FIXTURE_OPTIONS = GenerateOptions(max_words=300)
FILES = ("corpus.jsonl", "pairs.csv", "framed_pairs.csv", "clusters.csv", "documents.csv")
runner = CliRunner()


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _corpus(out: Path) -> dict[str, str]:
    if (out / "corpus.parquet").exists():
        t = pq.read_table(out / "corpus.parquet")
        return dict(zip(t.column("url").to_pylist(), t.column("text").to_pylist()))
    return {r["url"]: r["text"] for r in map(json.loads, (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines())}


def _lines(t: str) -> list[list[str]]:
    return [line.split(" ") for line in t.split("\n")]


def _replay(lines: list[list[str]], ops: list[dict]) -> list[list[str]]:
    """Apply a variant's listed edits to its original, one at a time."""
    lines = [list(ws) for ws in lines]
    for op in ops:
        ws = lines[op["line"]]
        if op["op"] == "insert":
            ws.insert(op["word"], op["new"])
        elif op["op"] == "delete":
            assert ws.pop(op["word"]) == op["old"]
        else:
            assert ws[op["word"]] == op["old"] != op["new"]
            ws[op["word"]] = op["new"]
    return lines


def check_corpus(out: Path, o: GenerateOptions) -> None:
    """Every invariant a generated corpus promises, checked from its files alone."""
    texts = _corpus(out)
    docs = _csv(out / "documents.csv")
    assert sorted(texts) == sorted(d["url"] for d in docs)
    by_url = {d["url"]: d for d in docs}
    for d in docs:
        t, ops = texts[d["url"]], json.loads(d["edits"] or "[]")
        assert int(d["words"]) == len(t.split())
        if d["role"] in ("original", "framed"):
            assert d["original"] == ""
            continue
        orig = by_url[d["original"]]
        assert orig["role"] == "original" and orig["cluster"] == d["cluster"] != "" and d["role"] in o.kinds
        a, b = _lines(texts[orig["url"]]), _lines(t)
        if d["role"] == "exact":
            assert t == texts[orig["url"]] and ops == []
        elif d["role"] == "edit":
            n = sum(map(len, a))  # round(rate * n) edits, at least one
            assert max(1, o.edit_rate[0] * n - 0.5) <= len(ops) <= max(1, o.edit_rate[1] * n + 0.5)
            assert _replay(a, ops) == b
            flat_a, flat_b = [w for ws in a for w in ws], [w for ws in b for w in ws]
            assert Levenshtein.distance(flat_a, flat_b) <= len(ops)
            kinds = Counter(op["op"] for op in ops)
            assert len(flat_b) - len(flat_a) == kinds["insert"] - kinds["delete"]
            assert all(op["new"].isalpha() and len(op["new"]) > 1 for op in ops if "new" in op)
        elif d["role"] == "reorder":
            (op,) = ops
            i, j = op["i"], op["j"]
            assert i < j
            if op["unit"] == "paragraph":
                assert len(a) == len(b) and b[i] == a[j] and b[j] == a[i]
                assert all(b[k] == a[k] for k in range(len(a)) if k not in (i, j))
            else:
                assert len(a) == len(b) == 1 and sorted(a[0]) == sorted(b[0]) and a != b
        else:  # boilerplate
            (op,) = ops
            assert b[1:-1] == a and len(b[0]) == op["header"] and len(b[-1]) == op["footer"]
            assert 8 <= op["header"] <= 15 and 8 <= op["footer"] <= 15
    # gold clusters: one original each, the rest its variants; gold pairs are exactly their pairs
    clusters: dict[str, set[str]] = {}
    for r in _csv(out / "clusters.csv"):
        clusters.setdefault(r["cluster"], set()).add(r["url"])
    assert clusters == {c: {d["url"] for d in docs if d["cluster"] == c} for c in {d["cluster"] for d in docs if d["cluster"]}}
    for members in clusters.values():
        assert len(members) >= 2 and sum(by_url[u]["role"] == "original" for u in members) == 1
    pairs = _csv(out / "pairs.csv")
    assert {(p["url_a"], p["url_b"]) for p in pairs} == {tuple(sorted(p)) for m in clusters.values() for p in combinations(m, 2)}
    assert len(pairs) == sum(len(m) * (len(m) - 1) // 2 for m in clusters.values())
    sets = dict(zip(texts, shingle_sets(list(texts.values()))))
    for p in pairs:
        assert float(p["jaccard"]) == pytest.approx(jaccard(sets[p["url_a"]], sets[p["url_b"]]), abs=1e-6)
        assert p["relation"] == "~".join(sorted((by_url[p["url_a"]]["role"], by_url[p["url_b"]]["role"])))
    # framed pages: groups share their header and footer lines, never their own text, and are in no gold pair
    framed: dict[int, list[list[list[str]]]] = {}
    for d in docs:
        if d["role"] == "framed":
            (op,) = json.loads(d["edits"])
            b = _lines(texts[d["url"]])
            assert len(b[0]) == o.frame_words // 2 and len(b[-1]) == o.frame_words - o.frame_words // 2
            assert sum(map(len, b[1:-1])) == op["content"] and d["cluster"] == ""
            framed.setdefault(op["frame"], []).append(b)
    assert sum(map(len, framed.values())) == o.framed
    for pages in framed.values():
        assert 1 <= len(pages) <= o.frame_group
        assert len({(" ".join(p[0]), " ".join(p[-1])) for p in pages}) == 1
        assert len({json.dumps(p[1:-1]) for p in pages}) == len(pages)
    fp = _csv(out / "framed_pairs.csv")
    assert len(fp) == sum(len(p) * (len(p) - 1) // 2 for p in framed.values())
    for p in fp:
        assert float(p["jaccard"]) == pytest.approx(jaccard(sets[p["url_a"]], sets[p["url_b"]]), abs=1e-6)
    # originals (the sources as used) are mutually dissimilar: no other duplicates hide in the corpus
    originals = [texts[d["url"]] for d in docs if d["role"] == "original"]
    assert brute_force(shingle_sets(originals), o.source_similarity) == []


def test_generated_corpus_keeps_its_promises(tmp_path):
    o = GenerateOptions(frame_words=100)
    res = generate(TEXT, tmp_path, o)
    check_corpus(tmp_path, o)
    assert res.similar > 0  # the fixture text holds duplicates of its own; they are not used as sources
    assert set(res.variants) == set(KINDS) and res.framed == o.framed
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["options"]["frame_words"] == 100 and manifest["result"]["gold_pairs"] == res.gold_pairs


@settings(max_examples=8)
@given(
    seed=st.integers(0, 10**6),
    duplicated=st.sampled_from([0.2, 0.5, 1.0]),
    variants=st.sampled_from([(1, 1), (1, 3), (2, 4)]),
    kinds=st.sets(st.sampled_from(KINDS), min_size=1).map(lambda s: tuple(k for k in KINDS if k in s)),
    rate=st.sampled_from([(0.0, 0.01), (0.01, 0.05), (0.1, 0.2)]),
    framed=st.sampled_from([0, 3, 7]),
    max_words=st.sampled_from([None, 80]),
)
# two framed pages of one frame whose sources start with the same three words (license files)
@example(seed=886, duplicated=0.2, variants=(1, 1), kinds=("exact",), rate=(0.0, 0.01), framed=7, max_words=None)
def test_generated_corpora_keep_their_promises(tmp_path_factory, seed, duplicated, variants, kinds, rate, framed, max_words):
    out = tmp_path_factory.mktemp("gen")
    o = GenerateOptions(seed=seed, duplicated=duplicated, variants=variants, kinds=kinds, edit_rate=rate, framed=framed,
                        frame_group=3, frame_words=60, max_words=max_words, sources=40)
    generate(TEXT, out, o)
    check_corpus(out, o)
    assert sum(d["role"] == "original" for d in _csv(out / "documents.csv")) == 40


def test_generate_is_deterministic_and_seeded(tmp_path):
    generate(TEXT, tmp_path / "a", GenerateOptions(seed=3))
    generate(TEXT, tmp_path / "b", GenerateOptions(seed=3))
    generate(TEXT, tmp_path / "c", GenerateOptions(seed=4))
    for f in (*FILES, "manifest.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert (tmp_path / "a" / "corpus.jsonl").read_bytes() != (tmp_path / "c" / "corpus.jsonl").read_bytes()


def test_parquet_output_holds_the_same_corpus(tmp_path):
    generate(TEXT, tmp_path / "j", GenerateOptions(seed=1))
    generate(TEXT, tmp_path / "p", GenerateOptions(seed=1, output_format="parquet"))
    assert _corpus(tmp_path / "p") == _corpus(tmp_path / "j")
    assert (tmp_path / "p" / "pairs.csv").read_bytes() == (tmp_path / "j" / "pairs.csv").read_bytes()


def test_the_committed_labelled_fixture_is_what_generate_makes(tmp_path, monkeypatch):
    # same input and options give the same bytes on every machine: fixtures/generated was made elsewhere
    monkeypatch.chdir(ROOT)
    generate(FIXTURE_INPUTS, tmp_path, FIXTURE_OPTIONS)
    committed = FIXTURES / "generated"
    for f in FILES:
        assert (tmp_path / f).read_bytes() == (committed / f).read_bytes(), f
    new, old = (json.loads((d / "manifest.json").read_text()) for d in (tmp_path, committed))
    assert {k: v for k, v in new.items() if k != "neardup"} == {k: v for k, v in old.items() if k != "neardup"}
    check_corpus(committed, FIXTURE_OPTIONS)


def test_the_jaccard_method_finds_exactly_the_pairs_the_labels_predict(tmp_path):
    """End to end: generate, ingest, evaluate. Verified pairs are exact word-shingle Jaccard >= 0.8, so
    the found pairs are the gold pairs at or above 0.8 plus the framed false duplicates at or above it."""
    out = tmp_path / "gen"
    r = runner.invoke(app, ["generate", *TEXT, "--out", str(out), "--seed", "7", "--frame-words", "200",
                            "--framed-content", "5,40", "--edit-rate", "0.01,0.06"])
    assert r.exit_code == 0, r.output
    idx = tmp_path / "idx"
    r = runner.invoke(app, ["ingest", "-q", "--index", str(idx), str(out / "corpus.jsonl")])
    assert r.exit_code == 0, r.output
    gold = {(p["url_a"], p["url_b"]): float(p["jaccard"]) for p in _csv(out / "pairs.csv")}
    false = {(p["url_a"], p["url_b"]): float(p["jaccard"]) for p in _csv(out / "framed_pairs.csv")}
    with Index(idx).reader() as con:
        found = set(con.execute("SELECT url_a, url_b FROM duplicate_urls WHERE method = 'jaccard'").fetchall())
    expect_gold = {p for p, j in gold.items() if j >= 0.8 - 1e-9}
    expect_false = {p for p, j in false.items() if j >= 0.8 - 1e-9}
    assert expect_false and expect_gold != set(gold)  # the corpus has both traps: false duplicates and far variants
    assert found == expect_gold | expect_false
    r = runner.invoke(app, ["evaluate", "--index", str(idx), "--gold", str(out / "pairs.csv"), "--gold-clusters", str(out / "clusters.csv")])
    assert r.exit_code == 0, r.output
    with Index(idx).reader() as con:
        got = dict(con.execute("SELECT measure, value FROM evaluations WHERE method = 'jaccard' AND threshold IS NULL").fetchall())
    assert got["precision"] == pytest.approx(len(expect_gold) / len(found))
    assert got["recall"] == pytest.approx(len(expect_gold) / len(gold))


def test_generate_from_html_records(tmp_path):
    recs = [{"url": f"u{i}", "text": "<html><body>" + "".join(f"<p>para {i} {k} " + " ".join(f"t{i}x{k}y{w}" for w in range(20)) + "</p>"
                                                          for k in range(4)) + "</body></html>"} for i in range(12)]
    src = write_jsonl(tmp_path / "h.jsonl", recs)
    o = GenerateOptions(framed=0, duplicated=1.0, kinds=("reorder",))
    res = generate([str(src)], tmp_path / "g", o, read=ReadOptions(html=True))
    check_corpus(tmp_path / "g", o)
    assert res.originals == 12 and res.variants["reorder"] >= 12 and "<p>" not in (tmp_path / "g" / "corpus.jsonl").read_text()
    docs = _csv(tmp_path / "g" / "documents.csv")
    assert all(json.loads(d["edits"])[0]["unit"] == "paragraph" for d in docs if d["role"] == "reorder")


def test_too_little_input_and_bad_options_are_clear_errors(tmp_path):
    src = write_jsonl(tmp_path / "s.jsonl", [{"url": "a", "text": "short text"}, {"url": "b", "text": " ".join(f"w{i}" for i in range(60))}])
    with pytest.raises(GenerateError, match="usable sources"):
        generate([str(src)], tmp_path / "o", GenerateOptions())
    with pytest.raises(GenerateError, match="duplicated"):
        generate([str(src)], tmp_path / "o", GenerateOptions(duplicated=2.0))
    r = runner.invoke(app, ["generate", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "missing.jsonl" in r.output
    r = runner.invoke(app, ["generate", str(src), "--out", str(tmp_path / "o"), "--kinds", "exact,rewrite"])
    assert r.exit_code == 2 and "kinds" in r.output
    r = runner.invoke(app, ["generate", str(src), "--out", str(tmp_path / "o"), "--variants", "a,b"])
    assert r.exit_code == 2
    assert not (tmp_path / "o").exists()  # nothing written on error


def test_bad_records_are_named_and_skipped(tmp_path):
    good = [{"url": f"u{i}", "text": " ".join(f"r{i}w{k}" for k in range(60))} for i in range(6)]
    src = tmp_path / "mixed.jsonl"
    lines = [json.dumps(r) for r in good]
    lines.insert(2, '{"url": "broken", "text": ')
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "g"
    r = runner.invoke(app, ["generate", str(src), "--out", str(out), "--framed", "0", "--kinds", "exact", "--duplicated", "1"])
    assert r.exit_code == 0, r.output
    assert "mixed.jsonl" in r.output and "line 3" in r.output
    docs = _csv(out / "documents.csv")
    assert sorted({d["source_url"] for d in docs}) == [f"u{i}" for i in range(6)]
    check_corpus(out, GenerateOptions(framed=0, kinds=("exact",), duplicated=1.0))
