"""Lexical methods on a tiny collection, against the formulas of 003 computed here by hand."""

from __future__ import annotations

import math
import zlib
from collections import Counter

import pytest

from neardup import Index
from neardup.fingerprints.rcdl import STOP_WORDS
from neardup.ingest import ingest
from neardup.settings import Settings

from .conftest import write_jsonl

DOCS = [
    "Alpha bravo charlie delta. Echo foxtrot alpha alpha! Golf hotel india juliet kilo lima.",
    "Alpha bravo charlie delta echo. Mike november oscar papa quebec romeo sierra tango alpha.",
    "Uniform victor whiskey xray yankee zulu. Alpha alpha alpha bravo bravo charlie these words.",
]
METHODS = ("lexical", "a1", "a2", "a3", "a4", "a5", "a10", "a12")


def terms(doc: str) -> list[str]:
    words = [w.strip(".!,").lower() for w in doc.split()]
    return [w for w in words if len(w) > 3 and w not in STOP_WORDS]


def sentences(doc: str) -> list[str]:
    import re

    return [" ".join(w.lower() for w in re.findall(r"\w+", s)) for s in re.split(r"[.!?]\s*", doc) if s.strip()]


def crc(words: list[str]) -> int:
    return zlib.crc32(" ".join(words).encode())


def top6(weights: dict[str, float]) -> list[str]:
    return sorted(sorted(weights, key=lambda t: (-weights[t], t))[:6])


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    d = tmp_path_factory.mktemp("lex")
    idx = Index(d / "i")
    ingest(idx, str(write_jsonl(d / "a.jsonl", [{"url": f"u{i}", "text": t} for i, t in enumerate(DOCS)])),
           create_with=Settings(methods=METHODS, min_words=5))
    return idx


def expected_stats(docs):
    tfs = [Counter(terms(d)) for d in docs]
    df, cf = Counter(), Counter()
    for c in tfs:
        df.update(c.keys())
        cf.update(c)
    return tfs, df, cf


def test_collection_statistics(index):
    _, df, cf = expected_stats(DOCS)
    with index.reader() as con:
        got = {t: (d, c) for t, d, c in con.execute("SELECT term, df, cf FROM term_stats").fetchall()}
        stats = con.execute("SELECT n_docs, total_tf, max_cf FROM collection_stats").fetchone()
    assert got == {t: (df[t], cf[t]) for t in df}
    assert stats == (3, sum(cf.values()), max(cf.values()))


def test_a1_a2_a3_a10_top6_and_crc32(index):
    tfs, df, cf = expected_stats(DOCS)
    n = 3
    avg_dl = sum(cf.values()) / n
    expect = {"a1": [], "a2": [], "a3": [], "a10": []}
    for tf in tfs:
        dl, tf_max = sum(tf.values()), max(tf.values())
        expect["a1"].append(top6({t: tf[t] for t in tf}))
        expect["a2"].append(top6({t: tf[t] / (2 * (0.25 + 0.75 * dl / avg_dl) + tf[t]) * math.log((n - df[t] + 0.5) / (df[t] + 0.5)) for t in tf}))
        expect["a3"].append(top6({t: (0.5 + 0.5 * tf[t] / tf_max) * (-math.log(df[t] / n) + math.log(1 - math.exp(-cf[t] / n))) for t in tf}))

        def opt(t):
            idf = -math.log(df[t] / n)
            return math.sqrt(idf / 11.5) if idf < 11.5 else 11.5 / idf

        expect["a10"].append(top6({t: (0.5 + 0.5 * tf[t] / tf_max) * opt(t) for t in tf}))
    with index.reader() as con:
        for m, words in expect.items():
            rows = con.execute(f"SELECT words, crc32 FROM fp_{m} ORDER BY doc_id").fetchall()
            assert [r[0] for r in rows] == words, m
            assert [r[1] for r in rows] == [crc(w) for w in words], m


