"""The incremental clusterings after a delete, as if the deleted documents had never been ingested.

* ``components``: a component without a deleted document is a component of what is left. One
  with a deleted document is removed and its other members are joined again by the pairs left
  between them (they have no pair outside it).
* ``concept`` (the maximal sets of documents sharing >= k sketch values, ``neardup.concepts``):
  a cluster without a deleted document stays maximal (a set that could extend it now could
  before). A cluster with one is removed. A maximal set of what is left that was not maximal
  before lay inside such a removed cluster, so it holds one of the removed clusters' remaining
  members (the **affected** documents): the maximal sets holding an affected document are mined
  again, each from its smallest affected member, within the neighbourhood of what is left, and
  those that are not already clusters are added.

A cluster the miner's budget truncated (``clusters.truncated``) is its anchor's neighbourhood, not
a maximal set; what a delete makes of one follows the same rules and can differ from an ingest of
what is left.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import concepts
from ..clusters import _as_arrays, _components, _insert, _remove, _sketches
from ..neighbours import search
from ..settings import Settings
from ..sqlfiles import query


def _with_gone(con, method: str) -> tuple[list[int], list[int]]:
    """The clusters of ``method`` holding a deleted document (``gone``), and their other members."""
    rows = con.execute(query("delete", "clusters_with"), [method]).fetchall()
    gone = {d for (d,) in con.execute("SELECT doc_id FROM gone").fetchall()}
    left = sorted({d for _, members in rows for d in members} - gone)
    return [cid for cid, _ in rows], left


def update_components(con, batch_id: int, settings: Settings) -> dict[str, int]:
    """``components`` after the deleted documents' pairs are gone (call after deleting them)."""
    method = settings.component_pairs
    if method is None:
        return {"created": 0, "removed": 0}
    removed, left = _with_gone(con, "components")
    _remove(con, removed, "components", batch_id)
    if not left:
        return {"created": 0, "removed": len(removed)}
    con.register("near", pa.table({"doc_id": pa.array(left, pa.int64())}))
    try:
        pairs = con.sql(query("delete", "pairs_within"), params=[method]).to_arrow_table()
    finally:
        con.unregister("near")
    a, b = (pairs.column(i).to_numpy().astype(np.int64) for i in range(2))
    found = [(g, None, None, False) for g in _components(a, b)]
    _insert(con, "components", batch_id, found, {"pairs": method})
    return {"created": len(found), "removed": len(removed)}


def update_concepts(con, postings, gone: np.ndarray, batch_id: int, settings: Settings) -> dict[str, int]:
    """``concept`` without the deleted documents ``gone``. ``postings`` still hold them (they are
    removed after the catalog commit): their entries are skipped."""
    k = settings.support
    removed, affected = _with_gone(con, "concept")
    _remove(con, removed, "concept", batch_id)
    if not affected:
        return {"created": 0, "removed": len(removed)}
    nb, sk = _neighbours(con, postings, np.array(affected, dtype=np.int64), gone, k)
    is_affected = set(affected).__contains__
    found = []
    for q in affected:
        if nb.get(q):
            found += concepts.mine_anchor(q, sk[q], {e: sk[e] for e in nb[q]}, k, is_affected)
    con.register("near", pa.table({"doc_id": pa.array(affected, pa.int64())}))
    try:
        existing = {tuple(m) for (m,) in con.execute(query("delete", "member_sets"), ["concept"]).fetchall()}
    finally:
        con.unregister("near")
    new = [(c.members, c.support, c.common, c.truncated) for c in found if c.members not in existing]
    _insert(con, "concept", batch_id, new, {"support": k, "sketch": "bottomk", "size": settings.bottomk})
    return {"created": len(new), "removed": len(removed)}


def _neighbours(con, postings, ids: np.ndarray, gone: np.ndarray, k: int) -> tuple[dict[int, list[int]], dict[int, np.ndarray]]:
    """``N(q)`` among the documents left, for each of ``ids``, and the sketches of everyone in them."""
    con.register("near", pa.table({"doc_id": pa.array(ids, pa.int64())}))
    try:
        t = con.sql(query("delete", "sketches_of")).to_arrow_table()
    finally:
        con.unregister("near")
    if t.num_rows == 0:
        return {}, {}
    col = t.column("sketch").combine_chunks()
    own_ids = t.column("doc_id").to_numpy()
    lens = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = col.flatten().to_numpy(zero_copy_only=False).astype(np.uint64)
    # every holder of a looked-up value comes from the postings (``lo`` above every id): the
    # affected documents themselves, their neighbours old and new, and the deleted ones
    beyond = int(own_ids.max()) + (1 << 31)
    a, b, _ = search(own_ids, flat, lens, k, lo=beyond, postings=postings, exact=False,
                     old_sketches=lambda want: _as_arrays(_sketches(con, postings, beyond, want)))
    skip = set(gone.tolist())
    nb: dict[int, set[int]] = {}
    mine = set(own_ids.tolist())
    for x, y in zip(a.tolist(), b.tolist()):
        if x == y or x in skip or y in skip:
            continue
        if x in mine:
            nb.setdefault(x, set()).add(y)
        if y in mine:
            nb.setdefault(y, set()).add(x)
    starts = np.concatenate([[0], np.cumsum(lens)])
    sk = {d: flat[s:e] for d, s, e in zip(own_ids.tolist(), starts[:-1].tolist(), starts[1:].tolist())}
    others = sorted({e for ns in nb.values() for e in ns} - set(sk))
    if others:
        sk.update(_sketches(con, postings, beyond, np.array(others, dtype=np.int64)))
    return {q: sorted(ns) for q, ns in nb.items()}, sk
