"""Distributed build benchmark: local ingest vs ``neardup build --dask local:N`` on a scale corpus.

The corpus is one made by ``benchmarks/scale.py build`` (its ``parts/`` are the
inputs, in order). Three runs:

1. local: one ``neardup ingest`` process per part, in order, into a new index
   (what the build must equal): wall time and peak RSS of each process
   (``os.wait4``);
2. build: ``neardup.distributed.build`` on a LocalCluster of ``--workers``
   one-thread worker processes, started here: wall time, and the peak RSS
   of each worker (asked on the worker) and of this process (client and
   scheduler);
3. measure: the build again with ``measure=True``: rows and Arrow bytes of
   each dataset entering a shuffle, per document built (docs/scaling.md).

It checks that the build has the local index's documents, pairs per method
and clusters per method, and writes RESULTS/dask-<docs>.json.

    python benchmarks/scale.py build --docs 20000 --out /tmp/scale-20k
    python benchmarks/dask.py --corpus /tmp/scale-20k --work /tmp/dask-bench

The million: the local side is the scale benchmark's own run (one ingest per
part, the same thing), its index and CSV reused; the third run left out (the
bytes per document come from the smaller corpora):

    python benchmarks/scale.py run --corpus benchmarks/data/scale --index /tmp/scale-idx --batches 10 --results /tmp/scale-res
    python benchmarks/dask.py --corpus benchmarks/data/scale --work /tmp/dask-1m \
        --local-from /tmp/scale-idx /tmp/scale-res/scale-10.csv --no-measure
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# run as a script, this file's folder comes first on sys.path, and this file would be imported as `dask`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]


def neardup_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "neardup"
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from neardup.cli.app import main; main()"]


def local_ingest(parts: list[Path], index: Path) -> dict:
    rows = []
    for p in parts:
        t = time.perf_counter()
        proc = subprocess.Popen([*neardup_cmd(), "ingest", "--index", str(index), "--quiet", str(p)])
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status):
            sys.exit(f"neardup ingest {p} failed")
        rows.append({"part": p.name, "wall_s": round(time.perf_counter() - t, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024)})
    return {"wall_s": round(sum(r["wall_s"] for r in rows), 2), "peak_rss_mb": max(r["peak_rss_mb"] for r in rows), "per_part": rows}


def local_from_csv(csv: Path, n_parts: int) -> dict:
    """The local ingest's figures from a ``scale.py run`` CSV (one ``neardup ingest`` per part, as above)."""
    import csv as csvmod

    rows = list(csvmod.DictReader(csv.open()))[:n_parts]
    per = [{"part": f"part-{int(r['batch']):02d}", "wall_s": float(r["wall_s"]), "peak_rss_mb": int(float(r["peak_rss_mb"]))} for r in rows]
    return {"wall_s": round(sum(r["wall_s"] for r in per), 2), "peak_rss_mb": max(r["peak_rss_mb"] for r in per),
            "per_part": per, "from": str(csv)}


def _peak_rss_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def dask_build(parts: list[Path], out: Path, workers: int, measure: bool) -> tuple[dict, object]:
    from dask.distributed import Client, LocalCluster

    from neardup.distributed import build

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as lc, Client(lc) as c:
        t = time.perf_counter()
        res = build([str(p) for p in parts], str(out), cluster=c, force=True, measure=measure)
        wall = time.perf_counter() - t
        peaks = c.run(_peak_rss_mb)
    return {"wall_s": round(wall, 2), "worker_peak_rss_mb": sorted(peaks.values()), "client_scheduler_peak_rss_mb": _peak_rss_mb(),
            "stages_s": {k: round(v, 2) for k, v in res.timings.items()}, "component_rounds": res.rounds}, res


def local_counts(index: Path) -> dict:
    q = ("SELECT 'docs' AS k, count(*) AS n FROM documents UNION ALL SELECT 'rejects', count(*) FROM rejects "
         "UNION ALL SELECT 'pairs ' || method, count(*) FROM duplicates GROUP BY method "
         "UNION ALL SELECT 'clusters ' || method, count(*) FROM clusters GROUP BY method")
    r = subprocess.run([*neardup_cmd(), "sql", "--index", str(index), "--format", "json", q], capture_output=True, text=True, check=True)
    return {d["k"]: int(d["n"]) for d in map(json.loads, r.stdout.splitlines()) if d}


