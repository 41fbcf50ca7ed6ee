"""Preparing a chunk of records for the index, in the preparing threads: HTML reduced to its
visible text (or its main content), the text each record's fingerprints come from
(``fingerprinted_text``), its words and sentences measured, short or empty texts made rejects, the
stored text's content hash and every fingerprint computed over the whole chunk (``prepare``). The
local ingest, ``neardup query`` and the distributed build's stages all prepare records with these
functions, so they fingerprint alike."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from . import fingerprints, text
from .pipeline import lap
from .readers import RawChunk, Reject
from .readers.content import ContentPool, page_texts
from .settings import Settings


@dataclass
class Prepared:
    table: pa.Table  # url, source, record, text, n_words, ..., "method.column" fingerprints, _row
    rejects: list[Reject]
    terms: pa.Table | None = None  # (doc = chunk row, term, tf) for the statistics-based methods
    sent_terms: pa.Table | None = None  # (doc, sent, term) for A5
    sent_texts: pa.Table | None = None  # (doc, sent, text) for A5
    #: seconds of each preparing step, in the thread that prepared the chunk
    timings: dict[str, float] = field(default_factory=dict)


def extract_html(chunk: RawChunk, content: str = "full", pool: ContentPool | None = None) -> RawChunk:
    """Replace the HTML records' content by their visible text (``is_html`` becomes false).

    Extracted text is white-space cleaned (markup leaves runs of blanks);
    plain text is kept exactly as read. With ``content="main"`` the batch
    gains a column ``main``: each HTML record's main content
    (``neardup.readers.content``), null for the other records; with ``pool``, a big
    chunk's texts are extracted in its worker processes.
    """
    b = chunk.batch
    is_html = b.column("is_html").to_numpy(zero_copy_only=False)
    if b.num_rows == 0 or not is_html.any():
        return chunk
    content_col = b.column("content")
    html = content_col.filter(pa.array(is_html))
    main = content == "main"
    extracted, main_text = pool.submit(html, main)() if pool is not None else page_texts(html, main)
    # put the extracted texts back in the rows that held HTML
    take = pa.array(np.maximum(np.cumsum(is_html) - 1, 0))
    merged = pc.if_else(pa.array(is_html), extracted.take(take), content_col)
    cols = {name: b.column(name) for name in b.schema.names}
    cols["content"] = merged
    cols["is_html"] = pa.array(np.zeros(b.num_rows, dtype=bool))
    schema = b.schema
    if main:
        # an HTML record whose page cannot be parsed gets "" (its full text is fingerprinted); the others null
        cols["main"] = pc.if_else(pa.array(is_html), main_text.fill_null("").take(take), pa.nulls(b.num_rows, pa.large_string()))
        schema = schema.append(pa.field("main", pa.large_string()))
    chunk.batch = pa.RecordBatch.from_pydict(cols, schema=schema)
    return chunk


def fingerprinted_text(chunk: pa.RecordBatch, settings: Settings) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The normal form of the text each record's fingerprints are computed from, and what it is.

    Returns ``(normal, kind, main)``: that normal form; ``documents.content``
    per record (``main``; ``fallback``: an HTML record whose main content has
    fewer than ``min_words`` words, or none, so its full text is
    fingerprinted; ``full``: the full text, as the setting or a plain-text
    input has it); and the main text where it is fingerprinted, else null.
    """
    full = chunk.column("content")
    n = chunk.num_rows
    if "main" not in chunk.schema.names:
        return text.normal_form(full), pa.array(["full"] * n, pa.string()), pa.nulls(n, pa.large_string())
    main = chunk.column("main")
    was_html = pc.is_valid(main).to_numpy(zero_copy_only=False)
    normal_main = text.normal_form(main.fill_null(""))
    main_words = text.analyze(normal_main, settings.seed, spans=False).word_counts  # words only: a fast pass
    use_main = was_html & (main_words >= settings.min_words)
    kind = np.where(use_main, "main", np.where(was_html, "fallback", "full"))
    mask = pa.array(use_main)
    normal = normal_main if use_main.all() else pc.if_else(mask, normal_main, text.normal_form(full))
    return normal, pa.array(kind, pa.string()), pc.if_else(mask, main, pa.nulls(n, pa.large_string()))


def prepare(chunk: pa.RecordBatch, settings: Settings) -> Prepared:
    """Clean, measure and hash a chunk of extracted text; short or empty texts become rejects.

    The fingerprints, ``n_words`` and ``n_sentences`` are those of the
    fingerprinted text (``fingerprinted_text``); ``text``, ``n_bytes`` and
    ``content_hash`` those of the full text, which is what is stored.
    """
    timings: dict[str, float] = {}
    t = time.perf_counter()
    cleaned = chunk.column("content")
    normal, kind, main = fingerprinted_text(chunk, settings)
    t = lap(timings, "normal form", t)
    analysis = text.analyze(normal, settings.seed, spans=settings.needs_spans)
    lap(timings, "words", t)
    n_words = analysis.word_counts.astype(np.int32)
    n_sentences = analysis.sentence_counts.astype(np.int32)
    ok = n_words >= settings.min_words
    rejects = []
    if not ok.all():
        sources = chunk.column("source").to_pylist()
        records = chunk.column("record").to_pylist()
        urls = chunk.column("url").to_pylist()
        for i in np.flatnonzero(~ok).tolist():
            w = int(n_words[i])
            why = "empty text (no words)" if w == 0 else f"too short: {w} words (< {settings.min_words})"
            rejects.append(Reject(sources[i], records[i], f"{why} (url {urls[i]})"))
    everyone = bool(ok.all())
    mask = pa.array(ok)

    def kept(arr):  # the rows kept; all of them without a copy (the usual chunk: no reject)
        return arr if everyone else arr.filter(mask)

    kept_text = kept(cleaned)
    hashes = content_hashes(kept_text)
    images, terms, sent_terms, sent_texts = fingerprints.compute_all(normal, analysis, settings, timings)
    columns = {f"{m}.{col}": kept(arr) for m, cols in images.items() for col, arr in cols.items()}
    columns["_row"] = pa.array(np.flatnonzero(ok), pa.int64())
    table = pa.table(
        {
            **columns,
            "url": kept(chunk.column("url")),
            "source": kept(chunk.column("source")),
            "record": kept(chunk.column("record")),
            "text": kept_text,
            "n_words": pa.array(n_words[ok], pa.int32()),
            "n_sentences": pa.array(n_sentences[ok], pa.int32()),
            "n_bytes": pc.cast(pc.binary_length(kept_text), pa.int32()),
            "content_hash": pa.array(hashes, pa.uint64()),
            "content": kept(kind),
            "main_text": kept(main),
        }
    )
    return Prepared(table, rejects, terms, sent_terms, sent_texts, timings)


def content_hashes(texts: pa.Array) -> np.ndarray:
    """``documents.content_hash`` of each text: XXH3-64 of its UTF-8 bytes, hashed where Arrow holds
    them (no Python string is made of the text)."""
    data, offs = text._utf8(texts)
    view = memoryview(data)
    h = xxhash.xxh3_64_intdigest
    bounds = offs.tolist()
    return np.fromiter((h(view[bounds[i] : bounds[i + 1]]) for i in range(len(texts))), dtype=np.uint64, count=len(texts))
