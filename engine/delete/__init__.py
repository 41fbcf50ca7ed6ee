"""``neardup delete``: remove documents as if they had never been ingested, in one atomic batch.

A delete is a batch like an ingest (``neardup.store.index``): under the writer lock, with
``batch.pending`` marked, ONE catalog transaction removes the documents with their fingerprints,
terms, pairs and cluster memberships, renumbers the versions of their urls, takes their terms out
of the collection statistics, brings the ``concept`` and ``components`` clusters to what an index
without them holds (``neardup.delete.clusters``), keeps their ids in ``deleted_documents`` and
records a ``batches`` row of kind ``delete``; its commit is the moment the delete happens. Then
ONE LMDB transaction removes their postings (``neardup.delete.postings``). A crash before the
commit leaves the index as it was; after it, the next writer re-derives all postings from the
catalog (``Writer.repair``: a delete batch's own postings cannot be re-derived row by row, the
rows are gone).

What stays as it was: the fingerprints of the documents left (those of the statistics-based
methods keep the statistics of their own batch, as they do when later batches arrive; ``neardup
rebuild`` recomputes them), A9's support words, the rows of ``rejects``, the ``batches`` rows of
the ingests (the ids the documents had stay used: ids are never reused), and the pairs between
documents left (a pair depends on its two documents only, but for the chains of ``a11``/``a12``,
where a deleted document may have linked two others of one chain).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from .. import __version__
from ..faults import crashpoint
from ..sqlfiles import query
from ..store.index import Index
from .postings import as_table, frequent_changes, removed_postings
from .select import Selection, check_predicate, select

#: the crash points a delete passes, in order (``neardup.faults``)
CRASH_POINTS = ("batch-start", "duckdb-before-commit", "duckdb-after-commit", "lmdb-mid-write", "lmdb-before-commit",
                "lmdb-after-commit", "before-done", "after-batch")
#: urls a result lists (``--dry-run`` prints them)
SHOW = 20


@dataclass
class DeleteResult:
    """What a delete did (or, with ``dry_run``, would do)."""

    selection: Selection
    dry_run: bool
    batch_id: int | None = None
    n_docs: int = 0
    n_urls: int = 0
    #: the first ``show`` documents taken: (doc_id, url, version, batch_id), by url
    first: list[tuple[int, str, int, int]] = field(default_factory=list)
    #: pairs removed per pair method
    pairs: dict[str, int] = field(default_factory=dict)
    #: clusters created and removed per incremental clustering
    clusters: dict[str, dict[str, int]] = field(default_factory=dict)
    #: urls whose remaining versions were renumbered
    n_renumbered_urls: int = 0
    repaired: list[int] = field(default_factory=list)
    seconds: float = 0.0


def delete(index: Index, selection: Selection, dry_run: bool = False, show: int = SHOW) -> DeleteResult:
    """Delete the documents ``selection`` takes (see the module docstring), or with ``dry_run``
    only say which. An empty selection deletes nothing and records no batch (``n_docs`` 0).
    Raises ``SelectionError`` (none or several selectors, a url or batch not in the index),
    ``QueryRefused``/``QueryError`` for a bad ``--where``, ``IndexLocked`` while another writer runs."""
    t0 = time.perf_counter()
    selection.check()
    index.require()
    res = DeleteResult(selection, dry_run)
    if dry_run:
        with index.reader() as con:
            _preview(con, select(con, selection), res, show)
        res.seconds = time.perf_counter() - t0
        return res
    with index.writer() as w:
        res.repaired = list(w.repaired)
        gone = select(w.con, selection)
        _preview(w.con, gone, res, show)
        if gone.size:
            _delete(w, gone, selection, res)
    res.seconds = time.perf_counter() - t0
    return res


def _preview(con, gone: np.ndarray, res: DeleteResult, show: int) -> None:
    res.n_docs = int(gone.size)
    if not gone.size:
        return
    con.register("gone", as_table(gone))
    try:
        res.n_docs, res.n_urls = con.execute(query("delete", "count_urls")).fetchall()[0]
        res.first = [tuple(r) for r in con.execute(query("delete", "preview"), [show]).fetchall()]
    finally:
        con.unregister("gone")


def _delete(w, gone: np.ndarray, selection: Selection, res: DeleteResult) -> None:
    from . import clusters  # the concept kernels (numba) load with the delete, not with the CLI

    con, settings = w.con, w.settings
    started = datetime.now()
    batch_id = con.execute(query("catalog", "next_ids")).fetchall()[0][0]
    w.begin_batch(kind="delete")
    crashpoint("batch-start")
    con.execute("BEGIN TRANSACTION")
    try:
        con.register("gone", as_table(gone))
        # the postings to remove, read while the rows are there
        removed = removed_postings(con, gone, settings)
        batches = [tuple(int(x) for x in r) for r in con.execute(query("delete", "affected_batches")).fetchall()]
        gone_frequent, added = frequent_changes(con, batches, settings)
        removed.update(gone_frequent)
        con.execute(query("delete", "record_deleted"), [batch_id])
        con.execute(query("delete", "gone_urls"))
        con.execute(query("delete", "subtract_term_stats"))
        con.execute(query("delete", "drop_unused_terms"))
        res.pairs = dict(con.execute(query("delete", "pairs_per_method")).fetchall())
        con.execute(query("delete", "delete_pairs"))
        for table in _document_tables(con):
            con.execute(f"DELETE FROM {table} WHERE doc_id IN (SELECT doc_id FROM gone)")
        res.n_renumbered_urls = int(con.execute("SELECT count(*) FROM gone_urls").fetchall()[0][0])
        con.execute(query("delete", "renumber_versions"))
        if "concept" in settings.clusters:
            res.clusters["concept"] = clusters.update_concepts(con, w.postings, gone, batch_id, settings)
        if "components" in settings.clusters:
            res.clusters["components"] = clusters.update_components(con, batch_id, settings)
        max_id = int(con.execute(query("delete", "max_doc_id")).fetchall()[0][0])
        con.execute(query("delete", "insert_delete_batch"), [batch_id, selection.describe(), started, __version__, res.n_docs])
        con.unregister("gone")
        con.execute("DROP TABLE IF EXISTS gone_urls")
        crashpoint("duckdb-before-commit")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        w.finish_batch(None, None)
        raise
    w.finish_delete(batch_id, removed, added, max_id)
    crashpoint("after-batch")
    res.batch_id = batch_id


def _document_tables(con) -> list[str]:
    """Every table with a row per document (or per document and term): fingerprints, terms, documents last."""
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_columns() WHERE database_name = current_database() AND NOT internal "
        "AND column_name = 'doc_id' AND table_name NOT IN ('documents', 'duplicates', 'cluster_members', 'deleted_documents') "
        "AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE NOT temporary) ORDER BY table_name").fetchall()]
    return [*names, "documents"]


__all__ = ["CRASH_POINTS", "DeleteResult", "Selection", "check_predicate", "delete"]
