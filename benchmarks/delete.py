"""Cost of ``neardup delete`` beside the ingest of what it deletes.

An index is built once from the first ``--base`` documents of a JSON Lines corpus (one batch) and
the next ``--batch`` ones (a second batch), then checkpointed. Each run copies it, syncs the disk,
and times one command in a fresh process with ``/usr/bin/time -v`` (wall time and peak RSS; the
CLI's own "in X s" excludes start-up):

* ``ingest``: the second batch ingested into an index of the base alone (for comparison);
* ``batch``: ``delete --batch 2``, i.e. that batch deleted again;
* ``urls``: ``delete --url`` of 10 urls spread over the base;
* ``where``: ``delete --where "doc_id % 100 = 7"``, 1% of the documents, spread over every batch.

    python benchmarks/delete.py --corpus benchmarks/data/dedup-101000-w400.jsonl --base 30000 --batch 2000 --runs 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CLI = [sys.executable, "-c", "from neardup.cli.app import main; main()"]


def timed(args: list[str]) -> tuple[float, float, float | None]:
    """(wall seconds, peak RSS in MB, the command's own seconds) of one CLI run."""
    p = subprocess.run(["/usr/bin/time", "-v", *CLI, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{p.stdout}\n{p.stderr}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", p.stderr)
    secs = (int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3)))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) / 1024
    own = re.search(r" in ([\d.]+) s", p.stdout)
    return secs, rss, float(own.group(1)) if own else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--base", type=int, default=30000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=None, help="folder for the indexes (default: a temporary one)")
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="neardup-delete-"))
    work.mkdir(parents=True, exist_ok=True)
    base_f, batch_f = work / "base.jsonl", work / "batch.jsonl"
    urls = []
    if not batch_f.exists():
        with open(a.corpus) as src, open(base_f, "w") as b, open(batch_f, "w") as c:
            for i, line in enumerate(itertools.islice(src, a.base + a.batch)):
                (b if i < a.base else c).write(line)
    with open(base_f) as fh:
        for i, line in enumerate(fh):
            if i % (a.base // 10) == 3:
                urls.append(json.loads(line)["url"])
    only_base, built = work / "base-index", work / "index"
    if not built.exists():
        subprocess.run([*CLI, "ingest", "-q", "--index", str(only_base), str(base_f)], check=True)
        shutil.copytree(only_base, built)
        subprocess.run([*CLI, "ingest", "-q", "--index", str(built), str(batch_f)], check=True)
    cases = {
        "ingest": (only_base, ["ingest", "-q", str(batch_f)]),
        "batch": (built, ["delete", "--show", "0", "--batch", "2"]),
        "urls": (built, ["delete", "--show", "0", *itertools.chain.from_iterable(("--url", u) for u in urls[:10])]),
        "where": (built, ["delete", "--show", "0", "--where", "doc_id % 100 = 7"]),
    }
    print(f"index: {a.base} + {a.batch} documents of {a.corpus}; {a.runs} runs each; medians")
    for name, (src, args) in cases.items():
        rows = []
        for _ in range(a.runs):
            trial = work / "trial"
            shutil.rmtree(trial, ignore_errors=True)
            shutil.copytree(src, trial)
            os.sync()
            rows.append(timed([*args[:1], "--index", str(trial), *args[1:]]))
        wall = statistics.median(r[0] for r in rows)
        rss = statistics.median(r[1] for r in rows)
        own = [r[2] for r in rows if r[2] is not None]
        own_s = f", command {statistics.median(own):.2f} s" if own else ""
        print(f"{name:7s} wall {wall:.2f} s (runs {', '.join(f'{r[0]:.2f}' for r in rows)}){own_s}, peak RSS {rss:.0f} MB")
    shutil.rmtree(work / "trial", ignore_errors=True)


if __name__ == "__main__":
    main()
