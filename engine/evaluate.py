"""``neardup evaluate``: the seeds' comparisons of found duplicates with a reference.

* **Comparator** (000, section 3, item 8): for a method and threshold, the
  number of pairs in the reference list, the number found, the reference pairs
  not found ("unique reference pairs"), the found pairs not in the reference
  ("unique found pairs") and the pairs in both; the two unique lists are
  written as CSV.
* **Pair precision, recall, F1** per pair method, and per similarity
  threshold (the layout of 001's tables: one row per threshold).
* **Concept clusters by support** (001 tables 2-4 and 6): the clusters of
  documents sharing >= k image elements, mined afresh and timed at each k, for
  the bottom-k image ("n minimal elements in a permutation") and the min-hash
  image ("minimal elements in n permutations").
* **Cluster Pr, Re, F1, CPr** exactly as 004 defines them: each reference
  cluster g_i is matched with the found cluster f(g_i) sharing most members;
  ``Pr_i = |f(g_i) ∩ g_i| / |f(g_i)|``, ``Re_i = |f(g_i) ∩ g_i| / |g_i|``; Pr and
  Re are their averages weighted by ``|g_i| / |R|`` (R: all reference
  members); ``F1 = 2 Pr Re / (Pr + Re)``; ``CPr_i`` is the share of the pairs
  of found cluster c_i whose two members share a reference cluster, and CPr
  their mean.
* **Pooled evaluation** (003): the union of every method's pairs, verified by
  a text similarity, is the reference; recall, precision, F1 and the Dice
  matrix between methods.
* **Report 002's view**: group sizes, the ten largest groups and the
  distances checked, per simhash bit budget.

Reference pairs and clusters name documents by url (or by doc id); a url
stands for its latest version, and a relative path (``dir/x.html`` or
``file://dir/x.html``) stands for the one ingested ``file:///`` url that ends
with it.

Everything is computed on a read-only connection; the writer is taken only
to store the results in ``evaluations``.
"""

from __future__ import annotations

import csv
import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import combinations
from pathlib import Path

import numpy as np
import pyarrow as pa

from .errors import InputError, SettingsMismatch
from .arrays import unique

Pair = tuple[int, int]


def method_order(name: str) -> list:
    """Sort key of method names with their numbers in numeric order (a2 before a10)."""
    return [int(t) if i % 2 else t for i, t in enumerate(re.split(r"(\d+)", name))]


def comparator(found: set[Pair], gold: set[Pair]) -> dict[str, int]:
    """000's Comparator: its five numbers."""
    common = len(found & gold)
    return {
        "gold_pairs": len(gold),
        "found_pairs": len(found),
        "unique_gold_pairs": len(gold) - common,
        "unique_found_pairs": len(found) - common,
        "common_pairs": common,
    }


