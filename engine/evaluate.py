"""``neardup evaluate``: the seeds' comparisons of found duplicates with a reference.

* **Comparator** (000, section 3, item 8): for a method, the number of pairs
  in the reference list, the number found, the reference pairs not found
  ("unique reference pairs"), the found pairs not in the reference ("unique
  found pairs") and the pairs in both; the two unique lists are written as CSV.
* **Pair precision, recall, F1** per pair method, and per similarity
  threshold (the layout of 001's tables: one row per threshold).
* **Cluster Pr, Re, F1, CPr** exactly as 004 defines them: each reference
  cluster g_i is matched with the found cluster f(g_i) sharing most members;
  ``Pr_i = |f(g_i) ∩ g_i| / |f(g_i)|``, ``Re_i = |f(g_i) ∩ g_i| / |g_i|``; Pr and
  Re are their averages weighted by ``|g_i| / |R|`` (R: all reference
  members); ``F1 = 2 Pr Re / (Pr + Re)``; ``CPr_i`` is the share of the pairs
  of found cluster c_i whose two members share a reference cluster, and CPr
  their mean.

Reference pairs and clusters name documents by url (or by doc id); a url
stands for its latest version, and a relative path (``dir/x.html`` or
``file://dir/x.html``) stands for the one ingested ``file:///`` url that ends
with it.
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import InputError, SettingsMismatch

Pair = tuple[int, int]


def comparator(found: set[Pair], gold: set[Pair]) -> dict[str, int]:
    """000's Comparator: its five numbers."""
    return {
        "gold_pairs": len(gold),
        "found_pairs": len(found),
        "unique_gold_pairs": len(gold - found),
        "unique_found_pairs": len(found - gold),
        "common_pairs": len(found & gold),
    }


def pair_scores(found: set[Pair], gold: set[Pair]) -> dict[str, float]:
    common = len(found & gold)
    p = common / len(found) if found else 1.0
    r = common / len(gold) if gold else 1.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def cluster_scores(found: list[set[int]], gold: list[set[int]]) -> dict[str, float]:
    """004's Pr, Re, F1 and CPr of found clusters against reference clusters."""
    total = sum(len(g) for g in gold)
    pr = re = 0.0
    for g in gold:
        best = max(found, key=lambda c: (len(c & g), -len(c)), default=set())
        inter = len(best & g)
        pr += len(g) / total * (inter / len(best) if best else 0.0)
        re += len(g) / total * (inter / len(g))
    label = {d: i for i, g in enumerate(gold) for d in g}
    cprs = []
    for c in found:
        if len(c) < 2:
            continue
        pairs = list(combinations(sorted(c), 2))
        same = sum(1 for t, s in pairs if t in label and label.get(s) == label[t])
        cprs.append(same / len(pairs))
    return {
        "Pr": pr, "Re": re, "F1": 2 * pr * re / (pr + re) if pr + re else 0.0,
        "CPr": sum(cprs) / len(cprs) if cprs else 0.0,
    }


def text_similarity(a: str, b: str, cutoff: float = 0.0) -> float:
    """Normalised edit similarity of two texts, ``1 - indel distance / (len a + len b)``: the
    measure of Perl's String::Similarity (003's check), computed by rapidfuzz. Below
    ``cutoff`` it may return 0."""
    from rapidfuzz import fuzz

    return fuzz.ratio(a, b, score_cutoff=cutoff * 100) / 100


def weighted_jaccard(a: set[str], b: set[str], weight: dict[str, float]) -> float:
    """004's weighted Jaccard: ``sum w(t) over a ∩ b / sum w(t) over a ∪ b`` (weight 1 for unknown tokens)."""
    union = sum(weight.get(t, 1.0) for t in a | b)
    return sum(weight.get(t, 1.0) for t in a & b) / union if union else 0.0


def tfidf_cosine(a: dict[str, int], b: dict[str, int], idf: dict[str, float]) -> float:
    """004's cosine of TF-IDF vectors, ``r(t) = tf_r(t) * idf(t)``."""
    va = {t: n * idf.get(t, 1.0) for t, n in a.items()}
    vb = {t: n * idf.get(t, 1.0) for t, n in b.items()}
    dot = sum(v * vb[t] for t, v in va.items() if t in vb)
    na = math.sqrt(sum(v * v for v in va.values()))
    nb = math.sqrt(sum(v * v for v in vb.values()))
    return dot / (na * nb) if na and nb else 0.0


