"""Clusters in the catalog, kept current batch by batch (``concept``, ``components``).

``clusters(cluster_id, method, size, support, params, representative, common,
truncated, batch_id)`` and ``cluster_members(cluster_id, doc_id)`` hold every
live cluster; ``cluster_changes(batch_id, method, cluster_id, change)``
records what each batch created and removed. The representative of a cluster
is its earliest document (smallest doc id).

* ``concept`` (seeds 000/001, ``neardup.concepts``): a new document q can only
  create clusters inside ``N[q]`` and can only remove clusters X with
  ``|I(X) ∩ S(q)| >= k`` (X ∪ {q} is then valid, so X is no longer maximal);
  nothing else changes. A batch therefore finds the neighbours of its new
  documents (prefix-filter keys in LMDB, overlaps counted on the sketches),
  removes the clusters its documents extend, and mines the maximal sets that
  contain a new document, each from its smallest new member.
* ``components``: connected components of the duplicate graph of one pair
  method; a batch's new pairs merge the components they touch.

``rebuild_clusters`` recomputes both from scratch; a property test checks that
any batch split and any insertion order give the clusters of a rebuild.
"""

from __future__ import annotations

import json
import time
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import concepts
from .neighbours import all_pairs, neighbour_arrays, neighbour_lists, postings_of, search
from .pipeline import Beside, lap
from .settings import Settings
from .store import catalog
from .arrays import unique

#: the sketches read back for older documents
SKETCH_VALUES = "bottomk"


def concept_postings(con, lo: int, hi: int, settings: Settings) -> dict[str, tuple]:
    """The concept neighbours' postings of documents ``lo..hi`` (for ``neardup.keys``): every
    sketch value, the batch's frequent values (``neardup.neighbours``), and the sketches."""
    from .pairs.values import _flat, _lists

    ids, col = _lists(con, "fp_bottomk", "sketch", lo, hi)
    flat, lens = _flat(col)
    return concept_postings_of(ids, flat, lens, settings.support)


