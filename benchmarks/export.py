"""Time and peak memory of ``neardup export`` against the size of the index.

Indexes of the first N documents of one corpus (``--sizes``) are built once,
untimed, with the default settings, in ``--work`` (kept there and reused).
Each export then runs ``--runs`` times as its own process under
``/usr/bin/time -v``: the wall time and the peak resident set size (the
process's whole, interpreter and imports included) are its figures, and the
medians are printed per size and export. The floor is a ``neardup sql
"SELECT 1"`` on the same index: the process with its imports and the catalog
open, exporting nothing.

    python benchmarks/export.py --corpus benchmarks/data/dedup-101000-w400.jsonl --sizes 50000,100000 --runs 3

(``corpus.build_dedup_jsonl(101000, max_words=400)`` makes that corpus.) Or on indexes built
beforehand, e.g. from the parts of the million-document corpus (``benchmarks/scale.py build``):

    neardup ingest -q --index /tmp/s100k benchmarks/data/scale/parts/part-00.jsonl.zst
    cp -r /tmp/s100k /tmp/s200k && neardup ingest -q --index /tmp/s200k benchmarks/data/scale/parts/part-01.jsonl.zst
    python benchmarks/export.py --indexes /tmp/s100k,/tmp/s200k --runs 3

Memory should not follow the index: the rows are read and written range by range
(``neardup.export``), under a DuckDB memory limit of 128 MB.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-c", "from neardup.cli.app import main; main()"]
#: name -> export options (the output file's suffix is the format's)
CASES = {
    "keep parquet": ["--what", "keep", "--format", "parquet"],
    "keep jsonl": ["--what", "keep", "--format", "jsonl"],
    "drop parquet": ["--what", "drop", "--format", "parquet"],
    "pairs parquet": ["--what", "pairs", "--format", "parquet"],
}


def build(corpus: Path, n: int, work: Path) -> Path:
    """The index of the corpus's first ``n`` documents (built once)."""
    idx = work / f"idx-{n}"
    if (idx / "catalog.duckdb").exists():
        return idx
    part = work / f"corpus-{n}.jsonl"
    with open(corpus, encoding="utf-8") as src, open(part, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i == n:
                break
            dst.write(line)
    subprocess.run([*CLI, "ingest", "-q", "--index", str(idx), str(part)], check=True)
    part.unlink()
    return idx


def timed(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one process."""
    p = subprocess.run(["/usr/bin/time", "-v", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{p.stderr}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", p.stderr)
    h, m, s = (float(x) if x else 0.0 for x in wall.groups())
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    return h * 3600 + m * 60 + s, rss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parent / "data" / "dedup-101000-w400.jsonl")
    ap.add_argument("--sizes", default="50000,100000")
    ap.add_argument("--indexes", help="comma-separated index folders built beforehand (instead of --corpus and --sizes)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/neardup-export-bench"))
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    results = []
    indexes = [Path(x) for x in a.indexes.split(",")] if a.indexes else [build(a.corpus, int(n), a.work) for n in a.sizes.split(",")]
    for n, idx in enumerate(indexes):
        docs = json.loads(subprocess.run([*CLI, "sql", "--index", str(idx), "--format", "json",
                                          "SELECT count(*) AS docs, sum(n_bytes) AS bytes FROM latest_documents"],
                                         capture_output=True, text=True, check=True).stdout)
        cases = {"floor (sql SELECT 1)": None, **CASES}
        for name, opts in cases.items():
            figures = []
            out = a.work / f"out-{n}.{opts[-1] if opts else 'none'}"
            for _ in range(a.runs):
                if opts is None:
                    figures.append(timed([*CLI, "sql", "--index", str(idx), "SELECT 1"]))
                else:
                    figures.append(timed([*CLI, "export", "-q", "--index", str(idx), "--out", str(out), "--force", *opts]))
            row = {"docs": docs["docs"], "text_mb": round(float(docs["bytes"]) / 1e6, 1), "export": name, "runs": a.runs,
                   "seconds": round(statistics.median(f[0] for f in figures), 2),
                   "peak_rss_mb": round(statistics.median(f[1] for f in figures)),
                   "out_mb": round(out.stat().st_size / 1e6, 1) if opts else None}
            results.append(row)
            print(f"{row['docs']:>8} docs ({row['text_mb']} MB of text)  {name:<22} {row['seconds']:>6.2f} s  "
                  f"{row['peak_rss_mb']:>5} MB peak RSS" + (f"  {row['out_mb']} MB written" if opts else ""), flush=True)
            if opts:
                out.unlink()
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
