"""Labelled near-duplicate corpora made from real text (``neardup generate``).

The input is any crawl or text file neardup reads. Its records become
*sources*: visible text, white space made canonical (one space between words,
one line per paragraph), at least ``min_words`` words, and no two of them
similar (word-shingle Jaccard >= ``source_similarity``: a later record
similar to a kept one is dropped), so that the only duplicates in the output
are the ones made here. Each kept source plays one role:

* **original**: written as it is; ``duplicated`` of them get 1..n
  near-duplicate variants, each of one kind:

  * ``exact``: the same text;
  * ``edit``: ``round(rate * words)`` word insertions, deletions and
    substitutions at random places, ``rate`` drawn from ``edit_rate``; inserted
    and substituted words come from the sources' own vocabulary;
  * ``reorder``: two paragraphs swapped (two sentences, if the text is one
    paragraph);
  * ``boilerplate``: a site header line and footer line of 8-15 words each
    (taken from a *frame* source) put around the text.

  An original and its variants form one gold cluster, and every two of them
  are a gold pair.
* **framed content**: the start of the source (``framed_content`` words,
  lengthened a word at a time where another page of its group already has
  that start) is put inside a long frame (header and footer, ``frame_words``
  words of another source), and ``frame_group`` such pages share a frame. These are the
  false duplicates of 001 (pages about different people that share a
  template): similar by shingles, not duplicates, so they are in no gold
  pair; ``framed_pairs.csv`` lists their pairs with their Jaccard.
* **reframed**: the start of the source (``framed_content`` words, as for
  framed content) written twice, once inside each of two long frames (two
  *sites*, ``frame_words`` words of two other sources each): one page under
  two site frames, as a site crawled in two releases or mirrored under
  another template serves it. The two copies are one gold cluster and a gold
  pair (relation ``reframed~reframed``); reframed pages under the same site
  frame are false duplicates like the framed ones (not listed in
  ``framed_pairs.csv``).
* **frame**: the words of the frames; not written.

With ``html_pages`` every document is written as an HTML page: the frame
lines of a framed, reframed or boilerplate page as its navigation header
(``<header><nav>``, one link per 4 words) and its footer (``<footer>``),
its own text as the paragraphs of ``<main><article>``; a page without a
frame has only the latter. Its visible text is the document's words in the
same order, so the Jaccard values listed are those of the full text;
ingest the corpus with ``--html`` (and ``--content main`` or ``full``).

Every random choice comes from ``random.Random`` seeded with a string made
from ``seed`` and the item's position, using only ``random()`` (whose
sequence Python keeps stable across versions), so the same input and options
give byte-identical output on every machine.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import __version__, exact, text
from .errors import InputError, NeardupError
from .prepare import extract_html
from .readers import ReadOptions, Reject, read_input
from .settings import Settings
from .variants import KINDS, _Rng, can_reorder, edit, frame_lines, html_page, reorder

URL_PREFIX = "https://generated.example/doc/"
OUTPUT_FORMATS = ("jsonl", "parquet")
#: Words of each boilerplate header and footer line.
BOILERPLATE_WORDS = (8, 15)
#: Frames shared by all boilerplate variants.
BOILERPLATE_FRAMES = 3
#: At most this many sources lend their words to the vocabulary of edits.
VOCABULARY_SOURCES = 1000
#: Pairs at or above this Jaccard are counted in the summary (the default pair threshold).
REPORT_AT = 0.8


class GenerateError(NeardupError):
    """The options or the input cannot make the corpus asked for."""

    hint = "pass more input text, or ask for fewer sources or framed pages"
    exit_code = 2


@dataclass(frozen=True)
class GenerateOptions:
    """What to make; see the module docstring for the meaning of each."""

    sources: int | None = None
    duplicated: float = 0.5
    variants: tuple[int, int] = (1, 3)
    kinds: tuple[str, ...] = KINDS
    edit_rate: tuple[float, float] = (0.005, 0.02)
    framed: int = 20
    frame_group: int = 5
    frame_words: int = 200
    framed_content: tuple[int, int] | None = None  # default: frame_words/20 .. frame_words/2
    min_words: int = 50
    max_words: int | None = None
    source_similarity: float = 0.3
    seed: int = 0
    output_format: str = "jsonl"
    reframed: int = 0
    html_pages: bool = False

    def content_range(self) -> tuple[int, int]:
        return self.framed_content or (max(1, self.frame_words // 20), max(1, self.frame_words // 2))

    def check(self) -> None:
        bad = []
        if self.sources is not None and self.sources < 1:
            bad.append("sources must be at least 1")
        if not 0 <= self.duplicated <= 1:
            bad.append("duplicated must lie in [0, 1]")
        if not 1 <= self.variants[0] <= self.variants[1]:
            bad.append("variants must be LO,HI with 1 <= LO <= HI")
        if not self.kinds or any(k not in KINDS for k in self.kinds):
            bad.append(f"kinds must be some of {', '.join(KINDS)}")
        if not 0 <= self.edit_rate[0] <= self.edit_rate[1] < 1:
            bad.append("edit rate must be LO,HI with 0 <= LO <= HI < 1")
        if self.reframed < 0:
            bad.append("reframed must be >= 0")
        if self.framed < 0 or self.frame_group < 2:
            bad.append("framed must be >= 0 and frame group >= 2")
        if self.frame_words < 2:
            bad.append("frame words must be at least 2")
        lo, hi = self.content_range()
        if not 1 <= lo <= hi:
            bad.append("framed content must be LO,HI with 1 <= LO <= HI")
        if self.min_words < 2 or (self.max_words is not None and self.max_words < self.min_words):
            bad.append("min words must be >= 2 and max words >= min words")
        if not 0 < self.source_similarity <= 1:
            bad.append("source similarity must lie in (0, 1]")
        if self.output_format not in OUTPUT_FORMATS:
            bad.append(f"output format must be one of {', '.join(OUTPUT_FORMATS)}")
        if bad:
            raise GenerateError("; ".join(bad), hint="see `neardup generate --help`")


@dataclass
class GenerateResult:
    """What a run read and wrote (also in ``manifest.json``)."""

    out: str
    corpus: str
    records_read: int = 0
    rejected: int = 0
    too_short: int = 0
    similar: int = 0
    originals: int = 0
    clusters: int = 0
    variants: dict[str, int] = field(default_factory=dict)
    framed: int = 0
    reframed: int = 0
    documents: int = 0
    gold_pairs: int = 0
    gold_pairs_below: int = 0
    framed_pairs: int = 0
    framed_pairs_above: int = 0
    rejects: list[Reject] = field(default_factory=list)  # the first 20 records the readers rejected


# -- sources -------------------------------------------------------------------------------

def canonical(t: str) -> list[list[str]]:
    """A text as paragraphs of words (empty paragraphs dropped)."""
    return [ws for ws in (line.split() for line in t.split("\n")) if ws]


def join(lines: list[list[str]]) -> str:
    return "\n".join(" ".join(ws) for ws in lines)


def _truncate(lines: list[list[str]], max_words: int) -> list[list[str]]:
    out, n = [], 0
    for ws in lines:
        if n + len(ws) > max_words:
            if max_words - n > 0:
                out.append(ws[: max_words - n])
            break
        out.append(ws)
        n += len(ws)
    return out


def _records(inputs: Sequence[str], opts: ReadOptions, res: GenerateResult) -> Iterator[tuple[str, str]]:
    for path in inputs:
        for chunk in read_input(path, opts):
            res.rejected += len(chunk.rejects)
            res.rejects.extend(chunk.rejects[: 20 - len(res.rejects)])
            chunk = extract_html(chunk)
            b = chunk.batch
            res.records_read += b.num_rows
            if b.num_rows:
                yield from zip(b.column("url").to_pylist(), text.clean_whitespace(b.column("content")).to_pylist())


def read_sources(inputs: Sequence[str], opts: ReadOptions, o: GenerateOptions, need: int | None,
                 res: GenerateResult) -> tuple[list[str], list[list[list[str]]]]:
    """The usable source texts in input order: long enough, each url once, and none similar to an
    earlier kept one. With ``need`` set, reading stops once that many are kept, enough of them
    long enough for the frames."""
    def long_enough(docs: list) -> bool:
        return sum(sum(map(len, d)) >= o.frame_words for d in docs) >= _long_frames(o)

    urls: list[str] = []
    docs: list[list[list[str]]] = []
    seen: set[str] = set()
    kept = _Dissimilar(o.source_similarity)
    pending: list[tuple[str, list[list[str]]]] = []

    def settle() -> None:  # shingle the pending texts together (one vectorised call), keep the dissimilar ones
        sets = exact.shingle_sets([join(d) for _, d in pending])
        for (url, d), x in zip(pending, sets):
            if kept.add(x):
                urls.append(url)
                docs.append(d)
            else:
                res.similar += 1
        pending.clear()

    for url, t in _records(inputs, opts, res):
        if url in seen or t is None:
            continue
        lines = canonical(t)
        if sum(map(len, lines)) < o.min_words:
            res.too_short += 1
            continue
        if o.max_words is not None:
            lines = _truncate(lines, o.max_words)
        seen.add(url)
        pending.append((url, lines))
        if len(pending) >= (1000 if need is None else max(50, min(1000, need - len(docs)))):
            settle()
            if need is not None and len(docs) >= need and long_enough(docs):
                break
    settle()
    return urls, docs


class _Dissimilar:
    """Keeps a set unless its Jaccard with a set kept before reaches ``threshold`` (exact).

    Prefix filter over kept sets only: with elements in one fixed order (here by value, the
    hashes being random), two sets with Jaccard >= t share an element among the first
    ``|x| - ceil(t |x|) + 1`` of each (Bayardo et al., 2007, as in ``neardup.exact``); every
    candidate is verified by intersecting the full sets. A copy of a kept text meets that
    text at once, so a crawl full of mirrors costs about one check per record.
    """

    def __init__(self, threshold: float):
        self.t = threshold
        self.sets: list[np.ndarray] = []
        self.index: dict[int, list[int]] = {}

    def add(self, x: np.ndarray) -> bool:
        x = np.sort(x)
        prefix = x[: len(x) - math.ceil(self.t * len(x) - 1e-9) + 1].tolist() if len(x) else []
        seen: set[int] = set()
        for v in prefix:
            for i in self.index.get(v, ()):
                if i not in seen:
                    seen.add(i)
                    y = self.sets[i]
                    if self.t * len(x) - 1e-9 <= len(y) <= len(x) / self.t + 1e-9 and exact.jaccard(x, y) >= self.t - 1e-12:
                        return False
        n = len(self.sets)
        self.sets.append(x)
        for v in prefix:
            self.index.setdefault(v, []).append(n)
        return True


# -- the corpus ----------------------------------------------------------------------------

@dataclass
class _Doc:
    lines: list[list[str]]
    role: str
    source_url: str
    cluster: str = ""
    edits: list[dict] = field(default_factory=list)
    original: int | None = None  # position of its original in the list of docs
    frame: int | None = None
    #: paragraphs of frame at the start and at the end of ``lines``
    frame_lines: tuple[int, int] = (0, 0)


def _groups(o: GenerateOptions) -> int:
    return math.ceil(o.framed / o.frame_group)


#: Site frames the reframed pages are written under (each page once under each).
SITES = 2


def _long_frames(o: GenerateOptions) -> int:
    """Long frames the corpus needs: one per group of framed pages, and the sites of the reframed pages."""
    return _groups(o) + (SITES if o.reframed else 0)


def _needed(o: GenerateOptions) -> int:
    """Sources the corpus needs: frames, framed and reframed pages and (at least one) originals."""
    return _long_frames(o) + (BOILERPLATE_FRAMES if "boilerplate" in o.kinds else 0) + o.framed + o.reframed + (o.sources or 1)


def _allocate(o: GenerateOptions, docs: list[list[list[str]]], n_groups: int) -> tuple[list[int], ...]:
    """Positions of the boilerplate frames, long frames, framed contents, originals, site frames
    and reframed contents (the last two empty unless ``reframed``)."""
    need = _needed(o)
    if len(docs) < need:
        raise GenerateError(f"the input holds {len(docs)} usable sources (at least {o.min_words} words, mutually dissimilar); "
                            f"this corpus needs {need}")
    order = list(range(len(docs)))
    _Rng(o.seed, "allocate").shuffle(order)
    n_words = [sum(map(len, d)) for d in docs]
    boiler_frames = BOILERPLATE_FRAMES if "boilerplate" in o.kinds else 0
    n_long = _long_frames(o)
    long_all = [i for i in order if n_words[i] >= o.frame_words][:n_long]
    if len(long_all) < n_long:
        sites = f" and {SITES} site frames" if o.reframed else ""
        raise GenerateError(f"{n_groups} framed groups{sites} need sources of at least {o.frame_words} words; "
                            f"only {len(long_all)} usable sources are that long")
    long_frames, sites = long_all[:n_groups], long_all[n_groups:]
    taken = set(long_all)
    rest = [i for i in order if i not in taken]
    boiler = rest[:boiler_frames]
    framed = rest[boiler_frames : boiler_frames + o.framed]
    reframed = rest[boiler_frames + o.framed : boiler_frames + o.framed + o.reframed]
    originals = rest[boiler_frames + o.framed + o.reframed :]
    if o.sources is not None:
        originals = originals[: o.sources]
    return boiler, long_frames, framed, sorted(originals), sites, reframed


def _vocabulary(docs: list[list[list[str]]]) -> list[str]:
    words = {w for d in docs[:VOCABULARY_SOURCES] for ws in d for w in ws if w.isalpha() and len(w) > 1}
    return sorted(words) or ["word"]


def make_documents(o: GenerateOptions, urls: list[str], docs: list[list[list[str]]]) -> list[_Doc]:
    n_groups = _groups(o)
    boiler, long_frames, framed, originals, sites, reframed = _allocate(o, docs, n_groups)
    vocabulary = _vocabulary(docs)
    out: list[_Doc] = []
    boiler_words = [[w for ws in docs[i] for w in ws] for i in boiler]
    for n, s in enumerate(originals):
        rng = _Rng(o.seed, "original", n)
        label = f"c{n:06d}"
        first = len(out)
        out.append(_Doc(docs[s], "original", urls[s], label))
        if rng.random() >= o.duplicated:
            out[-1].cluster = ""
            continue
        for v in range(rng.between(*o.variants)):
            kind = rng.pick(o.kinds)
            if kind == "reorder" and not can_reorder(docs[s]):  # one sentence: another kind asked for, else a copy
                kind = next((k for k in o.kinds if k != "reorder"), "exact")
            if kind == "exact":
                lines, ops = docs[s], []
            elif kind == "edit":
                words = sum(map(len, docs[s]))
                lines, ops = edit(docs[s], max(1, round(rng.uniform(*o.edit_rate) * words)), rng, vocabulary)
            elif kind == "reorder":
                lines, ops = reorder(docs[s], rng)
            else:
                f = rng.below(len(boiler_words))
                h, t = rng.between(*BOILERPLATE_WORDS), rng.between(*BOILERPLATE_WORDS)
                head, foot = frame_lines(boiler_words[f], h, t)
                lines = [head, *docs[s], foot]
                ops = [{"op": "frame", "frame": f, "header": len(head), "footer": len(foot)}]
            out.append(_Doc(lines, kind, urls[s], label, ops, original=first, frame_lines=(1, 1) if kind == "boilerplate" else (0, 0)))
    lo, hi = o.content_range()
    for g, f in enumerate(long_frames):
        words = [w for ws in docs[f] for w in ws]
        head, foot = frame_lines(words, o.frame_words // 2, o.frame_words - o.frame_words // 2)
        bodies: set[tuple[tuple[str, ...], ...]] = set()  # the group's own texts so far: never one twice
        for k, s in enumerate(framed[g * o.frame_group : (g + 1) * o.frame_group]):
            rng = _Rng(o.seed, "framed", g, k)
            n_words = sum(map(len, docs[s]))
            c = rng.between(min(lo, n_words), min(hi, n_words))
            body = _truncate(docs[s], c)
            # two sources may start alike (license files, changelogs): a start another page of the
            # group already has is lengthened a word at a time (the sources differ as wholes)
            key = tuple(map(tuple, body))
            while key in bodies and c < n_words:
                c += 1
                body = _truncate(docs[s], c)
                key = tuple(map(tuple, body))
            bodies.add(key)
            out.append(_Doc([head, *body, foot], "framed", urls[s], frame=g, frame_lines=(1, 1),
                            edits=[{"op": "framed", "frame": g, "header": len(head), "footer": len(foot), "content": c}]))
    site_frames = []
    for f in sites:
        words = [w for ws in docs[f] for w in ws]
        site_frames.append(frame_lines(words, o.frame_words // 2, o.frame_words - o.frame_words // 2))
    for k, s in enumerate(reframed):
        rng = _Rng(o.seed, "reframed", k)
        n_words = sum(map(len, docs[s]))
        c = rng.between(min(lo, n_words), min(hi, n_words))
        body = _truncate(docs[s], c)
        first = len(out)
        for site, (head, foot) in enumerate(site_frames):
            out.append(_Doc([head, *body, foot], "reframed", urls[s], f"r{k:06d}", original=None if site == 0 else first, frame_lines=(1, 1),
                            edits=[{"op": "reframed", "site": site, "header": len(head), "footer": len(foot), "content": c}]))
    return out


def generate(inputs: Sequence[str], out: str | Path, options: GenerateOptions | None = None,
             read: ReadOptions | None = None) -> GenerateResult:
    """Read real text from ``inputs`` and write a labelled corpus to the folder ``out``.

    Files: ``corpus.jsonl`` (or ``.parquet``: url, text), ``pairs.csv`` (the gold pairs,
    with their relation and word-shingle Jaccard), ``clusters.csv`` (url, cluster of every
    document in a gold cluster), ``framed_pairs.csv`` (the false duplicates), ``documents.csv``
    (each document's role, source, cluster and edits) and ``manifest.json`` (the options and counts).
    """
    o = options or GenerateOptions()
    o.check()
    if not inputs:
        raise InputError("no input given", hint="name one or more inputs: anything `neardup ingest` reads")
    out = Path(out)
    corpus = out / f"corpus.{o.output_format}"
    res = GenerateResult(out=str(out), corpus=str(corpus))
    need = _needed(o) if o.sources is not None else None
    urls, docs = read_sources(inputs, read or ReadOptions(), o, need, res)
    documents = make_documents(o, urls, docs)

    order = list(range(len(documents)))
    _Rng(o.seed, "order").shuffle(order)
    url_of = {d: f"{URL_PREFIX}{n:07d}" for n, d in enumerate(order)}
    texts = [join(d.lines) for d in documents]
    sets = exact.shingle_sets(texts)

    members: dict[str, list[int]] = {}
    for i, d in enumerate(documents):
        if d.cluster:
            members.setdefault(d.cluster, []).append(i)
    pairs = []
    for label, ids in sorted(members.items()):
        for a, b in combinations(ids, 2):
            rel = "~".join(sorted((documents[a].role, documents[b].role)))
            pairs.append((*sorted((url_of[a], url_of[b])), rel, exact.jaccard(sets[a], sets[b])))
    groups: dict[int, list[int]] = {}
    for i, d in enumerate(documents):
        if d.frame is not None:
            groups.setdefault(d.frame, []).append(i)
    framed_pairs = [(*sorted((url_of[a], url_of[b])), f"f{g:04d}", exact.jaccard(sets[a], sets[b]))
                    for g, ids in sorted(groups.items()) for a, b in combinations(ids, 2)]

    out.mkdir(parents=True, exist_ok=True)
    rows_urls = [url_of[i] for i in order]
    rows_texts = [html_page(documents[i].lines, documents[i].frame_lines) if o.html_pages else texts[i] for i in order]
    if o.output_format == "jsonl":
        with open(corpus, "w", encoding="utf-8", newline="\n") as fh:
            for u, t in zip(rows_urls, rows_texts):
                fh.write(json.dumps({"url": u, "text": t}, ensure_ascii=False) + "\n")
    else:
        pq.write_table(pa.table({"url": rows_urls, "text": rows_texts}), corpus)
    _write_csv(out / "pairs.csv", ("url_a", "url_b", "relation", "jaccard"), sorted((a, b, r, f"{j:.6f}") for a, b, r, j in pairs))
    _write_csv(out / "framed_pairs.csv", ("url_a", "url_b", "frame", "jaccard"), sorted((a, b, g, f"{j:.6f}") for a, b, g, j in framed_pairs))
    _write_csv(out / "clusters.csv", ("url", "cluster"),
               sorted((url_of[i], label) for label, ids in members.items() for i in ids))
    doc_rows = []
    for i in order:
        d = documents[i]
        j = "" if d.original is None else f"{exact.jaccard(sets[i], sets[d.original]):.6f}"
        doc_rows.append((url_of[i], d.role, d.cluster, d.source_url, sum(map(len, d.lines)),
                         "" if d.original is None else url_of[d.original], j, json.dumps(d.edits, ensure_ascii=False) if d.edits else ""))
    _write_csv(out / "documents.csv", ("url", "role", "cluster", "source_url", "words", "original", "jaccard_to_original", "edits"), doc_rows)

    res.documents = len(documents)
    res.originals = sum(d.role == "original" for d in documents)
    res.clusters = len(members)
    for d in documents:
        if d.original is not None:
            res.variants[d.role] = res.variants.get(d.role, 0) + 1
    res.variants = dict(sorted(res.variants.items()))
    res.framed = sum(d.role == "framed" for d in documents)
    res.reframed = sum(d.role == "reframed" for d in documents)
    res.gold_pairs = len(pairs)
    res.gold_pairs_below = sum(p[3] < REPORT_AT for p in pairs)
    res.framed_pairs = len(framed_pairs)
    res.framed_pairs_above = sum(p[3] >= REPORT_AT for p in framed_pairs)
    manifest = {"neardup": __version__, "inputs": [str(p) for p in inputs], "options": asdict(o),
                "result": {k: v for k, v in asdict(res).items() if k not in ("out", "corpus", "rejects")},
                "files": sorted(p.name for p in (corpus, out / "pairs.csv", out / "framed_pairs.csv", out / "clusters.csv",
                                                  out / "documents.csv"))}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return res


def _write_csv(path: Path, header: Sequence[str], rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
