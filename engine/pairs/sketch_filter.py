"""The bottom-k screen of ``jaccard``: candidates whose bottom-k sketches agree too rarely for the
threshold are not verified.

The agreement filter (``verify.agree_enough``) drops a pair at the threshold with probability at
most 10^-5, but on a site whose pages share their frame it is fed tens of millions of candidate
pairs of Jaccard about 0.45-0.55 (most of them agree on about half of the 100 min-hash
positions), and the far tail of so many lets tens of thousands through to the exact Jaccard: part
9's first batch of the scale corpus verified 77,690 pairs to keep 4,276 (docs/benchmarks.md,
thirty-ninth session). The bottom-k sketch of each set (``fingerprints.sketches.bottom_k``,
stored anyway for the concept clusters) is a second sample, under a hash of its own, and tells
those pairs apart: of the same 77,690, 5,520 pass it. The pairs that agree on the min-hash
positions as often as nearly every pair at the threshold does (``verify.sure_agreements``) are
not screened: they would nearly all pass.

Broder's estimate: ``S`` is the ``k`` smallest values of the union of the two sketches, which
are the ``k`` smallest of the union of the two sets, and ``X = |S n A n B|``. Given a random
hash, ``S`` is a uniform sample of ``k`` elements of ``A u B``, so ``X`` follows the
hypergeometric law of ``k`` draws from ``|A u B|`` elements of which ``|A n B|`` are marked.
For a pair at the threshold t its lower tail lies below the binomial one of ``k`` draws at t
(the draws are without replacement; ``tests/test_sketch_filter.py`` checks it for union sizes
from ``k`` to 1,500 and some far larger), so the agreement filter's bound ``min_agreements(t, k)``
(62 of 100 at 0.8) drops such a pair with probability at most 10^-5 too, a pair above the
threshold more rarely still.

When both sketches are whole sets (their union holds fewer than ``k`` values), ``S`` is the whole
union of the two shingle sets (a set of fewer than ``k`` values is its own sketch, under either
permutation scheme), so ``X / |S|`` is the exact Jaccard the verification would compute: such a
pair is decided here, kept with that similarity when it reaches the threshold.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..kernels import bottom_counts
from ..settings import Settings
from .values import ValueCache, _flat, _rows_of, _values, big_endian_lists

#: the postings' value table of the bottom-k sketches (``clusters.SKETCH_VALUES``: big-endian
#: uint64, the sketch in order), written with the concept clusters' postings
SKETCH_VALUES = "bottomk"


#: what ``screen`` tells of a pair
DROP, VERIFY, EXACT = 0, 1, 2


def screens(settings: Settings) -> bool:
    """Whether ``jaccard``'s candidates are screened: with the bottom-k sketches computed and the
    concept clusters on, whose postings hold the older documents' sketches (without them each
    slice would search the catalog's sketch table for its older documents)."""
    return "bottomk" in settings.methods and "concept" in (settings.clusters or ())


@njit(cache=True, nogil=True)
def sketch_states(data, offs, ra, rb, k, need, threshold, sim):
    """For each row pair of ascending sketches ``data[offs[r]:offs[r+1]]``: ``EXACT`` when the
    union of the two holds fewer than ``k`` values (both are whole sets) and the share in both
    (written to ``sim``) reaches ``threshold``; ``VERIFY`` when it holds ``k`` or more and at least
    ``need`` of its ``k`` smallest are in both; else ``DROP``."""
    out = np.empty(ra.size, np.int8)
    for p in range(ra.size):
        both, taken = bottom_counts(data, offs[ra[p]], offs[ra[p] + 1], offs[rb[p]], offs[rb[p] + 1], k)
        if taken >= k:
            out[p] = 1 if both >= need else 0
        elif taken > 0 and both / taken >= threshold - 1e-12:
            sim[p] = both / taken
            out[p] = 2
        else:
            out[p] = 0
    return out


