"""Reading older documents' values from an index's postings, with and without releasing the mapped
pages as the engine does (``LmdbPostings._release`` after every ``RELEASE_AFTER`` values).

    python benchmarks/value_reads.py --index /tmp/scale-900k [--n 26000] [--rows 414000]

Reads ``--n`` random documents' shingle sets (``get_values``) and ``--rows`` random documents'
one-byte signature rows (``get_fixed``) three times each, first with the release, then in a new
process without it, and prints the seconds and the process's peak RSS: the release trades re-mapping
pages for a process that does not keep every page it read mapped (the memory target). Then, in a
third process, the same number of random documents' sets read from the catalog instead
(``fp_shingles.hashes``, as ``pairs.values._values`` reads what the postings lack): what a later
batch would pay without the postings' copy of the sets. ``--drop-caches`` (root) empties the page
cache before each process, so the first reads of each come from the disk.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def measure(index: str, n: int, n_rows: int, release: bool, seed: int) -> dict:
    import numpy as np

    import neardup.store.postings as P

    if not release:
        P.RELEASE_AFTER = 1 << 62
        P._madvise = None
    p = P.LmdbPostings(f"{index}/postings", readonly=True)
    top = _max_doc(index)
    rng = np.random.default_rng(seed)
    out: dict = {"release": release, "values_s": [], "rows_s": []}
    width = None
    rows_ids = np.sort(rng.choice(top, min(n_rows, top), replace=False)) + 1  # doc ids start at 1
    for _ in range(3):
        ids = np.sort(rng.choice(top, min(n, top), replace=False)) + 1
        t = time.perf_counter()
        got = p.get_values("shingles", ids)
        out["values_s"].append(round(time.perf_counter() - t, 3))
        out["values_mb"] = round(sum(map(len, got.values())) / 1e6, 1)
        if width is None:
            one = p.get_values("minhash8", rows_ids[:1])
            width = len(next(iter(one.values()))) if one else 0
        t = time.perf_counter()
        if width:
            p.get_fixed("minhash8", rows_ids, width)
        out["rows_s"].append(round(time.perf_counter() - t, 3))
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return out


def measure_catalog(index: str, n: int, n_rows: int, seed: int) -> dict:
    import duckdb
    import numpy as np

    from neardup.pairs.values import _fetch

    con = duckdb.connect(f"{index}/catalog.duckdb", read_only=True)
    top = _max_doc(index)
    rng = np.random.default_rng(seed)
    out: dict = {"from": "catalog", "values_s": []}
    rng.choice(top, min(n_rows, top), replace=False)  # drawn as ``measure`` draws its rows: the same sets read
    for _ in range(3):
        ids = np.sort(rng.choice(top, min(n, top), replace=False)) + 1
        t = time.perf_counter()
        got = _fetch(con, "fp_shingles", "f.hashes", ids)
        out["values_s"].append(round(time.perf_counter() - t, 3))
        out["values_mb"] = round(got.column("hashes").nbytes / 1e6, 1)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return out


def _max_doc(index: str) -> int:
    import duckdb

    con = duckdb.connect(f"{index}/catalog.duckdb", read_only=True)
    return int(con.sql("SELECT max(doc_id) FROM documents").fetchall()[0][0] or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--n", type=int, default=26_000)
    ap.add_argument("--rows", type=int, default=414_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--drop-caches", action="store_true", help="empty the page cache before each process (root)")
    ap.add_argument("--one", choices=["release", "keep", "catalog"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        got = measure_catalog(a.index, a.n, a.rows, a.seed) if a.one == "catalog" else \
            measure(a.index, a.n, a.rows, a.one == "release", a.seed)
        print(json.dumps(got))
        return
    for mode in ("release", "keep", "catalog"):  # a process each: the peak RSS is the mode's own
        if a.drop_caches:
            subprocess.run(["sync"], check=True)
            with open("/proc/sys/vm/drop_caches", "w") as fh:
                fh.write("3\n")
        r = subprocess.run([sys.executable, __file__, "--index", a.index, "--n", str(a.n), "--rows", str(a.rows),
                            "--seed", str(a.seed), "--one", mode], capture_output=True, text=True, check=True)
        print(r.stdout.strip())


if __name__ == "__main__":
    main()
