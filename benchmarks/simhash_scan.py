"""The simhash scan of a batch against the older documents: streamed, or held sorted on the tables.

    python benchmarks/simhash_scan.py --index /tmp/scale-900k --batch 33000 --runs 3

Reads an index's catalog (read-only) and takes its last ``--batch`` documents as the batch. For
each run it times ``neardup.pairs.simhash.scan_pairs`` three ways: every older document's
simhash streamed from the catalog and looked up among the batch's (what a batch does when its
ingest holds nothing), the older documents sorted on the tables first and then used (an ingest's
first scanned batch: ``SortedOld``), and with them already held (the ingest's next batches), after
an untimed scan of a small batch each way (the compiled kernels loaded). It checks that the three
give the same pairs and prints the medians.

With ``--ingest FILE`` it instead ingests FILE into the index (change a copy!) in this process
and prints the CPU time of each batch's scan (the scan thread's own, ``time.thread_time``), the
time spent sorting the older documents, and the process's user and system CPU, so two engines
installed in venvs of their own can be compared on the same input:

    cp -a /tmp/scale-900k /tmp/copy && /tmp/venv-a/bin/python benchmarks/simhash_scan.py --index /tmp/copy --ingest part-09.jsonl.zst
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time


def compare(index: str, batch: int, runs: int, bits: int) -> None:
    import duckdb
    import numpy as np

    from neardup.pairs import simhash as scan

    con = duckdb.connect(f"{index}/catalog.duckdb", read_only=True)
    hi = con.sql("SELECT max(doc_id) FROM fp_simhash").fetchall()[0][0]
    lo = hi - batch + 1

    def ordered(r):
        a, b, s = r
        o = np.lexsort((b, a))
        return a[o], b[o], s[o]

    times: dict[str, list[float]] = {"streamed": [], "sorted first": [], "held": []}
    warm: dict = {}  # the compiled kernels loaded before the timed runs, on a small batch
    for _ in range(2):
        scan.scan_pairs(con, "simhash", max(hi - 99, 1), hi, bits, 1 << 22, cache=warm)
    scan.scan_pairs(con, "simhash", max(hi - 99, 1), hi, bits, 1 << 22)
    for _ in range(runs):
        t0 = time.perf_counter()
        ref = ordered(scan.scan_pairs(con, "simhash", lo, hi, bits, 1 << 22))
        t1 = time.perf_counter()
        cache: dict = {}
        first = ordered(scan.scan_pairs(con, "simhash", lo, hi, bits, 1 << 22, cache=cache))
        t2 = time.perf_counter()
        held = ordered(scan.scan_pairs(con, "simhash", lo, hi, bits, 1 << 22, cache=cache))
        t3 = time.perf_counter()
        if not all(np.array_equal(x, y) for got in (first, held) for x, y in zip(ref, got)):
            raise SystemExit("the ways gave different pairs")
        times["streamed"].append(t1 - t0)
        times["sorted first"].append(t2 - t1)
        times["held"].append(t3 - t2)
    print(f"{batch} documents against {lo - 1} older ones, {ref[0].size} pairs within {bits} bits; medians of {runs} runs")
    for way, ts in times.items():
        print(f"  {way}: {statistics.median(ts):.3f} s ({', '.join(f'{t:.3f}' for t in ts)})")


def _thread_timed(fn, spent: list[float]):
    """``fn`` that appends the CPU time of its calling thread for each call to ``spent``."""

    def timed(*args, **kwargs):
        t = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent.append(time.thread_time() - t)

    return timed


def ingest_timed(index: str, path: str) -> None:
    import neardup.cli  # noqa: F401  (the CLI process's set-up: one malloc arena, no BLAS threads)
    from neardup import memory
    from neardup.blas_probe import skip_numba_blas_probe
    from neardup.ingest import ingest
    from neardup.pairs import simhash as scan
    from neardup.store.index import Index

    scan_cpu: list[float] = []
    sort_cpu: list[float] = []
    scan._scan = _thread_timed(scan._scan, scan_cpu)
    if hasattr(scan, "sorted_old"):  # an engine from before the sorted tables has none
        scan.sorted_old = _thread_timed(scan.sorted_old, sort_cpu)
    skip_numba_blas_probe()  # as the CLI's ingest
    memory.keep_freed_memory()
    t0 = time.perf_counter()
    res = ingest(Index(index), path)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"seconds": round(time.perf_counter() - t0, 2), "batches": len(res.batch_ids),
                      "scan_cpu_s": [round(x, 3) for x in scan_cpu], "sort_cpu_s": [round(x, 3) for x in sort_cpu],
                      "user_s": round(ru.ru_utime, 2), "sys_s": round(ru.ru_stime, 2), "minor_faults": ru.ru_minflt,
                      "peak_rss_mb": ru.ru_maxrss // 1024}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--batch", type=int, default=33000, help="the last documents of the index taken as the batch")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bits", type=int, default=3, help="the simhash distance (the index's setting)")
    ap.add_argument("--ingest", help="ingest this input into the index instead, timing each batch's scan")
    a = ap.parse_args()
    if a.ingest:
        ingest_timed(a.index, a.ingest)
    else:
        compare(a.index, a.batch, a.runs, a.bits)


if __name__ == "__main__":
    sys.exit(main())
