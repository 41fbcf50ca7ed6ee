"""Query speed: `neardup query` / `Index.query` against a 100,000-document index.

build (untimed): streams JSONL records (``.jsonl``, ``.jsonl.gz`` or
``.jsonl.zst``; ``url`` and ``text``) from ``--input`` files in order; the
first ``--docs`` go into a fresh index (``neardup ingest -`` with the
default settings, one batch per 128 MB), the next ``--held-out`` are written
to ``WORK/held-out.jsonl``, the records to query. With the scale corpus
(``benchmarks/scale.py build``: site frames of 30-70% of a page's words, 10%
recrawls of earlier pages with a few words edited, 3% copies) part 0 holds
100,000 pages and the first 1,000 of part 1 are held out: recrawls and
copies of indexed pages among pages that pair with nothing.

run: ``--runs`` times, in a fresh process each, measured from the
interpreter's start:

* ``startup``: ``import neardup``, then a query of one held-out text (opens
  the catalog and postings, loads the compiled kernels);
* ``batch``: ``Index.query`` of all held-out texts as one call; reported as
  ms per query document;
* ``single``: then ``--singles`` queries of one held-out text each
  (median ms per call: each opens the index again), and as many in one
  ``Index.lookup()`` that holds the index open (``lookup``);
* the process's peak RSS (``os.wait4``), and the engine's stage times of
  the batch call.

Then the command line: ``neardup query WORK/held-out.jsonl --format jsonl``
as a subprocess, its wall time and peak RSS. Medians of the runs are printed
and written to ``RESULTS/NAME.csv`` (``--name``, default ``query``).

    python benchmarks/scale.py build                  # the scale corpus (once; benchmarks/data/scale)
    python benchmarks/query.py build --input benchmarks/data/scale/parts/part-00.jsonl.zst \\
        --input benchmarks/data/scale/parts/part-01.jsonl.zst --docs 100000 --held-out 1000 --work /tmp/qbench
    python benchmarks/query.py run --work /tmp/qbench --runs 3 --name query-scale
    # the real site (benchmarks/realsite.py): its pages' text as JSONL, the last 1,000 held out
    neardup ingest --index /tmp/qreal/full benchmarks/data/realsite/both.warc.gz
    neardup sql --index /tmp/qreal/full --format json "SELECT url, text FROM documents ORDER BY doc_id" > /tmp/qreal/pages.jsonl
    python benchmarks/query.py build --input /tmp/qreal/pages.jsonl --docs N-1000 --held-out 1000 --work /tmp/qreal
    python benchmarks/query.py run --work /tmp/qreal --runs 3 --name query-realsite
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
T_START = time.perf_counter()


def records(paths: list[str]):
    for p in paths:
        if p.endswith(".zst"):
            import zstandard

            raw = zstandard.ZstdDecompressor().stream_reader(open(p, "rb"))
        elif p.endswith(".gz"):
            raw = gzip.open(p, "rb")
        else:
            raw = open(p, "rb")
        with io.TextIOWrapper(raw, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield line


def build(args: argparse.Namespace) -> None:
    work = Path(args.work)
    index = work / "index"
    if index.exists():
        shutil.rmtree(index)
    work.mkdir(parents=True, exist_ok=True)
    it = records(args.input)
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", "from neardup.cli.app import main; main()", "ingest", "--quiet",
                          "--index", str(index), "-"], stdin=subprocess.PIPE)
    n = 0
    for line in it:
        p.stdin.write(line.encode("utf-8"))
        n += 1
        if n == args.docs:
            break
    p.stdin.close()
    held = []
    for line in it:
        held.append(line)
        if len(held) == args.held_out:
            break
    (work / "held-out.jsonl").write_text("".join(held), encoding="utf-8")
    if p.wait() != 0:
        sys.exit(f"ingest failed ({p.returncode})")
    print(f"indexed {n} records in {time.perf_counter() - t0:.0f} s into {index}; {len(held)} held out in {work / 'held-out.jsonl'}")


def child(args: argparse.Namespace) -> None:
    """One measured run (in its own process); prints one JSON line."""
    import neardup
    from neardup.lookup.run import query_texts

    t_import = time.perf_counter() - T_START
    held = [json.loads(x) for x in (Path(args.work) / "held-out.jsonl").read_text(encoding="utf-8").splitlines()]
    texts, urls = [r["text"] for r in held], [r["url"] for r in held]
    idx = neardup.Index(Path(args.work) / "index")
    idx.query(texts[:1], urls[:1])
    t_startup = time.perf_counter() - T_START
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    result = query_texts(idx, texts, urls, timings=timings)
    t_batch = time.perf_counter() - t0
    singles, held_open = [], []
    for i in range(args.singles):
        j = (i * 37) % len(texts)
        t0 = time.perf_counter()
        idx.query(texts[j : j + 1], urls[j : j + 1])
        singles.append(time.perf_counter() - t0)
    with idx.lookup() as q:
        for i in range(args.singles):
            j = (i * 37) % len(texts)
            t0 = time.perf_counter()
            q.query(texts[j : j + 1], urls[j : j + 1])
            held_open.append(time.perf_counter() - t0)
    rows = result.to_pylist()
    with_partner = len({r["query"] for r in rows if r["doc_id"] is not None})
    print(json.dumps({
        "import_s": t_import, "startup_s": t_startup, "batch_s": t_batch, "docs": len(texts),
        "ms_per_doc": 1000 * t_batch / len(texts), "single_ms": 1000 * statistics.median(singles) if singles else None,
        "lookup_ms": 1000 * statistics.median(held_open) if held_open else None,
        "with_partners": with_partner, "rows": len(rows), "stages": timings,
    }))


def measure(cmd: list[str], stdout=subprocess.PIPE) -> tuple[float, float, bytes]:
    """(wall seconds, peak RSS in MB, stdout) of a child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout)
    out = p.stdout.read() if stdout is subprocess.PIPE else b""
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, out


