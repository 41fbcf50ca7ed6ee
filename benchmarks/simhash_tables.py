"""The simhash scan of one batch against the older documents, with the engine's tables and with more.

With ``bits`` = 3 the engine splits 64 bits into 5 blocks and keys a table on every choice of 2
(10 tables of about 26 bits, ``pairs.keys.simhash_plan``): any two simhashes within 3 bits agree
on at least 2 blocks. 6 blocks choose 3 (20 tables of about 32 bits) or 7 choose 4 (35 of about 37)
find the same pairs with fewer candidates but more lookups. This script times the compiled scan
(``kernels.simhash_table_hits``, the kernel of ``pairs.simhash.scan_pairs``) for each plan on an
existing index, counting the candidates (keys equal on a table) and the pairs kept, so the choice is
measured on a real corpus rather than assumed.

    python benchmarks/simhash_tables.py --index /tmp/scale-10 [--batch-id N] [--runs 3]

The batch is ``--batch-id``, by default the last committed batch of at least 10,000 documents; the
older documents are every document before it.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from pathlib import Path

import duckdb
import numpy as np


def masks(n_blocks: int, bits: int) -> list[np.uint64]:
    """Every choice of ``n_blocks - bits`` of ``n_blocks`` near-equal blocks, as 64-bit masks."""
    edges = [round(64 * i / n_blocks) for i in range(n_blocks + 1)]
    out = []
    for chosen in itertools.combinations(range(n_blocks), n_blocks - bits):
        m = 0
        for b in chosen:
            m |= ((1 << (edges[b + 1] - edges[b])) - 1) << edges[b]
        out.append(np.uint64(m))
    return out


def candidates(new: np.ndarray, old: np.ndarray, ms: list[np.uint64]) -> int:
    total = 0
    for m in ms:
        k = np.sort(new & m)
        q = old & m
        total += int((np.searchsorted(k, q, "right") - np.searchsorted(k, q, "left")).sum())
    return total


def scan(new: np.ndarray, old: np.ndarray, ms: list[np.uint64], bits: int) -> tuple[float, int]:
    """Seconds of the compiled scan over every table, and the (table, pair) hits within ``bits``."""
    from neardup import kernels
    from neardup.pairs.simhash import _Sorted

    s = _Sorted(np.arange(new.size, dtype=np.int64), new, ms)
    hit_old, hit_new = np.empty(1 << 20, np.int64), np.empty(1 << 20, np.int64)
    t0, hits = time.perf_counter(), 0
    for t, m in enumerate(ms):
        i = 0
        while i < old.size:
            i, n = kernels.simhash_table_hits(old, s.keys[t], s.sorted_values[t], s.starts[t], s.shifts[t],
                                              np.uint64(m), bits, i, hit_old, hit_new)
            hits += n
    return time.perf_counter() - t0, hits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, type=Path)
    ap.add_argument("--bits", type=int, default=3)
    ap.add_argument("--blocks", default="5,6,7", help="block counts to try (the engine's: bits + 2)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch-id", type=int)
    a = ap.parse_args()
    con = duckdb.connect(str(a.index / "catalog.duckdb"), read_only=True)
    which = "batch_id = ?" if a.batch_id is not None else "last_doc_id - first_doc_id >= 9999"
    row = con.sql(f"SELECT first_doc_id, last_doc_id FROM batches WHERE status = 'committed' "
                  f"AND first_doc_id IS NOT NULL AND {which} ORDER BY batch_id DESC LIMIT 1",
                  params=[a.batch_id] if a.batch_id is not None else None).fetchall()
    if not row:
        raise SystemExit(f"{a.index}: no such batch")
    lo, hi = row[0]
    new = con.sql("SELECT simhash FROM fp_simhash WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id",
                  params=[lo, hi]).fetchnumpy()["simhash"].astype(np.uint64)
    old = con.sql("SELECT simhash FROM fp_simhash WHERE doc_id < ? ORDER BY doc_id",
                  params=[lo]).fetchnumpy()["simhash"].astype(np.uint64)
    from neardup.pairs.keys import table_masks

    # the engine's plan is the bits + 2 blocks row: checked, so the comparison is with what it runs
    assert masks(a.bits + 2, a.bits) == table_masks(a.bits), "simhash_plan changed: update masks()"
    print(f"batch {new.size} documents against {old.size} older, {a.bits} bits")
    print("blocks,tables,lookups,candidates,hits,median_s,runs_s")
    for n in (int(x) for x in a.blocks.split(",")):
        ms = masks(n, a.bits)
        scan(new[:1000], old[:1000], ms, a.bits)  # compile or load the kernel outside the timing
        runs = [scan(new, old, ms, a.bits) for _ in range(a.runs)]
        secs = [r[0] for r in runs]
        print(f"{n},{len(ms)},{len(ms) * old.size},{candidates(new, old, ms)},{runs[0][1]},"
              f"{statistics.median(secs):.3f},{' '.join(f'{s:.3f}' for s in secs)}")


if __name__ == "__main__":
    main()
