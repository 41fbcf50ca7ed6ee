"""Time one batch into a large index without changing the index: the batch runs to the crash point
``duckdb-before-commit`` (``neardup.faults``), so every run meets the same index, and two engines can
be compared on it in alternation.

    python benchmarks/late_batch.py --index /tmp/scale-900k --input part-09-first-25k.jsonl \\
        --neardup A=/tmp/venv-a/bin/neardup --neardup B=.venv/bin/neardup --runs 5

Each run is the whole process up to the point it kills itself before the commit (reading, preparing,
storing the rows in the open transaction, the pairs and the concept clusters); the commit and the
postings' write are not in it. A killed batch leaves the index as it was (the crash tests' promise),
which is what makes the runs repeatable. Prints each run (seconds, peak RSS) and the medians per
engine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time


def run_once(neardup: str, index: str, path: str) -> tuple[float, int]:
    """Seconds to the crash point and the process's peak RSS in MB."""
    env = dict(os.environ, NEARDUP_CRASH_AT="duckdb-before-commit")
    t0 = time.perf_counter()
    p = subprocess.Popen([neardup, "ingest", "-q", "--index", index, path], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    took = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != -9:
        raise SystemExit(f"{neardup}: ended with {code}, not at the crash point:\n{err[-2000:]}")
    return took, usage.ru_maxrss // 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--neardup", action="append", required=True, help="NAME=path of a neardup executable")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    engines = [tuple(x.split("=", 1)) for x in a.neardup]
    for _ in range(a.warmup):  # compiled kernels' caches, the index's pages
        for _, exe in engines:
            run_once(exe, a.index, a.input)
    times: dict[str, list[float]] = {name: [] for name, _ in engines}
    rss: dict[str, list[int]] = {name: [] for name, _ in engines}
    for r in range(a.runs):
        # every other run in the reverse order (ABBA): a fixed order counts the machine's favouring
        # of a pair's second run (docs/benchmarks.md, thirty-second session) as the engines' difference
        for name, exe in (engines if r % 2 == 0 else engines[::-1]):
            t, mb = run_once(exe, a.index, a.input)
            times[name].append(t)
            rss[name].append(mb)
            print(f"run {r + 1} {name} {t:.2f} s, peak RSS {mb} MB", flush=True)
    for name, ts in times.items():
        print(f"{name}: median {statistics.median(ts):.2f} s of {' '.join(f'{t:.2f}' for t in ts)}; "
              f"peak RSS median {statistics.median(rss[name]):.0f} MB of {' '.join(map(str, rss[name]))}")


if __name__ == "__main__":
    main()
