"""A comparable picture of an index's whole state (catalog rows and postings)."""

from __future__ import annotations

from pathlib import Path

from neardup.neighbours import FREQUENT_TABLE
from neardup.store.index import Index
from neardup.store.postings import LmdbPostings

BATCH_COLS = "batch_id, source, n_docs, n_unchanged, n_skipped, n_rejected, n_bytes, first_doc_id, last_doc_id, status"


def snapshot(path: Path) -> dict:
    idx = Index(path)
    with idx.reader() as con:
        state = {
            "documents": con.execute("SELECT * FROM documents ORDER BY doc_id").fetchall(),
            "rejects": con.execute("SELECT * FROM rejects ORDER BY ALL").fetchall(),
            "batches": con.execute(f"SELECT {BATCH_COLS} FROM batches ORDER BY batch_id").fetchall(),
            "settings": con.execute("SELECT * FROM settings ORDER BY key").fetchall(),
            "duplicates": con.execute("SELECT * FROM duplicates ORDER BY ALL").fetchall(),
            "clusters": con.execute(
                "SELECT c.*, list(m.doc_id ORDER BY m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id) GROUP BY ALL ORDER BY ALL").fetchall(),
            "cluster_changes": con.execute("SELECT * FROM cluster_changes ORDER BY ALL").fetchall(),
        }
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND (table_name LIKE 'fp_%' OR table_name IN ('doc_terms', 'term_stats', 'support_words')) ORDER BY 1").fetchall()]
        state["fingerprints"] = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}
    if idx.postings_path.exists():
        p = LmdbPostings(idx.postings_path, readonly=True)
        try:
            state["postings"] = p.dump()
            state["applied_batch"] = p.applied_batch()
        finally:
            p.close()
    else:
        state["postings"], state["applied_batch"] = {}, 0
    return state


def content(state: dict) -> dict:
    """The state without batch ids and sources: what must not depend on how input was split."""
    docs = [(d[0], d[1], *d[5:]) for d in state["documents"]]  # drop source, record, batch_id
    pairs = sorted(d[:4] for d in state["duplicates"])  # drop the batch that found the pair
    # the frequent-values hint records what each batch saw (it steers cost, never results)
    postings = {t: v for t, v in state["postings"].items() if t != FREQUENT_TABLE}
    return {"documents": docs, "postings": postings, "fingerprints": state["fingerprints"], "duplicates": pairs}
