"""Near-duplicate pairs end to end: neardup against datasketch and SetSimilaritySearch.

On one corpus (``corpus.build_dedup_jsonl``: real fixture sentences, a third of
the documents with edited copies), in one run:

* datasketch: MinHash (num_perm=128) of each document's word 5-shingles,
  ``MinHashLSH(threshold=0.8)``, every document queried, candidates kept when
  the estimated Jaccard reaches 0.8 (its own verification);
* SetSimilaritySearch: exact ``all_pairs`` (Jaccard >= 0.8) over the same
  shingle sets;
* neardup: ``neardup ingest`` of the JSONL file into a fresh index with the
  default settings (threshold 0.8), as a subprocess, then its ``jaccard``
  pairs read from the catalog (``neardup.query.run_sql``); the time includes
  reading, storing texts and every default fingerprint (everything ingest
  does). Before 2026-11-26 the pairs were read by a second process
  (``neardup sql``, about 1 s of process start and CLI): ``--pairs-via-cli``.

The peers read the JSONL and shingle in the timed region too (words are runs
of letters and digits of the lower-cased text, as neardup's tokenizer makes
them). The truth is the exact all-pairs answer (``neardup.exact.all_pairs``)
on neardup's shingle sets. Times are medians of ``--runs``. With ``--alternate`` the
tools take turns run by run, each round in the reverse order of the one before (neardup,
datasketch, datasketch, neardup, ...), so the drift of a shared
machine falls on all of them, after ``--warmup`` untimed runs of each (default 0; by default
each tool's runs come one after the other, as before 2026-11-26's twentieth session).

    python benchmarks/dedup.py --docs 5000 --runs 3

``--corpus FILE.jsonl`` takes a real corpus instead (``url`` and ``text``
per line, text already extracted; e.g. the Rust documentation site of
``benchmarks/realsite.py`` as neardup extracted it, below). Each tool then
runs in a child process of its own, and its peak RSS (its children's
included) is reported beside its time:

    neardup ingest --index /tmp/rs63 benchmarks/data/realsite/rust-1.63.warc.gz
    neardup sql --index /tmp/rs63 --format json "SELECT url, text FROM documents ORDER BY doc_id" > /tmp/rs63.jsonl
    python benchmarks/dedup.py --corpus /tmp/rs63.jsonl --runs 3 --skip sss
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build_dedup_jsonl  # noqa: E402

from neardup import exact  # noqa: E402

THRESHOLD = 0.8
_WORD = re.compile(r"[^\W_]+")


def read_shingles(path: Path) -> list[list[bytes]]:
    """Each document's distinct word 5-shingles, as UTF-8 bytes."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            w = _WORD.findall(json.loads(line)["text"].lower())
            sh = {" ".join(w[i : i + 5]).encode() for i in range(max(1, len(w) - 4))}
            out.append(list(sh))
    return out


def run_datasketch(path: Path) -> set[tuple[int, int]]:
    from datasketch import MinHash, MinHashLSH

    sets = read_shingles(path)
    mhs = MinHash.bulk(sets, num_perm=128)
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=128)
    for i, m in enumerate(mhs):
        lsh.insert(i, m)
    found = set()
    for i, m in enumerate(mhs):
        for j in lsh.query(m):
            if j > i and m.jaccard(mhs[j]) >= THRESHOLD:
                found.add((i, j))
    return found


def run_sss(path: Path) -> set[tuple[int, int]]:
    from SetSimilaritySearch import all_pairs

    sets = read_shingles(path)
    return {(min(x, y), max(x, y)) for x, y, s in all_pairs(sets, similarity_func_name="jaccard", similarity_threshold=THRESHOLD) if s >= THRESHOLD}


PAIRS_SQL = "SELECT doc_a - 1 AS a, doc_b - 1 AS b FROM duplicates WHERE method = 'jaccard'"


#: where ``run_neardup`` builds its index; removed by ``run_neardup.cleanup`` after the timed run
_WORK = Path(tempfile.gettempdir()) / f"neardup-dedup-{os.getpid()}"


def run_neardup(path: Path) -> set[tuple[int, int]]:
    """``neardup ingest`` of the corpus into a fresh index (a process of its own, as a user runs it),
    then its pairs read from the catalog by the engine's ``run_sql`` in this process (what a Python
    user of the index does; ``--pairs-via-cli`` reads them with a second process, ``neardup sql``).
    The index is deleted after the timed run (``in_child`` calls ``run_neardup.cleanup``), as the
    peers' structures go when their process ends: deleting its files is the benchmark's own
    housekeeping (about 0.05 s on the real site; inside the timed run before 2026-11-27)."""
    shutil.rmtree(_WORK, ignore_errors=True)
    _WORK.mkdir(parents=True)
    idx = _WORK / "idx"
    code = "from neardup.cli.app import main; main()"
    subprocess.run([sys.executable, "-c", code, "ingest", "--quiet", "--index", str(idx), str(path)], check=True)
    if PAIRS_VIA_CLI:
        out = subprocess.run([sys.executable, "-c", code, "sql", "--index", str(idx), "--format", "csv", PAIRS_SQL],
                             check=True, capture_output=True, text=True).stdout.splitlines()[1:]
        return {tuple(int(x) for x in line.split(",")) for line in out if line}
    from neardup import Index
    from neardup.query import run_sql

    t = run_sql(Index(idx), PAIRS_SQL)
    return set(zip(t.column("a").to_pylist(), t.column("b").to_pylist()))


run_neardup.cleanup = lambda: shutil.rmtree(_WORK, ignore_errors=True)  # type: ignore[attr-defined]


