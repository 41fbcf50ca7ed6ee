"""Sorting ``(key, doc)`` rows by a compiled bucket sort (numba, cached).

A batch's postings are millions of such rows whose keys are hash values
(sketch values, band keys, URL hashes), so their leading bits spread the
rows evenly: one counting pass places every row in one of about ``n / 4``
buckets by those bits, and each bucket, a handful of rows, is sorted on its
own. On the documentation site's 1.7 million concept postings
(``neardup.neighbours.postings_of``) that took 0.025 s against 0.14-0.27 s
for numpy's sort of the keys followed by a sort of each run of equal keys
(``arrays.sorted_distinct_pairs`` before). Keys that are not spread (a
value held by thousands of documents lands in one bucket) only make some
buckets large: a large bucket is sorted by a merge sort of its keys and a
sort of the documents of each key, so no input is quadratic.

``key_order`` is the same bucket sort returning an order: the positions of
hash keys by key, ties in input order (a batch's candidate keys, made
document after document).

``masked_order`` sorts simhashes on the bits of one table's mask (the simhash
scan's older documents, ``pairs.simhash.SortedOld``): the masked bits, packed
together (26 of the 64 at the default 3 bits), are sorted by a least
significant digit radix sort, ``MASKED_DIGIT`` bits a pass. ``masked_sorted``
is the same sort returning the values and their ids in that order, each
pass moving them along, where a gather by the order would read both at
random.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

#: a bucket of more rows than this is sorted by a merge sort, not by insertion
SMALL_BUCKET = 32


@njit(cache=True, nogil=True)
def _sort_bucket(ok, od, lo, hi):
    """Sort rows ``lo:hi`` of ``(ok, od)`` in place by key, then doc."""
    if hi - lo <= SMALL_BUCKET:
        for i in range(lo + 1, hi):
            k = ok[i]
            d = od[i]
            j = i - 1
            while j >= lo and (ok[j] > k or (ok[j] == k and od[j] > d)):
                ok[j + 1] = ok[j]
                od[j + 1] = od[j]
                j -= 1
            ok[j + 1] = k
            od[j + 1] = d
        return
    order = np.argsort(ok[lo:hi], kind="mergesort")
    keys = ok[lo:hi][order]
    docs = od[lo:hi][order]
    start = 0
    for i in range(1, keys.size + 1):
        if i == keys.size or keys[i] != keys[start]:
            if i - start > 1:
                docs[start:i].sort()
            start = i
    ok[lo:hi] = keys
    od[lo:hi] = docs


@njit(cache=True, nogil=True)
def _scatter(keys, docs, bits):
    """The rows ``(keys[i], docs[i])`` placed in ``2**bits`` buckets by the keys' leading bits,
    in input order within each bucket: ``(starts, keys, docs)``, bucket ``b`` at
    ``starts[b]:starts[b + 1]``."""
    n = keys.size
    shift = uint64(64 - bits)
    nb = np.int64(1) << np.int64(bits)
    starts = np.zeros(nb + 1, np.int64)
    for i in range(n):
        starts[np.int64(keys[i] >> shift) + 1] += 1
    for b in range(nb):
        starts[b + 1] += starts[b]
    pos = starts[:-1].copy()
    ok = np.empty(n, np.uint64)
    od = np.empty_like(docs)
    for i in range(n):
        b = np.int64(keys[i] >> shift)
        p = pos[b]
        ok[p] = keys[i]
        od[p] = docs[i]
        pos[b] = p + 1
    return starts, ok, od


@njit(cache=True, nogil=True)
def sorted_distinct_pairs(keys, docs, bits):
    """The distinct rows ``(keys[i], docs[i])`` (uint64 both), sorted by key then doc: ``2**bits``
    buckets by the keys' leading bits (1 <= bits <= 63)."""
    starts, ok, od = _scatter(keys, docs, bits)
    n = keys.size
    for b in range(starts.size - 1):
        if starts[b + 1] - starts[b] > 1:
            _sort_bucket(ok, od, starts[b], starts[b + 1])
    m = 0
    for i in range(n):
        if m == 0 or ok[i] != ok[m - 1] or od[i] != od[m - 1]:
            ok[m] = ok[i]
            od[m] = od[i]
            m += 1
    return ok[:m], od[:m]


