"""Main-content extraction on a real site crawled in two releases: extractors and WARC readers.

The corpus is ``benchmarks/realsite.py``'s Rust documentation site
(``rust-1.63.warc.gz`` and ``rust-1.85.warc.gz``; the same url for the same
page in both). A *mirror* is a url present in both releases: to a reader one
page. Per extractor it measures

* extraction speed, MB/s of HTML (one thread, each page on its own), by the
  wall clock and by the thread's CPU time (the one to read on a shared machine);
* the mirror share: mirrors whose two fingerprinted texts reach word
  5-shingle Jaccard 0.8 (exact, neardup's shingles), and how many of them an
  index finds as ``jaccard`` pairs;
* the ``jaccard`` pairs between *different* urls, and of those found on the
  full text, how many have main contents (resiliparse's) that are
  near-duplicates too (the rest are frame-only pairs);
* the *unchanged* mirrors: those whose page text proper, the site's own
  main element (``site`` below), has the same words in the same order in
  both releases, so that only the frame around it changed; of those, how
  many each extractor's index finds as ``jaccard`` pairs. This is the case
  main-content extraction is for (the same article under two frames);
  mirrors whose own text was edited between the releases are another
  matter, which no extractor can turn into a pair.

Extractors: ``full`` (today's whole visible text, ``neardup.text``),
``resiliparse`` (``extract_plain_text(main_content=True)`` with the options
of ``neardup.readers.content``), ``trafilatura`` (``extract``, its
defaults), and ``site``, not a candidate but a bound: the text of this
site's own main element, picked by hand (rustdoc's ``#main-content``,
mdBook's ``<main>``), i.e. what a perfect extractor could give. As the index does, a main text under ``min_words`` (10) words
falls back to the full text. Pairs come from ``neardup.ingest`` of the
fingerprinted texts as plain text, one JSON Lines record per page, the url
prefixed by its release (so a mirror is a pair of two urls, not two versions
of one), default settings.

``--options``: the mirror share with other resiliparse options
(``OPTION_SETS``: its defaults, alt texts and list bullets, links, no
comments or post metadata, hidden elements kept).

Also WARC reading alone, MB/s of the compressed files: warcio (what
``neardup.readers.warc`` uses), fastwarc (resiliparse's reader) and
neardup's own reader (``read_input``, with its checks).

    python benchmarks/content.py [--data benchmarks/data/realsite] [--options] [--extractors full,resiliparse,trafilatura] [--limit N] [--runs 3]

Extracted texts are kept in ``benchmarks/data/content/<extractor>.parquet``
with the seconds they took (``--fresh`` extracts again); ``--limit`` takes
the first N pages of each release (their speed only, not the mirror share).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data" / "realsite"
CACHE = ROOT / "data" / "content"
RELEASES = ("rust-1.63", "rust-1.85")
EXTRACTORS = ("full", "resiliparse", "trafilatura", "site")
MIN_WORDS = 10
THRESHOLD = 0.8


def pages(release: str, limit: int | None = None):
    """(url, html) of every response record of a release, read with fastwarc."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    with open(DATA / f"{release}.warc.gz", "rb") as fh:
        for n, rec in enumerate(ArchiveIterator(fh, record_types=WarcRecordType.response, parse_http=True)):
            if limit is not None and n >= limit:
                return
            yield rec.headers["WARC-Target-URI"], rec.reader.read().decode("utf-8")


def _full(batch: list[str]) -> list[str]:
    from neardup import text

    marked = text.mark_blocks(pa.array(batch, pa.large_string())).to_pylist()
    return [text.html_to_text(h, blocks_marked=True) for h in marked]


def _resiliparse(batch: list[str]) -> list[str | None]:
    from neardup.readers.content import main_content

    return [main_content(h) for h in batch]


def _trafilatura(batch: list[str]) -> list[str | None]:
    import trafilatura

    return [trafilatura.extract(h) for h in batch]


