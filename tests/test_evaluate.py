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


def test_cluster_scores_count_unclustered_members_as_singletons():
    # 004's clusterings are partitions: 3 and 4 are in no found cluster, so each is a cluster of its own
    gold = [{1, 2, 3}, {4, 5}, {6}]
    found = [{1, 2}, {5, 7, 8}]
    # g1 -> {1,2}: 2 common, Pr 2/2, Re 2/3; g2: {5,7,8} shares 1 (Pr 1/3) and the singleton {4} shares 1
    # (Pr 1/1): ties go to the smaller cluster -> Pr 1, Re 1/2; g3 = {6}: the singleton {6}: Pr 1, Re 1
    s = cluster_scores(found, gold)
    assert s["Pr"] == pytest.approx(3 / 6 * 1 + 2 / 6 * 1 + 1 / 6 * 1)
    assert s["Re"] == pytest.approx(3 / 6 * (2 / 3) + 2 / 6 * (1 / 2) + 1 / 6 * 1)
    # CPr over found clusters of two or more: {1,2}: 1 of 1 pair; {5,7,8}: 0 of 3 (7, 8 are in no reference cluster)
    assert s["CPr"] == pytest.approx((1 + 0) / 2)
    # nothing found: every reference member is a singleton
    s = cluster_scores([], [{1, 2}])
    assert (s["Pr"], s["Re"], s["CPr"]) == (1.0, 0.5, 0.0)


def test_cpr_with_overlapping_reference_clusters():
    # a url listed under two labels: a pair counts once when some reference cluster holds both
    gold = [{1, 2, 3}, {3, 4}]
    found = [{1, 2, 3, 4}]
    # pairs of {1,2,3,4}: (1,2) (1,3) (2,3) in g1, (3,4) in g2; (1,4) and (2,4) in none: 4 of 6
    assert cluster_scores(found, gold)["CPr"] == pytest.approx(4 / 6)


