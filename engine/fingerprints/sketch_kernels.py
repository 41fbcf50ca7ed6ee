"""Compiled loops (numba, cached) of the sketches: the bottom-k selection, min-hash signatures
and Charikar's simhash, over a chunk's shingle or word hashes grouped by document
(``neardup.fingerprints.sketches``, ``hashing``, ``simhash`` hold their definitions and call them)."""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from ..kernels import SH_P2, shingle_count, shingle_run
from ..sort_kernels import SMALL_BUCKET  # a bucket of more values is sorted by numba's sort, not by insertion


@njit(cache=True, nogil=True)
def _bucket_sort(src, n, top, dst, fill):
    """Sort ``src[:n]`` (values in ``[0, top]``, about uniform) into ``dst[:n]``: a counting
    sort on ``n`` equal-width buckets, then an insertion sort that only moves values
    within their bucket. ``fill`` is scratch of at least ``n + 1`` int64s."""
    scale = n / (float(top) + 1.0)
    for b in range(n + 1):
        fill[b] = 0
    for i in range(n):
        b = min(int(float(src[i]) * scale), n - 1)  # monotone in the value
        fill[b + 1] += 1
    for b in range(n):
        fill[b + 1] += fill[b]
    for i in range(n):
        b = min(int(float(src[i]) * scale), n - 1)
        dst[fill[b]] = src[i]
        fill[b] += 1
    for i in range(1, n):
        v = dst[i]
        j = i - 1
        while j >= 0 and dst[j] > v:
            dst[j + 1] = dst[j]
            j -= 1
        dst[j + 1] = v




@njit(cache=True, nogil=True)
def _insertion_sort(a, lo, hi):
    """Sort ``a[lo:hi]`` in place by insertion (equal values do not move past each other)."""
    for i in range(lo + 1, hi):
        v = a[i]
        j = i - 1
        while j >= lo and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@njit(cache=True, nogil=True)
def _sorted_run(src, a, m, srt, fill, most, out, pos):
    """``src[a:a + m]``'s distinct values, ascending, written to ``out[pos:]``; returns how many.
    ``srt`` (at least ``m`` values) and ``fill`` (``2**most + 1`` int64s) are scratch."""
    if m <= SMALL_BUCKET:
        for i in range(m):
            srt[i] = src[a + i]
        # np.int64, not a literal: a literal argument makes numba compile the callee once more for it
        _insertion_sort(srt, np.int64(0), m)
    else:
        bits = 1
        while (np.int64(1) << (bits + 2)) <= m and bits < most:
            bits += 1
        nb = np.int64(1) << bits
        shift = uint64(64 - bits)
        for b in range(nb + 1):
            fill[b] = 0
        for i in range(a, a + m):
            fill[np.int64(src[i] >> shift) + 1] += 1
        for b in range(nb):
            fill[b + 1] += fill[b]
        for i in range(a, a + m):
            b = np.int64(src[i] >> shift)
            srt[fill[b]] = src[i]
            fill[b] += 1
        lo = np.int64(0)  # fill[b] is now where bucket b ends
        for b in range(nb):
            hi = fill[b]
            if hi - lo > SMALL_BUCKET:
                srt[lo:hi].sort()
            elif hi - lo > 1:
                _insertion_sort(srt, lo, hi)
            lo = hi
    n = 0
    for i in range(m):
        v = srt[i]
        if n == 0 or out[pos + n - 1] != v:
            out[pos + n] = v
            n += 1
    return n


@njit(cache=True, nogil=True)
def _bucket_bits(longest):
    """The most leading bits ``_sorted_run`` buckets a run of ``longest`` values by."""
    most = 1
    while (np.int64(1) << (most + 2)) <= longest and most < 20:
        most += 1
    return most


@njit(cache=True, nogil=True)
def distinct_sorted(hashes, starts):
    """Each run ``hashes[starts[d]:starts[d + 1]]``'s distinct values in ascending order:
    ``(values, counts)``, run 0's values first. See ``fingerprints.hashing.distinct_sorted``.

    A run of up to ``SMALL_BUCKET`` values is sorted by insertion; a longer one of ``m``
    values is placed by a counting pass in about ``m / 4`` buckets by the values' leading
    bits (hashes spread evenly), then each bucket is sorted on its own: by insertion, or
    by numba's sort when it holds more than ``SMALL_BUCKET`` values, so values that do not
    spread cost a sort, never a quadratic pass. Equal values share a bucket, so the
    repeats are dropped as the sorted run is copied out.
    """
    n_docs = starts.size - 1
    longest = np.int64(0)
    for d in range(n_docs):
        longest = max(longest, starts[d + 1] - starts[d])
    out = np.empty(hashes.size, np.uint64)
    counts = np.zeros(n_docs, np.int64)
    srt = np.empty(longest, np.uint64)
    most = _bucket_bits(longest)
    fill = np.empty((np.int64(1) << most) + 1, np.int64)
    pos = np.int64(0)
    for d in range(n_docs):
        n = _sorted_run(hashes, starts[d], starts[d + 1] - starts[d], srt, fill, most, out, pos)
        counts[d] = n
        pos += n
    return out[:pos], counts


