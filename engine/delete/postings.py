"""The postings a delete batch removes, derived from the catalog rows before they go.

The postings are a function of the catalog rows (``neardup.keys``); after a delete they must be
what that function gives for the documents left, i.e. what ``neardup rebuild --postings`` would
derive. For the tables kept per document that is the deleted documents' own entries, found from
their rows in spans of nearby ids (``fingerprint_postings`` reads ranges) and filtered to them.
``concept_frequent`` is kept per batch (the values ``FREQUENT`` or more of a batch's documents hold,
keyed to its first doc id): for each batch that loses documents, the rows that what it keeps no
longer implies are removed (and moved to the next first id when its first document goes),
counted in DuckDB over the batch's sketches.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..keys import BATCH_TABLES, derive_postings, fingerprint_postings
from ..settings import Settings
from ..sqlfiles import query
from ..store.postings import VALUES

#: deleted ids closer than this share one read of the fingerprint rows between them
SPAN_GAP = 256
#: ids one read covers at most (what it holds in memory is the postings of that many documents)
SPAN_MAX = 4096

Postings = dict[str, tuple[np.ndarray, np.ndarray]]


def spans(ids: np.ndarray, gap: int = SPAN_GAP, most: int = SPAN_MAX) -> list[tuple[int, int]]:
    """``ids`` (ascending) as ranges ``(lo, hi)``: a new range wherever two ids are more than ``gap``
    apart, and none wider than ``most`` ids."""
    out = []
    if ids.size == 0:
        return out
    cut = np.flatnonzero(np.diff(ids) > gap)
    for s, e in zip(np.r_[0, cut + 1].tolist(), np.r_[cut, ids.size - 1].tolist()):
        run = ids[s : e + 1]
        part = (run - run[0]) // most  # ascending: each part is a slice of the run
        starts = np.flatnonzero(np.r_[True, part[1:] != part[:-1]])
        ends = np.r_[starts[1:], run.size] - 1
        out += [(int(run[a]), int(run[b])) for a, b in zip(starts.tolist(), ends.tolist())]
    return out


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


def frequent_changes(con, batches: list[tuple[int, int, int]], settings: Settings) -> tuple[Postings, Postings]:
    """``(removed, added)`` rows of ``concept_frequent`` for the batches ``(batch_id, lo, hi)`` that
    lose the documents of ``gone``, read before their rows go. A batch's row of a value goes when
    fewer than ``FREQUENT`` of its documents left hold the value; when the batch's first document
    (its key) goes, every row of the batch moves to the next one."""
    if "concept" not in settings.clusters:
        return {}, {}
    # imported here: the concept search's module loads numba, which the CLI's import of the delete
    # command (every command's start, an ingest's included) must not load on its main thread
    from ..neighbours import FREQUENT, FREQUENT_TABLE

    k = settings.support
    gone_k, gone_v, new_k, new_v = [], [], [], []
    for _, lo, hi in batches:
        first, first_left = con.execute(query("delete", "frequent_firsts"), [lo, hi, k]).fetchall()[0]
        if first is None:
            continue
        if first == first_left:
            lost = [v for (v,) in con.execute(query("delete", "frequent_lost"), [lo, hi, k, FREQUENT, FREQUENT]).fetchall()]
            gone_k += lost
            gone_v += [first] * len(lost)
            continue
        for v, n_left in con.execute(query("delete", "frequent_all"), [lo, hi, k, FREQUENT]).fetchall():
            gone_k.append(v)
            gone_v.append(first)
            if first_left is not None and n_left >= FREQUENT:
                new_k.append(v)
                new_v.append(first_left)

    def table(keys, ids):
        return {FREQUENT_TABLE: (np.array(keys, dtype=np.uint64), np.array(ids, dtype=np.uint64))} if keys else {}

    return table(gone_k, gone_v), table(new_k, new_v)


def as_table(ids: np.ndarray) -> pa.Table:
    return pa.table({"doc_id": pa.array(np.asarray(ids, dtype=np.int64), pa.int64())})
