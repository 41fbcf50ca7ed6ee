"""Near-duplicate pairs end to end: neardup against datasketch and SetSimilaritySearch.

On one corpus (``corpus.build_dedup_jsonl``: real fixture sentences, a third of
the documents with edited copies), in one run:

* datasketch: MinHash (num_perm=128) of each document's word 5-shingles,
  ``MinHashLSH(threshold=0.8)``, every document queried, candidates kept when
  the estimated Jaccard reaches 0.8 (its own verification);
* SetSimilaritySearch: exact ``all_pairs`` (Jaccard >= 0.8) over the same
  shingle sets;
* neardup: ``neardup ingest`` of the JSONL file into a fresh index with the
  default settings (threshold 0.8), as a subprocess, then its ``jaccard``
  pairs; the time includes reading, storing texts and every default
  fingerprint (everything ingest does).

The peers read the JSONL and shingle in the timed region too (words are runs
of letters and digits of the lower-cased text, as neardup's tokenizer makes
them). The truth is the exact all-pairs answer (``neardup.exact.all_pairs``)
on neardup's shingle sets. Times are medians of ``--runs``.

    python benchmarks/dedup.py --docs 5000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build_dedup_jsonl  # noqa: E402

from neardup import exact  # noqa: E402

THRESHOLD = 0.8
_WORD = re.compile(r"[^\W_]+")


def read_shingles(path: Path) -> list[list[bytes]]:
    """Each document's distinct word 5-shingles, as UTF-8 bytes."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            w = _WORD.findall(json.loads(line)["text"].lower())
            sh = {" ".join(w[i : i + 5]).encode() for i in range(max(1, len(w) - 4))}
            out.append(list(sh))
    return out


def run_datasketch(path: Path) -> set[tuple[int, int]]:
    from datasketch import MinHash, MinHashLSH

    sets = read_shingles(path)
    mhs = MinHash.bulk(sets, num_perm=128)
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=128)
    for i, m in enumerate(mhs):
        lsh.insert(i, m)
    found = set()
    for i, m in enumerate(mhs):
        for j in lsh.query(m):
            if j > i and m.jaccard(mhs[j]) >= THRESHOLD:
                found.add((i, j))
    return found


def run_sss(path: Path) -> set[tuple[int, int]]:
    from SetSimilaritySearch import all_pairs

    sets = read_shingles(path)
    return {(min(x, y), max(x, y)) for x, y, s in all_pairs(sets, similarity_func_name="jaccard", similarity_threshold=THRESHOLD) if s >= THRESHOLD}


def run_neardup(path: Path) -> set[tuple[int, int]]:
    tmp = Path(tempfile.mkdtemp(prefix="neardup-dedup-"))
    try:
        idx = tmp / "idx"
        code = "from neardup.cli.app import main; main()"
        subprocess.run([sys.executable, "-c", code, "ingest", "--quiet", "--index", str(idx), str(path)], check=True)
        out = subprocess.run(
            [sys.executable, "-c", code, "sql", "--index", str(idx), "--format", "csv",
             "SELECT doc_a - 1, doc_b - 1 FROM duplicates WHERE method = 'jaccard'"],
            check=True, capture_output=True, text=True,
        ).stdout.splitlines()[1:]
        return {tuple(int(x) for x in line.split(",")) for line in out if line}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def timed(fn, path: Path, runs: int) -> tuple[float, set, list[float]]:
    times, res = [], set()
    for _ in range(runs):
        t0 = time.perf_counter()
        res = fn(path)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), res, times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated tools to leave out: datasketch, sss")
    a = ap.parse_args()
    path = build_dedup_jsonl(a.docs)
    texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    t0 = time.perf_counter()
    truth = {(i, j) for i, j, _ in exact.all_pairs(exact.shingle_sets(texts), THRESHOLD)}
    t_truth = time.perf_counter() - t0
    print(f"{len(texts)} documents, {mb:.1f} MB; {len(truth)} pairs with word-5-shingle Jaccard >= {THRESHOLD} "
          f"(exact all-pairs, {t_truth:.1f} s); medians of {a.runs} runs\n")
    tools = [("neardup ingest (end to end)", run_neardup)]
    skip = set(a.skip.split(","))
    if "datasketch" not in skip:
        tools.append(("datasketch MinHashLSH (128 perms, threshold 0.8)", run_datasketch))
    if "sss" not in skip:
        tools.append(("SetSimilaritySearch all_pairs (exact)", run_sss))
    rows = []
    for name, fn in tools:
        t, found, all_t = timed(fn, path, a.runs)
        tp = len(found & truth)
        rows.append((name, t, len(found), tp / len(found) if found else 1.0, tp / len(truth) if truth else 1.0, all_t))
    base = rows[0][1]
    print("| tool | seconds (median) | pairs | precision | recall | time / neardup's |")
    print("|---|---|---|---|---|---|")
    for name, t, n, p, r, _ in rows:
        print(f"| {name} | {t:.2f} | {n} | {p:.4f} | {r:.4f} | {t / base:.1f}x |")
    print("\nall times (s): " + "; ".join(f"{name}: " + ", ".join(f"{x:.2f}" for x in ts) for name, *_, ts in rows))


if __name__ == "__main__":
    main()