def _idf(con) -> dict[str, float]:
    """``log(1 + N / df)`` of every word of the collection (normal form, neardup's words);
    smoothed so that a word in every document still weighs something."""
    from collections import Counter

    from . import text

    df: Counter = Counter()
    n = 0
    for batch in con.sql("SELECT text FROM documents").to_arrow_reader(2000):
        normal = text.normal_form(batch.column(0).cast(pa.large_string()))
        for ws in text.words(normal).to_pylist():
            df.update(set(ws))
            n += 1
    return {t: math.log(1 + n / c) for t, c in df.items()}


MEASURES = ("edit", "weighted-jaccard", "cosine")


def similarity_function(con, measure: str):
    """A function ``(text a, text b, cutoff) -> similarity`` for one of ``MEASURES``."""
    if measure == "edit":
        return text_similarity
    if measure not in MEASURES:
        raise InputError(f"unknown similarity measure {measure!r}", hint=f"choose from {', '.join(MEASURES)}")
    from . import text

    idf = _idf(con)

    def words(t: str) -> list[str]:
        return text.words(text.normal_form(pa.array([t], pa.large_string()))).to_pylist()[0]

    if measure == "weighted-jaccard":
        return lambda a, b, cutoff=0.0: weighted_jaccard(set(words(a)), set(words(b)), idf)

    from collections import Counter

    return lambda a, b, cutoff=0.0: tfidf_cosine(Counter(words(a)), Counter(words(b)), idf)


def pooled_scores(found: dict[str, set[Pair]], verified: set[Pair]) -> dict[str, dict[str, float]]:
    """003's pooled evaluation: the verified union of every method's pairs is 100% recall;
    a method's precision is the share of its pairs that verify."""
    out = {}
    for m, pairs in found.items():
        good = len(pairs & verified)
        p = good / len(pairs) if pairs else 1.0
        r = good / len(verified) if verified else 1.0
        out[m] = {"pairs": float(len(pairs)), "precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}
    return out


def dice_matrix(found: dict[str, set[Pair]]) -> dict[tuple[str, str], float]:
    """003 table 4: ``Dice(A, B) = 2 |A ∩ B| / (|A| + |B|)`` for every two methods."""
    names = sorted(found)
    return {(a, b): (2 * len(found[a] & found[b]) / (len(found[a]) + len(found[b])) if found[a] or found[b] else 1.0)
            for i, a in enumerate(names) for b in names[i + 1 :]}


def _doc_ids(con, names: list[str]) -> dict[str, int]:
    """url or doc id -> doc id (a url's latest version); a relative file path matches the one
    ``file://`` url that ends with it; unknown names are left out."""
    urls = dict(con.execute("SELECT url, doc_id FROM latest_documents").fetchall())
    ids = {str(d) for (d,) in con.execute("SELECT doc_id FROM documents").fetchall()}
    files = [u for u in urls if u.startswith("file://")]
    out = {}
    for n in names:
        if n in urls:
            out[n] = urls[n]
        elif n in ids:
            out[n] = int(n)
        elif files and not n.startswith(("http://", "https://", "file:///")):
            tail = "/" + n.removeprefix("file://").removeprefix("./")  # file://dir/x.html is relative
            hits = [u for u in files if u.endswith(tail)]
            if len(hits) == 1:
                out[n] = urls[hits[0]]
    return out


def read_gold_pairs(con, path: str) -> tuple[set[Pair], int]:
    """Reference pairs from a CSV of two columns (more are ignored; a header is optional),
    as doc-id pairs ``(a, b)`` with ``a < b``; also how many rows named unknown documents."""
    rows = _read_csv(path)
    ids = _doc_ids(con, [x for r in rows for x in r[:2]])
    if rows and rows[0][0] not in ids and rows[0][1] not in ids:
        rows = rows[1:]  # a header
    pairs, unknown = set(), 0
    for r in rows:
        a, b = ids.get(r[0]), ids.get(r[1])
        if a is None or b is None:
            unknown += 1
        elif a != b:
            pairs.add((min(a, b), max(a, b)))
    return pairs, unknown


def read_gold_clusters(con, path: str) -> tuple[list[set[int]], int]:
    """Reference clusters from a CSV ``url,cluster_label`` (header optional)."""
    rows = _read_csv(path)
    ids = _doc_ids(con, [r[0] for r in rows])
    if rows and rows[0][0] not in ids:
        rows = rows[1:]
    groups: dict[str, set[int]] = {}
    unknown = 0
    for r in rows:
        d = ids.get(r[0])
        if d is None:
            unknown += 1
        else:
            groups.setdefault(r[1], set()).add(d)
    return [g for _, g in sorted(groups.items())], unknown


def _read_csv(path: str) -> list[list[str]]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.reader(fh) if r and any(x.strip() for x in r)]
    except OSError as exc:
        raise InputError(f"{path}: cannot read the reference file: {exc.strerror}") from exc
    for i, r in enumerate(rows, start=1):
        if len(r) < 2:
            raise InputError(f"{path}: line {i}: expected two columns, got {len(r)}")
    return [[x.strip() for x in r] for r in rows]


