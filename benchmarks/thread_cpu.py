"""CPU seconds of each thread of one neardup command, by thread name, read from Linux's ``/proc``.

The stage timings an ingest records (``batch_timings``) are wall seconds in the thread that ran
each stage. On two cores with more threads runnable than cores, a stage's wall seconds include the
time its thread waited for a core, so they add up to more than the process's CPU time. This script
runs one CLI command in this process, reads every thread's user and system CPU time from
``/proc/self/task/*/stat`` every ``--every`` seconds while it runs (a thread that ends keeps its
last reading), and prints them summed by the thread's Python name with its trailing number taken
off (``neardup-prepare_0`` and ``_1`` count as ``neardup-prepare``). Threads Python did not start
(DuckDB's, Arrow's) are summed as ``(native)``. The import of the CLI counts in ``MainThread``.

    python benchmarks/thread_cpu.py ingest --quiet --index /tmp/i /tmp/rs63.jsonl

Linux only. The sampling thread's own work is listed too (``thread-cpu-sampler``).
"""

from __future__ import annotations

import argparse
import atexit
import glob
import os
import re
import sys
import threading
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=float, default=0.02, help="seconds between two readings")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the neardup command and its arguments")
    args = ap.parse_args()
    tick = os.sysconf("SC_CLK_TCK")
    names: dict[int, str] = {}
    seen: dict[int, tuple[float, float]] = {}
    stop = threading.Event()

    def read() -> None:
        for th in threading.enumerate():
            if th.native_id is not None:
                names[th.native_id] = th.name
        for path in glob.glob("/proc/self/task/*/stat"):
            try:
                with open(path) as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended between the listing and the read
                continue
            seen[int(path.split("/")[-2])] = (int(fields[11]) / tick, int(fields[12]) / tick)

    def sample() -> None:
        while not stop.is_set():
            read()
            time.sleep(args.every)

    sampler = threading.Thread(target=sample, name="thread-cpu-sampler", daemon=True)
    sampler.start()
    t0 = time.perf_counter()

    def report() -> None:  # at exit: the CLI runs the exit functions, then leaves with ``os._exit``
        read()
        stop.set()
        wall = time.perf_counter() - t0
        totals: dict[str, list[float]] = {}
        for tid, (user, system) in seen.items():
            name = re.sub(r"[_-]?\d+$", "", names.get(tid, "(native)"))
            row = totals.setdefault(name, [0.0, 0.0, 0])
            row[0] += user
            row[1] += system
            row[2] += 1
        print(f"wall {wall:.2f} s; CPU by thread (user + system):", file=sys.stderr)
        for name, (user, system, n) in sorted(totals.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
            print(f"  {user + system:6.2f} s  user {user:5.2f}  system {system:5.2f}  {n:3d} thread(s)  {name}", file=sys.stderr)
        print(f"  {sum(u + s for u, s, _ in totals.values()):6.2f} s  in all", file=sys.stderr)

    atexit.register(report)
    sys.argv = ["neardup", *args.command]
    from neardup.cli.app import main as cli

    cli()


if __name__ == "__main__":
    main()