def concept_postings_of(ids: np.ndarray, flat: np.ndarray, lens: np.ndarray, k: int,
                        frequent: np.ndarray | None = None) -> dict[str, tuple]:
    """``concept_postings`` of the sketches ``flat`` (``lens`` values each) of documents ``ids``
    (``frequent``: their frequent values if already counted, see ``neighbours.postings_of``)."""
    from .store.postings import VALUES

    raw = flat.astype(">u8").tobytes()
    bounds = np.concatenate([[0], np.cumsum(lens)]) * 8
    return {
        **postings_of(ids, flat, lens, k, frequent),
        VALUES + SKETCH_VALUES: (ids.astype(np.uint64), [raw[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]),
    }


def _sketches(con, postings, lo: int, ids: np.ndarray) -> dict[int, np.ndarray]:
    """Sketches of ``ids``: older documents' from the postings' value table, new ones from the catalog."""
    from .pairs.values import _values

    ids, blobs = _values(con, postings, lo, np.asarray(ids, dtype=np.int64), "fp_bottomk", "sketch", SKETCH_VALUES)
    out = {}
    for d, b in zip(ids.tolist(), blobs):
        out[d] = np.frombuffer(b, dtype=">u8").astype(np.uint64) if isinstance(b, (bytes, bytearray)) else np.asarray(b, dtype=np.uint64)
    return out


def _sketch_arrays(con, postings, lo: int, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_as_arrays(_sketches(...))`` of ``ids``, the older documents' sketches read end to end from
    the value table (``Postings.get_packed``) and sorted per document by one kernel call: the
    concept search reads thousands of its partners' sketches a batch (4,187 of a 1,000-document
    batch into 100,000 documents of the scale corpus)."""
    from . import kernels

    ids = unique(np.asarray(ids, dtype=np.int64))
    old = ids[ids < lo]
    if postings is None or old.size == 0:
        return _as_arrays(_sketches(con, postings, lo, ids))
    found, raw, offs = postings.get_packed(SKETCH_VALUES, old)
    values = np.frombuffer(raw, dtype=">u8").astype(np.uint64)  # a copy, sorted in place below
    offs = offs // 8
    if found.size < ids.size:  # the batch's own, or older ones the value table lacks: read as before
        sk = _sketches(con, None, lo, np.setdiff1d(ids, found, assume_unique=True))
        sk.update((d, values[a:b]) for d, a, b in zip(found.tolist(), offs[:-1].tolist(), offs[1:].tolist()))
        return _as_arrays(sk)
    kernels.sort_segments(values, offs)
    return found, values, offs


def _as_arrays(sk: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``{doc: values}`` as ``(ids ascending, values sorted per doc, offsets)``."""
    ids = np.array(sorted(sk), dtype=np.int64)
    parts = [np.sort(sk[d]) for d in ids.tolist()]
    offs = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum([p.size for p in parts], out=offs[1:])
    return ids, (np.concatenate(parts) if parts else np.zeros(0, np.uint64)), offs


def _new_sketches(con, lo: int, hi: int, written=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, values, lengths)`` of the bottom-k sketches of documents ``lo..hi`` (from the catalog,
    or from ``written``, the batch's own as it inserted them: ``store.rows.WrittenRows``)."""
    from .pairs.values import _flat, _lists

    ids, col = _lists(con, "fp_bottomk", "sketch", lo, hi, written)
    flat, lens = _flat(col)
    return ids, flat, lens


def _neighbours(con, postings, lo: int, hi: int, settings: Settings) -> tuple[dict[int, list[int]], dict[int, np.ndarray]]:
    """``N(q)`` of every new document and the sketches of everyone involved."""
    return _neighbours_of(con, postings, lo, *_new_sketches(con, lo, hi), settings)


def _neighbours_of(con, postings, lo: int, ids: np.ndarray, flat: np.ndarray, lens: np.ndarray,
                   settings: Settings) -> tuple[dict[int, list[int]], dict[int, np.ndarray]]:
    """``_neighbours`` of the new documents' sketches given (``con`` reads older documents only)."""
    a, b, old_sk = _search_with_sketches(con, postings, lo, ids, flat, lens, settings.support)
    starts = np.concatenate([[0], np.cumsum(lens)])
    sk = {d: flat[s:e] for d, s, e in zip(ids.tolist(), starts[:-1].tolist(), starts[1:].tolist())}
    sk.update(old_sk)
    return neighbour_lists(a, b, lo), sk


def _search_with_sketches(con, postings, lo: int, ids: np.ndarray, flat: np.ndarray, lens: np.ndarray, k: int,
                          frequent_out: list | None = None) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """``neighbours.search`` of the new documents' sketches (older ones read through ``con``) and
    the sketches of the older documents in its pairs: ``(a, b, older sketches by id)``."""
    held: dict[int, np.ndarray] = {}
    a, b, _ = search(ids, flat, lens, k, lo=lo, postings=postings, exact=False,
                     old_sketches=lambda want: _sketch_arrays(con, postings, lo, want),
                     frequent_out=frequent_out, old_out=held)
    return a, b, _older_sketches(con, postings, lo, unique(a[a < lo]), held)


def _older_sketches(con, postings, lo: int, old: np.ndarray, held: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """The sketches of older documents ``old``: those the search kept (``search``'s ``old_out``),
    any other read (``_sketches``)."""
    out = {d: held[d] for d in old.tolist() if d in held}
    if len(out) < old.size:
        out.update(_sketches(con, postings, lo, np.array([d for d in old.tolist() if d not in held], dtype=np.int64)))
    return out


def _next_cluster_id(con) -> int:
    return int(con.execute("SELECT coalesce(max(cluster_id), 0) + 1 FROM (SELECT cluster_id FROM clusters UNION ALL SELECT cluster_id FROM cluster_changes)").fetchall()[0][0])


def _remove(con, ids: list[int], method: str, batch_id: int) -> None:
    if not ids:
        return
    con.register("gone_ids", pa.table({"cluster_id": pa.array(sorted(ids), pa.int64())}))
    try:
        con.execute("DELETE FROM cluster_members WHERE cluster_id IN (SELECT cluster_id FROM gone_ids)")
        con.execute("DELETE FROM clusters WHERE cluster_id IN (SELECT cluster_id FROM gone_ids)")
        con.execute("INSERT INTO cluster_changes SELECT ?, ?, cluster_id, 'removed' FROM gone_ids", [batch_id, method])
    finally:
        con.unregister("gone_ids")


def _insert(con, method: str, batch_id: int,
            found: list[tuple[tuple[int, ...], int | None, tuple[int, ...] | None, bool]] | concepts.ConceptArrays,
            params: dict) -> list[int]:
    """Insert clusters ``(members, support, common, truncated)`` (or ``concepts.ConceptArrays``:
    support is the number of common elements); returns their ids."""
    if not len(found):
        return []
    first = _next_cluster_id(con)
    if isinstance(found, concepts.ConceptArrays):
        return _insert_arrays(con, method, batch_id, found, params, first)
    ids = list(range(first, first + len(found)))
    rows = pa.table({
        "cluster_id": pa.array(ids, pa.int64()),
        "method": pa.array([method] * len(found), pa.string()),
        "size": pa.array([len(f[0]) for f in found], pa.int32()),
        "support": pa.array([f[1] for f in found], pa.int32()),
        "params": pa.array([json.dumps(params, sort_keys=True)] * len(found), pa.string()),
        "representative": pa.array([min(f[0]) for f in found], pa.int64()),
        "common": pa.array([list(f[2]) if f[2] is not None else None for f in found], pa.list_(pa.uint64())),
        "truncated": pa.array([f[3] for f in found], pa.bool_()),
        "batch_id": pa.array([batch_id] * len(found), pa.int32()),
    })
    members = pa.table({
        "cluster_id": pa.array(np.repeat(ids, [len(f[0]) for f in found]), pa.int64()),
        "doc_id": pa.array([d for f in found for d in f[0]], pa.int64()),
    })
    _insert_tables(con, rows, members)
    return ids


def _insert_arrays(con, method: str, batch_id: int, found: concepts.ConceptArrays, params: dict, first: int) -> list[int]:
    """``_insert`` of ``concepts.ConceptArrays``: the same rows, built from the arrays."""
    n = len(found)
    ids = np.arange(first, first + n, dtype=np.int64)
    sizes = np.diff(found.m_off)
    rows = pa.table({
        "cluster_id": pa.array(ids, pa.int64()),
        "method": pa.array([method] * n, pa.string()),
        "size": pa.array(sizes, pa.int32()),
        "support": pa.array(np.diff(found.c_off), pa.int32()),
        "params": pa.array([json.dumps(params, sort_keys=True)] * n, pa.string()),
        "representative": pa.array(found.members[found.m_off[:-1]], pa.int64()),  # members ascending: the first
        "common": pa.ListArray.from_arrays(pa.array(found.c_off, pa.int32()), pa.array(found.common, pa.uint64())),
        "truncated": pa.array(found.truncated, pa.bool_()),
        "batch_id": pa.array(np.full(n, batch_id, np.int32)),
    })
    members = pa.table({
        "cluster_id": pa.array(np.repeat(ids, sizes), pa.int64()),
        "doc_id": pa.array(found.members, pa.int64()),
    })
    _insert_tables(con, rows, members)
    return ids.tolist()


def _insert_tables(con, rows: pa.Table, members: pa.Table) -> None:
    con.register("new_clusters", rows)
    con.register("new_members", members)
    try:
        con.execute("INSERT INTO clusters BY NAME SELECT * FROM new_clusters")
        con.execute("INSERT INTO cluster_members SELECT * FROM new_members")
        con.execute("INSERT INTO cluster_changes SELECT batch_id, method, cluster_id, 'created' FROM new_clusters")
    finally:
        con.unregister("new_clusters")
        con.unregister("new_members")


class SearchResult(NamedTuple):
    """What a ``NeighbourSearch`` found for a batch's new documents."""

    any_neighbours: bool  # whether any new document has a neighbour
    near_new: dict[int, list[int]]  # each older neighbour -> the new documents it neighbours
    sketches: dict[int, np.ndarray]  # the sketches of the new documents in near_new
    found: list | concepts.ConceptArrays  # the concepts mined, as ``_insert`` takes them
    postings: dict  # the new documents' ``concept_postings``
    searching: float  # seconds
    mining: float  # seconds


class NeighbourSearch:
    """The concept neighbour search of a batch's new documents, run in a thread of its own while
    the batch's pairs are found (the two read the same postings and nothing the other writes),
    and the mining of the concepts those neighbours hold (which needs nothing else).

    The new documents' sketches are read here, in the batch's transaction (or from ``written``); the
    thread reads older documents' sketches through a connection of its own (they are committed)
    and the postings; it runs in a copy of the caller's context, so under the same memory plan.
    ``result()`` waits for its ``SearchResult`` (the postings from the sketches read here);
    ``abandon()`` waits and drops it (a batch that fails must not close the catalog under a running
    search)."""

    def __init__(self, con, postings, lo: int, hi: int, settings: Settings, written=None):
        ids, flat, lens = _new_sketches(con, lo, hi, written)
        cur = catalog.cursor(con)

        def run() -> SearchResult:
            t = time.perf_counter()
            k = settings.support
            frequent: list = []
            a, b, old_sk = _search_with_sketches(cur, postings, lo, ids, flat, lens, k, frequent)
            anchors, nb_off, nb = neighbour_arrays(a, b, lo)
            # the sketches update_concepts reads: the new documents that neighbour older ones
            starts = np.concatenate([[0], np.cumsum(lens)])
            near = unique(b[a < lo])
            at = np.searchsorted(ids, near)
            sk = {d: flat[starts[i] : starts[i + 1]] for d, i in zip(near.tolist(), at.tolist())}
            t_mine = time.perf_counter()
            found = _mine_arrays(anchors, nb_off, nb, ids, flat, lens, old_sk, lo, hi, k)
            mining = time.perf_counter() - t_mine
            return SearchResult(anchors.size > 0, _near_new(a, b, lo), sk, found,
                                concept_postings_of(ids, flat, lens, k, frequent[0]), t_mine - t, mining)

        self._job = Beside(run, "neardup-concepts", done=cur.close)

    def result(self) -> SearchResult:
        return self._job.result()

    def abandon(self) -> None:
        self._job.join()


def update_concepts(con, postings, lo: int, hi: int, batch_id: int, settings: Settings,
                    timings: dict | None = None, search: NeighbourSearch | None = None) -> dict[str, int]:
    """Bring the ``concept`` clusters up to date with new documents ``lo..hi`` (``timings``: seconds
    of its parts, ``clusters: neighbours``, ``clusters: extended``, ``clusters: mine``, ``clusters:
    insert``). With ``search`` (started for these documents), its neighbours and concepts:
    ``clusters: neighbours`` and ``clusters: mine`` are then the thread's own times, spent beside the
    pairs', and ``clusters: wait`` what was left to wait for."""
    k = settings.support
    timings = timings if timings is not None else {}
    t = time.perf_counter()
    nb = None
    if search is not None:
        r = search.result()
        any_nb, near_new, sk, found = r.any_neighbours, r.near_new, r.sketches, r.found
        timings["clusters: neighbours"] = timings.get("clusters: neighbours", 0.0) + r.searching
        timings["clusters: mine"] = timings.get("clusters: mine", 0.0) + r.mining
        t = lap(timings, "clusters: wait", t)
    else:
        nb, sk = _neighbours(con, postings, lo, hi, settings)
        t = lap(timings, "clusters: neighbours", t)
        any_nb, found = bool(nb), None
        # each older neighbour -> the new documents it neighbours
        near_new = {}
        for q, ns in nb.items():
            for e in ns:
                if e < lo:
                    near_new.setdefault(e, []).append(q)
    if not any_nb:
        return {"created": 0, "removed": 0}
    # clusters a new document extends are no longer maximal
    touched = sorted(near_new)
    gone: list[int] = []
    if touched:
        # X is extended by q iff |I(X) ∩ S(q)| >= k (then q neighbours every member): only the
        # new neighbours of X's first member need checking, so only the clusters whose first member
        # is an older neighbour. A cluster's representative is its first member (the smallest id; a
        # delete replaces the clusters it changes): those clusters are found by it, and then their
        # common values read by row (``_extended``)
        gone = _extended(con, touched, near_new, sk, k)
    _remove(con, gone, "concept", batch_id)
    t = lap(timings, "clusters: extended", t)
    if found is None:
        found = _mine(nb, sk, lo, hi, k)
        t = lap(timings, "clusters: mine", t)
    _insert(con, "concept", batch_id, found, {"support": k, "sketch": "bottomk", "size": settings.bottomk})
    lap(timings, "clusters: insert", t)
    return {"created": len(found), "removed": len(gone)}


def _extended(con, touched: list[int], near_new: dict[int, list[int]], sk: dict, k: int) -> list[int]:
    """The ``concept`` clusters some new document extends: those whose representative (first
    member) is one of the older documents ``touched`` with a new neighbour ``q`` (``near_new``) whose
    sketch ``sk[q]`` holds at least ``k`` of the cluster's common values.

    The clusters are found on their narrow columns, and the common values (a list a cluster, most
    of the table's bytes) are read for those clusters only, by row id: a scan of them all, or one
    joined on the cluster ids, reads the whole column. The first batch of the million's last part
    read 86 MB of the catalog's file before and 76 MB after (``clusters.common`` 49 -> 35 MB: the
    clusters lie all over the table), which each writer drops from the page cache
    (docs/benchmarks.md).

    Every (cluster, new neighbour of its representative) pair is tested in one compiled call
    (``concept_kernels.overlap_reaches`` over the common values, ascending, and the sketches,
    sorted; both are sets): one ``np.isin`` a pair from Python cost 0.59 s of a 3,269-page batch
    of the real site's second release into its first 48,767 pages (23,475 pairs, 870 clusters)."""
    con.register("nb_ids", pa.table({"doc_id": pa.array(touched, pa.int64())}))
    try:
        found = con.execute(
            "SELECT rowid FROM clusters WHERE method = 'concept' AND representative IN (SELECT doc_id FROM nb_ids)"
        ).fetchall()
    finally:
        con.unregister("nb_ids")
    if not found:
        return []
    con.register("x_rows", pa.table({"r": pa.array(sorted(r[0] for r in found), pa.int64())}))
    try:
        rows = con.sql(
            "SELECT cluster_id, common, representative FROM clusters WHERE rowid IN (SELECT r FROM x_rows)"
        ).to_arrow_table()
    finally:
        con.unregister("x_rows")
    return _extending(rows, near_new, sk, k)


def _extending(rows: pa.Table, near_new: dict[int, list[int]], sk: dict, k: int) -> list[int]:
    """Of ``rows`` (``cluster_id``, ``common``, ``representative``), the ids of the clusters whose
    common values share at least ``k`` with the sketch ``sk[q]`` of a new neighbour ``q`` of their
    representative (``near_new``), in the order of ``rows``."""
    from .concept_kernels import overlap_reaches, sorted_segments

    if not rows.num_rows:
        return []
    cids = rows.column("cluster_id").to_numpy()
    reps = rows.column("representative").to_numpy().tolist()
    common = rows.column("common").combine_chunks()
    c_len = pc.fill_null(pc.list_value_length(common), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    c_vals = pc.list_flatten(common).to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
    # the pairs to test: each cluster's row against each new neighbour of its representative
    qs: dict[int, int] = {}  # a new neighbour -> its row after the clusters' rows
    ra: list[int] = []
    rb: list[int] = []
    for i, rep in enumerate(reps):
        for q in near_new.get(rep, ()):
            ra.append(i)
            rb.append(qs.setdefault(q, len(qs)))
    if not ra:
        return []
    q_sk = [np.asarray(sk[q], dtype=np.uint64) for q in qs]
    q_len = np.fromiter((a.size for a in q_sk), np.int64, len(q_sk))
    data = np.concatenate([c_vals, *q_sk])
    offs = np.concatenate([[0], np.cumsum(np.concatenate([c_len, q_len]))]).astype(np.int64)
    data = sorted_segments(data, offs)
    n = cids.size
    reach = overlap_reaches(data, offs, np.asarray(ra, np.int64), np.asarray(rb, np.int64) + n, k) >= k
    hit = np.zeros(n, bool)
    hit[np.asarray(ra, np.int64)[reach]] = True
    return cids[hit].tolist()


def _near_new(a: np.ndarray, b: np.ndarray, lo: int) -> dict[int, list[int]]:
    """Of the neighbour pairs ``(a[i], b[i])`` (``a < b``, ``b`` new): each older document ``a``
    -> the new documents it neighbours."""
    old = np.flatnonzero(np.asarray(a) < lo)
    out: dict[int, list[int]] = {}
    for e, q in zip(np.asarray(a)[old].tolist(), np.asarray(b)[old].tolist()):
        out.setdefault(e, []).append(q)
    return out


def _mine_arrays(anchors: np.ndarray, nb_off: np.ndarray, nb: np.ndarray, ids: np.ndarray, flat: np.ndarray,
                 lens: np.ndarray, old_sk: dict[int, np.ndarray], lo: int, hi: int, k: int) -> list[tuple] | concepts.ConceptArrays:
    """``_mine`` of neighbours as arrays (``neighbours.neighbour_arrays``): the new documents'
    sketches are ``ids``/``flat``/``lens`` (the batch's, ids ascending), the older ones' ``old_sk``;
    the concepts as ``concepts.ConceptArrays`` (which ``_insert`` takes as it takes rows)."""
    if anchors.size == 0:
        return []
    docs = unique(np.concatenate([anchors, nb]))
    old_docs, new_docs = docs[docs < lo], docs[docs >= lo]
    offs = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    at = np.searchsorted(ids, new_docs)
    n_lens = offs[at + 1] - offs[at]
    take = np.repeat(offs[at] - np.concatenate([[0], np.cumsum(n_lens)[:-1]]), n_lens) + np.arange(int(n_lens.sum()))
    old_parts = [np.asarray(old_sk[d], dtype=np.uint64) for d in old_docs.tolist()]
    vals = np.concatenate([*old_parts, np.asarray(flat, dtype=np.uint64)[take]])
    all_lens = np.concatenate([np.fromiter(map(len, old_parts), np.int64, count=len(old_parts)), n_lens])
    new = (docs >= lo) & (docs <= hi)
    return concepts.mine_anchor_rows(anchors, nb_off, nb, docs, vals, all_lens, new, k)


def _mine(nb: dict[int, list[int]], sk: dict[int, np.ndarray], lo: int, hi: int, k: int) -> list[tuple]:
    """The concepts of new documents ``lo..hi`` from their neighbours ``nb`` (``N(q)``) and the
    sketches ``sk``, as ``(members, support, common, truncated)`` rows for ``_insert``."""
    if not nb:
        return []
    new = range(lo, hi + 1)
    return [(c.members, c.support, c.common, c.truncated) for c in concepts.mine_anchors(sorted(nb), sk, nb, k, new.__contains__)]


def update_components(con, batch_id: int, settings: Settings) -> dict[str, int]:
    """Merge the ``components`` touched by the batch's new pairs."""
    method = settings.component_pairs
    if method is None:
        return {"created": 0, "removed": 0}
    pairs = con.sql("SELECT doc_a, doc_b FROM duplicates WHERE batch_id = ? AND method = ?", params=[batch_id, method]).to_arrow_table()
    if pairs.num_rows == 0:
        return {"created": 0, "removed": 0}
    a, b = (pairs.column(c).to_numpy().astype(np.int64) for c in ("doc_a", "doc_b"))
    docs = unique(np.concatenate([a, b]))
    con.register("pair_docs", pa.table({"doc_id": pa.array(docs, pa.int64())}))
    try:
        old = con.sql(
            "SELECT m.cluster_id, m.doc_id FROM cluster_members m JOIN clusters c USING (cluster_id) "
            "WHERE c.method = 'components' AND m.cluster_id IN (SELECT cluster_id FROM cluster_members WHERE doc_id IN (SELECT doc_id FROM pair_docs))"
        ).to_arrow_table()
    finally:
        con.unregister("pair_docs")
    o_cid, o_doc = (old.column(c).to_numpy().astype(np.int64) for c in ("cluster_id", "doc_id"))
    removed = unique(o_cid).tolist()
    _remove(con, removed, "components", batch_id)
    found = [(g, None, None, False) for g in _components(a, b, o_cid, o_doc, None if o_doc.size else docs)]
    _insert(con, "components", batch_id, found, {"pairs": method})
    return {"created": len(found), "removed": len(removed)}


def _components(a: np.ndarray, b: np.ndarray, o_cid: np.ndarray | None = None,
                o_doc: np.ndarray | None = None, nodes: np.ndarray | None = None) -> list[tuple[int, ...]]:
    """The connected components (two members or more) of the graph of the pairs ``(a[i], b[i])``
    and of the components given as ``(o_cid[j], o_doc[j])`` rows (cluster, member), each as its
    ascending members, ordered by their smallest member (as sorted member tuples sort). ``nodes``:
    every node ascending, when the caller has them (else found here)."""
    from . import kernels

    if o_cid is None or o_cid.size == 0:
        o_first = o_doc = np.zeros(0, np.int64)
    else:  # each old component's members joined to its first
        order = np.argsort(o_cid, kind="stable")
        o_cid, o_doc = o_cid[order], o_doc[order]
        starts = np.flatnonzero(np.r_[True, o_cid[1:] != o_cid[:-1]])
        o_first = np.repeat(o_doc[starts], np.diff(np.r_[starts, o_cid.size]))
    if nodes is None:
        nodes = unique(np.concatenate([a, b, o_doc]).astype(np.int64))
    root = kernels.component_roots(nodes.size, np.searchsorted(nodes, np.concatenate([a, o_first])),
                                   np.searchsorted(nodes, np.concatenate([b, o_doc])))  # a component's smallest node
    members = nodes[np.argsort(root, kind="stable")].tolist()  # by component, then ascending
    size = np.bincount(root, minlength=nodes.size)
    out, s = [], 0
    for e in np.cumsum(size[size > 0]).tolist():
        if e - s > 1:
            out.append(tuple(members[s:e]))
        s = e
    return out


def update(con, postings, lo: int, hi: int, batch_id: int, settings: Settings, timings: dict | None = None,
           search: NeighbourSearch | None = None) -> dict[str, dict[str, int]]:
    """Every incremental clustering of the index, for a batch's new documents and pairs (``search``:
    the concept neighbour search of those documents, started before the pairs)."""
    out = {}
    t0 = time.perf_counter()
    if "concept" in settings.clusters:
        out["concept"] = update_concepts(con, postings, lo, hi, batch_id, settings, timings, search)
    if "components" in settings.clusters:
        out["components"] = update_components(con, batch_id, settings)
    if timings is not None:
        timings["clusters"] = timings.get("clusters", 0.0) + time.perf_counter() - t0
    return out


def rebuild_incremental(con, settings: Settings, batch_id: int) -> dict[str, dict[str, int]]:
    """Recompute ``concept`` and ``components`` from scratch (one pass over all documents),
    recorded under ``batch_id`` in ``cluster_changes``."""
    out = {}
    lo_hi = con.execute("SELECT min(doc_id), max(doc_id) FROM documents").fetchall()[0]
    for method in settings.clusters:
        old = [r[0] for r in con.execute("SELECT cluster_id FROM clusters WHERE method = ?", [method]).fetchall()]
        _remove(con, old, method, batch_id)
        if lo_hi[0] is None:
            continue
        if method == "concept":
            out[method] = update_concepts(con, None, lo_hi[0], lo_hi[1], batch_id, settings)
        else:
            pm = settings.component_pairs
            pairs = con.sql("SELECT doc_a, doc_b FROM duplicates WHERE method = ?", params=[pm]).to_arrow_table()
            found = [(g, None, None, False) for g in _components(*(pairs.column(c).to_numpy().astype(np.int64) for c in ("doc_a", "doc_b")))]
            _insert(con, "components", batch_id, found, {"pairs": pm})
            out[method] = {"created": len(found), "removed": len(old)}
    return out


__all__ = ["update", "rebuild_incremental", "concept_postings"]


def run_requested(con, settings: Settings, names: list[str], batch_id: int, pair_method: str | None = None,
                  theta: float = 0.0, bits: list[int] | None = None, support: int | None = None,
                  max_component: int = 50, fingerprint: str | None = None) -> dict[str, dict]:
    """Recompute the named clusterings from scratch (``neardup rebuild --clusters``), each under
    its method name (a name with its parameter when they differ from the index's incremental
    ones: ``concept_90``, ``components_simhash``, ``greedy002_5``). Returns per method name
    ``{"clusters": n, "params": ...}``."""
    from . import clusterings
    from .errors import SettingsMismatch

    out: dict[str, dict] = {}
    pm = pair_method or settings.component_pairs
    for name in names:
        if name in clusterings.SIMHASH_METHODS:
            fp = fingerprint or ("simhash_hp" if "simhash_hp" in settings.methods else "simhash")
            if fp not in settings.methods:
                raise SettingsMismatch(f"clustering {name} needs simhash fingerprints", hint="create the index with simhash or simhash_hp in --methods")
            t = con.sql(f"SELECT f.doc_id, d.n_words, f.simhash FROM fp_{fp} f JOIN documents d USING (doc_id) ORDER BY f.doc_id").to_arrow_table()
            ids, lens, hs = (t.column(c).to_numpy() for c in ("doc_id", "n_words", "simhash"))
            for b in bits or [5, 10, 15]:
                if name == "greedy002":
                    groups = clusterings.greedy002(ids, lens, hs, b, settings.seed)
                else:
                    groups = clusterings.degree002(clusterings.window_edges(ids, lens, hs, b))
                out[f"{name}_{b}"] = _replace(con, f"{name}_{b}", batch_id, groups, {"bits": b, "fingerprint": fp, "seed": settings.seed})
            continue
        if name == "concept":
            k = support or settings.support
            method = "concept" if k == settings.support and "concept" in settings.clusters else f"concept_{k}"
            sk = {d: np.asarray(v, dtype=np.uint64) for d, v in con.execute("SELECT doc_id, sketch FROM fp_bottomk").fetchall()}
            found = concepts.mine(sk, k, neighbours=_all_neighbours(sk, k))
            old = [r[0] for r in con.execute("SELECT cluster_id FROM clusters WHERE method = ?", [method]).fetchall()]
            _remove(con, old, method, batch_id)
            _insert(con, method, batch_id, [(c.members, c.support, c.common, c.truncated) for c in found],
                    {"support": k, "sketch": "bottomk", "size": settings.bottomk})
            out[method] = {"clusters": len(found), "params": {"support": k}}
            continue
        if name not in clusterings.GRAPH_METHODS:
            raise SettingsMismatch(f"unknown clustering {name!r}", hint=f"choose from concept, {', '.join(clusterings.GRAPH_METHODS + clusterings.SIMHASH_METHODS)}")
        if pm is None or pm not in (settings.pairs or ()):
            raise SettingsMismatch(f"clustering {name} needs pairs of a method the index computes (--pairs-method)",
                                   hint=f"the index computes {', '.join(settings.pairs or ()) or 'no pairs'}")
        edges = [(a, b, w) for a, b, w in con.execute("SELECT doc_a, doc_b, similarity FROM duplicates WHERE method = ?", [pm]).fetchall()]
        params: dict = {"pairs": pm}
        skipped = None
        if name == "components":
            groups = clusterings.components(edges)
        elif name == "cliques":
            groups, skipped = clusterings.cliques(edges, max_component)
            params["max_component"] = max_component
        elif name in ("center", "merge_center"):
            groups = clusterings.center(edges, merge=name == "merge_center")
        elif name == "star":
            groups = clusterings.star(edges, theta)
            params["theta"] = theta
        elif name == "ricochet":
            groups = clusterings.ricochet(edges)
        else:
            groups = clusterings.biconnected(edges)
        method = name
        if name == "components" and "components" in settings.clusters and pm != settings.component_pairs:
            method = f"components_{pm}"
        out[method] = _replace(con, method, batch_id, groups, params)
        if skipped is not None:
            out[method]["skipped_components"] = skipped
    return out


def _replace(con, method: str, batch_id: int, groups: list[tuple[int, ...]], params: dict) -> dict:
    old = [r[0] for r in con.execute("SELECT cluster_id FROM clusters WHERE method = ?", [method]).fetchall()]
    _remove(con, old, method, batch_id)
    _insert(con, method, batch_id, [(g, None, None, False) for g in groups], params)
    return {"clusters": len(groups), "params": params}


def candidate_overlaps(sk: dict[int, np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``(a, b)`` of documents whose sketches share >= ``k`` values, with how many they
    share (``neardup.neighbours``)."""
    return all_pairs(sk, k)


def _all_neighbours(sk: dict[int, np.ndarray], k: int) -> dict[int, list[int]]:
    """``N(d)`` of every document (``candidate_overlaps``)."""
    a, b, _ = candidate_overlaps(sk, k)
    return neighbour_lists(a, b)
