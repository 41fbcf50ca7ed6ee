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

``--timeline SECONDS`` also prints, for each interval of that length, the cores in use (the CPU
all threads spent in it over its length) and the threads that spent the most, then the stage
ends an ingest records (``IngestResult.tick``: the stage, when it began and ended, its thread), so
the stretches where a core stands idle show beside the stage that runs then:

    python benchmarks/thread_cpu.py --every 0.01 --timeline 0.1 ingest --quiet --index /tmp/i /tmp/rs63.jsonl

The kernel counts thread CPU in clock ticks (``SC_CLK_TCK``, usually 100 a second), so an interval
under 0.1 s reads in coarse steps.

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
    ap.add_argument("--timeline", type=float, default=None, metavar="SECONDS",
                    help="also print the cores in use per interval of this length, and an ingest's stage ends")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the neardup command and its arguments")
    args = ap.parse_args()
    tick = os.sysconf("SC_CLK_TCK")
    names: dict[int, str] = {}
    seen: dict[int, tuple[float, float]] = {}
    stop = threading.Event()
    t0 = time.perf_counter()
    history: list[tuple[float, dict[int, float]]] = []  # (seconds since the start, CPU per thread) per reading
    marks: list[tuple[float, float, str, str]] = []  # (began, ended, stage, thread) of an ingest's stages

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
        if args.timeline:
            history.append((time.perf_counter() - t0, {tid: u + s for tid, (u, s) in seen.items()}))

    def sample() -> None:
        while not stop.is_set():
            read()
            time.sleep(args.every)

    sampler = threading.Thread(target=sample, name="thread-cpu-sampler", daemon=True)
    sampler.start()

    def report() -> None:  # at exit: the CLI runs the exit functions, then leaves with ``os._exit``
        read()
        stop.set()
        wall = time.perf_counter() - t0
        totals: dict[str, list[float]] = {}
        for tid, (user, system) in seen.items():
            name = short(names.get(tid, "(native)"))
            row = totals.setdefault(name, [0.0, 0.0, 0])
            row[0] += user
            row[1] += system
            row[2] += 1
        print(f"wall {wall:.2f} s; CPU by thread (user + system):", file=sys.stderr)
        for name, (user, system, n) in sorted(totals.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
            print(f"  {user + system:6.2f} s  user {user:5.2f}  system {system:5.2f}  {n:3d} thread(s)  {name}", file=sys.stderr)
        print(f"  {sum(u + s for u, s, _ in totals.values()):6.2f} s  in all", file=sys.stderr)
        if args.timeline:
            print_timeline(history, names, marks, args.timeline)

    atexit.register(report)
    # the CLI's package first: it installs how numba loads and compiles the kernels (neardup.cli),
    # which must precede numba's import; the stage marks import the engine, and with it numba
    import neardup.cli  # noqa: F401

    if args.timeline:
        mark_stages(marks, t0)
    sys.argv = ["neardup", *args.command]
    from neardup.cli.app import main as cli

    cli()


def short(name: str) -> str:
    """A thread's Python name without its trailing number (``neardup-prepare_1`` -> ``neardup-prepare``)."""
    return re.sub(r"[_-]?\d+$", "", name)


def print_timeline(history: list[tuple[float, dict[int, float]]], names: dict[int, str],
                   marks: list[tuple[float, float, str, str]], bucket: float) -> None:
    """Per interval of ``bucket`` seconds: the cores in use and the three threads (by name) that spent
    the most CPU in it; then the stage ends. A thread's CPU between two readings counts in the
    interval of the later one; a thread first seen at a reading counts from zero (it started since)."""
    spent: dict[int, dict[str, float]] = {}
    last: dict[int, float] = {}
    for t, cpu in history:
        b = int(t / bucket)
        for tid, v in cpu.items():
            d = v - last.get(tid, 0.0)
            last[tid] = v
            if d > 0:
                row = spent.setdefault(b, {})
                name = short(names.get(tid, "(native)"))
                row[name] = row.get(name, 0.0) + d
    print(f"timeline ({bucket:g} s intervals): cores in use, the threads that spent the most", file=sys.stderr)
    for b in range(max(spent) + 1 if spent else 0):  # an interval with no CPU at all reads 0.00
        row = spent.get(b, {})
        top = sorted(row.items(), key=lambda kv: -kv[1])[:3]
        print(f"  {b * bucket:6.2f} s  {sum(row.values()) / bucket:4.2f} cores  "
              + "  ".join(f"{n} {v:.2f}" for n, v in top), file=sys.stderr)
    for began, ended, stage, thread in marks:
        print(f"  stage {began:6.2f}-{ended:6.2f} s  {stage}  [{short(thread)}]", file=sys.stderr)


def mark_stages(marks: list[tuple[float, float, str, str]], t0: float) -> None:
    """Record every stage an ingest times (``IngestResult.tick(stage, since)``) with when it began and
    ended, by wrapping the method (nothing else of the ingest changes)."""
    from neardup.ingest import IngestResult

    timed = IngestResult.tick

    def tick(self, stage: str, since: float) -> float:
        now = timed(self, stage, since)
        marks.append((since - t0, now - t0, stage, threading.current_thread().name))
        return now

    IngestResult.tick = tick


if __name__ == "__main__":
    main()
