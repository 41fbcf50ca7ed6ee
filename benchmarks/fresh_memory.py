"""What fresh memory costs on this machine right now: a control for the other benchmarks.

Each run starts a process that allocates ``--mb`` of memory and writes every page once (numpy's
``ones``), and reports how long that took and the system CPU it used. On bare metal that is a few
tenths of a second a gigabyte, whatever the time of day. On a virtual machine whose host takes
back the guest's free memory (free page reporting, a balloon) or pages the guest's memory out, a
page the host no longer backs costs a host fault on first touch, and that cost follows the host's
state, not the program: every batch of an ingest allocates its arrays afresh, so its time then
moves with it. Run this before and after a long benchmark to tell the machine's changes from
the engine's:

    python benchmarks/fresh_memory.py --mb 512 --runs 3

Where the guest counts the memory it reported to its host
(``/sys/module/page_reporting/parameters/reported_kib``), that count is printed too. numpy asks for
transparent huge pages for arrays of 4 MB and more (``madvise``), and a huge page the host no
longer backs can cost far more than 512 small ones: ``--no-hugepage`` runs the child with
``NUMPY_MADVISE_HUGEPAGE=0``, to tell the two apart.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import json, resource, sys, time
import numpy as np
t = time.perf_counter()
a = np.ones(int(sys.argv[1]) * 2**20 // 8)
sec = time.perf_counter() - t
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": sec, "sys_s": r.ru_stime}))
"""

REPORTED = Path("/sys/module/page_reporting/parameters/reported_kib")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pause", type=float, default=2.0, help="seconds between runs")
    ap.add_argument("--no-hugepage", action="store_true", help="the child without numpy's huge-page advice")
    a = ap.parse_args()
    times, sys_s = [], []
    for r in range(a.runs):
        if r:
            time.sleep(a.pause)
        env = dict(os.environ, NUMPY_MADVISE_HUGEPAGE="0") if a.no_hugepage else None
        out = subprocess.run([sys.executable, "-c", CHILD, str(a.mb)], capture_output=True, text=True, check=True, env=env)
        d = json.loads(out.stdout)
        times.append(d["seconds"])
        sys_s.append(d["sys_s"])
    med = statistics.median(times)
    line = (f"{a.mb} MB of fresh memory written once{' (no huge pages)' if a.no_hugepage else ''}: median {med:.3f} s ({med * 1024 / a.mb:.2f} s a GB), "
            f"system CPU median {statistics.median(sys_s):.2f} s; runs: {', '.join(f'{t:.3f}' for t in times)} s")
    if REPORTED.exists():
        line += f"; free memory reported to the host so far: {int(REPORTED.read_text()) / 2**20:.1f} GB"
    print(line)


if __name__ == "__main__":
    main()
