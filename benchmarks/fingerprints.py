"""Fingerprint throughput against datasketch, in one process, on the same documents.

datasketch's ``MinHash.bulk`` (num_perm=128) on each document's word
5-shingles — words from ``str.split()`` of the lower-cased text, shingles
joined with spaces and UTF-8 encoded, as its documentation shows — is timed
next to each neardup method computed from the same raw texts (normal form,
tokenising and shingling included in neardup's time). Each figure is the
median of ``--runs`` runs; the ratio is datasketch's time over ours.

    python benchmarks/fingerprints.py --docs 2000 --runs 3 [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build_jsonl  # noqa: E402

from neardup import fingerprints, text  # noqa: E402
from neardup.settings import METHODS, Settings  # noqa: E402


def datasketch_minhash(texts: list[str]) -> None:
    from datasketch import MinHash

    def shingles(t: str) -> list[bytes]:
        w = t.lower().split()
        return [" ".join(w[i : i + 5]).encode("utf-8") for i in range(max(1, len(w) - 4))]

    MinHash.bulk([shingles(t) for t in texts], num_perm=128)


def ours(texts: list[str], settings: Settings) -> None:
    normal = text.normal_form(pa.array(texts, pa.large_string()))
    fingerprints.compute(normal, text.analyze(normal, spans=settings.needs_spans), settings)


def timed(fn, *args, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=500, help="documents per call (ingest works on chunks of this order)")
    ap.add_argument("--threads", type=int, default=1, help="neardup worker threads over chunks, as ingest's prepare pool (2 there)")
    a = ap.parse_args()
    path = build_jsonl(60)
    texts = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            if len(texts) >= a.docs:
                break
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    chunks = [texts[i : i + a.chunk] for i in range(0, len(texts), a.chunk)]

    def run_all(settings: Settings) -> None:
        if a.threads == 1:
            for c in chunks:
                ours(c, settings)
        else:
            from neardup.pipeline import ordered_map

            for _ in ordered_map(lambda c: ours(c, settings), chunks, workers=a.threads, window=2 * a.threads):
                pass

    base = timed(datasketch_minhash, texts, runs=a.runs)
    print(f"{len(texts)} documents, {mb:.1f} MB of text; neardup on {a.threads} thread(s); medians of {a.runs} runs\n")
    print("| method | seconds | MB/s | datasketch MinHash.bulk(128) / neardup |")
    print("|---|---|---|---|")
    print(f"| datasketch MinHash.bulk, num_perm=128, word 5-shingles | {base:.2f} | {mb / base:.1f} | 1.0x |")
    configs = [
        ("bottomk (k=128)", Settings(methods=("bottomk",), bottomk=128)),
        ("minhash (128 permutations)", Settings(methods=("minhash",), minhash_perms=128)),
        ("minhash (128, matrix permutations)", Settings(methods=("minhash",), minhash_perms=128, permutation="matrix")),
        ("simhash (Charikar)", Settings(methods=("simhash",))),
        ("simhash_hp (hyperplanes)", Settings(methods=("simhash_hp",))),
        ("shingles (full sets)", Settings(methods=("shingles",))),
    ]
    # statistics-based lexical methods finish in SQL at the end of a batch: measured by ingest_speed.py, not here
    from neardup.fingerprints.lexical import STATS_METHODS

    configs += [(m, Settings(methods=(m,))) for m in METHODS if m not in ("bottomk", "minhash", "simhash", "simhash_hp", "shingles", *STATS_METHODS)]
    configs.append(("default methods together", Settings()))
    for name, s in configs:
        t = timed(run_all, s, runs=a.runs)
        print(f"| {name} | {t:.2f} | {mb / t:.1f} | {base / t:.1f}x |")


if __name__ == "__main__":
    main()
