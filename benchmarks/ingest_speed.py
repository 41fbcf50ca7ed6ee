"""Ingest throughput: read + HTML strip + tokenize + the default fingerprints + store.

Builds (once) the >= 50 MB corpora of ``benchmarks/corpus.py`` and times, as
whole processes, ``neardup ingest`` into a fresh index, several runs each,
reporting the median in MB/s of payload (decompressed record bytes). Next to
it, in the same run, a floor: the same records read with the same libraries
and nothing else (warcio + selectolax for the WARC, ``json.loads`` for the
JSONL), so the ratio shows what the index costs on top of reading.

    python benchmarks/ingest_speed.py --mb 60 --runs 5 [--stages fingerprints|all]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build_jsonl, build_warc  # noqa: E402

FLOOR_WARC = """
import sys, time
from warcio.archiveiterator import ArchiveIterator
from selectolax.lexbor import LexborHTMLParser
n = 0
t0 = time.perf_counter()
with open(sys.argv[1], 'rb') as fh:
    for rec in ArchiveIterator(fh):
        if rec.rec_type == 'response':
            data = rec.content_stream().read()
            n += len(data)
            tree = LexborHTMLParser(data.decode('utf-8', 'replace'))
            tree.strip_tags(['script', 'style'])
            (tree.body.text(separator=' ') if tree.body else '')
print(n, time.perf_counter() - t0)
"""

FLOOR_JSONL = """
import sys, json, time
n = 0
t0 = time.perf_counter()
with open(sys.argv[1], 'rb') as fh:
    for line in fh:
        n += len(json.loads(line)['text'].encode('utf-8'))
print(n, time.perf_counter() - t0)
"""

NEARDUP = """
import sys, time
from neardup import Index, Settings
from neardup.ingest import ingest
t0 = time.perf_counter()
s = Settings(pairs=(), clusters=()) if sys.argv[3] == "fingerprints" else Settings()
r = ingest(Index(sys.argv[2]), sys.argv[1], create_with=s)
print(r.n_bytes, time.perf_counter() - t0, r.n_docs)
"""


def run(code: str, *args: str) -> tuple[int, float]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), float(out[1])  # bytes, seconds inside the process (after imports)


def measure(path: Path, floor: str, runs: int, stages: str) -> dict:
    ours, inner, base = [], [], []
    nbytes = 0
    for _ in range(runs):
        tmp = Path(tempfile.mkdtemp(prefix="neardup-bench-"))
        try:
            t0 = time.perf_counter()
            nbytes, t_in = run(NEARDUP, str(path), str(tmp / "idx"), stages)
            ours.append(time.perf_counter() - t0)  # whole process, imports included
            inner.append(t_in)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.perf_counter()
        run(floor, str(path))
        base.append(time.perf_counter() - t0)
    mo, mb = statistics.median(ours), statistics.median(base)
    return {
        "input": path.name,
        "MB": nbytes / 1e6,
        "neardup_s": mo,
        "neardup_MBps": nbytes / 1e6 / mo,
        "floor_s": mb,
        "floor_MBps": nbytes / 1e6 / mb,
        "ratio": mo / mb,
        "inner_MBps": nbytes / 1e6 / statistics.median(inner),
        "runs": runs,
        "all_neardup_s": [round(x, 2) for x in ours],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=60)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--stages", choices=["fingerprints", "all"], default="fingerprints",
                    help="fingerprints: an index without pair methods and clusterings (the fingerprint stage); "
                         "all: the default settings (pairs and clusters too; these corpora are dozens of "
                         "3%%-edited copies of each page, the worst case for both)")
    a = ap.parse_args()
    rows = [
        measure(build_warc(a.mb), FLOOR_WARC, a.runs, a.stages),
        measure(build_jsonl(a.mb), FLOOR_JSONL, a.runs, a.stages),
    ]
    print("| input | payload MB | neardup ingest (median s) | MB/s | MB/s after start-up | read-only floor (s) | floor MB/s | neardup / floor |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['input']} | {r['MB']:.1f} | {r['neardup_s']:.2f} | {r['neardup_MBps']:.1f} | {r['inner_MBps']:.1f} | "
            f"{r['floor_s']:.2f} | {r['floor_MBps']:.1f} | {r['ratio']:.2f}x |"
        )
    print(f"\nruns per figure: {a.runs}; all neardup times: " + "; ".join(f"{r['input']}: {r['all_neardup_s']}" for r in rows))


if __name__ == "__main__":
    main()