def screen(con, a: np.ndarray, b: np.ndarray, settings: Settings, need: int, postings=None, lo: int = 0, hi: int = -1,
           cache: ValueCache | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(state, similarity)`` of each pair ``(a[i], b[i])`` (``sketch_states`` with ``need`` of
    ``settings.bottomk``; the similarity is set where the state is ``EXACT``). ``lo..hi``: the
    batch's documents, whose sketches are read from the catalog once a batch (kept in ``cache``)."""
    sim = np.full(a.size, -1.0)
    if a.size == 0:
        return np.zeros(0, np.int8), sim
    ids, data, offs = sketch_rows(con, np.concatenate([a, b]), settings, postings, lo, hi, cache)
    state = sketch_states(data, offs, _rows_of(ids, a), _rows_of(ids, b), settings.bottomk, need, settings.threshold, sim)
    return state, sim


def hold_batch(cache: ValueCache | None, lo: int, hi: int, written, settings: Settings) -> None:
    """Keep the sketches of batch ``lo..hi`` in ``cache`` from ``written`` (``store.rows.WrittenRows``,
    the batch's rows as it inserted them), when the batch screens and it holds them: not read back
    from the catalog. (``find_batch_pairs`` lets them go at the batch's end.)"""
    if cache is None or written is None or not screens(settings):
        return
    held = written.column("fp_bottomk", "sketch")
    if held is not None:
        _keep(cache, lo, hi, held[0], held[1])


def _keep(cache: ValueCache | None, lo: int, hi: int, ids, col) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import pyarrow.compute as pc

    # the values as they lie in the column (no copy): the batch's rows outlive its pair search
    flat = col.flatten().to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
    lens = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64)
    out = (np.asarray(ids, dtype=np.int64), flat, np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))
    if cache is not None:
        cache.batch_sketches = ((lo, hi), out)
    return out


def _batch_sketches(con, lo: int, hi: int, cache: ValueCache | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids ascending, values, offsets)`` of the sketches of documents ``lo..hi``: those ``hold_batch``
    kept, or read from the catalog once a batch."""
    held = cache.batch_sketches if cache is not None else None
    if held is not None and held[0] == (lo, hi):
        return held[1]
    t = con.sql("SELECT doc_id, sketch FROM fp_bottomk WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id", params=[lo, hi]).to_arrow_table()
    return _keep(cache, lo, hi, t.column("doc_id").to_numpy(), t.column("sketch").combine_chunks())


def _gather(flat: np.ndarray, offs: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs ``flat[offs[r]:offs[r+1]]`` of ``rows``, one after another, and their offsets."""
    lens = offs[rows + 1] - offs[rows]
    out_offs = np.zeros(rows.size + 1, np.int64)
    np.cumsum(lens, out=out_offs[1:])
    at = np.repeat(offs[rows] - out_offs[:-1], lens) + np.arange(out_offs[-1])
    return flat[at], out_offs


def sketch_rows(con, ids: np.ndarray, settings: Settings, postings=None, lo: int = 0, hi: int = -1,
                cache: ValueCache | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids ascending, values, offsets)``: the bottom-k sketches of ``ids``, each ascending under
    the sketch's permutation. The batch's own (``lo..hi``) come from its rows, as ``hold_batch``
    kept them or as read from the catalog once (``_batch_sketches``); older documents' from
    ``cache`` or the postings' value table, or from the catalog where the postings have none."""
    ids = np.unique(np.asarray(ids, dtype=np.int64))
    new = ids[(ids >= lo) & (ids <= hi)]
    old = ids[(ids < lo) | (ids > hi)]
    parts_ids, parts_data, parts_lens = [], [], []
    if new.size:
        b_ids, b_flat, b_offs = _batch_sketches(con, lo, hi, cache)
        rows = np.searchsorted(b_ids, new)
        if (rows >= b_ids.size).any() or (b_ids[np.minimum(rows, b_ids.size - 1)] != new).any():
            raise ValueError(f"fp_bottomk: no sketch for documents {new[:5].tolist()}")
        data, offs = _gather(b_flat, b_offs, rows)
        parts_ids.append(new)
        parts_data.append(data)
        parts_lens.append(np.diff(offs))
    if old.size:
        _, got = _values(con, postings, lo, old, "fp_bottomk", "sketch", SKETCH_VALUES, cache, big_endian_lists)
        parts_ids.append(old)
        parts_data.append(np.frombuffer(b"".join(got), dtype=">u8").astype(np.uint64))
        parts_lens.append(np.fromiter(map(len, got), np.int64, count=len(got)) // 8)
    order = np.argsort(np.concatenate(parts_ids), kind="stable")
    all_ids = np.concatenate(parts_ids)[order]
    all_lens = np.concatenate(parts_lens)
    offs = np.zeros(all_lens.size + 1, np.int64)
    np.cumsum(all_lens, out=offs[1:])
    data, offs = _gather(np.concatenate(parts_data), offs, order)
    if settings.permutation != "universal":  # the sketches list original hashes in permuted order
        from ..fingerprints import sketches

        data = sketches.permute(data, 0, 1, settings.seed, settings.permutation)
    return all_ids, data, offs