def run(args: argparse.Namespace) -> None:
    work = Path(args.work)
    runs = []
    for k in range(args.runs):
        _, rss, out = measure([sys.executable, __file__, "_child", "--work", str(work), "--singles", str(args.singles)])
        r = json.loads(out.decode().strip().splitlines()[-1])
        r["rss_mb"] = rss
        with open(os.devnull, "wb") as null:
            wall, cli_rss, _ = measure([sys.executable, "-c", "from neardup.cli.app import main; main()", "query",
                                        "--index", str(work / "index"), str(work / "held-out.jsonl"), "--format", "jsonl"], stdout=null)
        r["cli_s"], r["cli_rss_mb"] = wall, cli_rss
        runs.append(r)
        print(f"run {k + 1}: startup {r['startup_s']:.2f} s (import {r['import_s']:.2f} s), {r['docs']} docs in {r['batch_s']:.2f} s = "
              f"{r['ms_per_doc']:.1f} ms/doc, single {r['single_ms']:.0f} ms/call ({r['lookup_ms']:.0f} ms held open), peak RSS {rss:.0f} MB; "
              f"{r['with_partners']} with partners; CLI {wall:.2f} s, {cli_rss:.0f} MB", flush=True)
    med = {k: statistics.median(r[k] for r in runs) for k in ("import_s", "startup_s", "batch_s", "ms_per_doc", "single_ms", "lookup_ms",
                                                             "rss_mb", "cli_s", "cli_rss_mb")}
    stages = {s: statistics.median(r["stages"].get(s, 0.0) for r in runs) for s in sorted({s for r in runs for s in r["stages"]})}
    with_partners = runs[0]["with_partners"]
    print(f"median of {len(runs)}: {med['ms_per_doc']:.1f} ms per query document ({runs[0]['docs']} in one call, "
          f"{with_partners} with indexed partners), start-up {med['startup_s']:.2f} s, single-document call {med['single_ms']:.0f} ms "
          f"({med['lookup_ms']:.0f} ms with the index held open), "
          f"peak RSS {med['rss_mb']:.0f} MB; CLI {med['cli_s']:.2f} s, {med['cli_rss_mb']:.0f} MB")
    print("engine stages of the batch call (s): " + ", ".join(f"{s} {v:.2f}" for s, v in stages.items()))
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    with open(results / f"{args.name}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        cols = ("import_s", "startup_s", "batch_s", "ms_per_doc", "single_ms", "lookup_ms", "rss_mb", "cli_s", "cli_rss_mb")
        w.writerow(["run", "docs", "with_partners", *cols])
        for k, r in enumerate(runs, 1):
            w.writerow([k, r["docs"], r["with_partners"], *(round(r[c], 4) for c in cols)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="index --docs records, hold out the next --held-out")
    b.add_argument("--input", action="append", required=True)
    b.add_argument("--docs", type=int, default=100_000)
    b.add_argument("--held-out", type=int, default=1_000)
    b.add_argument("--work", required=True)
    r = sub.add_parser("run", help="time the queries")
    r.add_argument("--work", required=True)
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--singles", type=int, default=20)
    r.add_argument("--results", default=str(HERE / "results"))
    r.add_argument("--name", default="query", help="results file RESULTS/NAME.csv")
    c = sub.add_parser("_child")
    c.add_argument("--work", required=True)
    c.add_argument("--singles", type=int, default=20)
    args = ap.parse_args()
    {"build": build, "run": run, "_child": child}[args.cmd](args)


if __name__ == "__main__":
    main()
