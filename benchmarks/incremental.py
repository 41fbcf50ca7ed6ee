"""Cost of one batch against the size of the index it joins.

One fixed batch (``--batch`` documents, 1% of the largest index) is ingested
into indexes of increasing size built from the same corpus
(``corpus.build_dedup_jsonl`` with shorter documents; the batch holds edited
copies of documents that are already indexed, so it has matches), with the
default settings. The prepared index is checkpointed (DuckDB otherwise
checkpoints when its log passes 16 MB, whichever batch that falls on). Each
run copies it (and syncs the disk, so that the batch's first fsync does not
write the copy back, and drops the copied catalog's pages from the page
cache, as the ingest that wrote it left them), then times
``neardup.ingest.ingest`` of the batch in a fresh process (start-up excluded);
the sizes take turns run by run. The ratio is the median time over the median
time into an empty index. ``--cli`` starts each process as the CLI's does
(``neardup.cli`` imported first: its kernel loading and wide vectors);
``--timings`` adds each stage's medians.

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

from neardup.store.catalog import drop_cached  # noqa: E402

RUN = """
import json, sys
if sys.argv[5] == "cli":
    import neardup.cli  # as the CLI's process starts: its kernel loading and vector width (neardup.kernel_cache)
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


def ingest_timed(path: Path, index: Path, stages: str, html: bool = False, cli: bool = False) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN, str(path), str(index), stages, "html" if html else "text",
                          "cli" if cli else "library"], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"ingest of {path} into {index} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="0,10000,30000,100000")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=0, help="untimed runs into an empty index first")
    ap.add_argument("--stages", choices=["pairs", "all"], default="all",
                    help="pairs: an index without the incremental clusterings; all: the default settings")
    ap.add_argument("--corpus", help="a real corpus (WARC or JSON Lines) instead of the generated one")
    ap.add_argument("--cli", action="store_true",
                    help="start each timed process as the CLI's does (neardup.cli imported first: its lean kernel "
                         "loading and wide vectors), not as a library user's")
    ap.add_argument("--timings", action="store_true",
                    help="also print each stage's median seconds per index size (the ingest's own timings)")
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
        print(f"batch: {a.batch} documents ({batch.stat().st_size / 1e6:.1f} MB); stages: {a.stages}; "
              f"processes started as {'the CLI' if a.cli else 'a library user'}'s; medians of {a.runs} runs\n")
        print("| documents in the index | batch seconds (median) | peak RSS MB (median) | pairs found (jaccard) | time ratio to an empty index | RSS ratio | all runs (s) |")
        print("|---|---|---|---|---|---|---|")
        prepared = {}
        for n in sizes:
            prepared[n] = tmp / f"idx-{n}"
            if n:
                part = tmp / f"base-{n}.jsonl"
                part.write_text("\n".join(itertools.islice(lines, n)) + "\n", encoding="utf-8")
                ingest_timed(part, prepared[n], a.stages, html, a.cli)
                # start from a checkpointed catalog: the batch then pays its own log, not the base's
                subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).execute('CHECKPOINT')",
                                str(prepared[n] / "catalog.duckdb")], check=True)
        for _ in range(a.warmup):  # untimed: kernels a cold cache lacks are compiled here
            shutil.rmtree(tmp / "warmup", ignore_errors=True)
            ingest_timed(batch, tmp / "warmup", a.stages, html, a.cli)
        shutil.rmtree(tmp / "warmup", ignore_errors=True)
        runs: dict[int, list[dict]] = {n: [] for n in sizes}
        for r in range(a.runs):  # the sizes in turns, so that the machine's slow minutes fall on all of them
            for n in sizes:
                trial = tmp / f"trial-{n}-{r}"
                if n:
                    shutil.copytree(prepared[n], trial)
                os.sync()  # or the batch's first fsync pays for writing the copy back
                if n:
                    # the copy's catalog pages leave the page cache, as the ingest that wrote the index
                    # left them (a writer drops them after its checkpoint, ``catalog.drop_cached``): else the
                    # batch's own drop pays for freeing the copy's (47 ms of a 1.7 GB catalog)
                    drop_cached(trial / "catalog.duckdb")
                runs[n].append(ingest_timed(batch, trial, a.stages, html, a.cli))
                shutil.rmtree(trial, ignore_errors=True)
        base_time = base_rss = None
        stage_medians: dict[int, dict[str, float]] = {}
        for n in sizes:
            times, rss = [x["seconds"] for x in runs[n]], [x["rss_mb"] for x in runs[n]]
            med, mrss = statistics.median(times), statistics.median(rss)
            base_time = base_time or med
            base_rss = base_rss or mrss
            pairs = runs[n][-1]["pairs"]
            print(f"| {n} | {med:.2f} | {mrss:.0f} | {pairs.get('jaccard', 0)} | {med / base_time:.2f}x | {mrss / base_rss:.2f}x | "
                  f"{', '.join(f'{t:.2f}' for t in times)} |", flush=True)
            keys = sorted({k for x in runs[n] for k in x["timings"]})
            stage_medians[n] = {k: statistics.median(x["timings"].get(k, 0.0) for x in runs[n]) for k in keys}
        if a.timings:
            print_stages(sizes, stage_medians)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def print_stages(sizes: list[int], medians: dict[int, dict[str, float]]) -> None:
    """A table of each stage's median seconds per index size, and what the largest adds to the first."""
    keys = sorted({k for m in medians.values() for k in m})
    print("\n| stage | " + " | ".join(f"{n} docs (s)" for n in sizes) + " | added |")
    print("|---|" + "---|" * (len(sizes) + 1))
    for k in keys:
        vals = [medians[n].get(k, 0.0) for n in sizes]
        print(f"| {k} | " + " | ".join(f"{v:.3f}" for v in vals) + f" | {vals[-1] - vals[0]:+.3f} |")


if __name__ == "__main__":
    main()