def pair_scores(found: set[Pair], gold: set[Pair]) -> dict[str, float]:
    common = len(found & gold)
    p = common / len(found) if found else 1.0
    r = common / len(gold) if gold else 1.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def cluster_scores(found: list[set[int]], gold: list[set[int]]) -> dict[str, float]:
    """004's Pr, Re, F1 and CPr of found clusters against reference clusters.

    A clustering in 004 is a partition: a reference member that no found cluster holds is in a
    found cluster of its own (a singleton). ``f(g)`` is the found cluster sharing most members
    with ``g``; ties go to the smaller cluster, then to the earlier one."""
    total = sum(len(g) for g in gold)
    holding: dict[int, list[int]] = {}
    for i, c in enumerate(found):
        for d in c:
            holding.setdefault(d, []).append(i)
    pr = re = 0.0
    for g in gold:
        overlap = Counter(i for d in g for i in holding.get(d, ()))
        # candidates (common members, -size, -position); an unclustered member is a singleton
        best = max(((n, -len(found[i]), -i) for i, n in overlap.items()), default=(0, 0, 0))
        if any(d not in holding for d in g):
            best = max(best, (1, -1, 1))
        inter, size = best[0], -best[1]
        pr += len(g) / total * (inter / size if size else 0.0)
        re += len(g) / total * (inter / len(g))
    labels: dict[int, set[int]] = {}
    for j, g in enumerate(gold):
        for d in g:
            labels.setdefault(d, set()).add(j)
    one_label = all(len(s) == 1 for s in labels.values())
    cprs = []
    for c in found:
        k = len(c)
        if k < 2:
            continue
        if one_label:  # pairs inside a reference cluster: sum of C(n_j, 2) over its labels
            same = sum(n * (n - 1) // 2 for n in Counter(next(iter(labels[d])) for d in c if d in labels).values())
        else:  # overlapping reference clusters: a pair counts once if some cluster holds both
            same = sum(1 for t, s in combinations(sorted(c), 2) if labels.get(t, set()) & labels.get(s, set()))
        cprs.append(same / (k * (k - 1) // 2))
    return {
        "Pr": pr, "Re": re, "F1": 2 * pr * re / (pr + re) if pr + re else 0.0,
        "CPr": sum(cprs) / len(cprs) if cprs else 0.0,
    }


def text_similarity(a: str, b: str, cutoff: float = 0.0) -> float:
    """Normalised edit similarity of two texts, ``1 - indel distance / (len a + len b)``: the
    measure of Perl's String::Similarity (003's check), computed by rapidfuzz. Below
    ``cutoff`` it may return 0."""
    return float(edit_similarities([a], [b], cutoff)[0])


def edit_similarities(a: list[str], b: list[str], cutoff: float = 0.0) -> np.ndarray:
    """``text_similarity`` of each pair ``(a[i], b[i])``, computed by rapidfuzz on every core."""
    from rapidfuzz import fuzz, process

    if not a:
        return np.zeros(0)
    return process.cpdist(a, b, scorer=fuzz.ratio, score_cutoff=cutoff * 100, workers=-1).astype(np.float64) / 100


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
    from . import text

    df: Counter = Counter()
    n = 0
    for batch in con.sql(f"SELECT {FINGERPRINTED_TEXT} FROM documents").to_arrow_reader(2000):
        normal = text.normal_form(batch.column(0).cast(pa.large_string()))
        for ws in text.words(normal).to_pylist():
            df.update(set(ws))
            n += 1
    return {t: math.log(1 + n / c) for t, c in df.items()}


MEASURES = ("edit", "weighted-jaccard", "cosine")


def check_measures(names) -> tuple[str, ...]:
    bad = [m for m in names if m not in MEASURES]
    if bad:
        raise InputError(f"unknown similarity measure {bad[0]!r}", hint=f"choose from {', '.join(MEASURES)}")
    return tuple(names)


def similarities(con, measure: str, pairs: list[Pair], texts: dict[int, str], cutoff: float = 0.0,
                 idf: dict[str, float] | None = None) -> np.ndarray:
    """One of ``MEASURES`` for each pair of documents (texts by doc id); below ``cutoff`` a
    similarity may read 0. ``idf``: the collection's weights when already computed."""
    check_measures([measure])
    if measure == "edit":
        return edit_similarities([texts[a] for a, _ in pairs], [texts[b] for _, b in pairs], cutoff)
    f = _word_measure(con, measure, idf)
    return np.array([f(texts[a], texts[b]) for a, b in pairs], dtype=np.float64)


def _word_measure(con, measure: str, idf: dict[str, float] | None = None):
    """``(text a, text b) -> similarity`` for weighted-jaccard or cosine over the texts' words."""
    from . import text

    weights = idf if idf is not None else _idf(con)

    @lru_cache(maxsize=4096)
    def counts(t: str) -> Counter:  # a text is compared with several others: tokenized once
        return Counter(text.words(text.normal_form(pa.array([t], pa.large_string()))).to_pylist()[0])

    if measure == "weighted-jaccard":
        return lambda a, b: weighted_jaccard(set(counts(a)), set(counts(b)), weights)
    return lambda a, b: tfidf_cosine(counts(a), counts(b), weights)


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
    names = sorted(found, key=method_order)
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


_CSV_FORM = ("a reference file is CSV with two columns: url (or doc id) pairs for --gold, "
             "url (or doc id) and cluster label for --gold-clusters; a header line is optional")


def _read_csv(path: str) -> list[list[str]]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.reader(fh) if r and any(x.strip() for x in r)]
    except OSError as exc:
        raise InputError(f"{path}: cannot read the reference file: {exc.strerror}", hint="check the path given with --gold / --gold-clusters") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})", hint=f"save it as UTF-8; {_CSV_FORM}") from exc
    for i, r in enumerate(rows, start=1):
        if len(r) < 2:
            raise InputError(f"{path}: line {i}: expected two columns, got {len(r)}", hint=_CSV_FORM)
    return [[x.strip() for x in r] for r in rows]