@njit(cache=True, nogil=True)
def key_order(keys, bits):
    """The stable order of ``keys`` (uint64): by key, equal keys in input order. ``2**bits`` buckets
    by the keys' leading bits, filled in input order; each bucket sorted by an insertion sort (a
    bucket of equal keys costs one pass) or, past ``SMALL_BUCKET`` rows, a merge sort of its keys."""
    starts, ok, oi = _scatter(keys, np.arange(keys.size), bits)
    for b in range(starts.size - 1):
        lo, hi = starts[b], starts[b + 1]
        if hi - lo <= 1:
            continue
        if hi - lo <= SMALL_BUCKET:
            for i in range(lo + 1, hi):
                k = ok[i]
                x = oi[i]
                j = i - 1
                while j >= lo and ok[j] > k:
                    ok[j + 1] = ok[j]
                    oi[j + 1] = oi[j]
                    j -= 1
                ok[j + 1] = k
                oi[j + 1] = x
        else:
            sub = np.argsort(ok[lo:hi], kind="mergesort")
            oi[lo:hi] = oi[lo:hi][sub]
            ok[lo:hi] = ok[lo:hi][sub]
    return oi


def bucket_bits(n: int) -> int:
    """Buckets for ``n`` rows: about four rows each, between 2 and 2**24 buckets."""
    return int(min(24, max(1, int(n).bit_length() - 2)))


#: bits of the packed key a pass of ``masked_order``'s radix sort places (8,192 counters: 64 KB)
MASKED_DIGIT = 13


def mask_runs(mask: int) -> tuple[np.ndarray, np.ndarray]:
    """The runs of set bits of a 64-bit ``mask``, lowest first: ``(shifts, widths)``."""
    mask = int(mask)
    shifts, widths, b = [], [], 0
    while b < 64:
        if mask >> b & 1:
            start = b
            while b < 64 and mask >> b & 1:
                b += 1
            shifts.append(start)
            widths.append(b - start)
        else:
            b += 1
    return np.array(shifts, np.int64), np.array(widths, np.int64)


def masked_order(values: np.ndarray, mask) -> np.ndarray:
    """``np.argsort(values & mask, kind="stable")`` for uint64 ``values``, by a radix sort of the
    masked bits: on 900,000 simhashes and a mask of 26 bits, about 25 ms against 90-115 ms."""
    shifts, widths = mask_runs(mask)
    run_masks = np.array([(1 << int(w)) - 1 for w in widths], dtype=np.uint64)
    places = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    values = np.ascontiguousarray(values, dtype=np.uint64)
    return _masked_order(values, shifts, run_masks, places, int(widths.sum()), MASKED_DIGIT)


@njit(cache=True, nogil=True)
def _masked_order(values, shifts, run_masks, places, total, digit):
    """The stable order of ``values`` on the bits of the runs at ``shifts`` (``run_masks``: each
    run's bits, shifted down; ``places``: where each run goes in the packed key; ``total`` bits in
    all): those bits are packed into one key (the runs' order kept, so the packed keys order as the
    masked values do), then sorted ``digit`` bits a pass from the lowest, with the positions carried
    along."""
    n = values.size
    key = np.empty(n, np.uint64)
    for i in range(n):
        v = values[i]
        c = uint64(0)
        for r in range(shifts.size):
            c |= ((v >> uint64(shifts[r])) & run_masks[r]) << uint64(places[r])
        key[i] = c
    idx = np.arange(n)
    key2 = np.empty(n, np.uint64)
    idx2 = np.empty(n, np.int64)
    n_buckets = np.int64(1) << np.int64(digit)
    counts = np.empty(n_buckets + 1, np.int64)
    low = uint64(n_buckets - 1)
    shift = 0
    while shift < total:
        counts[:] = 0
        for i in range(n):
            counts[np.int64((key[i] >> uint64(shift)) & low) + 1] += 1
        for b in range(n_buckets):
            counts[b + 1] += counts[b]
        for i in range(n):
            b = np.int64((key[i] >> uint64(shift)) & low)
            p = counts[b]
            counts[b] = p + 1
            key2[p] = key[i]
            idx2[p] = idx[i]
        key, key2 = key2, key
        idx, idx2 = idx2, idx
        shift += digit
    return idx


