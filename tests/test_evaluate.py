"""`neardup evaluate`: every measure computed by hand on tiny inputs, and end to end on the fixtures."""

from __future__ import annotations

import csv

import pytest

from neardup import Index
from neardup.evaluate import cluster_scores, comparator, pair_scores
from neardup.ingest import ingest

from .conftest import FIXTURES, write_jsonl


def test_comparator_and_pair_scores():
    found = {(1, 2), (1, 3), (4, 5)}
    gold = {(1, 2), (2, 3), (4, 5), (6, 7)}
    assert comparator(found, gold) == {"gold_pairs": 4, "found_pairs": 3, "unique_gold_pairs": 2, "unique_found_pairs": 1, "common_pairs": 2}
    s = pair_scores(found, gold)
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == pytest.approx(1 / 2)
    assert s["f1"] == pytest.approx(2 * (2 / 3) * (1 / 2) / (2 / 3 + 1 / 2))


def test_cluster_scores_of_004():
    gold = [{1, 2, 3, 4}, {5, 6}]
    found = [{1, 2, 3}, {4, 5, 6, 7}]
    # g1 = {1,2,3,4} -> {1,2,3} (3 common): Pr 3/3, Re 3/4; g2 = {5,6} -> {4,5,6,7} (2 common): Pr 2/4, Re 2/2
    # weights |g|/|R| = 4/6 and 2/6
    s = cluster_scores(found, gold)
    assert s["Pr"] == pytest.approx(4 / 6 * 1 + 2 / 6 * 0.5)
    assert s["Re"] == pytest.approx(4 / 6 * 0.75 + 2 / 6 * 1)
    assert s["F1"] == pytest.approx(2 * s["Pr"] * s["Re"] / (s["Pr"] + s["Re"]))
    # CPr: {1,2,3}: 3 of 3 pairs share a gold cluster; {4,5,6,7}: only (5,6) of 6 pairs
    assert s["CPr"] == pytest.approx((1 + 1 / 6) / 2)