def clusters_to_pairs(groups: list[set[int]]) -> set[Pair]:
    return {p for g in groups for p in combinations(sorted(g), 2)}


@dataclass
class Evaluation:
    run_id: int
    rows: list[dict] = field(default_factory=list)  # method, threshold, measure, value
    comparator: dict[str, dict[str, int]] = field(default_factory=dict)
    cluster: dict[str, dict[str, float]] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    pooled: dict[str, dict[str, float]] = field(default_factory=dict)
    pool: tuple[int, int] = (0, 0)  # pairs in the pool, of which verified
    timings: dict[str, float] = field(default_factory=dict)  # seconds per ingest stage, all batches
    #: report 002's view per bit budget: ({group size: groups}, [(size, main page url)] of the ten largest)
    simhash_groups: dict[int, tuple[dict[int, int], list[tuple[int, str]]]] = field(default_factory=dict)
    dice: dict[tuple[str, str], float] = field(default_factory=dict)
    #: 001 tables 2-4: concept clusters mined afresh at each support k (most common elements first)
    sweep: list[dict] = field(default_factory=list)
    seconds: float = 0.0


THRESHOLDS = (0.8, 0.85, 0.9, 0.95, 1.0)


def sweep_supports(size: int, thresholds: tuple[float, ...] = THRESHOLDS) -> tuple[int, ...]:
    """The supports of the default sweep: ``ceil(t * size)`` for each similarity threshold, largest first."""
    return tuple(sorted({math.ceil(t * size - 1e-9) for t in thresholds}, reverse=True))


def support_sweep(con, supports: tuple[int, ...], gold: set[Pair]) -> list[dict]:
    """001 tables 2-4: for each support k, the concept clusters of the whole index mined from
    scratch (neighbours and miner, timed; the sketches are read once before), judged as pairs."""
    from .clusters import _all_neighbours
    from .concepts import mine

    sk = {d: np.asarray(v, dtype=np.uint64) for d, v in con.execute("SELECT doc_id, sketch FROM fp_bottomk").fetchall()}
    if sk:  # load the compiled kernels before timing (001 times the miner alone): a document and its copy
        x = next(iter(sk.values()))
        two = {0: x, 1: x.copy()}
        mine(two, 1, neighbours=_all_neighbours(two, 1))
    rows = []
    for k in supports:
        t0 = time.perf_counter()
        found = mine(sk, k, neighbours=_all_neighbours(sk, k))
        seconds = time.perf_counter() - t0
        pairs = clusters_to_pairs([set(c.members) for c in found])
        rows.append({"support": k, "seconds": seconds, "clusters": len(found), **comparator(pairs, gold), **pair_scores(pairs, gold)})
    return rows