def test_a4_longest_sentences(index):
    with index.reader() as con:
        rows = con.execute("SELECT sentences, crc32 FROM fp_a4 ORDER BY doc_id").fetchall()
    for doc, (got, sig) in zip(DOCS, rows):
        s = sentences(doc)
        top = sorted(sorted(s, key=lambda x: (-len(x.split()), x))[:2])
        assert got == top and sig == crc(top)


def test_a5_heaviest_sentences(index):
    tfs, df, cf = expected_stats(DOCS)
    n, avg_dl = 3, sum(cf.values()) / 3
    with index.reader() as con:
        rows = con.execute("SELECT sentences FROM fp_a5 ORDER BY doc_id").fetchall()
    for doc, tf, (got,) in zip(DOCS, tfs, rows):
        dl = sum(tf.values())
        wt = {t: tf[t] / (2 * (0.25 + 0.75 * dl / avg_dl) + tf[t]) * math.log((n - df[t] + 0.5) / (df[t] + 0.5)) for t in tf}
        s = sentences(doc)
        weight = {x: sum(wt.get(w, 0.0) for w in x.split() if len(w) > 3 and w not in STOP_WORDS) for x in s}
        assert got == sorted(sorted(s, key=lambda x: (-weight[x], x))[:2])


def test_a12_records(index):
    with index.reader() as con:
        rows = con.execute("SELECT ss, ws, len, num FROM fp_a12 ORDER BY doc_id").fetchall()
    for doc, (ss, ws, length, num) in zip(DOCS, rows):
        s = sentences(doc)
        assert num == len(s)
        assert ss == [sig for _, sig in sorted((-len(x.split()), zlib.crc32(x.encode())) for x in s)[:3]]
        words = {w.strip(".!,").lower() for w in doc.split()}
        assert ws == [sig for _, sig in sorted((-len(w), zlib.crc32(w.encode())) for w in words)[:5]]
        assert length == sum(1 for w in doc.split() if len(w.strip(".!,")) >= 3)


def test_lexical_image_and_incremental_statistics(tmp_path):
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "a.jsonl", [{"url": "u0", "text": DOCS[0]}])), create_with=Settings(methods=METHODS, min_words=5))
    ingest(idx, str(write_jsonl(tmp_path / "b.jsonl", [{"url": f"u{i}", "text": t} for i, t in enumerate(DOCS[1:], 1)])))
    _, df, cf = expected_stats(DOCS)
    with idx.reader() as con:
        got = {t: (d, c) for t, d, c in con.execute("SELECT term, df, cf FROM term_stats").fetchall()}
        image = con.execute("SELECT words FROM fp_lexical ORDER BY doc_id").fetchall()
    assert got == {t: (df[t], cf[t]) for t in df}
    # with a tiny collection the upper bound (half the largest collection frequency) is what bites
    assert image[2][0] == sorted(t for t in set(terms(DOCS[2])) if cf[t] <= 0.5 * max(cf.values()))


