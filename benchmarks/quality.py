"""Quality against known labels: neardup's pair methods and clusterings beside datasketch.

For each seed, ``neardup generate`` makes a labelled corpus from the fixtures'
real text (the WARC pages, the text records and the HTML folder; default
options: half of the originals with 1-3 variants of the kinds exact, edit,
reorder and boilerplate, and 20 framed false duplicates). Then, in the same
run:

* neardup: ``ingest`` into a fresh index with every fingerprint method and
  every pair method (``--methods`` all, ``--pairs all``), the ``concept`` and
  ``components`` clusters kept by ingest, and the other clusterings computed
  by ``rebuild --clusters``; each pair method and clustering is judged by
  ``neardup evaluate``'s comparator against the gold pairs, and each
  clustering by 004's cluster F1 and CPr against the gold clusters;
* datasketch: ``MinHash.bulk(num_perm=128)`` of each text's word 5-shingles,
  ``MinHashLSH(threshold=0.8)``, every document queried, candidates kept when
  the estimated Jaccard reaches 0.8; its pairs judged the same way, and its
  pairs' connected components as its clustering.

Printed per method: medians over the seeds of precision, recall and F1
against the gold pairs, and how many of the framed false-duplicate pairs it
reports; per clustering: 004's F1 and CPr.

    python benchmarks/quality.py --seeds 5
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import networkx as nx

from neardup import Index, Settings
from neardup.evaluate import cluster_scores, clusters_to_pairs, pair_scores, read_gold_clusters, read_gold_pairs
from neardup.generate import GenerateOptions, generate
from neardup.ingest import ingest
from neardup.rebuild import rebuild_clusters
from neardup.settings import METHODS, parse_pairs

ROOT = Path(__file__).resolve().parent.parent
INPUTS = [str(ROOT / "fixtures" / "crawl" / "sample.warc.gz"), str(ROOT / "fixtures" / "text" / "docs.jsonl"), str(ROOT / "fixtures" / "html")]
CLUSTERINGS = ["cliques", "center", "merge_center", "star", "ricochet", "biconnected"]
THRESHOLD = 0.8
_WORD = re.compile(r"[^\W_]+")


def datasketch_pairs(urls: list[str], texts: list[str]) -> set[tuple[str, str]]:
    from datasketch import MinHash, MinHashLSH

    sets = []
    for t in texts:
        w = _WORD.findall(t.lower())
        sets.append(list({" ".join(w[i : i + 5]).encode() for i in range(max(1, len(w) - 4))}))
    mhs = MinHash.bulk(sets, num_perm=128)
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=128)
    for i, m in enumerate(mhs):
        lsh.insert(i, m)
    return {tuple(sorted((urls[i], urls[j]))) for i, m in enumerate(mhs) for j in lsh.query(m)
            if j != i and m.jaccard(mhs[j]) >= THRESHOLD}


def one_seed(seed: int, tmp: Path) -> dict[str, dict[str, float]]:
    out = tmp / f"gen{seed}"
    generate(INPUTS, out, GenerateOptions(seed=seed))
    idx = Index(tmp / f"idx{seed}")
    methods = tuple(METHODS)
    ingest(idx, str(out / "corpus.jsonl"), create_with=Settings(methods=methods, pairs=parse_pairs("all", methods)))
    rebuild_clusters(idx, CLUSTERINGS)
    with open(out / "framed_pairs.csv", newline="") as fh:
        framed_urls = {(r["url_a"], r["url_b"]) for r in csv.DictReader(fh)}
    rows: dict[str, dict[str, float]] = {}
    with idx.reader() as con:
        gold, _ = read_gold_pairs(con, str(out / "pairs.csv"))
        gold_c, _ = read_gold_clusters(con, str(out / "clusters.csv"))
        url_of = dict(con.execute("SELECT doc_id, url FROM documents").fetchall())
        doc_of = {u: d for d, u in url_of.items()}
        framed = {tuple(sorted((doc_of[a], doc_of[b]))) for a, b in framed_urls}
        found: dict[str, set] = {}
        for a, b, m in con.execute("SELECT doc_a, doc_b, method FROM duplicates").fetchall():
            found.setdefault(m, set()).add((a, b))
        groups: dict[str, list[set[int]]] = {}
        for m, members in con.execute("SELECT c.method, list(m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id) "
                                      "GROUP BY c.cluster_id, c.method ORDER BY c.cluster_id").fetchall():
            groups.setdefault(m, []).append(set(members))
        texts = con.execute("SELECT url, text FROM documents ORDER BY doc_id").fetchall()
    ds = datasketch_pairs([u for u, _ in texts], [t for _, t in texts])
    found["datasketch MinHashLSH"] = {tuple(sorted((doc_of[a], doc_of[b]))) for a, b in ds}
    g = nx.Graph(list(found["datasketch MinHashLSH"]))
    groups["datasketch components"] = [set(c) for c in nx.connected_components(g)]
    for m, pairs in found.items():
        rows[f"pairs: {m}"] = {**pair_scores(pairs, gold), "pairs": len(pairs), "framed": len(pairs & framed)}
    for m, gs in groups.items():
        pairs = clusters_to_pairs(gs)
        c = cluster_scores(gs, gold_c)
        rows[f"clusters: {m}"] = {**pair_scores(pairs, gold), "pairs": len(pairs), "framed": len(pairs & framed),
                                  "cluster_f1": c["F1"], "cpr": c["CPr"]}
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="corpora to make (seeds 0..N-1)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="neardup-quality-"))
    try:
        runs = [one_seed(s, tmp) for s in range(a.seeds)]
        info = [json.loads((tmp / f"gen{s}" / "manifest.json").read_text())["result"] for s in range(a.seeds)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = lambda k, key: statistics.median(r[k].get(key, 0.0) for r in runs)  # noqa: E731
    span = lambda key: f"{min(i[key] for i in info)}-{max(i[key] for i in info)}"  # noqa: E731
    print(f"{a.seeds} corpora from the fixtures' text: {span('documents')} documents, {span('gold_pairs')} gold pairs "
          f"({span('gold_pairs_below')} of them below Jaccard 0.8), {span('framed_pairs')} framed pairs "
          f"({span('framed_pairs_above')} of them at or above 0.8); table cells are medians over the corpora\n")
    print("| method | pairs | precision | recall | F1 | framed pairs reported | cluster F1 (004) | CPr (004) |")
    print("|---|---|---|---|---|---|---|---|")
    for k in sorted(runs[0], key=lambda k: (not k.startswith("pairs"), -med(k, "f1"), k)):
        extra = f"{med(k, 'cluster_f1'):.3f} | {med(k, 'cpr'):.3f}" if k.startswith("clusters") else "- | -"
        print(f"| {k} | {med(k, 'pairs'):.0f} | {med(k, 'precision'):.3f} | {med(k, 'recall'):.3f} | {med(k, 'f1'):.3f} | "
              f"{med(k, 'framed'):.0f} | {extra} |")


if __name__ == "__main__":
    sys.exit(main())
