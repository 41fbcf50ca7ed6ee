"""The first run after installing: one CLI command with an empty kernel cache, timed, and what
numba compiled in it.

neardup's kernels are compiled by numba on first use and cached on disk (``cache=True``); a fresh
install has no cache, so its first ingest compiles every kernel it calls. This script runs the
command ``--runs`` times, each in a fresh process with an empty ``NUMBA_CACHE_DIR`` (nothing in the
package's own ``__pycache__`` is read or written), and prints each run's wall seconds and the
median:

    python benchmarks/first_run.py --runs 3 -- ingest --index /tmp/fr fixtures/crawl/sample.warc.gz

``--kernels`` runs it once more, after the timed runs, in a fresh interpreter with a listener on
numba's compile events (not timed), and prints the functions that took longest to compile (inclusive: a kernel's time
holds the kernels and numba's own implementations compiled for it), how many signatures of each,
and every signature compiled for a ``Literal`` argument (numba compiles a callee once more for
each literal value compiled code passes it; neardup's kernels pass ``np.int64`` instead). The
command's ``--index`` folder is deleted before every run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _index_of(command: list[str]) -> str | None:
    for i, arg in enumerate(command):
        if arg == "--index" and i + 1 < len(command):
            return command[i + 1]
        if arg.startswith("--index="):
            return arg.split("=", 1)[1]
    return None


def _fresh(command: list[str]) -> None:
    index = _index_of(command)
    if index:
        shutil.rmtree(index, ignore_errors=True)


#: the CLI's entry point, as the installed ``neardup`` script runs it
_CLI = "import sys; from neardup.cli.app import main; sys.exit(main())"


def timed_runs(command: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        _fresh(command)
        with tempfile.TemporaryDirectory(prefix="neardup-first-run-") as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", _CLI, *command], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out.append(time.perf_counter() - t0)
            print(f"run {len(out)}: {out[-1]:.1f} s", flush=True)
    return out


#: run in a fresh interpreter by ``--kernels``: the command under a listener on numba's compiles
_LISTEN = r"""
import collections, json, sys, time
import neardup.cli  # how the CLI has numba compile, set before numba is imported
from numba.core import event
from neardup.cli.app import app

starts, names = [], []
spent, count, literal = collections.defaultdict(float), collections.Counter(), []


class Listener(event.Listener):
    def on_start(self, ev):
        d = ev.data["dispatcher"]
        names.append(getattr(d, "py_func", d).__qualname__)
        starts.append(time.perf_counter())

    def on_end(self, ev):
        took = time.perf_counter() - starts.pop()
        name = names.pop()
        spent[name] += took
        count[name] += 1
        if "Literal" in str(ev.data["args"]):
            literal.append(f"{name}{ev.data['args']}")


event.register("numba:compile", Listener())
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps({"spent": spent, "count": count, "literal": literal}))
"""


def kernels(command: list[str], top: int) -> None:
    _fresh(command)
    with tempfile.TemporaryDirectory(prefix="neardup-first-run-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        done = subprocess.run([sys.executable, "-c", _LISTEN, *command], env=env, check=True,
                              capture_output=True, text=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    spent, count = got["spent"], collections.Counter(got["count"])
    print(f"\n{sum(count.values())} compiles; the {top} longest (inclusive seconds, signatures, function):")
    for name, s in sorted(spent.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {s:7.2f}  {count[name]:3d}  {name}")
    print(f"{len(got['literal'])} for a literal argument" + (":" if got["literal"] else ""))
    for sig in got["literal"]:
        print(f"  {sig}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="timed runs, each with an empty kernel cache")
    ap.add_argument("--kernels", action="store_true", help="then list what numba compiled, by function")
    ap.add_argument("--top", type=int, default=25, help="functions listed by --kernels")
    ap.add_argument("command", nargs="+", help="the neardup command and its arguments (after --)")
    args = ap.parse_args()
    if args.runs:
        times = timed_runs(args.command, args.runs)
        print(f"median {statistics.median(times):.1f} s (min {min(times):.1f}, max {max(times):.1f}) over {len(times)} runs")
    if args.kernels:
        kernels(args.command, args.top)


if __name__ == "__main__":
    main()
