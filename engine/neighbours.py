"""Concept neighbours: every pair of documents whose sketches share at least k values.

The concept clusters (seeds 000/001, ``neardup.concepts``) are mined inside
``N[q] = {q} ∪ {e : |S(q) ∩ S(e)| >= k}``. This module finds those
neighbour pairs exactly, at a cost that follows the rare values of the
sketches rather than the squares of the lists of common ones.

**The filter.** Let ``n = |S(q)|``. A neighbour ``e`` misses at most
``n - k`` of q's values, so any ``n - k + c`` values of ``S(q)``, call them
``P(q)``, contain at least c values of ``S(e)``. This holds for *any* choice
of ``P(q)``; the choice only steers the cost. So every document's full
sketch is posted (LMDB table ``concept_values``), each new document looks
up only its ``n - k + c`` **rarest** values (c = ``SHARED`` = 4, at most k),
and only the documents holding c of them are candidates (a page that shares
one paragraph with q holds one or two, and its sketch is never read): on a real site whose pages
share navigation and footers, those are the values of the page's own body,
whose lists are short, while the frame's values, held by thousands of pages,
are looked up only by pages that are nearly all frame (and whose true
neighbours are then many anyway). A value's rarity is estimated from what a
batch can see cheaply: how many documents of the batch hold it, and whether
an earlier batch found it in ``FREQUENT`` or more of its own documents
(``concept_frequent``, a hint that never changes results).

**Direction.** From q's side alone every neighbour of q is found, older or
in the same batch. So each new document keeps the pairs it reaches with
older documents and with *smaller* new ones: a pair of two new documents is
kept by its larger member (the smaller one may not reach it, having looked
up other values).

**Bounded memory.** The new documents (anchors) are taken in slices: a
slice looks up the older holders of its own anchors' values only, emits
its (document, partner) rows, counts the common values of the candidates
exactly on the sorted sketches (compiled merge) and keeps the pairs with at
least k. A slice takes as many anchors as the rows per anchor of the slices
before it allow under ``PAIR_BUDGET`` (one anchor alone may exceed it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .pairs.groups import _decode, dense_unique, holders_of, read_older_holders  # the candidate generators' decoder and lookups
from .pipeline import in_parts
from .arrays import hash_order, pair_order, small_order, unique

#: every sketch value of every document with at least k values -> doc ids
VALUES_TABLE = "concept_values"
#: sketch values some batch held in at least FREQUENT of its documents -> that batch's first doc id
FREQUENT_TABLE = "concept_frequent"
#: a value held by this many documents of one batch counts as frequent (frame, boilerplate)
FREQUENT = 32
#: a document looks up n - k + SHARED values and a candidate must hold SHARED of them (at most k)
SHARED = 4
#: (anchor, partner) rows materialised at once (about: a slice's anchors are chosen from the rows per
#: anchor of the slices before it)
PAIR_BUDGET = 4_000_000
#: anchors (new documents) of the first slice
FIRST_ANCHORS = 2_000

OldSketches = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def sort_sketches(ids: np.ndarray, flat: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Documents in ascending id order, each sketch sorted ascending: ``(ids, flat, offsets)``."""
    from . import kernels

    ids = np.asarray(ids, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    flat = np.array(flat, dtype=np.uint64)  # a copy: sorted in place below
    offs = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    if ids.size > 1 and (np.diff(ids) < 0).any():
        rank = np.argsort(ids, kind="stable")
        flat = np.concatenate([flat[offs[r] : offs[r + 1]] for r in rank.tolist()])
        ids, lens = ids[rank], lens[rank]
        np.cumsum(lens, out=offs[1:])
    kernels.sort_segments(flat, offs)
    return ids, flat, offs


def _group(values: np.ndarray):
    """``(group of each value, the distinct values ascending, how many values each holds)``:
    ``neighbour_kernels.sorted_groups`` along the values' sorted order."""
    from . import neighbour_kernels

    values = np.ascontiguousarray(values, dtype=np.uint64)
    return neighbour_kernels.sorted_groups(values, hash_order(values))


def _frequent(keys: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The values a ``_group`` counts ``FREQUENT`` or more times, ascending (as its keys are)."""
    return keys[counts >= FREQUENT]


def postings_of(ids: np.ndarray, flat: np.ndarray, lens: np.ndarray, k: int,
                frequent: np.ndarray | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The posting rows of a batch's sketches: every value of each sketch with >= k values, and
    the values held by ``FREQUENT`` or more of those documents (keyed to the batch's first id).
    ``frequent``: those values if already counted (``search``'s ``frequent_out``)."""
    lens = np.asarray(lens, dtype=np.int64)
    ok = np.repeat(lens >= k, lens)
    docs = np.repeat(np.asarray(ids, dtype=np.uint64), lens)[ok]
    vals = np.asarray(flat, dtype=np.uint64)[ok]
    freq = _frequent(*_group(vals)[1:]) if frequent is None else frequent
    first = np.full(freq.size, docs.min() if docs.size else 0, dtype=np.uint64)
    return {VALUES_TABLE: (vals, docs), FREQUENT_TABLE: (freq, first)}


def search(ids: np.ndarray, flat: np.ndarray, lens: np.ndarray, k: int, *, lo: int | None = None,
           postings=None, old_sketches: OldSketches | None = None,
           budget: int | None = None, exact: bool = True,
           frequent_out: list | None = None, old_out: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``(a, b)``, ``a < b``, sharing at least ``k`` sketch values, with ``b`` one of
    the given (new) documents and ``a`` new or older, and how many values they share (with
    ``exact=False``, ``k`` for every pair: each comparison stops once it has met ``k``).

    ``ids``/``flat``/``lens``: the new documents' sketches (distinct values each). Older partners
    (ids below ``lo``) come from ``postings`` (``VALUES_TABLE``, ``FREQUENT_TABLE``) and their
    sketches from ``old_sketches(ids) -> (ids ascending, values sorted per id, offsets)``.
    ``frequent_out``: a list the batch's frequent values are appended to, as ``postings_of`` finds
    them (counted here anyway, so a caller storing the batch's postings need not count them again).
    ``old_out``: a dict given the sketch (sorted, a copy) of every older document in a pair found,
    as ``old_sketches`` read it (a caller needing them need not read them again)."""
    from . import kernels, memory, neighbour_kernels

    if budget is None:
        budget = memory.current().scaled(PAIR_BUDGET)
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    ids, data, offs = sort_sketches(ids, flat, lens)
    lens = np.diff(offs)
    sel = lens >= k
    if not sel.any():
        if frequent_out is not None:
            frequent_out.append(np.zeros(0, np.uint64))
        return none
    if not sel.all():
        ids, data, lens = ids[sel], data[np.repeat(sel, lens)], lens[sel]
        offs = np.zeros(ids.size + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
    if int(ids.max()) >= 1 << 32:
        raise ValueError("doc ids beyond 2^32 are not supported by the pair encoder")
    if lo is None:
        lo = int(ids.min())
    n = ids.size
    owner = np.repeat(np.arange(n), lens)  # row -> new document (its index in ids)
    slot, keys, counts = _group(data)  # equal values share a slot: their group, numbered in value order
    if frequent_out is not None:
        frequent_out.append(_frequent(keys, counts))
    frequent = counts >= FREQUENT
    if postings is not None:
        hint = np.asarray(postings.keys(FREQUENT_TABLE), dtype=np.uint64)
        at = np.searchsorted(keys, hint)
        inside = at < keys.size
        at = at[inside]
        frequent[at[keys[at] == hint[inside]]] = True
    # each document's rarest n - k + c values: not frequent first, then fewest holders in the
    # batch, then the smaller value (the sketch is sorted and the selection stable)
    c = shared_needed(k)
    rank = neighbour_kernels.slot_ranks(slot, counts, frequent)
    take = neighbour_kernels.smallest_per_segment(rank, offs, lens - k + c)
    p_doc = owner[take]  # grouped by document
    # the looked-up values, numbered densely
    wanted = np.zeros(keys.size, dtype=bool)
    wanted[slot[take]] = True
    wslots = np.flatnonzero(wanted)
    # numbered in ascending value order (as the groups are), so a slice's values are looked up in
    # key order (no sort there)
    u = keys[wslots]
    cnt = counts[wslots]
    rank_of_slot = np.empty(keys.size, dtype=np.int64)  # group -> its value's number (looked-up groups only)
    rank_of_slot[wslots] = np.arange(wslots.size)
    p_val = rank_of_slot[slot[take]]

    # who holds each looked-up value: the batch's documents (rows grouped by value), older ones from postings
    rows = np.flatnonzero(wanted[slot])
    dense_rows = rank_of_slot[slot[rows]]
    del rank_of_slot
    del rank, wanted, keys, frequent, counts
    by_val = rows[small_order(dense_rows, u.size)]
    b_holder = owner[by_val]
    b_start = np.zeros(u.size + 1, dtype=np.int64)
    np.cumsum(cnt, out=b_start[1:])
    del slot, rows, dense_rows, by_val

    # slices of whole anchors; older holders are looked up for the values of the slice's anchors only,
    # and the next slice takes as many anchors as the rows per anchor so far allow under ``budget``
    p_bounds = np.searchsorted(p_doc, np.arange(n + 1))  # p_doc is grouped by document, ascending
    out_a, out_b, out_c = [], [], []
    # every looked-up value's older holders read once, in value order, while they fit in the budget
    # (else each slice reads its own): slice by slice, most pages of the stored runs are read again
    # for every slice
    every = read_older_holders(postings, VALUES_TABLE, u, lo, budget) if postings is not None else None
    d0, step = 0, min(FIRST_ANCHORS, budget)
    while d0 < n:
        a0, d1 = d0, min(n, d0 + step)
        s, e = int(p_bounds[a0]), int(p_bounds[d1])
        d0 = d1
        if s == e:
            continue
        qd, qv = p_doc[s:e], p_val[s:e]
        # new-new pairs as (smaller, larger) indices into ids, kept by the larger member only; old-new
        # pairs as (old id, index): the pairs holding c looked-up values, counted without listing the rows
        n_rows = int(cnt[qv].sum())
        nn = kernels.holder_pairs(qd, qv, b_start, b_holder, True, c, n_rows)
        on = np.zeros(0, np.uint64)
        if postings is not None:
            uv, inv = dense_unique(qv, u.size)
            if every is not None:
                which, old = holders_of(*every, uv)
            else:
                which, old = postings.get_flat(VALUES_TABLE, u[uv])  # ascending keys: u is sorted
                keep = old < np.uint64(lo)
                which, old = which[keep], old[keep].astype(np.int64)
                del keep
            o_start = np.zeros(uv.size + 1, dtype=np.int64)
            np.cumsum(np.bincount(which, minlength=uv.size), out=o_start[1:])
            o_rows = int(np.diff(o_start)[inv].sum())
            n_rows += o_rows
            on = kernels.holder_pairs(qd, inv, o_start, old, False, c, o_rows)
            del which, old
        step = max(1, int(budget * (d1 - a0) / max(n_rows, 1)))
        if nn.size == 0 and on.size == 0:
            continue
        nx, ny = _decode(nn)
        ox, oy = _decode(on)
        # one array of sorted sketches: the old partners' first, then the new documents'
        o_ids_s, o_data, o_offs = (np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(1, np.int64))
        if on.size:
            if old_sketches is None:
                raise ValueError("older partners found but no way to read their sketches")
            o_ids_s, o_data, o_offs = old_sketches(unique(ox))
        shift = o_ids_s.size
        all_data = np.concatenate([o_data, data]) if shift else data
        all_offs = np.concatenate([o_offs[:-1], o_offs[-1] + offs]) if shift else offs
        ra = np.concatenate([np.searchsorted(o_ids_s, ox), nx + shift])
        rb = np.concatenate([oy, ny]) + shift
        if exact:
            common = in_parts(lambda x, y: kernels.pair_overlap(all_data, all_offs, x, y), ra, rb)
        else:
            from .concept_kernels import overlap_reaches

            common = in_parts(lambda x, y: overlap_reaches(all_data, all_offs, x, y, k), ra, rb)
        hit = common >= k
        if old_out is not None and shift:
            held = unique(ox[hit[: ox.size]])
            for d, i in zip(held.tolist(), np.searchsorted(o_ids_s, held).tolist()):
                old_out[d] = o_data[o_offs[i] : o_offs[i + 1]].copy()
        out_a.append(np.concatenate([ox, ids[nx]])[hit])
        out_b.append(ids[np.concatenate([oy, ny])][hit])
        out_c.append(common[hit])
    if not out_a:
        return none
    a, b, c = np.concatenate(out_a), np.concatenate(out_b), np.concatenate(out_c)
    order = pair_order(a, b)
    return a[order], b[order], c[order]


def shared_needed(k: int) -> int:
    """How many of its looked-up values a candidate must hold: c = min(SHARED, k)."""
    return min(SHARED, k)


def neighbour_lists(a: np.ndarray, b: np.ndarray, lo: int = 0) -> dict[int, list[int]]:
    """Neighbour lists of the documents from ``lo`` on, from the pairs ``(a[i], b[i])``."""
    nb: dict[int, list[int]] = {}
    for x, y in zip(a.tolist(), b.tolist()):
        if x >= lo:
            nb.setdefault(x, []).append(y)
        if y >= lo:
            nb.setdefault(y, []).append(x)
    return nb


def neighbour_arrays(a: np.ndarray, b: np.ndarray, lo: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``neighbour_lists`` as arrays: ``(anchors, offsets, neighbours)``, the documents from ``lo``
    on that have neighbours (ascending) and each one's distinct neighbours (ascending) at
    ``neighbours[offsets[i]:offsets[i + 1]]``."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    keep = src >= lo
    src, dst = src[keep], dst[keep]
    order = pair_order(src, dst)
    src, dst = src[order], dst[order]
    if src.size:
        first = np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]
        src, dst = src[first], dst[first]
    anchors, starts = np.unique(src, return_index=True)
    offsets = np.r_[starts, src.size].astype(np.int64)
    return anchors, offsets, dst


def all_pairs(sk: dict[int, np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of documents of ``sk`` (``{doc: sketch of distinct values}``) sharing at least
    ``k`` values, with how many they share."""
    ids = np.array(sorted(sk), dtype=np.int64)
    if ids.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    parts = [np.asarray(sk[d], dtype=np.uint64) for d in ids.tolist()]
    lens = np.array([p.size for p in parts], dtype=np.int64)
    flat = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    return search(ids, flat, lens, k)