def clusters_to_pairs(groups) -> set[Pair]:
    return {p for g in groups for p in combinations(sorted(g), 2)}


@dataclass
class Evaluation:
    run_id: int = 0
    #: method -> 000's Comparator and precision/recall/F1 of all its pairs (clusterings: ``clusters:<m>``)
    comparator: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the same per similarity threshold: dicts of method, threshold, the Comparator, precision, recall, f1
    by_threshold: list[dict] = field(default_factory=list)
    #: method -> (reference pairs it misses, its pairs not in the reference)
    unique: dict[str, tuple[list[Pair], list[Pair]]] = field(default_factory=dict)
    #: 004's measures per clustering
    cluster: dict[str, dict[str, float]] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    pooled: dict[str, dict[str, float]] = field(default_factory=dict)
    pool: tuple[int, int] = (0, 0)  # pairs in the pool, of which verified
    verify: tuple[str, float] = ("edit", 0.8)
    dice: dict[tuple[str, str], float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per ingest stage, all batches
    #: report 002's view per bit budget: ({group size: groups}, [(size, main page url)] of the ten largest)
    simhash_groups: dict[int, tuple[dict[int, int], list[tuple[int, str]]]] = field(default_factory=dict)
    #: report 002's distances checked per bit budget: 65 counts, index = differing bits
    simhash_distances: dict[int, list[int]] = field(default_factory=dict)
    #: 001 tables 2-4 and 6: concept clusters mined afresh at each support k, per image
    sweep: list[dict] = field(default_factory=list)
    #: seconds of the sweep's neighbour search, per image (once, at the lowest support)
    sweep_search: dict[str, float] = field(default_factory=dict)
    #: 004's measures asked for the unique lists, and their values: pair -> {measure: similarity}
    measures: tuple[str, ...] = ()
    pair_similarity: dict[Pair, dict[str, float]] = field(default_factory=dict)
    urls: dict[int, str] = field(default_factory=dict)  # of the documents in the unique lists
    seconds: float = 0.0

    def rows(self) -> list[dict]:
        """Every number as a ``(method, threshold, measure, value)`` row (the ``evaluations`` table)."""
        out = []

        def add(method, threshold, measure, value):
            out.append({"method": method, "threshold": threshold, "measure": measure, "value": float(value)})

        for m, scores in self.comparator.items():
            for k, v in scores.items():
                add(m, None, k, v)
        for r in self.by_threshold:
            for k, v in r.items():
                if k not in ("method", "threshold"):
                    add(r["method"], r["threshold"], k, v)
        for m, scores in self.cluster.items():
            for k, v in scores.items():
                add(f"clusters:{m}", None, k, v)
        for r in self.sweep:
            for k, v in r.items():
                if k not in ("image", "support"):
                    add(f"sweep:{r['image']}", float(r["support"]), k, v)
        for image, v in self.sweep_search.items():
            add(f"sweep:{image}", None, "seconds:neighbours", v)
        for m, scores in self.pooled.items():
            for k, v in scores.items():
                add(m, self.verify[1], f"pooled_{k}", v)
        for (a, b), v in self.dice.items():
            add(a, None, f"dice:{b}", v)
        for b, (hist, _) in self.simhash_groups.items():
            for size, n in hist.items():
                add(f"greedy002_{b}", None, f"groups_of_size:{size}", n)
        for b, counts in self.simhash_distances.items():
            for d, n in enumerate(counts):
                if n:
                    add(f"greedy002_{b}", float(d), "compared", n)
        for k, v in self.timings.items():
            add("ingest", None, f"seconds:{k}", v)
        return out


THRESHOLDS = (0.8, 0.85, 0.9, 0.95, 1.0)

#: the images the support sweep mines: fingerprint method -> (table, column)
SWEEP_IMAGES = {"bottomk": ("fp_bottomk", "sketch"), "minhash": ("fp_minhash", "signature")}


def sweep_supports(size: int, thresholds: tuple[float, ...] = THRESHOLDS) -> tuple[int, ...]:
    """The supports of the default sweep: ``ceil(t * size)`` for each similarity threshold, largest first."""
    return tuple(sorted({math.ceil(t * size - 1e-9) for t in thresholds}, reverse=True))


def image_size(settings, image: str) -> int:
    return settings.bottomk if image == "bottomk" else settings.minhash_perms


def read_images(con, image: str) -> dict[int, np.ndarray]:
    """Each document's image as a sorted array of distinct values. The min-hash image is the set
    of its signature's values (000's "minimal elements in n permutations": the shingle hashes the
    permutations select, merged by value whichever permutation selected them)."""
    table, col = SWEEP_IMAGES[image]
    return {d: unique(np.asarray(v, dtype=np.uint64)) for d, v in con.execute(f"SELECT doc_id, {col} FROM {table}").fetchall()}


def support_sweep(images: dict[int, np.ndarray], supports: tuple[int, ...], gold: set[Pair]) -> tuple[list[dict], float]:
    """001 tables 2-4 and 6: for each support k, the concept clusters of the whole index mined
    from scratch, judged as pairs; also the seconds of the neighbour search.

    The neighbour pairs and their common values are found once, at the lowest support (the pairs
    sharing >= k values are among them for every larger k), as 000 built its inverted table once;
    each row's ``seconds`` is then the miner's at that support: keeping the pairs with >= k common
    values and mining the maximal sets (the compiled kernels are loaded before timing)."""
    from .clusters import _all_neighbours, candidate_overlaps, neighbour_lists
    from .concepts import mine

    if not supports:
        return [], 0.0
    if images:  # load the compiled kernels before timing: a document and its copy
        x = next(iter(images.values()))
        two = {0: x, 1: x.copy()}
        mine(two, 1, neighbours=_all_neighbours(two, 1))
    t0 = time.perf_counter()
    a, b, common = candidate_overlaps(images, min(supports))
    search = time.perf_counter() - t0
    rows = []
    for k in supports:
        t0 = time.perf_counter()
        keep = common >= k
        found = mine(images, k, neighbours=neighbour_lists(a[keep], b[keep]))
        seconds = time.perf_counter() - t0
        pairs = clusters_to_pairs(c.members for c in found)
        rows.append({"support": k, "seconds": seconds, "clusters": len(found), **comparator(pairs, gold), **pair_scores(pairs, gold)})
    return rows, search


def evaluate(index, gold_pairs: str | None = None, gold_clusters: str | None = None, out: str | None = None,
             thresholds: tuple[float, ...] = THRESHOLDS, pooled: bool = False, verify_at: float = 0.8,
             bits: tuple[int, ...] = (5, 10, 15), measure: str = "edit", supports: tuple[int, ...] | None = None,
             measures: tuple[str, ...] = ()) -> Evaluation:
    """Compare every pair method and clustering of the index with the reference (and, with
    ``pooled``, every pair method with the verified union of all of them); store the results
    in ``evaluations`` and, with ``out``, write every table, the pictures and ``report.html``.

    ``supports``: the concept-cluster support sweep (``support_sweep``) of each image the index
    has; None: ``sweep_supports`` of the image's size when a reference is given; ``()``: none.
    ``measures``: 004's similarities (``MEASURES``) to compute for the pairs of the unique lists."""
    from .settings import EQUAL_KEY_PAIRS, Settings
    from .store import catalog

    if not gold_pairs and not gold_clusters and not pooled:
        raise InputError("nothing to compare with", hint="pass --gold pairs.csv, --gold-clusters labels.csv or --pooled")
    check_measures([measure, *measures])
    t0 = time.perf_counter()
    ev = Evaluation(verify=(measure, verify_at), measures=tuple(measures))
    with index.reader() as con:
        settings = Settings.from_dict(catalog.read_settings(con))
        images = [m for m in SWEEP_IMAGES if m in settings.methods]
        if supports and not images:
            raise SettingsMismatch("the support sweep mines concept clusters of bottom-k or min-hash images; this index has neither",
                                   hint="drop --support-sweep, or create the index with bottomk or minhash in --methods")
        for m in images:
            bad = [k for k in supports or () if not 1 <= k <= image_size(settings, m)]
            if bad:
                raise InputError(f"support sweep: {bad[0]} is not between 1 and the {m} image size {image_size(settings, m)}")
        gold_p: set[Pair] | None = None
        gold_c: list[set[int]] | None = None
        if gold_pairs:
            gold_p, ev.unknown["gold pairs"] = read_gold_pairs(con, gold_pairs)
        if gold_clusters:
            gold_c, ev.unknown["gold cluster members"] = read_gold_clusters(con, gold_clusters)
            if gold_p is None:
                gold_p = clusters_to_pairs(gold_c)
        pairs_by_method: dict[str, list[tuple[int, int, float]]] = {}
        for a, b, m, s in con.execute("SELECT doc_a, doc_b, method, similarity FROM duplicates ORDER BY method, doc_a, doc_b").fetchall():
            pairs_by_method.setdefault(m, []).append((a, b, s))
        found = {m: {(a, b) for a, b, _ in rows} for m, rows in pairs_by_method.items()}
        clusters_by_method: dict[str, list[set[int]]] = {}
        for m, members in con.execute(
            "SELECT c.method, list(m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id) GROUP BY c.cluster_id, c.method ORDER BY c.cluster_id"
        ).fetchall():
            clusters_by_method.setdefault(m, []).append(set(members))
        ev.timings = dict(sorted(con.execute("SELECT stage, sum(seconds) FROM batch_timings GROUP BY stage").fetchall(),
                                 key=lambda r: _stage_order(r[0])))
        _simhash_view(con, ev, bits, settings)
        weighted = {"weighted-jaccard", "cosine"} & ({measure} if pooled else set()) | set(measures)
        idf = _idf(con) if weighted else None  # a scan of every text: at most once
        if pooled:
            _pooled(con, ev, found, verify_at, measure, idf)
        if gold_p is not None:
            for m in sorted(found, key=method_order):
                _judge(ev, m, found[m], gold_p)
                for t in () if m in EQUAL_KEY_PAIRS else thresholds:  # equal keys: every row would be the one above
                    cut = {(a, b) for a, b, s in pairs_by_method[m] if s is not None and s >= t - 1e-12}
                    ev.by_threshold.append({"method": m, "threshold": t, **comparator(cut, gold_p), **pair_scores(cut, gold_p)})
            for m, groups in sorted(clusters_by_method.items()):
                _judge(ev, f"clusters:{m}", clusters_to_pairs(groups), gold_p)
                if gold_c is not None:
                    ev.cluster[m] = cluster_scores(groups, gold_c)
            for image in images:
                ks = supports if supports is not None else sweep_supports(image_size(settings, image), thresholds)
                if ks:
                    rows, ev.sweep_search[image] = support_sweep(read_images(con, image), tuple(ks), gold_p)
                    ev.sweep += [{"image": image, **r} for r in rows]
            listed = sorted({p for lists in ev.unique.values() for ps in lists for p in ps})
            listed_ids = sorted({d for p in listed for d in p})
            ev.urls = _by_id(con, listed_ids, "url")
            if measures and listed:
                texts = _by_id(con, listed_ids, "text")
                sims = {m: similarities(con, m, listed, texts, idf=idf).tolist() for m in measures}
                ev.pair_similarity = {p: {m: sims[m][i] for m in measures} for i, p in enumerate(listed)}
    rows = ev.rows()
    gold_desc = json.dumps({"pairs": gold_pairs, "clusters": gold_clusters,
                            "pooled": f"{measure} >= {verify_at:g}" if pooled else None})
    with index.writer() as w:
        ev.run_id = int(w.con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM evaluations").fetchall()[0][0])
        now = datetime.now()
        w.con.executemany("INSERT INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?)",
                          [[ev.run_id, now, gold_desc, r["method"], r["threshold"], r["measure"], r["value"]] for r in rows])
    ev.seconds = time.perf_counter() - t0
    if out:
        from . import report
        from .storage import guard

        with guard(Path(out), "writing the evaluation report",
                   f"The evaluation is stored in the index (evaluations, run {ev.run_id}); only the report files are missing"):
            report.write(ev, Path(out))
    return ev


#: the stages of a batch in the order they run (000 times shingling, images, then clustering)
STAGES = ("prepare: html", "prepare: normal form", "prepare: words", "prepare: shingles", "prepare: fingerprint", "prepare: terms",
          "read+prepare", "store", "lexical", "candidate keys", "candidates", "candidates: simhash scan", "verify", "store pairs", "clusters", "clusters: neighbours",
          "clusters: extended", "clusters: mine", "clusters: insert", "commit", "postings")


def _stage_order(stage: str) -> tuple[int, list]:
    key = "prepare: fingerprint" if stage.startswith("prepare: fingerprint ") else stage  # one per method
    return (STAGES.index(key) if key in STAGES else len(STAGES)), method_order(stage)


def _judge(ev: Evaluation, method: str, found: set[Pair], gold: set[Pair]) -> None:
    """The Comparator and pair scores of all of a method's pairs, and its unique lists."""
    ev.comparator[method] = {**comparator(found, gold), **pair_scores(found, gold)}
    ev.unique[method] = (sorted(gold - found), sorted(found - gold))


#: the text a document's fingerprints were computed from (docs/sql.md: ``documents.content``)
FINGERPRINTED_TEXT = "CASE WHEN content = 'main' THEN main_text ELSE text END"


def _by_id(con, ids: list[int], column: str) -> dict[int, str]:
    """doc id -> one column of ``documents`` for the given ids: ``url``, or ``text``, which reads the
    fingerprinted text (the main content under ``content = main``), the one the pairs are about."""
    if not ids:
        return {}
    con.register("want_ids", pa.table({"doc_id": pa.array(ids, pa.int64())}))
    expr = FINGERPRINTED_TEXT if column == "text" else column
    try:
        return dict(con.execute(f"SELECT d.doc_id, {expr} FROM documents d SEMI JOIN want_ids w ON d.doc_id = w.doc_id").fetchall())
    finally:
        con.unregister("want_ids")


def simhash_view(ids: np.ndarray, lengths: np.ndarray, hashes: np.ndarray, urls: dict[int, str], bits: int,
                 seed: int) -> tuple[dict[int, int], list[tuple[int, str]], list[int]]:
    """Report 002's view of one bit budget: ``{group size: groups}`` (singletons included), the
    ten largest groups as ``(size, main page url)`` (ties: the earlier main page by doc id), and
    the 65 counts of the distances checked."""
    from . import clusterings

    distances = np.zeros(65, dtype=np.int64)
    groups = clusterings.greedy002_groups(ids, lengths, hashes, bits, seed, distances=distances)
    hist = dict(sorted(Counter(len(g) for _, g in groups).items()))
    top = [(len(g), urls[main]) for main, g in sorted(groups, key=lambda x: (-len(x[1]), x[0]))[:10]]
    return hist, top, distances.tolist()


def _simhash_view(con, ev: Evaluation, bits: tuple[int, ...], settings) -> None:
    """Report 002's histograms of group sizes per bit budget, its ten largest groups, and the
    distances it checked."""
    fp = "simhash_hp" if "simhash_hp" in settings.methods else "simhash" if "simhash" in settings.methods else None
    if fp is None or not bits:
        return
    t = con.sql(f"SELECT f.doc_id, d.n_words, f.simhash, d.url FROM fp_{fp} f JOIN documents d USING (doc_id) ORDER BY f.doc_id").to_arrow_table()
    if t.num_rows == 0:
        return
    ids, lens, hs = (t.column(c).to_numpy() for c in ("doc_id", "n_words", "simhash"))
    url = dict(zip(ids.tolist(), t.column("url").to_pylist()))
    for b in bits:
        hist, top, dist = simhash_view(ids, lens, hs, url, b, settings.seed)
        ev.simhash_groups[b] = (hist, top)
        ev.simhash_distances[b] = dist


def _pooled(con, ev: Evaluation, found: dict[str, set[Pair]], verify_at: float, measure: str = "edit",
            idf: dict[str, float] | None = None) -> None:
    pool = sorted(set().union(*found.values())) if found else []
    texts = _by_id(con, sorted({d for p in pool for d in p}), "text")
    sim = similarities(con, measure, pool, texts, cutoff=verify_at, idf=idf)
    verified = {p for p, v in zip(pool, sim.tolist()) if v >= verify_at - 1e-12}
    ev.pool = (len(pool), len(verified))
    ev.pooled = dict(sorted(pooled_scores(found, verified).items(), key=lambda kv: (-kv[1]["f1"], method_order(kv[0]))))
    ev.dice = dice_matrix(found)
