"""Cost of one batch against the size of the index it joins.

One fixed batch (``--batch`` documents, 1% of the largest index) is ingested
into indexes of increasing size built from the same corpus
(``corpus.build_dedup_jsonl`` with shorter documents; the batch holds edited
copies of documents that are already indexed, so it has matches), with the
default settings. The prepared index is checkpointed (DuckDB otherwise
checkpoints when its log passes 16 MB, whichever batch that falls on). Each
run copies it (and syncs the disk, so that the batch's first fsync does not
write the copy back), then times
``neardup.ingest.ingest`` of the batch in a fresh process (start-up excluded).
The ratio is the median time over the median time into an empty index.

    python benchmarks/incremental.py --sizes 0,10000,30000,100000 --batch 1000 --runs 3 [--stages pairs|all]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build_dedup_jsonl  # noqa: E402

RUN = """
import json, sys
from neardup import Index, Settings
from neardup.ingest import ingest
s = Settings(clusters=()) if sys.argv[3] == "pairs" else Settings()
r = ingest(Index(sys.argv[2]), sys.argv[1], create_with=s)
print(json.dumps({"seconds": r.seconds, "pairs": r.pairs, "timings": r.timings}))
"""


def ingest_timed(path: Path, index: Path, stages: str) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN, str(path), str(index), stages], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"ingest of {path} into {index} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="0,10000,30000,100000")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stages", choices=["pairs", "all"], default="all",
                    help="pairs: an index without the incremental clusterings; all: the default settings")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    corpus = build_dedup_jsonl(max(sizes) + a.batch, max_words=400)
    lines = open(corpus, encoding="utf-8").read().splitlines()
    tmp = Path(tempfile.mkdtemp(prefix="neardup-incr-"))
    try:
        batch = tmp / "batch.jsonl"
        batch.write_text("\n".join(lines[-a.batch :]) + "\n", encoding="utf-8")
        print(f"batch: {a.batch} documents ({batch.stat().st_size / 1e6:.1f} MB); stages: {a.stages}; medians of {a.runs} runs\n")
        print("| documents in the index | batch seconds (median) | pairs found (jaccard) | ratio to an empty index | all runs (s) |")
        print("|---|---|---|---|---|")
        base_time = None
        for n in sizes:
            prepared = tmp / f"idx-{n}"
            if n:
                part = tmp / f"base-{n}.jsonl"
                part.write_text("\n".join(itertools.islice(lines, n)) + "\n", encoding="utf-8")
                ingest_timed(part, prepared, a.stages)
                # start from a checkpointed catalog: the batch then pays its own log, not the base's
                subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).execute('CHECKPOINT')",
                                str(prepared / "catalog.duckdb")], check=True)
            times, pairs = [], {}
            for r in range(a.runs):
                trial = tmp / f"trial-{n}-{r}"
                if n:
                    shutil.copytree(prepared, trial)
                os.sync()  # or the batch's first fsync pays for writing the copy back
                res = ingest_timed(batch, trial, a.stages)
                times.append(res["seconds"])
                pairs = res["pairs"]
                shutil.rmtree(trial, ignore_errors=True)
            med = statistics.median(times)
            base_time = base_time or med
            print(f"| {n} | {med:.2f} | {pairs.get('jaccard', 0)} | {med / base_time:.2f}x | {', '.join(f'{t:.2f}' for t in times)} |", flush=True)
            shutil.rmtree(prepared, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