def test_report_002_view_by_hand():
    import numpy as np

    from neardup.evaluate import simhash_view

    # every length is below 300, so each round picks the longest remaining document (ties: largest id):
    # 002's code looks for a length drawn from [300, 900) and takes the last one when none is that long
    ids = np.array([1, 2, 3, 4, 5, 6])
    lengths = np.array([100, 100, 100, 100, 100, 200])
    hashes = np.array([0x0, 0x1, 0x7, 0xFE, 0xFF, 0xFF], dtype=np.uint64)
    urls = {i: f"u{i}" for i in range(1, 7)}
    hist, top, dist = simhash_view(ids, lengths, hashes, urls, 2, seed=0)
    # round 1: 6 (200 words); its window [160, 242) holds no other document -> {6}, no comparison
    # round 2: 5 (0xFF) against 1..4 at 8, 7, 5, 1 bits -> {4, 5}
    # round 3: 3 (0x7) against 1, 2 at 3, 2 bits -> {2, 3}
    # round 4: 1 alone -> {1}
    assert hist == {1: 2, 2: 2}
    assert top == [(2, "u3"), (2, "u5"), (1, "u1"), (1, "u6")]  # by size, then main page id
    assert {d: n for d, n in enumerate(dist) if n} == {8: 1, 7: 1, 5: 1, 1: 1, 3: 1, 2: 1}
    # with 3 bits, round 2 takes nothing more, round 3 takes both 1 and 2
    hist, top, _ = simhash_view(ids, lengths, hashes, urls, 3, seed=0)
    assert hist == {1: 1, 2: 1, 3: 1} and top[0] == (3, "u3")


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
    r = CliRunner().invoke(app, ["evaluate", "--index", str(tmp_path / "i"), "--gold", str(gold), "--gold-clusters", str(labels),
                                 "--out", str(tmp_path / "out"), "--measures", "edit,cosine"])
    assert r.exit_code == 0, r.output
    with idx.reader() as con:
        got = {(m, t, k): v for m, t, k, v in con.execute("SELECT method, threshold, measure, value FROM evaluations WHERE run_id = 1").fetchall()}
    assert got[("jaccard", None, "gold_pairs")] == 2
    assert got[("jaccard", None, "found_pairs")] == 2  # a-b and c-d
    assert got[("jaccard", None, "common_pairs")] == 1
    assert got[("jaccard", None, "precision")] == pytest.approx(0.5) and got[("jaccard", None, "recall")] == pytest.approx(0.5)
    # the Comparator per threshold: both pairs are exact copies (similarity 1), so every threshold keeps both
    for t in (0.8, 0.9, 1.0):
        assert [got[("jaccard", t, k)] for k in ("gold_pairs", "found_pairs", "unique_gold_pairs", "unique_found_pairs", "common_pairs")] == [2, 2, 1, 1, 1]
    # clusters: concept {a,b}, {c,d}; gold {a,b}, {c}: Pr = 2/3*1 + 1/3*(1/2), Re = 1, CPr = (1 + 0)/2
    assert got[("clusters:concept", None, "Pr")] == pytest.approx(2 / 3 + 1 / 6)
    assert got[("clusters:concept", None, "Re")] == pytest.approx(1.0)
    assert got[("clusters:concept", None, "CPr")] == pytest.approx(0.5)
    from neardup.evaluate import text_similarity

    texts = {r["url"]: r["text"] for r in recs}
    with open(tmp_path / "out" / "unique_gold_pairs_jaccard.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [row["url_a"] + "-" + row["url_b"] for row in rows] == ["a-c"]
    # 004's measures of the listed pair: a and c share no word
    assert float(rows[0]["edit"]) == pytest.approx(text_similarity(texts["a"], texts["c"]), abs=1e-4)
    assert float(rows[0]["cosine"]) == 0.0
    with open(tmp_path / "out" / "unique_found_pairs_clusters-concept.csv") as fh:  # a clustering's pairs get the lists too
        assert [row["url_a"] + "-" + row["url_b"] for row in csv.DictReader(fh)] == ["c-d"]
    # every table as CSV and Parquet, with the numbers stored in evaluations
    with open(tmp_path / "out" / "comparator.csv") as fh:
        comp = {r["method"]: r for r in csv.DictReader(fh)}
    assert float(comp["jaccard"]["precision"]) == got[("jaccard", None, "precision")]
    assert int(comp["clusters:concept"]["common_pairs"]) == got[("clusters:concept", None, "common_pairs")]
    with open(tmp_path / "out" / "clusters.csv") as fh:
        assert {r["clustering"]: float(r["CPr"]) for r in csv.DictReader(fh)}["concept"] == got[("clusters:concept", None, "CPr")]
    import pyarrow.parquet as pq

    for name in ("comparator", "thresholds", "sweep", "clusters", "simhash_group_sizes", "simhash_top", "simhash_distances", "timings"):
        with open(tmp_path / "out" / f"{name}.csv") as fh:
            assert len(list(csv.DictReader(fh))) == pq.read_table(tmp_path / "out" / f"{name}.parquet").num_rows > 0, name
    with open(tmp_path / "out" / "unique_found_pairs_jaccard.csv") as fh:
        assert [row["url_a"] + "-" + row["url_b"] for row in csv.DictReader(fh)] == ["c-d"]
    for name in ("prf_jaccard.png", "prf_simhash.png", "prf_sweep_bottomk.png", "prf_sweep_minhash.png", "sweep_seconds.png",
                 "groups_5.png", "distances_15.png", "report.html"):
        assert (tmp_path / "out" / name).stat().st_size > 1000, name
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
            "prepare: words", "clusters: neighbours"} <= {s for _, s, _ in rows}
    for batch in (1, 2):  # written after the batch's commit, once each
        assert sorted(s for b, s, _ in rows if b == batch and s in ("commit", "postings")) == ["commit", "postings"]
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
    with open(tmp_path / "out" / "simhash_group_sizes.csv") as fh:
        sizes = {int(r["group_size"]): (int(r["groups_5_bits"]), int(r["groups_15_bits"])) for r in csv.DictReader(fh)}
    assert sizes == {s: (ev.simhash_groups[5][0].get(s, 0), ev.simhash_groups[15][0].get(s, 0)) for s in sizes}
    # every document but the first pick of a round is compared with that round's pick at most once
    for b in (5, 15):
        assert sum(ev.simhash_distances[b]) <= n_docs * (n_docs - 1) // 2
        assert sum(ev.simhash_distances[b][: b + 1]) == n_docs - sum(ev.simhash_groups[b][0].values())  # joined = docs - groups
    page = (tmp_path / "out" / "report.html").read_text()
    # groups and distances per bit budget, and the Dice heatmap, embedded
    assert page.count("data:image/png;base64,") == 5
    assert "Pooled evaluation (003" in page and "Simhash groups by size" in page


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
    """001 tables 2-4 (bottom-k image) and 6 (min-hash image): per support k, the concept clusters
    of the whole index, checked against the exhaustive miner; the bottom-k row at the index's own
    support equals the kept concept clusters."""
    from neardup.concepts import brute_force
    from neardup.evaluate import clusters_to_pairs, evaluate, read_images, sweep_supports
    from neardup.settings import Settings

    words = [f"w{i}" for i in range(600)]
    base = words[:150]
    recs = [{"url": "o", "text": " ".join(base)}]
    for n in (1, 3, 6, 12, 25):  # copies with n words replaced: fewer shared image values as n grows
        recs.append({"url": f"e{n}", "text": " ".join(base[: 150 - n] + words[300 + 10 * n : 300 + 11 * n])})
    recs.append({"url": "z", "text": " ".join(words[450:600])})
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "r.jsonl", recs)), create_with=Settings(bottomk=32, minhash_perms=32))
    gold = tmp_path / "gold.csv"
    gold.write_text("o,e1\no,e3\no,e6\ne1,e3\n")
    supports = (32, 30, 28, 26, 24, 20)
    ev = evaluate(idx, str(gold), supports=supports)
    with idx.reader() as con:
        images = {m: {d: v.tolist() for d, v in read_images(con, m).items()} for m in ("bottomk", "minhash")}
        ids = dict(con.execute("SELECT url, doc_id FROM documents").fetchall())
        signatures = dict(con.execute("SELECT doc_id, signature FROM fp_minhash").fetchall())
    # the min-hash image is the set of values its permutations selected
    assert all(images["minhash"][d] == sorted(set(signatures[d])) for d in signatures)
    assert any(len(images["minhash"][d]) < 32 for d in signatures)  # two permutations selected one shingle
    want = {(min(ids[a], ids[b]), max(ids[a], ids[b])) for a, b in (("o", "e1"), ("o", "e3"), ("o", "e6"), ("e1", "e3"))}
    assert [(r["image"], r["support"]) for r in ev.sweep] == [(m, k) for m in ("bottomk", "minhash") for k in supports]
    for image in ("bottomk", "minhash"):
        recalls = []
        for r in (r for r in ev.sweep if r["image"] == image):
            truth = brute_force(images[image], r["support"])
            found = clusters_to_pairs(m for m, _ in truth)
            common = len(found & want)
            assert (r["found_pairs"], r["common_pairs"], r["clusters"]) == (len(found), common, len(truth))
            assert r["precision"] == pytest.approx(common / len(found) if found else 1.0)
            assert r["recall"] == pytest.approx(common / len(want))
            recalls.append(r["recall"])
        assert recalls == sorted(recalls) and recalls[0] < recalls[-1], image  # a lower support joins more
    # the default sweep: ceil(t * 32) for t = 0.8 ... 1; its bottom-k row at the index's support is the kept clustering
    ev = evaluate(idx, str(gold))
    assert [r["support"] for r in ev.sweep if r["image"] == "bottomk"] == list(sweep_supports(32)) == [32, 31, 29, 28, 26]
    at = next(r for r in ev.sweep if r["image"] == "bottomk" and r["support"] == Settings(bottomk=32).support)
    assert {k: at[k] for k in ev.comparator["clusters:concept"]} == ev.comparator["clusters:concept"]
    assert evaluate(idx, str(gold), supports=()).sweep == []
    with idx.reader() as con:  # stored with the image in the method name and the support as the threshold
        rows = con.execute("SELECT method, threshold, value FROM evaluations WHERE run_id = 2 AND measure = 'found_pairs' AND method LIKE 'sweep:%'").fetchall()
    assert sorted(rows) == sorted((f"sweep:{r['image']}", float(r["support"]), float(r["found_pairs"])) for r in ev.sweep)