def _site(batch: list[str]) -> list[str | None]:
    """Not a candidate, a bound: the text of this site's own main element, chosen by hand for it
    (rustdoc's ``#main-content``, else mdBook's ``<main>``), extracted by neardup's full-text rules."""
    from selectolax.lexbor import LexborHTMLParser

    from neardup import text

    out = []
    for h in text.mark_blocks(pa.array(batch, pa.large_string())).to_pylist():
        tree = LexborHTMLParser(h)
        tree.strip_tags(["script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "canvas"])
        node = tree.css_first("#main-content") or tree.css_first("main")
        out.append(node.text(deep=True, separator="") if node is not None else None)
    return out


FUNCS = {"full": _full, "resiliparse": _resiliparse, "trafilatura": _trafilatura, "site": _site}


def extract(name: str, limit: int | None, fresh: bool) -> tuple[pa.Table, dict]:
    """Every page's text by one extractor (cleaned like the index cleans it), and the seconds it took
    (wall and this thread's CPU: the machine may be shared) for how many bytes of HTML."""
    from neardup import text

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}{'' if limit is None else f'-{limit}'}.parquet"
    if path.exists() and not fresh:
        t = pq.read_table(path)
        return t, json.loads(t.schema.metadata[b"neardup"])
    rels, urls, texts = [], [], []
    seconds, cpu, nbytes = 0.0, 0.0, 0
    fn = FUNCS[name]
    for release in RELEASES:
        batch: list[tuple[str, str]] = []
        for item in [*pages(release, limit), None]:
            if item is not None:
                batch.append(item)
            if batch and (item is None or len(batch) == 1000):
                html = [h for _, h in batch]
                nbytes += sum(len(h.encode("utf-8")) for h in html)
                t0, c0 = time.perf_counter(), time.thread_time()
                out = fn(html)
                seconds += time.perf_counter() - t0
                cpu += time.thread_time() - c0
                rels += [release] * len(batch)
                urls += [u for u, _ in batch]
                texts += out
                batch = []
        print(f"  {name}: {release} done, {len(urls):,} pages, {seconds:.1f} s", file=sys.stderr)
    cleaned = text.clean_whitespace(pa.array(texts, pa.large_string()))
    t = pa.table({"release": rels, "url": urls, "text": cleaned})
    meta = {"seconds": seconds, "cpu_seconds": cpu, "html_bytes": nbytes}
    pq.write_table(t.replace_schema_metadata({"neardup": json.dumps(meta)}), path)
    return t, meta


def word_counts(texts: pa.Array) -> np.ndarray:
    from neardup import text

    return text.analyze(text.normal_form(texts.fill_null("")), 0, spans=False).word_counts


def fingerprinted(t: pa.Table, full: pa.Table) -> tuple[list[str], int]:
    """Each page's fingerprinted text: the extractor's, or the full text under MIN_WORDS words (and how many fell back)."""
    own = t.column("text").combine_chunks()
    short = word_counts(own) < MIN_WORDS
    fallback = full.column("text").combine_chunks()
    out = [f if s else o for o, f, s in zip(own.to_pylist(), fallback.to_pylist(), short.tolist())]
    return out, int(short.sum())


def mirror_jaccards(t: pa.Table, sets: list[np.ndarray]) -> dict[str, float]:
    """url -> exact Jaccard of its two releases' shingle sets, for the urls in both."""
    from neardup import exact

    where: dict[str, dict[str, int]] = {}
    for i, (r, u) in enumerate(zip(t.column("release").to_pylist(), t.column("url").to_pylist())):
        where.setdefault(u, {})[r] = i
    return {u: exact.jaccard(sets[d[RELEASES[0]]], sets[d[RELEASES[1]]]) for u, d in where.items() if len(d) == 2}


def mirror_words(t: pa.Table, texts: list[str]) -> dict:
    """How short the mirrors are and how much of their words changed: the median words of a mirror's
    two texts, and the share of mirrors whose word *sets* (1-shingles) reach Jaccard 0.8."""
    from neardup import Settings, exact

    sets = exact.shingle_sets(texts, Settings(shingle_size=1))
    words = word_counts(pa.array(texts, pa.large_string()))
    where: dict[str, dict[str, int]] = {}
    for i, (r, u) in enumerate(zip(t.column("release").to_pylist(), t.column("url").to_pylist())):
        where.setdefault(u, {})[r] = i
    pairs = [(d[RELEASES[0]], d[RELEASES[1]]) for d in where.values() if len(d) == 2]
    return {"mirror_median_words": float(np.median([words[a] for a, _ in pairs] + [words[b] for _, b in pairs])),
            "mirrors_word_sets_at_0.8": sum(exact.jaccard(sets[a], sets[b]) >= THRESHOLD - 1e-12 for a, b in pairs)}


def index_pairs(t: pa.Table, texts: list[str]) -> list[tuple[str, str, str, str]]:
    """The jaccard pairs a default index finds among the texts: (release_a, url_a, release_b, url_b)."""
    from neardup import Index, ReadOptions, Settings
    from neardup.ingest import ingest

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        with open(corpus, "w", encoding="utf-8") as fh:
            for r, u, x in zip(t.column("release").to_pylist(), t.column("url").to_pylist(), texts):
                fh.write(json.dumps({"url": f"{r} {u}", "text": x}, ensure_ascii=False) + "\n")
        idx = Index(Path(tmp) / "idx")
        ingest(idx, str(corpus), ReadOptions(), create_with=Settings(content="full"))
        with idx.reader() as con:
            rows = con.execute("SELECT url_a, url_b FROM duplicate_urls WHERE method = 'jaccard'").fetchall()
    return [(*a.split(" ", 1), *b.split(" ", 1)) for a, b in rows]


def unchanged_mirrors(site: pa.Table) -> set[str]:
    """The urls whose site main element (``_site``) holds at least MIN_WORDS words and the same words in
    the same order in both releases (neardup's normal form and words)."""
    from neardup import text

    own = site.column("text").combine_chunks()
    words = text.words(text.normal_form(own.fill_null(""))).to_pylist()
    by_url: dict[str, dict[str, tuple[str, ...]]] = {}
    for r, u, x, w in zip(site.column("release").to_pylist(), site.column("url").to_pylist(), own.to_pylist(), words):
        if x is not None and len(w) >= MIN_WORDS:
            by_url.setdefault(u, {})[r] = tuple(w)
    return {u for u, d in by_url.items() if len(d) == 2 and d[RELEASES[0]] == d[RELEASES[1]]}


def quality(name: str, t: pa.Table, full: pa.Table, main_sets: dict[tuple[str, str], np.ndarray] | None,
            unchanged: set[str] | None = None) -> dict:
    from neardup import exact

    texts, n_fallback = fingerprinted(t, full) if name != "full" else (t.column("text").to_pylist(), 0)
    sets = exact.shingle_sets(texts)
    mj = mirror_jaccards(t, sets)
    pairs = index_pairs(t, texts)
    found_mirrors = {ua for ra, ua, rb, ub in pairs if ua == ub and ra != rb}
    different = [(ra, ua, rb, ub) for ra, ua, rb, ub in pairs if ua != ub]
    res = {
        "extractor": name, "pages": t.num_rows, "fallback": n_fallback, "mirrors": len(mj),
        "mirrors_at_0.8": sum(j >= THRESHOLD - 1e-12 for j in mj.values()),
        "mirrors_identical": sum(j == 1.0 for j in mj.values()),
        "mirrors_found": len(found_mirrors & set(mj)),
        **({"unchanged_mirrors": len(unchanged), "unchanged_found": len(found_mirrors & unchanged),
            "unchanged_at_0.8": sum(mj.get(u, 0.0) >= THRESHOLD - 1e-12 for u in unchanged)} if unchanged is not None else {}),
        "different_url_pairs": len(different),
        "median_mirror_jaccard": statistics.median(mj.values()) if mj else None,
    }
    if main_sets is not None:  # of the pairs between different urls: are their main contents near-duplicates too?
        both = sum(exact.jaccard(main_sets[(ra, ua)], main_sets[(rb, ub)]) >= THRESHOLD - 1e-12 for ra, ua, rb, ub in different)
        res["different_url_main_also"] = both
        res["different_url_frame_only"] = len(different) - both
    res.update(mirror_words(t, texts))
    res["_mirror_jaccards"] = mj
    return res


#: resiliparse option sets tried beside the index's (``neardup.readers.content``): its defaults, and what
#: else might keep or drop text that changed between releases
OPTION_SETS = {
    "resiliparse defaults (main_content only)": dict(main_content=True),
    "index options + alt texts + list bullets": dict(main_content=True, preserve_formatting=True, alt_texts=True, list_bullets=True),
    "index options + links": dict(main_content=True, preserve_formatting=True, list_bullets=False, alt_texts=False, links=True),
    "index options, no comments or post meta": dict(main_content=True, preserve_formatting=True, list_bullets=False, alt_texts=False,
                                                    comments=False, post_meta=False),
    "index options + hidden elements": dict(main_content=True, preserve_formatting=True, list_bullets=False, alt_texts=False,
                                            hidden_elements=True),
}


def option_variants(full: pa.Table) -> list[dict]:
    """Mirror share (exact Jaccard, no index) of each of ``OPTION_SETS``, every page extracted again."""
    from resiliparse.extract.html2text import extract_plain_text

    from neardup import exact, text

    out = []
    for name, opts in OPTION_SETS.items():
        texts: list[str | None] = []
        for release in RELEASES:
            texts += [extract_plain_text(h, **opts) for _, h in pages(release)]
        t = pa.table({"release": full.column("release"), "url": full.column("url"),
                      "text": text.clean_whitespace(pa.array(texts, pa.large_string()))})
        mine, n_fallback = fingerprinted(t, full)
        mj = mirror_jaccards(t, exact.shingle_sets(mine))
        out.append({"options": name, "fallback": n_fallback, "mirrors_at_0.8": sum(j >= THRESHOLD - 1e-12 for j in mj.values()),
                    "mirrors": len(mj), "median_mirror_jaccard": statistics.median(mj.values())})
    return out


def warc_speed(runs: int) -> list[dict]:
    """Seconds (wall and process CPU) to read every response record's payload of both releases, per reader
    (medians of ``runs``)."""
    from fastwarc.warc import ArchiveIterator as FastIterator, WarcRecordType
    from warcio.archiveiterator import ArchiveIterator

    from neardup import ReadOptions
    from neardup.readers import read_input

    files = [DATA / f"{r}.warc.gz" for r in RELEASES]
    size = sum(f.stat().st_size for f in files)

    def by_warcio():
        n = 0
        for f in files:
            with open(f, "rb") as fh:
                for rec in ArchiveIterator(fh):
                    if rec.rec_type == "response":
                        n += len(rec.content_stream().read())
        return n

    def by_fastwarc():
        n = 0
        for f in files:
            with open(f, "rb") as fh:
                for rec in FastIterator(fh, record_types=WarcRecordType.response, parse_http=True):
                    n += len(rec.reader.read())
        return n

    def by_neardup():
        n = 0
        for f in files:
            for chunk in read_input(str(f), ReadOptions()):
                n += chunk.n_bytes_read
        return n

    out = []
    for name, fn in (("warcio", by_warcio), ("fastwarc", by_fastwarc), ("neardup read_input (warcio)", by_neardup)):
        secs, cpus = [], []
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            payload = fn()
            secs.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        s, c = statistics.median(secs), statistics.median(cpus)
        out.append({"reader": name, "seconds": round(s, 2), "cpu_seconds": round(c, 2), "runs": [round(x, 2) for x in secs],
                    "MB/s payload": round(payload / 1e6 / s, 1), "MB/s payload by CPU": round(payload / 1e6 / c, 1),
                    "MB compressed": round(size / 1e6, 1), "MB payload": round(payload / 1e6, 1)})
    return out


def main() -> None:
    global DATA
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "realsite", help="the folder of realsite.py's WARCs")
    ap.add_argument("--extractors", default=",".join(EXTRACTORS))
    ap.add_argument("--limit", type=int, default=None, help="first N pages of each release (speed only)")
    ap.add_argument("--runs", type=int, default=3, help="runs of the WARC reading timing")
    ap.add_argument("--fresh", action="store_true", help="extract again instead of reading benchmarks/data/content")
    ap.add_argument("--no-warc", action="store_true", help="skip the WARC reader timing")
    ap.add_argument("--options", action="store_true", help="the mirror share of other resiliparse option sets (OPTION_SETS)")
    ap.add_argument("--sample", type=Path, default=None, help="write 20 mirrors below 0.8 under main content to this file, to read")
    args = ap.parse_args()
    DATA = args.data
    names = [n for n in args.extractors.split(",") if n]
    tables = {}
    for name in ["full", *[n for n in names if n != "full"], *(["site"] if "site" not in names and args.limit is None else [])]:
        t, m = extract(name, args.limit, args.fresh)
        tables[name] = t
        mb = m["html_bytes"] / 1e6
        print(f"{name:12s} extraction: {mb:,.0f} MB of HTML in {m['seconds']:,.1f} s wall = {mb / m['seconds']:,.1f} MB/s; "
              f"{m['cpu_seconds']:,.1f} s CPU = {mb / m['cpu_seconds']:,.1f} MB/s", flush=True)
    if args.limit is None:
        from neardup import exact

        main_sets = None
        if "resiliparse" in tables:
            texts, _ = fingerprinted(tables["resiliparse"], tables["full"])
            sets = exact.shingle_sets(texts)
            t = tables["resiliparse"]
            main_sets = {(r, u): s for r, u, s in zip(t.column("release").to_pylist(), t.column("url").to_pylist(), sets)}
        unchanged = unchanged_mirrors(tables["site"])
        results = {}
        for name in names:
            res = quality(name, tables[name], tables["full"], main_sets if name == "full" else None, unchanged)
            results[name] = res
            print(json.dumps({k: v for k, v in res.items() if not k.startswith("_")}), flush=True)
        if args.sample and "resiliparse" in results:
            low = sorted((j, u) for u, j in results["resiliparse"]["_mirror_jaccards"].items() if j < THRESHOLD)
            step = max(1, len(low) // 20)
            args.sample.write_text("".join(f"{j:.3f} {u}\n" for j, u in low[::step][:20]))
    if args.options:
        for row in option_variants(tables["full"]):
            print(json.dumps(row), flush=True)
    if not args.no_warc:
        for row in warc_speed(args.runs):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
