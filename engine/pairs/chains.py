"""The chain methods' candidates in SQL (``sql/chains.sql``): A11 over the bottom-k shingles,
A12 over the 3+5 sentence signatures (003), documents ordered by length."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..sqlfiles import query
from ..arrays import unique

#: 003's chain ratio for similarity 0.85, and A12's sentence-count ratio
CHAIN_RATIO = 1.15
SENTENCE_RATIO = 1.20


def _records(con, keys_docs, lo: int, postings, table: str, lengths_sql: str) -> pa.Table | None:
    """``chain_records`` rows: for each key of the new documents, the new and older documents
    holding it, with the length the chain orders by."""
    if keys_docs is None or keys_docs[0].size == 0:
        return None
    k, d = keys_docs
    k = k.astype(np.uint64)
    d = d.astype(np.int64)
    rec_k, rec_d = [k], [d]
    uk = unique(k)
    for key, ids in (postings.get_many(table, uk.tolist()) if postings is not None else {}).items():
        old = ids[ids < lo].astype(np.int64)
        if old.size:
            rec_k.append(np.full(old.size, key, np.uint64))
            rec_d.append(old)
    kk, dd = np.concatenate(rec_k), np.concatenate(rec_d)
    con.register("want_ids", pa.table({"doc_id": pa.array(unique(dd), pa.int64())}))
    try:
        lens = con.sql(lengths_sql).to_arrow_table()
    finally:
        con.unregister("want_ids")
    lid = lens.column("doc_id").to_numpy()
    lv = lens.column("len").to_numpy()
    return pa.table({
        "key": pa.array(kk, pa.uint64()), "doc_id": pa.array(dd, pa.int64()),
        "len": pa.array(lv[np.searchsorted(lid, dd)], pa.int32()), "is_new": pa.array(dd >= lo),
    })


def _chain_pairs(con, keys_docs, lo: int, postings, table: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
    lengths = {
        # A11: a document's length is its number of words
        "a11": "SELECT d.doc_id, d.n_words AS len FROM documents d SEMI JOIN want_ids w ON d.doc_id = w.doc_id ORDER BY d.doc_id",
        # A12: its number of words of three letters or more (003 section 6.2)
        "a12": "SELECT f.doc_id, f.len FROM fp_a12 f SEMI JOIN want_ids w ON f.doc_id = w.doc_id ORDER BY f.doc_id",
    }[kind]
    recs = _records(con, keys_docs, lo, postings, table, lengths)
    if recs is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    con.register("chain_records", recs)
    try:
        con.execute(query("chains", "chain_members"), {"ratio": CHAIN_RATIO})
        r = con.sql(query("chains", "chain_pairs"), params={"ratio": CHAIN_RATIO}).to_arrow_table()
    finally:
        con.unregister("chain_records")
        con.execute("DROP TABLE IF EXISTS chain_members")
    return r.column("doc_a").to_numpy(), r.column("doc_b").to_numpy()


def _a12_pairs(con, keys_docs, lo: int, postings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = _chain_pairs(con, keys_docs, lo, postings, "a12_ss", "a12")
    if a.size == 0:
        return a, b, np.zeros(0)
    con.register("chain_pair", pa.table({"doc_a": pa.array(a, pa.int64()), "doc_b": pa.array(b, pa.int64())}))
    con.register("want_ids", pa.table({"doc_id": pa.array(unique(np.concatenate([a, b])), pa.int64())}))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE a12_rows AS SELECT f.doc_id, f.ss, f.ws, f.num FROM fp_a12 f SEMI JOIN want_ids w ON f.doc_id = w.doc_id")
        r = con.sql(query("chains", "a12_pairs"), params={"num_ratio": SENTENCE_RATIO}).to_arrow_table()
    finally:
        con.unregister("chain_pair")
        con.unregister("want_ids")
        con.execute("DROP TABLE IF EXISTS a12_rows")
    return r.column("doc_a").to_numpy(), r.column("doc_b").to_numpy(), r.column("similarity").to_numpy()