def test_evaluate_options_on_the_command_line(tmp_path):
    from neardup.cli.app import app
    from typer.testing import CliRunner

    recs = [{"url": u, "text": " ".join(f"w{i}" for i in range(120))} for u in ("a", "b")]
    ingest(Index(tmp_path / "i"), str(write_jsonl(tmp_path / "r.jsonl", recs)))
    gold = tmp_path / "g.csv"
    gold.write_text("a,b\n")
    base = ["evaluate", "--index", str(tmp_path / "i"), "--gold", str(gold)]
    run = lambda *a: CliRunner().invoke(app, [*base, *a], terminal_width=250)  # noqa: E731
    r = run("--support-sweep", "100,90", "--thresholds", "0.9,1")
    assert r.exit_code == 0, r.output
    assert "Concept clusters mined afresh" in r.output and "Pairs at or above each similarity threshold" in r.output
    with Index(tmp_path / "i").reader() as con:
        got = con.execute("SELECT DISTINCT method, threshold FROM evaluations WHERE run_id = 1 AND threshold IS NOT NULL "
                          "AND measure = 'found_pairs' ORDER BY ALL").fetchall()
    assert got == [("jaccard", 0.9), ("jaccard", 1.0), ("simhash", 0.9), ("simhash", 1.0),
                   ("sweep:bottomk", 90.0), ("sweep:bottomk", 100.0), ("sweep:minhash", 90.0), ("sweep:minhash", 100.0)]
    r = run("--support-sweep", "none", "--bits", "none")
    assert r.exit_code == 0 and "Concept clusters" not in r.output and "Simhash groups" not in r.output
    r = run("--bits", "3")
    assert r.exit_code == 0 and "groups 3 bits" in r.output
    for bad in (["--support-sweep", "lots"], ["--thresholds", "high"], ["--bits", "x"]):
        r = run(*bad)
        assert r.exit_code == 2, bad
    r = run("--support-sweep", "500")
    assert r.exit_code == 2 and "image size" in r.output
    r = run("--measures", "edit,jaccardish")
    assert r.exit_code == 2 and "unknown similarity measure 'jaccardish'" in r.output
    r = CliRunner().invoke(app, ["evaluate", "--index", str(tmp_path / "i")])
    assert r.exit_code == 2 and "nothing to compare with" in r.output


def test_bad_reference_files_are_named_and_store_nothing(tmp_path):
    from neardup.cli.app import app
    from typer.testing import CliRunner

    recs = [{"url": u, "text": " ".join(f"w{i}" for i in range(120))} for u in ("a", "b")]
    ingest(Index(tmp_path / "i"), str(write_jsonl(tmp_path / "r.jsonl", recs)))
    one_column = tmp_path / "one.csv"
    one_column.write_text("a,b\nc\n")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"a,b\n\xff\xfe,\x00\n")
    cases = [
        (["--gold", str(tmp_path / "missing.csv")], "missing.csv: cannot read the reference file"),
        (["--gold", str(one_column)], "one.csv: line 2: expected two columns, got 1"),
        (["--gold-clusters", str(binary)], "bin.csv: not UTF-8 text"),
    ]
    for args, message in cases:
        r = CliRunner().invoke(app, ["evaluate", "--index", str(tmp_path / "i"), *args], terminal_width=250)
        assert r.exit_code == 2 and message in r.output, r.output
    with Index(tmp_path / "i").reader() as con:
        assert con.execute("SELECT count(*) FROM evaluations").fetchall() == [(0,)]