def test_a7_lexrand_signatures(tmp_path):
    import hashlib

    import xxhash

    from neardup.fingerprints import lexical

    idx = Index(tmp_path / "i")
    docs = DOCS + [DOCS[0] + " Extra words appended here.", "Completely other content about zebras giraffes lions tigers."]
    ingest(idx, str(write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": t} for i, t in enumerate(docs)])),
           create_with=Settings(methods=("a7",), min_words=5))
    tfs, df, _ = expected_stats(docs)
    n = len(docs)
    with idx.reader() as con:
        rows = con.execute("SELECT signatures, keys FROM fp_a7 ORDER BY doc_id").fetchall()
    assert len(rows) == n
    for tf, (sigs, keys) in zip(tfs, rows):
        lex = sorted(t for t in tf if 0.2 <= math.log(n / df[t]) / math.log(n) <= 0.9)
        subsets = [lex] + [[t for t in lex if xxhash.xxh3_64_intdigest(t.encode(), k) >= int(0.33 * 2**64)] for k in range(1, 11)]
        assert sigs == [hashlib.sha1(" ".join(x).encode()).hexdigest() for x in subsets]
        assert len(set(keys)) == 11
    assert lexical.LEXRAND_K == 10


def test_rebuild_equals_ingesting_everything_in_one_batch(tmp_path):
    from .snapshot import snapshot

    recs = [{"url": f"u{i}", "text": t} for i, t in enumerate(DOCS + [DOCS[1] + " More words here."])]
    methods = ("shingles", "minhash", "a2", "a5", "a7", "lexical", "a12")
    one = Index(tmp_path / "one")
    ingest(one, str(write_jsonl(tmp_path / "all.jsonl", recs)), create_with=Settings(methods=methods, min_words=5, minhash_perms=8))
    split = Index(tmp_path / "split")
    ingest(split, str(write_jsonl(tmp_path / "a.jsonl", recs[:1])), create_with=Settings(methods=methods, min_words=5, minhash_perms=8))
    ingest(split, str(write_jsonl(tmp_path / "b.jsonl", recs[1:])))

    def fps(idx):
        with idx.reader() as con:
            return {m: con.execute(f"SELECT * FROM fp_{m} ORDER BY doc_id").fetchall() for m in methods} | {
                "term_stats": con.execute("SELECT * FROM term_stats ORDER BY term").fetchall()}

    assert fps(one)["term_stats"] == fps(split)["term_stats"]
    assert fps(one)["a2"] != fps(split)["a2"]  # statistics at ingest time differ between the two
    from neardup.rebuild import rebuild_fingerprints

    r = rebuild_fingerprints(split)
    assert r.n_docs == len(recs)
    assert fps(split) == fps(one)
    assert snapshot(split.path)["postings"] == snapshot(one.path)["postings"]


def test_a9_threshold_choice_and_signatures(tmp_path):
    import numpy as np

    from neardup.fingerprints import lexical

    # word "aa": rtf 0.1 (x2), 0.9 (x3): precision is perfect for thresholds away from both clusters
    terms = np.array(["aa"] * 5 + ["bb"] * 4)
    rtf = np.array([0.1, 0.1, 0.9, 0.9, 0.9, 0.5, 0.5, 0.52, 0.48])
    t = lexical.choose_support_words(terms, rtf).to_pylist()
    by = {r["term"]: r for r in t}
    # phase 1: largest coverage with precision >= 0.8 -> the smallest threshold not within Δ of 0.1 -> 0.2 (covers 3)
    assert by["aa"]["threshold"] == 0.2 and by["aa"]["coverage"] == 3 and by["aa"]["precision"] == 1.0
    assert by["bb"]["threshold"] == 0.05 and by["bb"]["coverage"] == 4
    docs = [
        "Apple apple banana cherry. Cherry apple banana durian elder!",
        "Apple apple banana cherry. Cherry apple banana durian elder!",
        "Fig grape grape honeydew. Apple banana kiwi kiwi lemon mango.",
        "Fig grape grape honeydew. Apple banana kiwi kiwi lemon mango nectarine.",
    ]
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": d} for i, d in enumerate(docs)])),
           create_with=Settings(methods=("a9",), min_words=5))
    with idx.reader() as con:
        rows = con.execute("SELECT words, signature FROM fp_a9 ORDER BY doc_id").fetchall()
        support = dict(con.execute("SELECT term, threshold FROM support_words").fetchall())
    assert rows[0] == rows[1] and rows[0][1] != 0
    assert rows[2][0] == rows[3][0]  # the extra word is not a support word (it is in one document)
    for words, _ in rows:
        assert set(words) <= set(support)


def test_every_document_gets_a_row_even_without_terms(tmp_path):
    idx = Index(tmp_path / "i")
    recs = [{"url": "short", "text": "a an the of in on at to by it is as be or if"}, {"url": "ok", "text": DOCS[0]}]
    ingest(idx, str(write_jsonl(tmp_path / "a.jsonl", recs)), create_with=Settings(methods=METHODS, min_words=5))
    with idx.reader() as con:
        for m in METHODS:
            assert con.execute(f"SELECT count(*) FROM fp_{m}").fetchone()[0] == 2, m
        assert con.execute("SELECT words, crc32 FROM fp_a2 WHERE doc_id = 1").fetchone() == ([], 0)
