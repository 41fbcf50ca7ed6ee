"""Answer a query: the indexed documents each record would pair with, and their clusters.

A query is an ingest batch that is never written. Its records are read and
prepared by ingest's own code (``neardup.prepare.extract_html`` and
``prepare``: visible text, normal form, fingerprints, rejects for empty or
too-short texts), numbered from the index's next doc id, written to an
in-memory overlay of the read-only catalog (``neardup.lookup.overlay``), and
paired by ``neardup.pairs.find_batch_pairs`` with the index's settings,
postings and verification. Of the pairs found, those whose older document is
indexed (a doc id below the query's first) are the answer: exactly the pairs
an ingest of the records would add against the index. Pairs among the query's
own records are found too (the batch logic cannot help it) and dropped.

Every record gets at least one row of ``SCHEMA``: one per (record, partner,
pair method); a record without partner one row whose partner columns are
null; a rejected record one row holding the ``reject`` reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import pairs, storage
from ..errors import PostingsDamaged
from ..fingerprints import lexical
from ..ingest import DEFAULT_BATCH_MB, batch_ends, read_ahead
from ..pipeline import lap, ordered_map, prefetch
from ..prepare import extract_html, prepare
from ..readers import RawChunk, Reject
from ..settings import Settings
from ..sqlfiles import query
from ..store import catalog
from ..store.index import Index
from ..store.postings import LmdbPostings
from ..store.rows import insert_by_row, insert_fingerprints, shift_sentences
from .overlay import Overlay

CLUSTER = pa.struct([("method", pa.string()), ("cluster_id", pa.int64())])
#: one row per (query record, partner, pair method); see the module docstring
SCHEMA = pa.schema([
    ("query", pa.int64()),  # the record's number among the input's records read as documents (0-based); null for a reader's reject
    ("source", pa.string()),
    ("record", pa.string()),
    ("url", pa.string()),
    ("doc_id", pa.int64()),  # the indexed partner
    ("doc_url", pa.string()),
    ("method", pa.string()),
    ("similarity", pa.float64()),
    ("clusters", pa.list_(CLUSTER)),  # the partner's clusters in the incremental clusterings
    ("reject", pa.string()),
])
#: text read per part of a query (as ingest's batches): the parts are paired one after the other
DEFAULT_PART_MB = DEFAULT_BATCH_MB


@dataclass
class Session:
    """An index opened for queries: read-only catalog with its overlay, read-only postings."""

    index: Index
    con: object
    overlay: Overlay
    settings: Settings
    postings: LmdbPostings | None
    #: the index's next batch and doc id: the query's documents are numbered from ``first_doc``
    batch_id: int
    first_doc: int
    next_doc: int = 0
    #: records read as documents so far (the next record's ``query`` number)
    n_records: int = 0
    #: sentences handed to A5's batch tables in this part so far
    sentences: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def open_session(index: Index, con) -> Session:
    """Open the postings of ``index`` (whose catalog ``con`` is open read-only) and lay the overlay.

    The postings must hold every committed batch: postings behind the catalog (an interrupted
    write no one could repair yet) would miss partners, so they are refused (``PostingsDamaged``).
    """
    settings = Settings.from_dict(catalog.read_settings(con))
    batch_id, first_doc = con.execute(query("catalog", "next_ids")).fetchall()[0]
    last = con.execute(query("catalog", "last_committed_batch")).fetchall()[0][0]
    postings = None
    hint = "run any write (`neardup ingest`) or `neardup rebuild --postings` where the folder can be written, then query again"
    if (index.postings_path / "data.mdb").exists():
        with storage.guard(index.postings_path, "reading the postings", index=index.path):
            postings = LmdbPostings(index.postings_path, readonly=True)
            applied = postings.applied_batch()
        if applied < last:
            postings.close()
            raise PostingsDamaged(f"{index.postings_path}: the postings hold batches up to {applied}, the catalog up to {last} "
                                  "(an interrupted write is not repaired yet): a query would miss partners", hint=hint)
    elif last:
        raise PostingsDamaged(f"{index.postings_path}: the postings are missing: a query needs them", hint=hint)
    overlay = Overlay(con, settings.methods, copy_stats=_keeps_statistics(settings))
    return Session(index, con, overlay, settings, postings, int(batch_id), int(first_doc), int(first_doc))


def reset_session(s: Session) -> None:
    """Forget the records answered so far: the next ones are numbered and paired as a fresh batch."""
    s.overlay.reset()
    s.next_doc, s.n_records, s.sentences = s.first_doc, 0, 0


def close_session(s: Session) -> None:
    if s.postings is not None:
        s.postings.close()
    s.overlay.close()


def prepared_chunks(raw: Iterable[RawChunk], settings: Settings, threads: bool = True) -> Iterator[tuple[RawChunk, object]]:
    """Ingest's preparing pipeline: raw chunks -> (chunk with visible text, prepared documents or None);
    without ``threads``, in this thread (for chunks already in memory: starting threads costs more)."""

    def prep(chunk: RawChunk):
        chunk = extract_html(chunk, settings.content)  # the text the index fingerprints: main content or all
        return chunk, (prepare(chunk.batch, settings) if chunk.batch.num_rows else None)

    return ordered_map(prep, prefetch(raw)) if threads else map(prep, raw)


def answer(s: Session, chunks: Iterable[tuple[RawChunk, object]], part_mb: float = DEFAULT_PART_MB) -> Iterator[pa.Table]:
    """The answer to prepared chunks, one table of ``SCHEMA`` per part of ``part_mb`` MB of text read."""
    budget = part_mb * 1e6
    chunks = read_ahead(chunks)  # parts are cut as an ingest cuts its batches (``ingest.batch_ends``)
    rejects: list[pa.Table] = []
    first, answered, n_bytes = s.next_doc, [], 0
    _begin_part(s)
    for chunk, prepared in chunks:
        rejects += [_reject_rows(chunk.rejects)]
        if prepared is not None:
            numbers = _rejected_rows(chunk, prepared)
            urls = chunk.batch.column("url").take(pa.array(numbers, pa.int64())).to_pylist()
            rejects += [_reject_rows(prepared.rejects, [s.n_records + i for i in numbers], urls)]
            if prepared.table.num_rows:
                answered.append(_add(s, prepared))
        s.n_records += chunk.batch.num_rows
        n_bytes += chunk.n_bytes_read
        if batch_ends(chunks, n_bytes, budget):
            yield _finish(s, first, answered, rejects)
            if not _keeps_statistics(s.settings):  # the next part needs none of this one's rows: memory follows a part
                s.overlay.reset()
                s.next_doc = s.first_doc
            first, answered, rejects, n_bytes = s.next_doc, [], [], 0
            _begin_part(s)
    if answered or rejects:
        yield _finish(s, first, answered, rejects)


def _keeps_statistics(settings: Settings) -> bool:
    """Whether the index has statistics-based methods: a part's records then count in the collection
    statistics of the parts after it (as a batch's do for later batches), so the overlay keeps them."""
    return any(m in lexical.STATS_METHODS for m in settings.methods)


def _begin_part(s: Session) -> None:
    """What an ingest does when a batch begins: A5's batch-wide sentence tables start empty."""
    if "a5" in s.settings.methods:
        with s.overlay.writing() as con:
            con.execute(query("lexical", "create_batch_sentences"))
    s.sentences = 0


def _rejected_rows(chunk: RawChunk, prepared) -> list[int]:
    """The rows of a chunk that ``prepare`` rejected (in the order of its rejects: ascending)."""
    kept = np.zeros(chunk.batch.num_rows, bool)
    kept[prepared.table.column("_row").to_numpy()] = True
    return np.flatnonzero(~kept).tolist()


def _add(s: Session, prepared) -> pa.Table:
    """Write a prepared chunk's documents to the overlay; returns their (doc_id, query, source, record, url)."""
    t = prepared.table
    n = t.num_rows
    ids = np.arange(s.next_doc, s.next_doc + n, dtype=np.int64)
    rows = t.column("_row").to_numpy()
    docs = t.append_column("doc_id", pa.array(ids, pa.int64()))
    docs = docs.append_column("batch_id", pa.array(np.full(n, s.batch_id, np.int32)))
    docs = docs.append_column("version", pa.array(np.ones(n, np.int32)))
    docs = docs.append_column("is_latest", pa.array(np.ones(n, bool)))
    t0 = time.perf_counter()
    with s.overlay.writing() as con:
        con.register("new_docs", docs.select(["doc_id", "url", "source", "record", "batch_id", "version", "is_latest",
                                              "n_words", "n_sentences", "n_bytes", "content_hash"]))
        try:
            con.execute("INSERT INTO new_documents BY NAME SELECT * FROM new_docs")
        finally:
            con.unregister("new_docs")
        insert_fingerprints(con, docs)
        if prepared.terms is not None:
            row_to_doc = np.full(int(rows.max()) + 1, -1, dtype=np.int64)
            row_to_doc[rows] = ids
            insert_by_row(con, "doc_terms", prepared.terms, row_to_doc)
            if prepared.sent_terms is not None:
                insert_by_row(con, "batch_sent_terms", shift_sentences(prepared.sent_terms, s.sentences), row_to_doc)
                insert_by_row(con, "batch_sent_text", shift_sentences(prepared.sent_texts, s.sentences), row_to_doc)
                s.sentences += prepared.sent_texts.num_rows
    lap(s.timings, "store", t0)
    s.next_doc += n
    return pa.table({
        "doc": pa.array(ids, pa.int64()),
        "query": pa.array(rows + s.n_records, pa.int64()),
        "source": t.column("source"), "record": t.column("record"), "url": t.column("url"),
    })


def _finish(s: Session, first: int, answered: list[pa.Table], rejects: list[pa.Table]) -> pa.Table:
    """Pair the part's documents ``first..s.next_doc-1`` and build its rows."""
    parts = [r for r in rejects if r.num_rows]
    if answered:
        last = s.next_doc - 1
        t0 = time.perf_counter()
        if _keeps_statistics(s.settings):
            with s.overlay.writing() as con:
                lexical.batch_end(con, first, last, s.settings.methods, s.settings.seed)
        t0 = lap(s.timings, "lexical", t0)
        con = s.overlay.pairing()
        pairs.find_batch_pairs(con, s.postings, first, last, s.batch_id, s.settings, s.timings)
        found = con.sql("SELECT doc_a, doc_b, method, similarity FROM duplicates WHERE doc_a < ?",
                        params=[s.first_doc]).to_arrow_table()
        con.execute("DELETE FROM duplicates")
        t0 = lap(s.timings, "pairs", t0)
        parts.insert(0, _rows(s, pa.concat_tables(answered), found))
        lap(s.timings, "partners", t0)
    out = pa.concat_tables(parts) if parts else SCHEMA.empty_table()
    return _order(out)


def _rows(s: Session, docs: pa.Table, found: pa.Table) -> pa.Table:
    """One row per (document, partner, method), or per partnerless document, with the partners' urls and
    clusters read from the catalog."""
    con = s.con
    sql = query("lookup", "query_rows").replace("CATALOG.", s.overlay.schema + ".")
    con.register("query_docs", docs)
    con.register("query_pairs", found)
    try:
        t = con.sql(sql, params={"methods": list(s.settings.clusters or ()),
                                 "pair_methods": pairs.pair_methods(s.settings)}).to_arrow_table()
    finally:
        con.unregister("query_docs")
        con.unregister("query_pairs")
    return t.cast(SCHEMA)


def _reject_rows(rejects: list[Reject], numbers: list[int] | None = None, urls: list[str] | None = None) -> pa.Table:
    n = len(rejects)
    return pa.table({
        "query": pa.array(numbers if numbers is not None else [None] * n, pa.int64()),
        "source": pa.array([r.source for r in rejects], pa.string()),
        "record": pa.array([r.record for r in rejects], pa.string()),
        "url": pa.array(urls if urls is not None else [None] * n, pa.string()), "doc_id": pa.nulls(n, pa.int64()), "doc_url": pa.nulls(n, pa.string()),
        "method": pa.nulls(n, pa.string()), "similarity": pa.nulls(n, pa.float64()),
        "clusters": pa.nulls(n, pa.list_(CLUSTER)), "reject": pa.array([r.reason for r in rejects], pa.string()),
    }, schema=SCHEMA)


def _order(t: pa.Table) -> pa.Table:
    """Rows in input order, readers' rejects (which have no number) last; stable, so each record's rows
    keep their order (pair method in the index's order, similarity highest first, partner id)."""
    if t.num_rows == 0:
        return t
    return t.take(pc.array_sort_indices(t.column("query"), null_placement="at_end"))