@njit(cache=True, nogil=True)
def shingle_sets(tok, counts, length, offset, seed):
    """Each document's distinct word-shingle hashes, ascending: ``(values, counts)``, the same as
    ``distinct_sorted`` of ``kernels.shingles`` (see ``fingerprints.hashing.shingle_sets``), made a
    document at a time: its hashes are sorted while they are in the cache, and neither the
    chunk's hashes nor their documents' indexes are written out whole."""
    n_docs = counts.size
    longest = np.int64(0)
    total = 0
    for d in range(n_docs):
        m = shingle_count(counts[d], length, offset)
        longest = max(longest, m)
        total += m
    out = np.empty(total, np.uint64)
    per_doc = np.zeros(n_docs, np.int64)
    buf = np.empty(longest, np.uint64)
    srt = np.empty(longest, np.uint64)
    most = _bucket_bits(longest)
    fill = np.empty((np.int64(1) << most) + 1, np.int64)
    init = uint64(seed) ^ SH_P2
    pos = np.int64(0)
    base = 0
    for d in range(n_docs):
        m = counts[d]
        k = shingle_run(tok, base, m, length, offset, init, buf, 0)
        n = _sorted_run(buf, np.int64(0), k, srt, fill, most, out, pos)
        per_doc[d] = n
        pos += n
        base += m
    return out[:pos], per_doc


@njit(cache=True, nogil=True)
def prefixes(values, counts, k):
    """The first ``min(k, counts[d])`` of each run of ``values`` (``counts[d]`` values each, runs in
    order), leaving out the value ``2^64 - 1`` (the sketches' padding): ``(values, lengths)``."""
    total = 0
    for d in range(counts.size):
        total += min(k, counts[d])
    out = np.empty(total, np.uint64)
    lens = np.zeros(counts.size, np.int64)
    empty = uint64(0xFFFFFFFFFFFFFFFF)
    a = 0
    pos = np.int64(0)
    for d in range(counts.size):
        n = 0
        for i in range(a, a + min(k, counts[d])):
            if values[i] != empty:
                out[pos + n] = values[i]
                n += 1
        lens[d] = n
        pos += n
        a += counts[d]
    return out[:pos], lens


@njit(cache=True, nogil=True)
def smallest_distinct(hashes, doc, n_docs, k):
    """Per document, its ``min(k, distinct)`` smallest distinct hashes, ascending:
    ``(values, counts)``. See ``fingerprints.hashing.smallest_distinct``."""
    starts = np.searchsorted(doc, np.arange(n_docs + 1))
    longest = np.int64(0)
    for d in range(n_docs):
        longest = max(longest, starts[d + 1] - starts[d])
    out = np.empty(min(hashes.size, n_docs * k), np.uint64)
    counts = np.zeros(n_docs, np.int64)
    buf = np.empty(longest, np.uint64)
    srt = np.empty(longest, np.uint64)
    fill = np.empty(longest + 1, np.int64)
    full = uint64(0xFFFFFFFFFFFFFFFF)
    pos = np.int64(0)
    for d in range(n_docs):
        a = starts[d]
        m = starts[d + 1] - a
        cut = full
        if m > 4 * k:
            cut = uint64(2.0 * k / m * 18446744073709551616.0)  # about 2k values fall below
        while True:
            nb = np.int64(0)
            for i in range(a, a + m):
                if hashes[i] <= cut:
                    buf[nb] = hashes[i]
                    nb += 1
            _bucket_sort(buf, nb, cut, srt, fill)
            n = 0
            for i in range(nb):
                if i == 0 or srt[i] != srt[i - 1]:
                    if n == k:
                        break
                    out[pos + n] = srt[i]
                    n += 1
            if n == k or cut == full:
                break
            cut = full  # too few distinct values below the cut: take them all
        counts[d] = n
        pos += n
    return out[:pos], counts