def digit_plan(mask: int, digit: int = MASKED_DIGIT) -> tuple[np.ndarray, np.ndarray]:
    """The passes of a least significant digit radix sort on the set bits of ``mask``, lowest
    first: ``(shifts, masks)``, pass p placing ``(value >> shifts[p]) & masks[p]`` (each run of
    ``mask_runs`` cut into pieces of at most ``digit`` bits)."""
    shifts, widths = mask_runs(mask)
    out_s, out_m = [], []
    for s, w in zip(shifts.tolist(), widths.tolist()):
        while w > 0:
            take = min(w, digit)
            out_s.append(s)
            out_m.append((1 << take) - 1)
            s, w = s + take, w - take
    return np.array(out_s, np.int64), np.array(out_m, np.uint64)


def masked_sorted(values: np.ndarray, ids: np.ndarray, mask, scratch: tuple[np.ndarray, np.ndarray] | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(values[o], ids[o])`` for ``o = masked_order(values, mask)``, without the order: each
    radix pass reads the values and ids in the order the pass before left them and writes them
    to their places (the digits are read off the values themselves), so nothing is gathered at
    random. ``scratch``: a uint64 and an ids-typed array of the values' size for the passes
    between (several sorts of one size then fault in no fresh pages for them). On the scale
    corpus's 933,000 older simhashes, the ten tables of 3 bits: 0.25-0.27 s against 0.57-0.60 s
    for ``masked_order`` and the two gathers (docs/benchmarks.md, forty-eighth session)."""
    shifts, masks = digit_plan(mask)
    values = np.ascontiguousarray(values, dtype=np.uint64)
    ids = np.ascontiguousarray(ids)
    out_v, out_i = np.empty_like(values), np.empty_like(ids)
    if shifts.size == 0:
        out_v[:], out_i[:] = values, ids
        return out_v, out_i
    if scratch is None or shifts.size == 1:
        tmp_v, tmp_i = (np.empty_like(values), np.empty_like(ids)) if shifts.size > 1 else (out_v, out_i)
    else:
        tmp_v, tmp_i = scratch
        if tmp_v.size != values.size or tmp_i.size != ids.size or tmp_i.dtype != ids.dtype:
            raise ValueError("scratch arrays must match the values and ids")
    _masked_sorted(values, ids, shifts, masks, MASKED_DIGIT, tmp_v, tmp_i, out_v, out_i)
    return out_v, out_i


@njit(cache=True, nogil=True)
def _masked_sorted(values, ids, shifts, masks, digit, tmp_v, tmp_i, out_v, out_i):
    """``masked_sorted``'s passes: every pass's counts are taken in one read of the values (a
    value's digits do not depend on where it lies), then each pass places values and ids, into
    ``out_v``/``out_i`` or ``tmp_v``/``tmp_i`` by turns so that the last pass writes the output."""
    n = values.size
    passes = shifts.size
    counts = np.zeros((passes, np.int64(1) << np.int64(digit)), np.int64)
    for i in range(n):
        v = values[i]
        for p in range(passes):
            counts[p, np.int64((v >> uint64(shifts[p])) & masks[p])] += 1
    for p in range(passes):
        run = 0
        for b in range(counts.shape[1]):
            c = counts[p, b]
            counts[p, b] = run
            run += c
    for p in range(passes):
        into_out = (passes - 1 - p) % 2 == 0
        if p == 0:
            src_v, src_i = values, ids
        elif into_out:
            src_v, src_i = tmp_v, tmp_i
        else:
            src_v, src_i = out_v, out_i
        dst_v, dst_i = (out_v, out_i) if into_out else (tmp_v, tmp_i)
        shift = uint64(shifts[p])
        m = masks[p]
        for i in range(n):
            v = src_v[i]
            b = np.int64((v >> shift) & m)
            j = counts[p, b]
            counts[p, b] = j + 1
            dst_v[j] = v
            dst_i[j] = src_i[i]
