"""Two shell commands timed in turn (A B B A A B ...), after a warm-up of each: whole-process wall
time, CPU time and peak RSS per run, their medians, and the A/B ratios of each pair of runs.

    python benchmarks/ab.py -n 5 --warmup 1 \\
      --a "rm -rf /tmp/hA; exec neardup ingest -q --index /tmp/hA benchmarks/data/realsite/both.warc.gz" \\
      --b "rm -rf /tmp/hB; PYTHONPATH=<folder holding the older neardup> exec neardup ingest -q --index /tmp/hB benchmarks/data/realsite/both.warc.gz"

Each run is ``sh -c COMMAND`` waited for with ``os.wait4``, so CPU and peak RSS are that process's
and its children's (the largest child's RSS; a command should ``exec`` its last step). Alternating
the two commands spreads the drift of a shared machine over both, and each pair runs them in the
other order than the pair before (ABBA): on this machine the second run of a pair can be the faster
one whatever it runs (3.5% in the thirty-second session's late batch, docs/benchmarks.md), which
pairs in a fixed order count as the difference between the commands.

``--clean`` runs a command untimed before every run and ``--pause`` then waits: a change to what a
run writes is measured under the conditions of ``benchmarks/dedup.py`` (which deletes its index
outside the timing). With the ``rm -rf`` inside a timed command, the next run writes into the page
cache's pages just freed; after a pause this machine has handed them back to its host (free page
reporting) and a first touch of a fresh page costs a fault there (docs/benchmarks.md, the
fifty-second session), so a lever that writes less looks smaller than it is.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time


def run_once(command: str) -> dict:
    """One run of ``sh -c command``: wall and CPU seconds, peak RSS in MB, exit status."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(["sh", "-c", command], stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "sys": ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
            "exit": proc.returncode}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="command A (run by sh -c)")
    ap.add_argument("--b", required=True, help="command B (run by sh -c)")
    ap.add_argument("-n", type=int, default=5, help="counted runs of each")
    ap.add_argument("--warmup", type=int, default=1, help="runs of each before counting")
    ap.add_argument("--clean", default=None, help="command run untimed before every run (e.g. rm -rf /tmp/hA /tmp/hB)")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds to wait before every run, after --clean")
    args = ap.parse_args()
    commands = {"A": args.a, "B": args.b}

    def run(command: str) -> dict:
        if args.clean:
            subprocess.run(["sh", "-c", args.clean], check=True)
        if args.pause:
            time.sleep(args.pause)
        return run_once(command)

    for _ in range(args.warmup):
        for c in commands.values():
            run(c)
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for i in range(args.n):
        for name in ("A", "B") if i % 2 == 0 else ("B", "A"):
            c = commands[name]
            r = run(c)
            if r["exit"] != 0:
                raise SystemExit(f"{name} exited {r['exit']}: {c}")
            runs[name].append(r)
    for name, got in runs.items():
        walls = sorted(r["wall"] for r in got)
        print(f"{name}: wall min {walls[0]:.2f}  median {statistics.median(walls):.2f}  max {walls[-1]:.2f} s   "
              f"cpu median {statistics.median(r['cpu'] for r in got):.2f} s (system {statistics.median(r['sys'] for r in got):.2f})   "
              f"peak RSS median {statistics.median(r['rss_mb'] for r in got):.0f} MB")
    ratios = sorted(a["wall"] / b["wall"] for a, b in zip(runs["A"], runs["B"]))
    print(f"A/B wall: median {statistics.median(ratios):.3f} (range {ratios[0]:.3f}-{ratios[-1]:.3f}) over {len(ratios)} pairs")


if __name__ == "__main__":
    main()