def test_evaluate_end_to_end_on_a_tiny_index(tmp_path):
    from neardup.cli.app import app
    from typer.testing import CliRunner

    words = [f"w{i}" for i in range(400)]
    base = " ".join(words[:120])
    recs = [
        {"url": "a", "text": base},
        {"url": "b", "text": base},  # an exact copy of a
        {"url": "c", "text": " ".join(words[200:320])},
        {"url": "d", "text": " ".join(words[200:320])},  # a copy of c
    ]
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "r.jsonl", recs)))
    gold = tmp_path / "gold.csv"
    gold.write_text("url_a,url_b\na,b\na,c\n")  # one found pair, one not; the c-d pair is not in the reference
    labels = tmp_path / "labels.csv"
    labels.write_text("a,x\nb,x\nc,y\n")
    r = CliRunner().invoke(app, ["evaluate", "--index", str(tmp_path / "i"), "--gold", str(gold), "--gold-clusters", str(labels), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    with idx.reader() as con:
        got = {(m, t, k): v for m, t, k, v in con.execute("SELECT method, threshold, measure, value FROM evaluations WHERE run_id = 1").fetchall()}
    assert got[("jaccard", None, "gold_pairs")] == 2
    assert got[("jaccard", None, "found_pairs")] == 2  # a-b and c-d
    assert got[("jaccard", None, "common_pairs")] == 1
    assert got[("jaccard", None, "precision")] == pytest.approx(0.5) and got[("jaccard", None, "recall")] == pytest.approx(0.5)
    assert got[("jaccard", 1.0, "found_pairs")] == 2
    # clusters: concept {a,b}, {c,d}; gold {a,b}, {c}: Pr = 2/3*1 + 1/3*(1/2), Re = 1, CPr = (1 + 0)/2
    assert got[("clusters:concept", None, "Pr")] == pytest.approx(2 / 3 + 1 / 6)
    assert got[("clusters:concept", None, "Re")] == pytest.approx(1.0)
    assert got[("clusters:concept", None, "CPr")] == pytest.approx(0.5)
    with open(tmp_path / "out" / "unique_gold_pairs_jaccard.csv") as fh:
        assert [row["url_a"] + "-" + row["url_b"] for row in csv.DictReader(fh)] == ["a-c"]
    with open(tmp_path / "out" / "unique_found_pairs_jaccard.csv") as fh:
        assert [row["url_a"] + "-" + row["url_b"] for row in csv.DictReader(fh)] == ["c-d"]
    for name in ("prf_jaccard.png", "prf_simhash.png", "report.html"):
        assert (tmp_path / "out" / name).stat().st_size > 1000, name
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / "evaluation.parquet").to_pylist()
    with open(tmp_path / "out" / "evaluation.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(table) == len(rows) and {(r["method"], r["measure"], r["value"]) for r in table} == {
        (r["method"], r["measure"], float(r["value"])) for r in rows}
    assert {("jaccard", "precision", 0.5), ("jaccard", "recall", 0.5)} <= {(r["method"], r["measure"], r["value"]) for r in table if r["threshold"] is None}


def test_evaluate_on_the_fixtures_finds_the_gold_pairs(tmp_path):
    idx = Index(tmp_path / "i")
    for src in ("crawl/sample.warc.gz", "text/docs.jsonl", "html"):
        ingest(idx, str(FIXTURES / src))
    from neardup.evaluate import evaluate

    ev = evaluate(idx, str(FIXTURES / "gold" / "pairs.csv"), str(FIXTURES / "gold" / "clusters.csv"))
    assert ev.unknown == {"gold pairs": 0, "gold cluster members": 0}  # relative paths map to file:// urls
    c = ev.comparator["jaccard"]
    assert c["gold_pairs"] == 83
    assert c["unique_found_pairs"] == 0  # every pair found at 0.8 is a reference pair
    assert ev.cluster["concept"]["Pr"] == pytest.approx(1.0)


def test_pooled_scores_and_dice_by_hand():
    from neardup.evaluate import dice_matrix, pooled_scores, text_similarity

    found = {"a": {(1, 2), (3, 4)}, "b": {(1, 2), (5, 6), (7, 8)}}
    verified = {(1, 2), (5, 6)}  # (3,4) and (7,8) fail the text check
    s = pooled_scores(found, verified)
    assert s["a"] == {"pairs": 2.0, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert s["b"]["precision"] == pytest.approx(2 / 3) and s["b"]["recall"] == 1.0
    assert dice_matrix(found) == {("a", "b"): pytest.approx(2 * 1 / (2 + 3))}
    # String::Similarity's measure: 1 - indel distance / (len a + len b); "abcd" vs "abxd": 2 edits of 8
    assert text_similarity("abcd", "abxd") == pytest.approx(0.75)
    assert text_similarity("abcd", "abxd", cutoff=0.8) == 0.0


def test_pooled_evaluation_verifies_the_union_by_text(tmp_path):
    from neardup.evaluate import evaluate
    from neardup.settings import Settings

    words = [f"w{i}" for i in range(400)]
    base = " ".join(words[:150])
    near = " ".join(words[:150][:140] + ["x"] * 10)  # a near copy, edit similarity above 0.8
    recs = [{"url": "a", "text": base}, {"url": "b", "text": base}, {"url": "c", "text": near}]
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "r.jsonl", recs)), create_with=Settings(methods=("shingles", "minhash", "simhash", "a0"), pairs=("jaccard", "simhash", "a0")))
    ev = evaluate(idx, pooled=True)
    with idx.reader() as con:
        pairs = {m: {(a, b) for a, b in con.execute("SELECT doc_a, doc_b FROM duplicates WHERE method = ?", [m]).fetchall()} for m in ("jaccard", "simhash", "a0")}
    pool = set().union(*pairs.values())
    assert ev.pool == (len(pool), len(pool))  # every pair here is a true near-copy
    assert ev.pooled["a0"]["recall"] == pytest.approx(len(pairs["a0"]) / len(pool))
    assert ev.pooled["a0"]["precision"] == 1.0


