"""Peak memory of `neardup ingest --memory SIZE` at several sizes, on the same inputs.

Each size ingests the inputs, in order, into a fresh index (one
``neardup ingest`` process per input, as a user would run them) and reports
per process the wall time, the peak resident size (``/usr/bin/time``'s
maximum RSS, which counts the postings' mapped pages too) and the index
size; the pairs and clusters found must be the same at every size.

    python benchmarks/memory.py --sizes 1GB,2GB,4GB benchmarks/data/realsite/both.warc.gz
    python benchmarks/memory.py --sizes 1GB,4GB part-00.jsonl.zst part-01.jsonl.zst part-02.jsonl.zst

(``python benchmarks/realsite.py`` writes the real site's WARC files;
``python benchmarks/scale.py build`` the parts of the million.)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def run_one(index: Path, path: str, size: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one ``neardup ingest`` process."""
    neardup = Path(sys.executable).with_name("neardup")
    cmd = ["/usr/bin/time", "-v", str(neardup), "ingest", "-q", "--memory", size, "--index", str(index), path]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    return wall, rss_kb / 1024


def found(index: Path) -> tuple[int, int, int]:
    import duckdb

    con = duckdb.connect(str(index / "catalog.duckdb"), read_only=True)
    try:
        docs = con.execute("SELECT count(*) FROM documents").fetchone()[0]
        pairs = con.execute("SELECT count(*) FROM duplicates").fetchone()[0]
        clusters = con.execute("SELECT count(*) FROM clusters").fetchone()[0]
    finally:
        con.close()
    return docs, pairs, clusters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--sizes", default="1GB,2GB,4GB")
    ap.add_argument("--tmp", default=None, help="where the indexes are built (default: a temporary folder)")
    a = ap.parse_args()
    tmp = Path(a.tmp or tempfile.mkdtemp(prefix="neardup-mem-"))
    tmp.mkdir(parents=True, exist_ok=True)
    print("| --memory | input | seconds | peak RSS MB | index MB | documents, pairs, clusters |")
    print("|---|---|---|---|---|---|")
    results = {}
    try:
        for size in a.sizes.split(","):
            index = tmp / f"idx-{size}"
            shutil.rmtree(index, ignore_errors=True)
            peak = 0.0
            for path in a.inputs:
                os.sync()
                wall, rss = run_one(index, path, size)
                peak = max(peak, rss)
                got = found(index)
                print(f"| {size} | {Path(path).name} | {wall:.1f} | {rss:,.0f} | {dir_mb(index):,.0f} | {got[0]:,}, {got[1]:,}, {got[2]:,} |",
                      flush=True)
            results[size] = (peak, got)
            shutil.rmtree(index, ignore_errors=True)
        print()
        for size, (peak, got) in results.items():
            print(f"{size}: peak RSS {peak:,.0f} MB over the inputs; documents, pairs, clusters {got}")
        if len({got for _, got in results.values()}) > 1:
            raise SystemExit("the sizes found different pairs or clusters")
    finally:
        if a.tmp is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