@njit(cache=True, nogil=True)
def minhash_universal(values, starts, counts, a, b, inv):
    """``(n_docs, len(a))`` min-hash signatures: per document and permutation ``i``, the value
    ``x`` of the document whose ``a[i] * x + b[i]`` (mod 2^64) is smallest, found as that minimum
    ``m`` and given back as ``(m - b[i]) * inv[i]`` (``inv[i]`` the inverse of ``a[i]``: the
    permutation undone in the same pass). A document without values gets ``2^64 - 1`` throughout.

    Eight permutations per pass over a document's values, so the loads are shared: on rs63's
    sets, eight a pass took 15% less time than four (the compiled loop runs the values eight to a
    vector; eight minima and their 16 constants still fit in the registers). Where fewer than eight
    are left, the last pass repeats the last permutation: the same minimum, written again to the
    same place.
    """
    n_perm = a.size
    top = np.uint64(0xFFFFFFFFFFFFFFFF)
    out = np.full((counts.size, n_perm), top)
    last = n_perm - 1
    for d in range(counts.size):
        s = starts[d]
        e = s + counts[d]
        if e == s:
            continue
        for i in range(0, n_perm, 8):
            j0, j1, j2, j3 = i, min(i + 1, last), min(i + 2, last), min(i + 3, last)
            j4, j5, j6, j7 = min(i + 4, last), min(i + 5, last), min(i + 6, last), min(i + 7, last)
            a0, a1, a2, a3, a4, a5, a6, a7 = a[j0], a[j1], a[j2], a[j3], a[j4], a[j5], a[j6], a[j7]
            b0, b1, b2, b3, b4, b5, b6, b7 = b[j0], b[j1], b[j2], b[j3], b[j4], b[j5], b[j6], b[j7]
            m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = top
            for k in range(s, e):
                x = values[k]
                v0 = x * a0 + b0
                v1 = x * a1 + b1
                v2 = x * a2 + b2
                v3 = x * a3 + b3
                v4 = x * a4 + b4
                v5 = x * a5 + b5
                v6 = x * a6 + b6
                v7 = x * a7 + b7
                m0 = v0 if v0 < m0 else m0
                m1 = v1 if v1 < m1 else m1
                m2 = v2 if v2 < m2 else m2
                m3 = v3 if v3 < m3 else m3
                m4 = v4 if v4 < m4 else m4
                m5 = v5 if v5 < m5 else m5
                m6 = v6 if v6 < m6 else m6
                m7 = v7 if v7 < m7 else m7
            out[d, j0] = (m0 - b0) * inv[j0]
            out[d, j1] = (m1 - b1) * inv[j1]
            out[d, j2] = (m2 - b2) * inv[j2]
            out[d, j3] = (m3 - b3) * inv[j3]
            out[d, j4] = (m4 - b4) * inv[j4]
            out[d, j5] = (m5 - b5) * inv[j5]
            out[d, j6] = (m6 - b6) * inv[j6]
            out[d, j7] = (m7 - b7) * inv[j7]
    return out


@njit(cache=True, inline="always")
def _add_lanes(acc, lanes, j):
    """Add the eight byte lanes of ``lanes`` (lane q counting bit ``8 q + j``) to ``acc``."""
    for q in range(8):
        acc[8 * q + j] += np.int64((lanes >> uint64(8 * q)) & uint64(0xFF))


@njit(cache=True, nogil=True)
def charikar(word_hashes, counts):
    """Charikar simhash per document: bit i set when at least half of its words' hashes have bit i.

    The bits are counted eight at a time: word ``j`` of eight uint64 counters adds ``(h >> j) &
    0x0101...01`` for every hash ``h``, so its byte lane q counts bit ``8 q + j``; the lanes go to
    the 64 totals every 255 hashes, before one could overflow (8 shifts and adds a hash instead of
    64 bit tests)."""
    out = np.zeros(counts.size, np.uint64)
    acc = np.zeros(64, np.int64)
    ones = uint64(0x0101010101010101)
    base = 0
    for d in range(counts.size):
        m = counts[d]
        if m == 0:
            continue
        acc[:] = 0
        k = base
        end = base + m
        while k < end:
            stop = min(end, k + 255)
            c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = uint64(0)
            for i in range(k, stop):
                h = word_hashes[i]
                c0 += h & ones
                c1 += (h >> uint64(1)) & ones
                c2 += (h >> uint64(2)) & ones
                c3 += (h >> uint64(3)) & ones
                c4 += (h >> uint64(4)) & ones
                c5 += (h >> uint64(5)) & ones
                c6 += (h >> uint64(6)) & ones
                c7 += (h >> uint64(7)) & ones
            _add_lanes(acc, c0, 0)
            _add_lanes(acc, c1, 1)
            _add_lanes(acc, c2, 2)
            _add_lanes(acc, c3, 3)
            _add_lanes(acc, c4, 4)
            _add_lanes(acc, c5, 5)
            _add_lanes(acc, c6, 6)
            _add_lanes(acc, c7, 7)
            k = stop
        s = uint64(0)
        for b in range(64):
            if 2 * acc[b] >= m:
                s |= uint64(1) << uint64(b)
        out[d] = s
        base += m
    return out