def test_stage_timings_are_kept_per_batch_and_summed(tmp_path):
    from neardup.evaluate import evaluate

    idx = Index(tmp_path / "i")
    recs = [{"url": f"u{i}", "text": " ".join(f"w{(i * 7 + j) % 300}" for j in range(60))} for i in range(6)]
    ingest(idx, str(write_jsonl(tmp_path / "a.jsonl", recs[:3])))
    ingest(idx, str(write_jsonl(tmp_path / "b.jsonl", recs[3:])))
    with idx.reader() as con:
        rows = con.execute("SELECT batch_id, stage, seconds FROM batch_timings").fetchall()
    assert {b for b, _, _ in rows} == {1, 2}
    assert {"read+prepare", "store", "candidates", "verify", "clusters", "prepare: shingles", "prepare: fingerprint bottomk",
            "prepare: words"} <= {s for _, s, _ in rows}
    ev = evaluate(idx, pooled=True)
    assert ev.timings["store"] == pytest.approx(sum(x for _, s, x in rows if s == "store"))


def test_report_002_view_counts_every_document_once(tmp_path):
    from neardup.evaluate import evaluate

    idx = Index(tmp_path / "i")
    ingest(idx, str(FIXTURES / "crawl" / "sample.warc.gz"))
    ev = evaluate(idx, pooled=True, bits=(5, 15), out=str(tmp_path / "out"))
    with idx.reader() as con:
        n_docs = con.execute("SELECT count(*) FROM documents").fetchall()[0][0]
    for b in (5, 15):
        hist, top = ev.simhash_groups[b]
        assert sum(size * n for size, n in hist.items()) == n_docs
        assert [s for s, _ in top] == sorted((s for s, _ in top), reverse=True) and len(top) == 10
    # a looser bit budget never makes more groups
    assert sum(ev.simhash_groups[15][0].values()) <= sum(ev.simhash_groups[5][0].values())
    assert (tmp_path / "out" / "simhash_groups_5.csv").exists()
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3  # groups_5, groups_15 and the Dice heatmap, embedded
    assert "Pooled evaluation (003)" in page and "Simhash groups within 15 bits" in page


def test_similarity_measures_of_004_by_hand():
    import math

    from neardup.evaluate import tfidf_cosine, weighted_jaccard

    w = {"a": 2.0, "b": 1.0, "c": 1.0, "d": 4.0}
    # common {a, b}: 3; union {a, b, c, d}: 8
    assert weighted_jaccard({"a", "b", "c"}, {"a", "b", "d"}, w) == pytest.approx(3 / 8)
    idf = {"x": 1.0, "y": 2.0}
    # r = (2*1, 1*2) = (2, 2); r' = (1*1, 0) = (1, 0): cos = 2 / (sqrt(8) * 1)
    assert tfidf_cosine({"x": 2, "y": 1}, {"x": 1}, idf) == pytest.approx(2 / math.sqrt(8))
    assert tfidf_cosine({"x": 1}, {"y": 1}, idf) == 0.0


@pytest.mark.parametrize("measure", ["weighted-jaccard", "cosine"])
def test_pooled_evaluation_with_another_measure(tmp_path, measure):
    from neardup.evaluate import evaluate

    words = [f"w{i}" for i in range(300)]
    recs = [{"url": "a", "text": " ".join(words[:150])}, {"url": "b", "text": " ".join(words[:150])}]
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "r.jsonl", recs)))
    ev = evaluate(idx, pooled=True, measure=measure)
    assert ev.pool[0] >= 1 and ev.pool[0] == ev.pool[1]  # identical texts verify under any measure