def evaluate(index, gold_pairs: str | None = None, gold_clusters: str | None = None, out: str | None = None,
             thresholds: tuple[float, ...] = THRESHOLDS, pooled: bool = False, verify_at: float = 0.8,
             bits: tuple[int, ...] = (5, 10, 15), measure: str = "edit", supports: tuple[int, ...] | None = None) -> Evaluation:
    """Compare every pair method and clustering of the index with the reference (and, with
    ``pooled``, every pair method with the verified union of all of them); store the results
    in ``evaluations`` and, with ``out``, write them as CSV files.

    ``supports``: the concept-cluster support sweep (``support_sweep``); None: ``sweep_supports``
    of the bottom-k size when the index has bottom-k sketches and a reference is given; ``()``: none."""
    if not gold_pairs and not gold_clusters and not pooled:
        raise InputError("nothing to compare with", hint="pass --gold pairs.csv, --gold-clusters labels.csv or --pooled")
    t0 = time.perf_counter()
    with index.writer() as w:
        con = w.con
        run_id = int(con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM evaluations").fetchall()[0][0])
        ev = Evaluation(run_id)
        gold_p: set[Pair] | None = None
        gold_c: list[set[int]] | None = None
        if gold_pairs:
            gold_p, ev.unknown["gold pairs"] = read_gold_pairs(con, gold_pairs)
        if gold_clusters:
            gold_c, ev.unknown["gold cluster members"] = read_gold_clusters(con, gold_clusters)
            if gold_p is None:
                gold_p = clusters_to_pairs(gold_c)
        pairs_by_method: dict[str, list[tuple[int, int, float]]] = {}
        for a, b, m, s in con.execute("SELECT doc_a, doc_b, method, similarity FROM duplicates").fetchall():
            pairs_by_method.setdefault(m, []).append((a, b, s))
        clusters_by_method: dict[str, list[set[int]]] = {}
        for m, members in con.execute(
            "SELECT c.method, list(m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id) GROUP BY c.cluster_id, c.method ORDER BY c.cluster_id"
        ).fetchall():
            clusters_by_method.setdefault(m, []).append(set(members))
        ev.timings = dict(con.execute("SELECT stage, sum(seconds) FROM batch_timings GROUP BY stage ORDER BY stage").fetchall())
        for k, v in ev.timings.items():
            ev.rows.append({"method": "ingest", "threshold": None, "measure": f"seconds:{k}", "value": v})
        _simhash_view(con, ev, bits, w.settings, out)
        if pooled:
            _pooled(con, ev, {m: {(a, b) for a, b, _ in rows} for m, rows in pairs_by_method.items()}, verify_at,
                    similarity_function(con, measure))
        for m, rows in sorted(pairs_by_method.items()):
            if gold_p is None:
                break
            found = {(a, b) for a, b, _ in rows}
            ev.comparator[m] = comparator(found, gold_p)
            for k, v in {**ev.comparator[m], **pair_scores(found, gold_p)}.items():
                ev.rows.append({"method": m, "threshold": None, "measure": k, "value": float(v)})
            for t in thresholds:
                cut = {(a, b) for a, b, s in rows if s is not None and s >= t - 1e-12}
                for k, v in pair_scores(cut, gold_p).items():
                    ev.rows.append({"method": m, "threshold": t, "measure": k, "value": v})
                ev.rows.append({"method": m, "threshold": t, "measure": "found_pairs", "value": float(len(cut))})
            if out:
                _write_pairs(Path(out) / f"unique_gold_pairs_{m}.csv", sorted(gold_p - found), con)
                _write_pairs(Path(out) / f"unique_found_pairs_{m}.csv", sorted(found - gold_p), con)
        for m, groups in sorted(clusters_by_method.items()):
            if gold_p is None:
                break
            found = clusters_to_pairs(groups)
            ev.comparator[f"clusters:{m}"] = comparator(found, gold_p)
            for k, v in {**ev.comparator[f"clusters:{m}"], **pair_scores(found, gold_p)}.items():
                ev.rows.append({"method": f"clusters:{m}", "threshold": None, "measure": k, "value": float(v)})
            if gold_c is not None:
                ev.cluster[m] = cluster_scores(groups, gold_c)
                for k, v in ev.cluster[m].items():
                    ev.rows.append({"method": f"clusters:{m}", "threshold": None, "measure": k, "value": v})
        has_bottomk = "bottomk" in w.settings.methods
        if supports and not has_bottomk:
            raise SettingsMismatch("the support sweep mines concept clusters of bottom-k sketches; this index has none",
                                   hint="drop --support-sweep, or create the index with bottomk in --methods")
        if supports is None:
            supports = sweep_supports(w.settings.bottomk, thresholds) if has_bottomk else ()
        bad = [k for k in supports if not 1 <= k <= w.settings.bottomk]
        if bad:
            raise InputError(f"support sweep: {bad[0]} is not between 1 and the sketch size {w.settings.bottomk}")
        if gold_p is not None and supports:
            ev.sweep = support_sweep(con, tuple(supports), gold_p)
            for r in ev.sweep:
                for k, v in r.items():
                    if k != "support":
                        ev.rows.append({"method": "concept_sweep", "threshold": float(r["support"]), "measure": k, "value": float(v)})
        ev.seconds = time.perf_counter() - t0
        gold_desc = json.dumps({"pairs": gold_pairs, "clusters": gold_clusters})
        con.executemany(
            "INSERT INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?)",
            [[run_id, datetime.now(), gold_desc, r["method"], r["threshold"], r["measure"], r["value"]] for r in ev.rows],
        )
    if out:
        from . import report

        _write_rows(Path(out) / "evaluation.csv", ev.rows)
        report.write_html(ev, Path(out), report.figures(ev, Path(out)))
    return ev


def _simhash_view(con, ev: Evaluation, bits: tuple[int, ...], settings, out: str | None) -> None:
    """Report 002's histograms of group sizes per bit budget, and its ten largest groups."""
    from collections import Counter

    from . import clusterings

    fp = "simhash_hp" if "simhash_hp" in settings.methods else "simhash" if "simhash" in settings.methods else None
    if fp is None or not bits:
        return
    t = con.sql(f"SELECT f.doc_id, d.n_words, f.simhash, d.url FROM fp_{fp} f JOIN documents d USING (doc_id) ORDER BY f.doc_id").to_arrow_table()
    if t.num_rows == 0:
        return
    ids, lens, hs = (t.column(c).to_numpy() for c in ("doc_id", "n_words", "simhash"))
    url = dict(zip(ids.tolist(), t.column("url").to_pylist()))
    for b in bits:
        groups = clusterings.greedy002_groups(ids, lens, hs, b, settings.seed)
        hist = dict(sorted(Counter(len(g) for _, g in groups).items()))
        top = [(len(g), url[main]) for main, g in sorted(groups, key=lambda x: (-len(x[1]), x[0]))[:10]]
        ev.simhash_groups[b] = (hist, top)
        for size, n in hist.items():
            ev.rows.append({"method": f"greedy002_{b}", "threshold": None, "measure": f"groups_of_size:{size}", "value": float(n)})
        if out:
            path = Path(out) / f"simhash_groups_{b}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow(["size", "main_page"])
                w.writerows(top)


def _pooled(con, ev: Evaluation, found: dict[str, set[Pair]], verify_at: float, sim=text_similarity) -> None:
    pool = set().union(*found.values()) if found else set()
    ids = sorted({d for p in pool for d in p})
    texts: dict[int, str] = {}
    if ids:
        import pyarrow as pa

        con.register("want_ids", pa.table({"doc_id": pa.array(ids, pa.int64())}))
        try:
            texts = dict(con.execute("SELECT d.doc_id, d.text FROM documents d SEMI JOIN want_ids w ON d.doc_id = w.doc_id").fetchall())
        finally:
            con.unregister("want_ids")
    verified = {p for p in sorted(pool) if sim(texts[p[0]], texts[p[1]], verify_at) >= verify_at - 1e-12}
    ev.pool = (len(pool), len(verified))
    ev.pooled = dict(sorted(pooled_scores(found, verified).items(), key=lambda kv: (-kv[1]["f1"], kv[0])))
    ev.dice = dice_matrix(found)
    for m, sc in ev.pooled.items():
        for k, v in sc.items():
            ev.rows.append({"method": m, "threshold": verify_at, "measure": f"pooled_{k}", "value": v})
    for (a, b), v in ev.dice.items():
        ev.rows.append({"method": a, "threshold": None, "measure": f"dice:{b}", "value": v})


def _write_pairs(path: Path, pairs: list[Pair], con) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    urls = dict(con.execute("SELECT doc_id, url FROM documents").fetchall())
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["doc_a", "url_a", "doc_b", "url_b"])
        for a, b in pairs:
            w.writerow([a, urls.get(a, ""), b, urls.get(b, "")])


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["method", "threshold", "measure", "value"])
        w.writeheader()
        w.writerows(rows)
    table = pa.table({"method": [r["method"] for r in rows], "threshold": pa.array([r["threshold"] for r in rows], pa.float64()),
                      "measure": [r["measure"] for r in rows], "value": pa.array([r["value"] for r in rows], pa.float64())})
    pq.write_table(table, path.with_suffix(".parquet"))
