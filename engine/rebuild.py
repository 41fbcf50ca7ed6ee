"""``neardup rebuild``: recompute every fingerprint and pair of every document with the current statistics.

Statistics-based lexical signatures (A2, A3, A5, A7, A10, the lexical image)
use the collection statistics as they were when their batch committed; a
rebuild recomputes all fingerprints from the stored texts in one transaction
(each document's fingerprinted text: ``main_text`` where ``content`` is
``main``, else ``text``),
so that they all use the statistics of the whole collection as it is now
(the same result as ingesting everything in one batch), then rebuilds the
postings. A crash leaves the index as before the rebuild, or as after it
(the next open finishes the postings).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from . import clusters, fingerprints, pairs, text
from .fingerprints import lexical
from .store.rows import insert_by_row, insert_fingerprints, shift_sentences
from .settings import METHODS
from .sqlfiles import query
from .store.index import Index

CHUNK_DOCS = 2000


@dataclass
class RebuildResult:
    n_docs: int
    methods: tuple[str, ...]
    seconds: float
    #: pairs per pair method after the rebuild
    pairs: dict[str, int] | None = None
    #: clusters made per incremental clustering
    clusters: dict[str, dict[str, int]] | None = None


def rebuild_fingerprints(index: Index, progress: Callable[[int], None] | None = None) -> RebuildResult:
    """Recompute all fingerprints (see the module docstring). Cost: one pass over all texts."""
    t0 = time.perf_counter()
    with index.writer() as w:
        con, s = w.con, w.settings
        w.begin_batch(kind="rebuild")
        from .faults import crashpoint

        crashpoint("batch-start")
        con.execute("BEGIN TRANSACTION")
        try:
            for m in METHODS:
                con.execute(f"DELETE FROM fp_{m}")
            con.execute("DELETE FROM doc_terms")
            con.execute("DELETE FROM term_stats")
            con.execute("DELETE FROM support_words")
            if "a5" in s.methods:
                con.execute(query("lexical", "create_batch_sentences"))
            lo_hi = con.execute("SELECT min(doc_id), max(doc_id), count(*) FROM documents").fetchall()[0]
            lo, hi, n = lo_hi
            sentences = 0
            start = lo
            while n and start <= hi:
                end = start + CHUNK_DOCS - 1
                t = con.sql(query("catalog", "fingerprinted_texts"), params=[start, end]).to_arrow_table()
                start = end + 1
                if t.num_rows == 0:
                    continue
                ids = t.column("doc_id").to_numpy()
                normal = text.normal_form(t.column("text").combine_chunks())
                analysis = text.analyze(normal, s.seed, spans=s.needs_spans)
                images, terms, sent_terms, sent_texts = fingerprints.compute_all(normal, analysis, s)
                docs = pa.table({"doc_id": ids, **{f"{m}.{c}": a for m, cols in images.items() for c, a in cols.items()}})
                insert_fingerprints(con, docs)
                row_to_doc = ids.astype(np.int64)
                if terms is not None:
                    insert_by_row(con, "doc_terms", terms, row_to_doc)
                if sent_terms is not None:
                    insert_by_row(con, "batch_sent_terms", shift_sentences(sent_terms, sentences), row_to_doc)
                    insert_by_row(con, "batch_sent_text", shift_sentences(sent_texts, sentences), row_to_doc)
                    sentences += sent_texts.num_rows
                if progress:
                    progress(t.num_rows)
            if n and any(m in lexical.STATS_METHODS for m in s.methods):
                lexical.batch_end(con, lo, hi, s.methods, s.seed)
            found = pairs.rebuild_pairs(con, s)
            last = con.execute(query("catalog", "last_committed_batch")).fetchall()[0][0]
            made = clusters.rebuild_incremental(con, s, last)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            w.finish_batch(None, None)
            raise
        w.rebuild_postings()
        w.finish_batch(None, None)
    return RebuildResult(int(n or 0), s.methods, time.perf_counter() - t0, found, made)


@dataclass
class ClusterResult:
    made: dict[str, dict]
    seconds: float


def rebuild_clusters(index: Index, names: list[str], pair_method: str | None = None, theta: float = 0.0,
                     bits: list[int] | None = None, support: int | None = None, max_component: int = 50,
                     fingerprint: str | None = None) -> ClusterResult:
    """``neardup rebuild --clusters``: recompute the named clusterings from scratch, in one
    transaction (``neardup.clusters.run_requested``); fingerprints and pairs stay as they are."""
    t0 = time.perf_counter()
    with index.writer() as w:
        con, s = w.con, w.settings
        last = con.execute(query("catalog", "last_committed_batch")).fetchall()[0][0]
        con.execute("BEGIN TRANSACTION")
        try:
            made = clusters.run_requested(con, s, names, last, pair_method, theta, bits, support, max_component, fingerprint)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return ClusterResult(made, time.perf_counter() - t0)


@dataclass
class PostingsResult:
    #: committed batches whose postings were derived
    batches: int
    seconds: float


def rebuild_postings(index: Index) -> PostingsResult:
    """``neardup rebuild --postings``: throw the postings away and re-derive them from the catalog
    (missing, damaged, behind or ahead alike); a crash leaves it to the next open to finish."""
    t0 = time.perf_counter()
    index.require()
    with index.writer(rebuild_postings=True) as w:
        n = len(w.repaired)
    return PostingsResult(n, time.perf_counter() - t0)
