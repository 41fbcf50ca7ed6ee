"""The postings' run merges alone: ``--batches`` batches of ``--entries`` random ``lsh`` entries each
(20 keys a document) applied to a fresh ``LmdbPostings``, the seconds of each ``apply_batch`` (the
run written, the merges the policy makes, the LMDB commit), then the table read back and checked
sorted. Compare two engines by running it under each (the second on ``PYTHONPATH``):

    python benchmarks/run_merge.py --entries 3300000 --batches 33
    PYTHONPATH=<folder holding another neardup> python benchmarks/run_merge.py --entries 3300000 --batches 33

Prints the total and the slowest batch, and a checksum of what was read back (the same for any
merge policy that keeps the entries)."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=2_000_000, help="entries a batch (20 a document)")
    ap.add_argument("--batches", type=int, default=33)
    ap.add_argument("--folder", default=None, help="where the postings are built (default: a temporary folder)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from neardup.store.postings import LmdbPostings

    folder = args.folder or tempfile.mkdtemp(prefix="run-merge-")
    shutil.rmtree(folder, ignore_errors=True)
    rng = np.random.default_rng(args.seed)
    postings = LmdbPostings(folder)
    seconds, first = [], 1
    try:
        for b in range(1, args.batches + 1):
            docs = np.arange(first, first + args.entries // 20, dtype=np.uint64)
            first += docs.size
            keys = rng.integers(0, 2**40, docs.size * 20, dtype=np.uint64)
            t = time.perf_counter()
            postings.apply_batch(b, {"lsh": (keys, np.repeat(docs, 20))})
            seconds.append(time.perf_counter() - t)
        k, i = postings.runs.lookup("lsh", None)
        ok = bool((k[1:] >= k[:-1]).all())
        check = int((k ^ (i * np.uint64(0x9E3779B97F4A7C15))).sum(dtype=np.uint64))
    finally:
        postings.close()
        shutil.rmtree(folder, ignore_errors=True)
    worst = int(np.argmax(seconds))
    print(f"{args.batches} batches of {args.entries:,} entries: {sum(seconds):.2f} s in all, slowest batch {worst + 1} "
          f"{seconds[worst]:.2f} s; read back {k.size:,} entries, sorted {ok}, checksum {check}")


if __name__ == "__main__":
    main()
