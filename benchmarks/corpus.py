"""Build larger benchmark corpora from the real fixture pages (deterministic).

Every page of ``fixtures/crawl/sample.warc.gz`` and every record of
``fixtures/text/docs.jsonl`` is copied many times under new urls, each copy
with a few percent of its words replaced, so that the corpus is real text
with realistic markup and near-duplicate structure, of any size.

    python benchmarks/corpus.py --mb 60      # writes benchmarks/data/crawl-60mb.warc.gz and docs-60mb.jsonl
"""

from __future__ import annotations

import argparse
import io
import json
import random
import re
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
_TEXT_WORD = re.compile(r">([^<]+)<")


def _mutate_html(html: str, rnd: random.Random, rate: float) -> str:
    """Replace about ``rate`` of the words inside text nodes."""

    def sub(m: re.Match) -> str:
        words = m.group(1).split(" ")
        for i in range(len(words)):
            if words[i] and rnd.random() < rate:
                words[i] = f"w{rnd.randrange(100000)}"
        return ">" + " ".join(words) + "<"

    return _TEXT_WORD.sub(sub, html)


def _mutate_text(t: str, rnd: random.Random, rate: float) -> str:
    words = t.split(" ")
    for i in range(len(words)):
        if rnd.random() < rate:
            words[i] = f"w{rnd.randrange(100000)}"
    return " ".join(words)


def build_warc(mb: int, seed: int = 1) -> Path:
    out = DATA / f"crawl-{mb}mb.warc.gz"
    if out.exists():
        return out
    DATA.mkdir(parents=True, exist_ok=True)
    pages = []
    with open(ROOT / "fixtures" / "crawl" / "sample.warc.gz", "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response" and "html" in (rec.http_headers.get_header("Content-Type") or ""):
                pages.append((rec.rec_headers.get_header("WARC-Target-URI"), rec.content_stream().read()))
    rnd = random.Random(seed)
    total, n = 0, 0
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        while total < mb * 1_000_000:
            url, body = pages[n % len(pages)]
            try:
                html = body.decode("utf-8")
            except UnicodeDecodeError:
                n += 1
                continue
            data = _mutate_html(html, rnd, 0.03).encode("utf-8")
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(f"{url}?copy={n}", "response", payload=io.BytesIO(data), http_headers=headers))
            total += len(data)
            n += 1
    tmp.rename(out)
    return out


def build_jsonl(mb: int, seed: int = 2) -> Path:
    out = DATA / f"docs-{mb}mb.jsonl"
    if out.exists():
        return out
    DATA.mkdir(parents=True, exist_ok=True)
    with open(ROOT / "fixtures" / "text" / "docs.jsonl", encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh]
    rnd = random.Random(seed)
    total, n = 0, 0
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        while total < mb * 1_000_000:
            r = recs[n % len(recs)]
            t = _mutate_text(r["text"], rnd, 0.03)
            line = json.dumps({"url": f"{r['url']}?copy={n}", "text": t}, ensure_ascii=False)
            fh.write(line + "\n")
            total += len(t.encode("utf-8"))
            n += 1
    tmp.rename(out)
    return out


def _sentence_pool() -> list[str]:
    """Every sentence-like line of the fixture texts (real prose, code and lists)."""
    pool = []
    with open(ROOT / "fixtures" / "text" / "docs.jsonl", encoding="utf-8") as fh:
        for line in fh:
            for part in re.split(r"(?<=[.!?])\s+|\n+", json.loads(line)["text"]):
                if len(part.split()) >= 4:
                    pool.append(part.strip())
    return sorted(set(pool))


def _edit(words: list[str], rnd: random.Random, rate: float) -> list[str]:
    """Replace, delete or insert about ``rate`` of the words (a third each)."""
    out = []
    for w in words:
        r = rnd.random()
        if r < rate / 3:
            out.append(f"w{rnd.randrange(100000)}")
        elif r < 2 * rate / 3:
            continue
        elif r < rate:
            out += [w, f"w{rnd.randrange(100000)}"]
        else:
            out.append(w)
    return out


def build_dedup_jsonl(n_docs: int, seed: int = 3, max_words: int = 1500) -> Path:
    """``n_docs`` documents for pair benchmarks: originals made of fixture sentences drawn at
    random (so unrelated documents still share common lines), and for a third of them
    1-4 edited copies with 0-6% of their words replaced, deleted or inserted — pairs on
    both sides of Jaccard 0.8 — all shuffled. Originals have 80 to ``max_words`` words.
    Written to benchmarks/data/dedup-N.jsonl (dedup-N-wM.jsonl for another ``max_words``)."""
    out = DATA / (f"dedup-{n_docs}.jsonl" if max_words == 1500 else f"dedup-{n_docs}-w{max_words}.jsonl")
    if out.exists():
        return out
    DATA.mkdir(parents=True, exist_ok=True)
    pool = _sentence_pool()
    rnd = random.Random(seed)
    docs: list[list[str]] = []
    while len(docs) < n_docs:
        words = []
        target = rnd.randrange(80, max_words)
        while len(words) < target:
            words += rnd.choice(pool).split()
        docs.append(words)
        if rnd.random() < 1 / 3:
            for _ in range(rnd.randrange(1, 5)):
                docs.append(_edit(words, rnd, rnd.uniform(0, 0.06)))
    docs = docs[:n_docs]
    rnd.shuffle(docs)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for i, words in enumerate(docs):
            fh.write(json.dumps({"url": f"https://bench.example/{i}", "text": " ".join(words)}, ensure_ascii=False) + "\n")
    tmp.rename(out)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=60)
    a = ap.parse_args()
    print(build_warc(a.mb), build_jsonl(a.mb))
