"""The pair search of one batch against a big index, without writing to it.

``neardup.lookup`` pairs its input exactly as an ingest of it would (the same
``pairs.find_batch_pairs`` on an overlay of the catalog, the postings read-only),
so a batch's candidate and verification cost against an index of a million
documents can be measured again and again on the same index, and two engines
compared on it (the second one on ``PYTHONPATH``). Each run is a fresh process;
the figures are medians over ``--runs``, with the process's peak RSS.

    python benchmarks/pair_probe.py --index /tmp/scale-1 --input /tmp/probe.jsonl --runs 3
    python benchmarks/pair_probe.py ... --vs /path/holding/another/neardup   # A and B in turn
    python benchmarks/pair_probe.py ... --methods jaccard   # one pair method's share

The input is any ``neardup query`` input; for the scale corpus, documents of a
part under new urls (they pair with their originals and with the pages of their
sites, as a new crawl of those sites would):

    zstdcat benchmarks/data/scale/parts/part-08.jsonl.zst | head -10000 \\
        | python -c "import sys, json; [print(json.dumps({**r, 'url': 'probe:' + r['url']})) for r in map(json.loads, sys.stdin)]" > /tmp/probe.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

STAGES = ("candidate keys", "candidates", "verify", "store pairs")

_CHILD = r"""
import json, resource, sys, time
if sys.argv[4]:  # only these pair methods (the index's others switched off for the probe)
    import neardup.pairs.batch as batch
    every, only = batch.pair_methods, sys.argv[4].split(",")
    batch.pair_methods = lambda settings: [m for m in every(settings) if m in only]
from neardup import Index
from neardup.lookup.run import query_input
timings, rows = {}, 0
t0 = time.perf_counter()
for table in query_input(Index(sys.argv[1]), sys.argv[2], part_mb=float(sys.argv[3]), timings=timings):
    rows += table.num_rows
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "rows": rows, "rss_mb": ru.ru_maxrss / 1024, "cpu": ru.ru_utime + ru.ru_stime, **timings}))
"""


def run_once(index: str, path: str, part_mb: float, pythonpath: str | None, methods: str = "") -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([sys.executable, "-c", _CHILD, index, path, str(part_mb), methods], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--part-mb", type=float, default=128.0, help="query part size (an ingest batch is 128 MB)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--vs", default=None, help="a folder holding another neardup package, run in turn as B")
    ap.add_argument("--methods", default="", help="only these pair methods, comma-separated (default: the index's own)")
    args = ap.parse_args()
    engines = {"A": None} if args.vs is None else {"A": None, "B": args.vs}
    runs: dict[str, list[dict]] = {k: [] for k in engines}
    for path in engines.values():  # warm-up: each engine's compiled kernels, the page cache
        run_once(args.index, args.input, args.part_mb, path, args.methods)
    for _ in range(args.runs):
        for name, path in engines.items():
            runs[name].append(run_once(args.index, args.input, args.part_mb, path, args.methods))
    for name, got in runs.items():
        if len({r["rows"] for r in got}) != 1:
            raise SystemExit(f"{name}: the runs answered different rows: {[r['rows'] for r in got]}")
        med = {k: statistics.median(r.get(k, 0.0) for r in got) for k in ("wall", "cpu", "rss_mb", *STAGES)}
        print(f"{name}: rows {got[0]['rows']}  wall {med['wall']:.2f} s  cpu {med['cpu']:.2f} s  peak RSS {med['rss_mb']:.0f} MB  "
              + "  ".join(f"{k} {med[k]:.2f} s" for k in STAGES) + f"  (medians of {len(got)})")
    if args.vs is not None and runs["A"][0]["rows"] != runs["B"][0]["rows"]:
        raise SystemExit("A and B answered different rows")


if __name__ == "__main__":
    main()
