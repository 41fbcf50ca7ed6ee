"""The postings a delete batch removes, derived from the catalog rows before they go.

The postings are a function of the catalog rows (``neardup.keys``); after a delete they must be
what that function gives for the documents left, i.e. what ``neardup rebuild --postings`` would
derive. For the tables kept per document that is the deleted documents' own entries, found from
their rows in spans of nearby ids (``fingerprint_postings`` reads ranges) and filtered to them.
``concept_frequent`` is kept per batch (the values many of a batch's documents hold, keyed to its
first doc id): for each batch that loses documents it is derived again from what the batch keeps,
and the difference is removed and added.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..keys import BATCH_TABLES, derive_postings, fingerprint_postings
from ..neighbours import FREQUENT_TABLE, postings_of
from ..settings import Settings
from ..sqlfiles import query
from ..store.postings import VALUES

#: deleted ids closer than this share one read of the fingerprint rows between them
SPAN_GAP = 4096

Postings = dict[str, tuple[np.ndarray, np.ndarray]]


def spans(ids: np.ndarray, gap: int = SPAN_GAP) -> list[tuple[int, int]]:
    """``ids`` (ascending) as ranges ``(lo, hi)``, a new range wherever two ids are more than ``gap`` apart."""
    if ids.size == 0:
        return []
    cut = np.flatnonzero(np.diff(ids) > gap)
    starts = np.r_[0, cut + 1]
    ends = np.r_[cut, ids.size - 1]
    return [(int(ids[s]), int(ids[e])) for s, e in zip(starts.tolist(), ends.tolist())]


def _merge(into: Postings, more: Postings) -> None:
    for table, (k, v) in more.items():
        if table in into:
            a, b = into[table]
            if table.startswith(VALUES):
                into[table] = (np.concatenate([a, k]), list(b) + list(v))
            else:
                into[table] = (np.concatenate([a, k]), np.concatenate([b, v]))
        else:
            into[table] = (k, v)


def _only(p: Postings, ids: np.ndarray) -> Postings:
    """The entries of ``p`` whose doc id is one of ``ids``."""
    out: Postings = {}
    for table, (k, v) in p.items():
        if table.startswith(VALUES):
            keep = np.isin(np.asarray(k, dtype=np.int64), ids)
            out[table] = (np.asarray(k)[keep], [x for x, y in zip(v, keep.tolist()) if y])
        else:
            keep = np.isin(np.asarray(v, dtype=np.uint64), ids.astype(np.uint64))
            out[table] = (np.asarray(k)[keep], np.asarray(v)[keep])
    return out


def removed_postings(con, gone: np.ndarray, settings: Settings) -> Postings:
    """Every entry of the deleted documents ``gone`` (ascending ids) in the per-document tables;
    read while their rows are still in the catalog (inside the delete's transaction)."""
    t = con.sql(query("delete", "gone_rows")).to_arrow_table()
    out = derive_postings(t.column("doc_id").to_numpy(), t.column("url").to_pylist(), t.column("content_hash").to_numpy())
    for lo, hi in spans(gone):
        got = {k: v for k, v in fingerprint_postings(con, lo, hi, settings).items() if k not in BATCH_TABLES}
        _merge(out, _only(got, gone))
    return out


def batch_frequent(con, batches: list[tuple[int, int, int]], settings: Settings) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``concept_frequent``'s rows of each batch ``(batch_id, lo, hi)`` as its documents in the
    catalog now make them (``neardup.neighbours.postings_of``); empty without concept clusters."""
    if "concept" not in settings.clusters:
        return {}
    out = {}
    for b, lo, hi in batches:
        t = con.sql(query("delete", "batch_sketches"), params=[lo, hi]).to_arrow_table()
        col = t.column("sketch").combine_chunks()
        lens = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64) if len(col) else np.zeros(0, np.int64)
        flat = col.flatten().to_numpy(zero_copy_only=False).astype(np.uint64) if len(col) else np.zeros(0, np.uint64)
        out[b] = postings_of(t.column("doc_id").to_numpy(), flat, lens, settings.support)[FREQUENT_TABLE]
    return out


def frequent_changes(before: dict, after: dict) -> tuple[Postings, Postings]:
    """``(removed, added)`` rows of ``concept_frequent`` between two ``batch_frequent`` results."""
    gone_k, gone_v, new_k, new_v = [], [], [], []
    for b, (k0, v0) in before.items():
        k1, v1 = after.get(b, (np.zeros(0, np.uint64), np.zeros(0, np.uint64)))
        old = set(zip(np.asarray(k0).tolist(), np.asarray(v0).tolist()))
        new = set(zip(np.asarray(k1).tolist(), np.asarray(v1).tolist()))
        for k, v in sorted(old - new):
            gone_k.append(k)
            gone_v.append(v)
        for k, v in sorted(new - old):
            new_k.append(k)
            new_v.append(v)

    def table(k, v):
        return {FREQUENT_TABLE: (np.array(k, dtype=np.uint64), np.array(v, dtype=np.uint64))} if k else {}

    return table(gone_k, gone_v), table(new_k, new_v)


def as_table(ids: np.ndarray) -> pa.Table:
    return pa.table({"doc_id": pa.array(np.asarray(ids, dtype=np.int64), pa.int64())})
