"""Concept clusters (maximal k-similar sets) against the thresholds of seed 000, and pyfim.

Generates bottom-k sketches for ``--docs`` documents (``--size`` elements each,
random 64-bit values kept sorted): a third of the documents belong to groups
of 2-8 near-duplicates, each member replacing 0-20% of its group's base
sketch, and the rest are unrelated. For each threshold k (85..100 of 100, or
125..150 of 150, as 000 table 4), it times neardup's miner from scratch
(neighbours by the prefix-filtered inverted index, then the per-anchor bitset
search: what ``neardup rebuild --clusters concept`` runs) and pyfim's
``fpgrowth(target='m', supp=-k, zmin=2)`` on the transposed context
(sketch values as transactions, documents as items; transactions of one
document dropped, as they support no set of two), checks both give the same
clusters, and prints the seeds' FPmax* time for the same threshold (000
table 4: 110,997 documents for size 100, 53,539 for size 150, on a
Pentium IV 3 GHz in 2007).

    python benchmarks/concepts.py --docs 110000 --size 100 --runs 3
    python benchmarks/concepts.py --docs 110000 --size 150 --runs 3

With ``--index DIR`` the sketches are those of a real index instead (its
``fp_bottomk``, e.g. the two-release documentation site of
``benchmarks/realsite.py``, whose pages share a template), and the
thresholds are ``--thresholds`` (default: the index's own support):

    python benchmarks/concepts.py --index /tmp/rs-both --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from neardup import concepts  # noqa: E402
from neardup.clusters import _all_neighbours  # noqa: E402

#: 000 table 4, MyFim (FPmax*) seconds: {sketch size: {threshold: seconds}}
SEEDS = {
    100: {100: 3.0, 95: 9.0, 90: 14.2, 85: 25.7},  # b_1_20_s_100_n1-12.txt, 110,997 documents
    150: {150: 1.75, 145: 3.265, 140: 19.609, 135: 97.046, 130: 36.609, 125: 11.75},  # b_1_10_s_150_n1-6.txt, 53,539
}


def generate(n_docs: int, size: int, seed: int = 5) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    out: dict[int, np.ndarray] = {}
    d = 1
    while d <= n_docs:
        if rng.random() < 1 / 9:  # a group (about a third of the documents)
            base = rng.integers(0, 2**63, size, dtype=np.uint64)
            for _ in range(int(rng.integers(2, 9))):
                s = base.copy()
                r = int(rng.integers(0, size // 5 + 1))
                s[rng.choice(size, r, replace=False)] = rng.integers(0, 2**63, r, dtype=np.uint64)
                out[d] = np.sort(s)
                d += 1
        else:
            out[d] = np.sort(rng.integers(0, 2**63, size, dtype=np.uint64))
            d += 1
    return {k: v for k, v in out.items() if k <= n_docs}


def ours(sketches: dict[int, np.ndarray], k: int) -> set:
    nb = _all_neighbours(sketches, k)
    return {(c.members, c.support) for c in concepts.mine(sketches, k, neighbours=nb)}


def transposed(sketches: dict[int, np.ndarray]) -> list[list[int]]:
    ids = np.repeat(np.array(list(sketches), dtype=np.int64), [v.size for v in sketches.values()])
    vals = np.concatenate(list(sketches.values()))
    order = np.argsort(vals, kind="stable")
    vals, ids = vals[order], ids[order]
    starts = np.flatnonzero(np.r_[True, vals[1:] != vals[:-1]])
    ends = np.r_[starts[1:], vals.size]
    keep = ends - starts > 1
    return [ids[a:b].tolist() for a, b in zip(starts[keep].tolist(), ends[keep].tolist())]


def theirs(transactions: list[list[int]], k: int) -> set:
    from fim import fpgrowth

    return {(tuple(sorted(items)), supp) for items, supp in fpgrowth(transactions, target="m", supp=-k, zmin=2)}


def timed(fn, *args, runs: int):
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=110_000)
    ap.add_argument("--size", type=int, default=100, choices=[100, 150])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--index", help="take the sketches of this index (fp_bottomk) instead of generated ones")
    ap.add_argument("--thresholds", help="comma-separated supports k (default: 000's for --size, or the index's)")
    a = ap.parse_args()
    if a.index:
        from neardup import Index

        with Index(a.index).reader() as con:
            sk = {d: np.sort(np.asarray(v, dtype=np.uint64)) for d, v in con.execute("SELECT doc_id, sketch FROM fp_bottomk").fetchall()}
        thresholds = [Index(a.index).settings().support]
        a.size = max((v.size for v in sk.values()), default=0)
    else:
        sk = generate(a.docs, a.size)
        thresholds = sorted(SEEDS[a.size], reverse=True)
    if a.thresholds:
        thresholds = [int(x) for x in a.thresholds.split(",")]
    t0 = time.perf_counter()
    tr = transposed(sk)
    t_tr = time.perf_counter() - t0
    print(f"{len(sk)} documents, sketches of {a.size}; medians of {a.runs} runs; pyfim's input "
          f"({len(tr)} transactions) built once in {t_tr:.1f} s, not counted\n")
    print("| threshold k | clusters | neardup (s) | pyfim fpgrowth (s) | pyfim / neardup | same clusters | 000 table 4, FPmax* (s) |")
    print("|---|---|---|---|---|---|---|")
    for k in thresholds:
        t_ours, got = timed(ours, sk, k, runs=a.runs)
        t_fim, want = timed(theirs, tr, k, runs=a.runs)
        print(f"| {k} | {len(got)} | {t_ours:.2f} | {t_fim:.2f} | {t_fim / t_ours:.1f}x | {got == want} | {SEEDS.get(a.size, {}).get(k, '-')} |", flush=True)


if __name__ == "__main__":
    main()
