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

With ``--corpus FILE`` (a WARC, or JSON Lines with ``url`` and ``text``,
plain or .gz/.zst) the documents are a real corpus's instead, in file order:
the index holds its first documents and the batch is its last ``--batch``
(WARC pages are ingested as HTML). The real, boilerplate-heavy case:

    python benchmarks/realsite.py
    python benchmarks/incremental.py --corpus benchmarks/data/realsite/both.warc.gz --sizes 0,10000,50000 --batch 500 --runs 3
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
from neardup.readers import ReadOptions
s = Settings(clusters=()) if sys.argv[3] == "pairs" else Settings()
r = ingest(Index(sys.argv[2]), sys.argv[1], ReadOptions(html=sys.argv[4] == "html"), create_with=s)
# VmHWM: this process's own peak (ru_maxrss would carry the forking parent's over exec)
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps({"seconds": r.seconds, "pairs": r.pairs, "timings": r.timings, "rss_mb": rss}))
"""


def corpus_lines(path: str) -> list[str]:
    """JSON lines (url, text) of a WARC's HTML pages or of a JSON Lines file, in file order."""
    if ".warc" in path:
        from warcio.archiveiterator import ArchiveIterator

        out = []
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    html = rec.content_stream().read().decode("utf-8", "replace")
                    out.append(json.dumps({"url": rec.rec_headers.get_header("WARC-Target-URI"), "text": html}))
        return out
    from neardup.readers.streams import decompressing, peek  # plain, .gz or .zst, as ingest reads it

    with open(path, "rb") as raw:
        stream, head = peek(raw)
        return decompressing(stream, head).read().decode("utf-8").splitlines()


def ingest_timed(path: Path, index: Path, stages: str, html: bool = False) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN, str(path), str(index), stages, "html" if html else "text"], capture_output=True, text=True)
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
    ap.add_argument("--corpus", help="a real corpus (WARC or JSON Lines) instead of the generated one")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    html = bool(a.corpus and ".warc" in a.corpus)
    if a.corpus:
        lines = corpus_lines(a.corpus)
        if max(sizes) + a.batch > len(lines):
            raise SystemExit(f"{a.corpus}: {len(lines)} documents, fewer than {max(sizes)} + {a.batch}")
    else:
        lines = open(build_dedup_jsonl(max(sizes) + a.batch, max_words=400), encoding="utf-8").read().splitlines()
    tmp = Path(tempfile.mkdtemp(prefix="neardup-incr-"))
    try:
        batch = tmp / "batch.jsonl"
        batch.write_text("\n".join(lines[-a.batch :]) + "\n", encoding="utf-8")
        print(f"batch: {a.batch} documents ({batch.stat().st_size / 1e6:.1f} MB); stages: {a.stages}; medians of {a.runs} runs\n")
        print("| documents in the index | batch seconds (median) | peak RSS MB (median) | pairs found (jaccard) | time ratio to an empty index | RSS ratio | all runs (s) |")
        print("|---|---|---|---|---|---|---|")
        base_time = base_rss = None
        for n in sizes:
            prepared = tmp / f"idx-{n}"
            if n:
                part = tmp / f"base-{n}.jsonl"
                part.write_text("\n".join(itertools.islice(lines, n)) + "\n", encoding="utf-8")
                ingest_timed(part, prepared, a.stages, html)
                # start from a checkpointed catalog: the batch then pays its own log, not the base's
                subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).execute('CHECKPOINT')",
                                str(prepared / "catalog.duckdb")], check=True)
            times, rss, pairs = [], [], {}
            for r in range(a.runs):
                trial = tmp / f"trial-{n}-{r}"
                if n:
                    shutil.copytree(prepared, trial)
                os.sync()  # or the batch's first fsync pays for writing the copy back
                res = ingest_timed(batch, trial, a.stages, html)
                times.append(res["seconds"])
                rss.append(res["rss_mb"])
                pairs = res["pairs"]
                shutil.rmtree(trial, ignore_errors=True)
            med, mrss = statistics.median(times), statistics.median(rss)
            base_time = base_time or med
            base_rss = base_rss or mrss
            print(f"| {n} | {med:.2f} | {mrss:.0f} | {pairs.get('jaccard', 0)} | {med / base_time:.2f}x | {mrss / base_rss:.2f}x | "
                  f"{', '.join(f'{t:.2f}' for t in times)} |", flush=True)
            shutil.rmtree(prepared, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