def test_the_support_sweep_mines_each_threshold_afresh(tmp_path):
    """001 tables 2-4: per support k, the concept clusters of the whole index, checked against
    the exhaustive miner; the row at the index's own support equals the kept concept clusters."""
    from neardup.concepts import brute_force
    from neardup.evaluate import clusters_to_pairs, evaluate, sweep_supports
    from neardup.settings import Settings

    words = [f"w{i}" for i in range(600)]
    base = words[:150]
    recs = [{"url": "o", "text": " ".join(base)}]
    for n in (1, 3, 6, 12, 25):  # copies with n words replaced: fewer shared sketch values as n grows
        recs.append({"url": f"e{n}", "text": " ".join(base[: 150 - n] + words[300 + 10 * n : 300 + 11 * n])})
    recs.append({"url": "z", "text": " ".join(words[450:600])})
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "r.jsonl", recs)), create_with=Settings(bottomk=32))
    gold = tmp_path / "gold.csv"
    gold.write_text("o,e1\no,e3\no,e6\ne1,e3\n")
    supports = (32, 30, 28, 26, 24, 20)
    ev = evaluate(idx, str(gold), supports=supports)
    with idx.reader() as con:
        sk = {d: list(v) for d, v in con.execute("SELECT doc_id, sketch FROM fp_bottomk").fetchall()}
        ids = dict(con.execute("SELECT url, doc_id FROM documents").fetchall())
    want = {(min(ids[a], ids[b]), max(ids[a], ids[b])) for a, b in (("o", "e1"), ("o", "e3"), ("o", "e6"), ("e1", "e3"))}
    assert [r["support"] for r in ev.sweep] == list(supports)
    recalls = []
    for r in ev.sweep:
        found = clusters_to_pairs([set(m) for m, _ in brute_force(sk, r["support"])])
        common = len(found & want)
        assert (r["found_pairs"], r["common_pairs"], r["clusters"]) == (len(found), common, len(brute_force(sk, r["support"])))
        assert r["precision"] == pytest.approx(common / len(found) if found else 1.0)
        assert r["recall"] == pytest.approx(common / len(want))
        recalls.append(r["recall"])
    assert recalls == sorted(recalls) and recalls[0] < recalls[-1]  # a lower support joins more
    # the default sweep: ceil(t * 32) for t = 0.8 ... 1; its row at the index's support is the kept clustering
    ev = evaluate(idx, str(gold))
    assert [r["support"] for r in ev.sweep] == list(sweep_supports(32)) == [32, 31, 29, 28, 26]
    at = next(r for r in ev.sweep if r["support"] == Settings(bottomk=32).support)
    assert {k: at[k] for k in ev.comparator["clusters:concept"]} == ev.comparator["clusters:concept"]
    assert evaluate(idx, str(gold), supports=()).sweep == []


def test_support_sweep_options_on_the_command_line(tmp_path):
    from neardup.cli.app import app
    from typer.testing import CliRunner

    recs = [{"url": u, "text": " ".join(f"w{i}" for i in range(120))} for u in ("a", "b")]
    ingest(Index(tmp_path / "i"), str(write_jsonl(tmp_path / "r.jsonl", recs)))
    gold = tmp_path / "g.csv"
    gold.write_text("a,b\n")
    base = ["evaluate", "--index", str(tmp_path / "i"), "--gold", str(gold)]
    r = CliRunner().invoke(app, [*base, "--support-sweep", "100,90"])
    assert r.exit_code == 0, r.output
    assert "concept clusters by support" in r.output
    r = CliRunner().invoke(app, [*base, "--support-sweep", "none"])
    assert r.exit_code == 0 and "by support" not in r.output
    r = CliRunner().invoke(app, [*base, "--support-sweep", "lots"])
    assert r.exit_code == 2
    r = CliRunner().invoke(app, [*base, "--support-sweep", "500"])
    assert r.exit_code == 2 and "sketch size" in r.output