def build_counts(out: Path) -> dict:
    import duckdb

    con = duckdb.connect()
    got = {"docs": con.execute(f"SELECT count(*) FROM read_parquet('{out}/documents/*.parquet')").fetchall()[0][0],
           "rejects": con.execute(f"SELECT count(*) FROM read_parquet('{out}/rejects/*.parquet')").fetchall()[0][0]}
    for m, n in con.sql(f"SELECT method, count(*) FROM read_parquet('{out}/duplicates/*.parquet') GROUP BY method").fetchall():
        got[f"pairs {m}"] = n
    for m, n in con.sql(f"SELECT method, count(*) FROM read_parquet('{out}/clusters/*.parquet') GROUP BY method").fetchall():
        got[f"clusters {m}"] = n
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="a corpus of benchmarks/scale.py build (its parts/ are read)")
    ap.add_argument("--work", required=True, help="a scratch folder (the local index and the build go there; replaced)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit-parts", type=int, default=None, help="only the corpus's first N parts")
    ap.add_argument("--results", default=str(HERE / "results"))
    ap.add_argument("--local-from", nargs=2, metavar=("INDEX", "CSV"),
                    help="skip the local ingest: the index and the per-part CSV of a `scale.py run --batches 10` of the same "
                         "corpus (the same one ingest per part, in order)")
    ap.add_argument("--no-measure", action="store_true", help="skip the third run (the bytes per document of each shuffle)")
    args = ap.parse_args()
    corpus, work = Path(args.corpus), Path(args.work)
    manifest = json.loads((corpus / "manifest.json").read_text())
    chosen = manifest["parts"][: args.limit_parts]
    parts = [corpus / p["file"] for p in chosen]
    if args.limit_parts is not None:
        manifest = {**manifest, "docs": sum(p["docs"] for p in chosen), "text_bytes": sum(p["text_bytes"] for p in chosen)}
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    if args.local_from:
        local_index = Path(args.local_from[0])
        local = local_from_csv(Path(args.local_from[1]), len(parts))
    else:
        local_index = work / "index"
        local = local_ingest(parts, local_index)
    print(f"local ingest: {local['wall_s']} s, peak RSS {local['peak_rss_mb']} MB", flush=True)
    dist, res = dask_build(parts, work / "build", args.workers, measure=False)
    print(f"build local:{args.workers}: {dist['wall_s']} s, worker peak RSS {dist['worker_peak_rss_mb']} MB, "
          f"client+scheduler {dist['client_scheduler_peak_rss_mb']} MB; stages {dist['stages_s']}", flush=True)
    lc, bc = local_counts(local_index), build_counts(work / "build")
    print(f"counts local {lc}\ncounts build {bc}\nsame: {lc == bc}", flush=True)
    shuffled = {}
    if not args.no_measure:
        shutil.rmtree(work / "build")  # room on the disk for the measured build
        _, measured = dask_build(parts, work / "measure", args.workers, measure=True)
        n = max(measured.n_docs, 1)
        shuffled = {k: {**v, "bytes_per_doc": round(v["bytes"] / n, 1)} for k, v in measured.shuffled.items()}
    for k, v in shuffled.items():
        print(f"  {k:<66} {v['rows']:>12,} rows {v['bytes']:>15,} B {v['bytes_per_doc']:>10,.1f} B/doc")
    out = {"corpus": str(corpus), "docs": manifest["docs"], "text_bytes": manifest.get("text_bytes"), "workers": args.workers,
           "cpus": os.cpu_count(), "local": local, "build": dist, "counts_local": lc, "counts_build": bc,
           "same_counts": lc == bc, "shuffled": shuffled}
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"dask-{manifest['docs']}.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"counts local {lc}\ncounts build {bc}\nsame: {lc == bc}\n-> {path}")


if __name__ == "__main__":
    main()