def compile_neardup() -> None:
    """Byte-compile neardup's modules before the runs, untimed, as ``pip install`` does (the peers
    are installed packages). An editable install where Python does not write bytecode
    (``PYTHONDONTWRITEBYTECODE``) otherwise compiles every module again in each process: about 0.3 s."""
    import compileall

    import neardup
    import neardup.cli

    for package in (neardup, neardup.cli):  # the CLI's folder is a package of its own in a checkout
        compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)


#: read neardup's pairs with a second process (``neardup sql``), as this script did before 2026-11-26
PAIRS_VIA_CLI = False


def in_child(fn, path: Path) -> tuple[float, set, float]:
    """``fn(path)`` in a forked child: (seconds, result, peak RSS in MB of the child and its children)."""
    import os
    import pickle

    out = Path(tempfile.mkstemp(prefix="neardup-dedup-")[1])
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            out.write_bytes(pickle.dumps(fn(path)))
            code = 0
        finally:
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - t0
    cleanup = getattr(fn, "cleanup", None)
    if cleanup is not None:  # untimed: what the run left on disk
        cleanup()
    if status:
        raise SystemExit(f"{fn.__name__} failed on {path}")
    res = pickle.loads(out.read_bytes())
    out.unlink()
    return seconds, res, usage.ru_maxrss / 1024


def timed(fn, path: Path, runs: int) -> tuple[float, set, list[float], float]:
    times, rss, res = [], [], set()
    for _ in range(runs):
        t, res, r = in_child(fn, path)
        times.append(t)
        rss.append(r)
    return statistics.median(times), res, times, statistics.median(rss)


def machine() -> str:
    """The machine and the tools' versions, one line: the ratios move with the kind of machine
    (datasketch's run is one core of arithmetic, a fifth or more of neardup's is the kernel's work
    on fresh pages; docs/benchmarks.md, fiftieth session), so a result names where it was made."""
    import platform
    from importlib import metadata

    cpu = {}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                cpu.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    model = cpu.get("model name") or platform.processor() or platform.machine()
    family = f", CPU family {cpu['cpu family']}" if "cpu family" in cpu else ""
    versions = []
    for dist in ("neardup", "datasketch", "SetSimilaritySearch"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return (f"machine: {model}{family}, {os.cpu_count()} cores; Python {platform.python_version()}; "
            + ", ".join(versions))


def _scores(found: set, truth: set) -> tuple[float, float]:
    """(precision, recall) of ``found`` against ``truth``."""
    tp = len(found & truth)
    return tp / len(found) if found else 1.0, tp / len(truth) if truth else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated tools to leave out: datasketch, sss")
    ap.add_argument("--corpus", help="a real corpus: JSON Lines with url and (extracted) text")
    ap.add_argument("--alternate", action="store_true", help="the tools take turns, run by run")
    ap.add_argument("--warmup", type=int, default=0, help="untimed runs of each tool first")
    ap.add_argument("--pairs-via-cli", action="store_true",
                    help="read neardup's pairs with a second process (neardup sql --format csv), not run_sql in the timed child")
    a = ap.parse_args()
    global PAIRS_VIA_CLI
    PAIRS_VIA_CLI = a.pairs_via_cli
    path = Path(a.corpus) if a.corpus else build_dedup_jsonl(a.docs)
    compile_neardup()
    tools = [("neardup ingest (end to end)", run_neardup)]
    skip = set(a.skip.split(","))
    if "datasketch" not in skip:
        tools.append(("datasketch MinHashLSH (128 perms, threshold 0.8)", run_datasketch))
    if "sss" not in skip:
        tools.append(("SetSimilaritySearch all_pairs (exact)", run_sss))
    rows = []
    if a.alternate:
        for _ in range(a.warmup):
            for _name, fn in tools:
                in_child(fn, path)
        got: dict[str, list] = {name: [] for name, _ in tools}
        for r in range(a.runs):
            # every other round in the reverse order (ABBA), so neither tool always runs first
            for name, fn in (tools if r % 2 == 0 else tools[::-1]):
                got[name].append(in_child(fn, path))
        for name, _ in tools:
            times = [t for t, _, _ in got[name]]
            rows.append((name, statistics.median(times), got[name][-1][1], times,
                         statistics.median([r for _, _, r in got[name]])))
    else:
        for name, fn in tools:
            for _ in range(a.warmup):
                in_child(fn, path)
            t, found, all_t, rss = timed(fn, path, a.runs)
            rows.append((name, t, found, all_t, rss))
    # the reference last: the tools' children fork from a process holding no corpus yet
    texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    t0 = time.perf_counter()
    truth = {(i, j) for i, j, _ in exact.all_pairs(exact.shingle_sets(texts), THRESHOLD)}
    t_truth = time.perf_counter() - t0
    print(machine())
    print(f"{len(texts)} documents, {mb:.1f} MB; {len(truth)} pairs with word-5-shingle Jaccard >= {THRESHOLD} "
          f"(exact all-pairs, {t_truth:.1f} s); medians of {a.runs} runs"
          f"{', the tools taking turns' if a.alternate else ''}{f' after {a.warmup} untimed' if a.warmup else ''}\n")
    rows = [(name, t, len(found), *_scores(found, truth), all_t, rss) for name, t, found, all_t, rss in rows]
    base = rows[0][1]
    print("| tool | seconds (median) | peak RSS MB (median) | pairs | precision | recall | time / neardup's |")
    print("|---|---|---|---|---|---|---|")
    for name, t, n, p, r, _, rss in rows:
        print(f"| {name} | {t:.2f} | {rss:.0f} | {n} | {p:.4f} | {r:.4f} | {t / base:.1f}x |")
    print("\nall times (s): " + "; ".join(f"{name}: " + ", ".join(f"{x:.2f}" for x in ts) for name, *_, ts, _ in rows))


if __name__ == "__main__":
    main()
