"""Compiled loops (numba, cached) for the per-byte work that numpy can only do in many passes.

``tokenize`` walks a chunk's UTF-8 bytes once and produces what
``neardup.text.analyze`` defines — word spans, words per document, sentence
starts, sentences per document — plus every word's XXH64 hash, computed as
the word ends. ``text.analyze`` (numpy) stays the reference definition; a
property test checks the two agree byte for byte, and another checks the
hashes against the ``xxhash`` package.
"""

from __future__ import annotations

import numpy as np
from numba import int64, njit, uint64

from .neighbour_kernels import _mix64

P1 = uint64(0x9E3779B185EBCA87)
P2 = uint64(0xC2B2AE3D27D4EB4F)
P3 = uint64(0x165667B19E3779F9)
P4 = uint64(0x85EBCA77C2B2AE63)
P5 = uint64(0x27D4EB2F165667C5)


@njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << uint64(r)) | (x >> uint64(64 - r))


@njit(cache=True, inline="always")
def _read_le(d, i, n):
    """``n`` bytes of ``d`` from ``i`` as a little-endian integer."""
    v = uint64(0)
    for k in range(n):
        v |= uint64(d[i + k]) << uint64(8 * k)
    return v


@njit(cache=True, inline="always")
def _round(acc, lane):
    acc = acc + lane * P2
    acc = _rotl(acc, 31)
    return acc * P1


@njit(cache=True, inline="always")
def _merge(acc, val):
    acc ^= _round(uint64(0), val)
    return acc * P1 + P4


@njit(cache=True, nogil=True)
def xxh64(d, start, end, seed):
    """XXH64 of ``d[start:end]`` (a uint8 array) with ``seed``."""
    n = end - start
    i = start
    if n >= 32:
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        limit = end - 32
        while i <= limit:
            v1 = _round(v1, _read_le(d, i, 8))
            v2 = _round(v2, _read_le(d, i + 8, 8))
            v3 = _round(v3, _read_le(d, i + 16, 8))
            v4 = _round(v4, _read_le(d, i + 24, 8))
            i += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + P5
    h += uint64(n)
    while i + 8 <= end:
        h ^= _round(uint64(0), _read_le(d, i, 8))
        h = _rotl(h, 27) * P1 + P4
        i += 8
    if i + 4 <= end:
        h ^= _read_le(d, i, 4) * P1
        h = _rotl(h, 23) * P2 + P3
        i += 4
    while i < end:
        h ^= uint64(d[i]) * P5
        h = _rotl(h, 11) * P1
        i += 1
    h ^= h >> uint64(33)
    h *= P2
    h ^= h >> uint64(29)
    h *= P3
    h ^= h >> uint64(32)
    return h


@njit(cache=True, nogil=True)
def tokenize(data, offsets, word_table, seed, spans):
    """One pass over a chunk; see the module docstring. Returns
    ``(starts, ends, hashes, word_counts, sentence_first, sentence_counts)``;
    with ``spans`` false, ``starts``, ``ends`` and ``sentence_first`` come back
    empty (about a fifth faster when only hashes and counts are wanted)."""
    n_docs = offsets.size - 1
    cap = data.size // 2 + n_docs + 1  # a word takes a byte, and two words of one document a separator
    span_cap = cap if spans else 0
    starts = np.empty(span_cap, np.int64)
    ends = np.empty(span_cap, np.int64)
    hashes = np.empty(cap, np.uint64)
    word_counts = np.zeros(n_docs, np.int64)
    sent_first = np.empty(span_cap, np.int64)
    sent_counts = np.zeros(n_docs, np.int64)
    nw = 0
    ns = 0
    for d in range(n_docs):
        i = offsets[d]
        end = offsets[d + 1]
        in_word = False
        ws = np.int64(0)  # np.int64, not a literal: a literal argument makes numba compile the callee once more for it
        boundary = True  # a sentence end since the last word (the document start counts as one)
        while i < end:
            b = data[i]
            # decode one character
            if b < 0x80:
                cp = np.int64(b)
                ln = 1
            elif b >= 0xF0:
                cp = (np.int64(b & 0x07) << 18) | (np.int64(data[i + 1] & 0x3F) << 12) | (np.int64(data[i + 2] & 0x3F) << 6) | np.int64(data[i + 3] & 0x3F)
                ln = 4
            elif b >= 0xE0:
                cp = (np.int64(b & 0x0F) << 12) | (np.int64(data[i + 1] & 0x3F) << 6) | np.int64(data[i + 2] & 0x3F)
                ln = 3
            else:
                cp = (np.int64(b & 0x1F) << 6) | np.int64(data[i + 1] & 0x3F)
                ln = 2
            isw = word_table[cp]
            if isw:
                if not in_word:
                    in_word = True
                    ws = i
                    if boundary:
                        if spans:
                            sent_first[ns] = nw
                        ns += 1
                        sent_counts[d] += 1
                        boundary = False
                # the ASCII word bytes that follow, in a loop of their own (a word's usual bytes:
                # nothing to decide for them but where they end)
                i += ln
                while i < end and data[i] < 0x80 and word_table[data[i]]:
                    i += 1
                continue
            else:
                if in_word:
                    in_word = False
                    if spans:
                        starts[nw] = ws
                        ends[nw] = i
                    hashes[nw] = xxh64(data, ws, i, seed)
                    nw += 1
                    word_counts[d] += 1
                if b == 10:
                    boundary = True
                elif b == 46 or b == 33 or b == 63:  # . ! ?
                    j = i + 1
                    if j >= end:
                        boundary = True
                    else:
                        c = data[j]
                        if c == 32 or c == 9 or c == 10 or c == 11 or c == 12 or c == 13 or c == 34 or c == 39 or c == 41 or c == 93:
                            boundary = True
                        elif c == 0xC2 and j + 1 < end and data[j + 1] == 0xBB:  # »
                            boundary = True
                        elif c == 0xE2 and j + 2 < end and data[j + 1] == 0x80 and (data[j + 2] == 0x9D or data[j + 2] == 0x99):  # ” ’
                            boundary = True
            i += ln
        if in_word:
            if spans:
                starts[nw] = ws
                ends[nw] = end
            hashes[nw] = xxh64(data, ws, end, seed)
            nw += 1
            word_counts[d] += 1
    if not spans:
        return starts, ends, hashes[:nw], word_counts, sent_first, sent_counts
    return starts[:nw], ends[:nw], hashes[:nw], word_counts, sent_first[:ns], sent_counts


@njit(cache=True, inline="always")
def _space_width(d, i, n):
    """Bytes of the horizontal space character at ``d[i]`` (0: none). ``text.clean_whitespace`` names them:
    space, tab, vertical tab, form feed, U+00A0, U+1680, U+2000-U+200A, U+202F, U+205F, U+3000."""
    b = d[i]
    if b == 0x20 or b == 0x09 or b == 0x0B or b == 0x0C:
        return 1
    if b == 0xC2:
        return 2 if i + 1 < n and d[i + 1] == 0xA0 else 0
    if b == 0xE1:
        return 3 if i + 2 < n and d[i + 1] == 0x9A and d[i + 2] == 0x80 else 0
    if b == 0xE2:
        if i + 2 >= n:
            return 0
        b1, b2 = d[i + 1], d[i + 2]
        if b1 == 0x80 and (0x80 <= b2 <= 0x8A or b2 == 0xAF):
            return 3
        return 3 if b1 == 0x81 and b2 == 0x9F else 0
    if b == 0xE3:
        return 3 if i + 2 < n and d[i + 1] == 0x80 and d[i + 2] == 0x80 else 0
    return 0


@njit(cache=True, nogil=True)
def collapse_space(data, offsets, out, out_offsets):
    """Each maximal run of white space in each string of (``offsets``, ``data``) as one character: a line
    break if the run holds a CR or LF, else one space (``text.clean_whitespace``'s first three steps, in
    one pass). ``out`` must be as long as ``data``; returns the bytes written."""
    n = data.size
    w = 0
    out_offsets[0] = 0
    for r in range(offsets.size - 1):
        i, end = offsets[r], offsets[r + 1]
        run, brk = False, False
        while i < end:
            b = data[i]
            if b > 0x20 and (b < 0x80 or (b != 0xC2 and (b < 0xE1 or b > 0xE3))):  # no white space starts here
                k = 0
            elif b == 0x0A or b == 0x0D:
                k = 1
                brk = True
            else:
                k = _space_width(data, i, end if end < n else n)
            if k:
                run = True
                i += k
                continue
            if run:
                out[w] = 0x0A if brk else 0x20
                w += 1
                run, brk = False, False
            out[w] = b
            w += 1
            i += 1
        if run:
            out[w] = 0x0A if brk else 0x20
            w += 1
        out_offsets[r + 1] = w
    return w


@njit(cache=True, nogil=True)
def span_mask(n, starts, ends):
    """Boolean mask of length ``n``: True inside any ``[starts[i], ends[i])``."""
    m = np.zeros(n, np.bool_)
    for k in range(starts.size):
        for i in range(starts[k], ends[k]):
            m[i] = True
    return m


SH_P1 = uint64(0x9E3779B185EBCA87)  # the shingle combine of neardup.fingerprints.hashing
SH_P2 = uint64(0xC2B2AE3D27D4EB4F)
SH_AV = uint64(0x165667919E3779F9)


@njit(cache=True, inline="always")
def _shingle_hash(tok, start, n, init):
    """The hash of the ``n`` word hashes ``tok[start:start + n]``: combined in order, then mixed."""
    h = init
    for j in range(n):
        h = (_rotl(h, 31) ^ tok[start + j]) * SH_P1
    h ^= h >> uint64(37)
    h *= SH_AV
    return h ^ (h >> uint64(32))


@njit(cache=True, inline="always")
def shingle_run(tok, base, m, length, offset, init, out, k):
    """The word-shingle hashes of one document (its ``m`` word hashes at ``tok[base:]``), as
    ``shingles`` defines them, written to ``out[k:]``; returns the position after the last."""
    if m >= length:
        p = 0
        while p <= m - length:
            out[k] = _shingle_hash(tok, base + p, length, init)
            k += 1
            p += offset
    elif m > 0:
        out[k] = _shingle_hash(tok, base, m, init)
        k += 1
    return k


@njit(cache=True, inline="always")
def shingle_count(m, length, offset):
    """How many word shingles a document of ``m`` words has."""
    if m >= length:
        return (m - length) // offset + 1
    return 1 if m > 0 else 0


@njit(cache=True, nogil=True)
def shingles(tok, counts, length, offset, seed):
    """Word-shingle hashes per document, as ``hashing.shingle_hashes_reference`` defines
    them (numpy, the reference): ``(hashes, doc)``."""
    n_docs = counts.size
    total = 0
    for d in range(n_docs):
        total += shingle_count(counts[d], length, offset)
    out = np.empty(total, np.uint64)
    doc = np.empty(total, np.int64)
    init = uint64(seed) ^ SH_P2
    k = 0
    base = 0
    for d in range(n_docs):
        m = counts[d]
        e = shingle_run(tok, base, m, length, offset, init, out, k)
        doc[k:e] = d
        k = e
        base += m
    return out, doc


@njit(cache=True, inline="always")
def _bswap(x):
    """``x`` with its 8 bytes in reverse order."""
    x = ((x & uint64(0x00FF00FF00FF00FF)) << uint64(8)) | ((x >> uint64(8)) & uint64(0x00FF00FF00FF00FF))
    x = ((x & uint64(0x0000FFFF0000FFFF)) << uint64(16)) | ((x >> uint64(16)) & uint64(0x0000FFFF0000FFFF))
    return (x << uint64(32)) | (x >> uint64(32))


@njit(cache=True, inline="always")
def _at(data, i, swap):
    """``data[i]``, its bytes reversed with ``swap`` (big-endian values read on a little-endian machine)."""
    return _bswap(data[i]) if swap else data[i]


@njit(cache=True, inline="always")
def _common(data, i, ie, j, je, swap=False):
    """How many values the sorted runs ``data[i:ie]`` and ``data[j:je]`` share."""
    inter = 0
    while i < ie and j < je:
        x, y = _at(data, i, swap), _at(data, j, swap)
        if x == y:
            inter += 1
            i += 1
            j += 1
        elif x < y:
            i += 1
        else:
            j += 1
    return inter


@njit(cache=True, nogil=True)
def pair_jaccard(data, offs, ra, rb, swap=False):
    """Jaccard of sorted distinct sets ``data[offs[r]:offs[r+1]]`` for each row pair ``(ra[i], rb[i])``
    (``swap``: each value's bytes are in the other order, big-endian values on a little-endian machine)."""
    out = np.empty(ra.size, np.float64)
    for p in range(ra.size):
        i, ie = offs[ra[p]], offs[ra[p] + 1]
        j, je = offs[rb[p]], offs[rb[p] + 1]
        inter = _common(data, i, ie, j, je, swap)
        union = (ie - i) + (je - j) - inter
        out[p] = inter / union if union > 0 else 0.0
    return out


@njit(cache=True, inline="always")
def needed_common(na, nb, t):
    """The fewest values two sets of ``na`` and ``nb`` values share at a Jaccard of ``t`` or more
    (``|A n B| >= t (|A| + |B|) / (1 + t)``), taken a little low: never refuses a pair at ``t``."""
    return np.ceil(t * (na + nb) / (1.0 + t) - 1e-6)


@njit(cache=True, inline="always")
def common_at_least(data, i, ie, j, je, need, stop, swap=False):
    """How many values the sorted runs ``data[i:ie]`` and ``data[j:je]`` share, or -1 when it is
    fewer than ``need``: the merge stops as soon as more values of either run are unmatched than
    ``need`` allows (``|A| - need`` of A's), or once ``stop`` values are matched (then ``stop``;
    give more than either run holds for the whole count)."""
    free_a, free_b = (ie - i) - need, (je - j) - need
    inter, miss_a, miss_b = 0, 0, 0
    while i < ie and j < je:
        x, y = _at(data, i, swap), _at(data, j, swap)
        if x == y:
            inter += 1
            i += 1
            j += 1
            if inter >= stop:
                break
        elif x < y:
            miss_a += 1
            i += 1
            if miss_a > free_a:
                break
        else:
            miss_b += 1
            j += 1
            if miss_b > free_b:
                break
    if miss_a > free_a or miss_b > free_b:
        return -1
    return inter


@njit(cache=True, inline="always")
def jaccard_at_least(data, i, ie, j, je, t, swap=False):
    """The Jaccard of the sorted runs ``data[i:ie]`` and ``data[j:je]``, or -1.0 below ``t``: the
    merge stops as soon as more values of either are unmatched than a Jaccard of ``t`` allows (at
    most ``|A| - needed_common`` of A's values unmatched; ``common_at_least``)."""
    na, nb = ie - i, je - j
    inter = common_at_least(data, i, ie, j, je, needed_common(na, nb, t), na + nb + 1, swap)
    if inter < 0:
        return -1.0
    union = na + nb - inter
    return inter / union if union > 0 else 0.0


@njit(cache=True, nogil=True)
def pair_jaccard_at_least(data, offs, ra, rb, t, swap=False):
    """As ``pair_jaccard`` for the pairs whose Jaccard reaches ``t``; -1.0 for the others, whose
    merge stops early (``jaccard_at_least``)."""
    out = np.empty(ra.size, np.float64)
    for p in range(ra.size):
        out[p] = jaccard_at_least(data, offs[ra[p]], offs[ra[p] + 1], offs[rb[p]], offs[rb[p] + 1], t, swap)
    return out


@njit(cache=True, inline="always")
def bottom_counts(data, i, ie, j, je, k):
    """``(both, taken)`` of the ascending sketches ``data[i:ie]`` and ``data[j:je]``: of the (at
    most ``k``) smallest values of their union, how many were taken and how many lie in both."""
    taken = 0
    both = 0
    # while both have values left, one merge step without a branch to mispredict
    while taken < k and i < ie and j < je:
        x = data[i]
        y = data[j]
        both += x == y
        i += x <= y
        j += y <= x
        taken += 1
    # then the rest of whichever is left, none of it in both
    return both, min(k, taken + (ie - i) + (je - j))


@njit(cache=True, nogil=True)
def pair_bottomk(data, offs, ra, rb, k):
    """Broder's estimate for each row pair of ascending bottom-k sketches: of the ``k``
    smallest values of the union, the share that lies in both sketches."""
    out = np.empty(ra.size, np.float64)
    for p in range(ra.size):
        both, taken = bottom_counts(data, offs[ra[p]], offs[ra[p] + 1], offs[rb[p]], offs[rb[p] + 1], k)
        out[p] = both / taken if taken > 0 else 1.0
    return out


@njit(cache=True, nogil=True)
def pair_overlap(data, offs, ra, rb):
    """How many values the sorted sets ``data[offs[r]:offs[r+1]]`` of each row pair share."""
    out = np.empty(ra.size, np.int64)
    for p in range(ra.size):
        out[p] = _common(data, offs[ra[p]], offs[ra[p] + 1], offs[rb[p]], offs[rb[p] + 1])
    return out


@njit(cache=True, nogil=True)
def sort_segments(data, offs):
    """Sort each run ``data[offs[i]:offs[i+1]]`` in place."""
    for i in range(offs.size - 1):
        if offs[i + 1] - offs[i] > 1:  # a shorter run is sorted (and the call's cost is most of a short sort)
            data[offs[i] : offs[i + 1]].sort()


@njit(cache=True, inline="always")
def _count(keys, counts, n_used, v):
    """Count ``v`` in the open-addressing table ``keys``/``counts`` (a count of 0: an empty slot)
    holding ``n_used`` values; the table is doubled when it would be over half full. Returns the
    table and its new ``n_used``."""
    m = np.int64(keys.size) - np.int64(1)
    s = np.int64(_mix64(v) & uint64(m))
    while counts[s] != 0 and keys[s] != v:
        s = (s + np.int64(1)) & m
    if counts[s] == 0:
        keys[s] = v
        n_used += 1
    counts[s] += 1
    if 2 * n_used > keys.size:
        size = np.int64(2) * keys.size
        m = size - np.int64(1)
        new_keys = np.zeros(size, np.uint64)
        new_counts = np.zeros(size, np.int64)
        for j in range(keys.size):
            if counts[j] != 0:
                t = np.int64(_mix64(keys[j]) & uint64(m))
                while new_counts[t] != 0:
                    t = (t + np.int64(1)) & m
                new_keys[t] = keys[j]
                new_counts[t] = counts[j]
        keys, counts = new_keys, new_counts
    return keys, counts, n_used


@njit(cache=True, nogil=True)
def _counted(keys, counts, n_used):
    """The ``n_used`` values of a ``_count`` table and their counts, in table order."""
    out_v = np.empty(n_used, np.uint64)
    out_c = np.empty(n_used, np.int64)
    o = 0
    for j in range(keys.size):
        if counts[j] != 0:
            out_v[o] = keys[j]
            out_c[o] = counts[j]
            o += 1
    return out_v, out_c


@njit(cache=True, nogil=True)
def distinct_counts(values, bits):
    """The distinct values of ``values`` and how often each occurs, in no particular order: an
    open-addressing table of ``2**bits`` slots to start with, doubled whenever it is half full.
    (Counting millions of pair codes of which a tenth are distinct this way costs a fraction of
    sorting them.)"""
    keys = np.zeros(np.int64(1) << np.int64(bits), np.uint64)
    counts = np.zeros(keys.size, np.int64)
    n_used = np.int64(0)
    for r in range(values.size):
        keys, counts, n_used = _count(keys, counts, n_used, values[r])
    return _counted(keys, counts, n_used)


@njit(cache=True, nogil=True)
def component_roots(n, a, b):
    """Connected components of the graph on nodes ``0..n-1`` with edges ``(a[i], b[i])``: each
    node's smallest node of its component (union-find, the larger root joined to the smaller)."""
    parent = np.arange(n)
    for i in range(a.size):
        x, y = a[i], b[i]
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x < y:
            parent[y] = x
        elif y < x:
            parent[x] = y
    for v in range(n):  # ascending: a node's parent is smaller, so already final
        parent[v] = parent[parent[v]]
    return parent


def occurring(values: np.ndarray, times: int = 1) -> np.ndarray:
    """The distinct values (uint64) that occur at least ``times`` times in ``values``, ascending
    (``np.unique`` with counts, by ``distinct_counts``: only what is kept is sorted)."""
    values = np.ascontiguousarray(values, dtype=np.uint64)
    if values.size == 0:
        return values
    # a table for an eighth of the values to start with: pair codes repeat (the bands a pair shares)
    v, c = distinct_counts(values, max(10, int(values.size // 8).bit_length()))
    return np.sort(v[c >= times] if times > 1 else v)


def holder_pairs(anchor: np.ndarray, vidx: np.ndarray, start: np.ndarray, holders: np.ndarray,
                 smaller_only: bool, times: int, rows: int) -> np.ndarray:
    """For each row ``i``, ``anchor[i]`` paired with every holder ``h`` of its value,
    ``holders[start[vidx[i]]:start[vidx[i] + 1]]`` (only ``h < anchor[i]`` when ``smaller_only``):
    the distinct codes ``h << 32 | anchor[i]`` that come at least ``times`` times, ascending, without
    listing the rows. ``rows``: about how many rows there are (the callers' estimate; unused).

    Counted an anchor at a time (``holder_pair_scan``): a counter per holder, which for the batch's
    own documents (or an older slice's holders, numbered densely) stays in the processor's cache,
    where one hash table of every (holder, anchor) code did not: on rust-1.63's sketches 0.045 s
    against 0.31 s, of a concept search of 0.65 s before."""
    if anchor.size == 0:
        return np.zeros(0, np.uint64)
    anchor = np.ascontiguousarray(anchor, np.int64)
    vidx = np.ascontiguousarray(vidx, np.int64)
    start = np.ascontiguousarray(start, np.int64)
    holders = np.ascontiguousarray(holders, np.int64)
    if anchor.size > 1 and (anchor[1:] < anchor[:-1]).any():  # rows grouped by anchor
        order = np.argsort(anchor, kind="stable")
        anchor, vidx = anchor[order], vidx[order]
    bound = int((start[vidx + 1] - start[vidx]).sum())  # rows, before ``smaller_only``
    if holders.size == 0 or bound == 0:
        return np.zeros(0, np.uint64)
    top = int(holders.max()) + 1
    if top <= max(4 * holders.size, 1 << 20):
        ids, dense = np.zeros(0, np.int64), holders
    else:  # sparse older ids: numbered densely, so the counters stay small
        ids, dense = np.unique(holders, return_inverse=True)
        top = ids.size
    code = holder_pair_scan(anchor, vidx, start, dense, ids, top, smaller_only, times, bound)
    code.sort()
    return code


@njit(cache=True, nogil=True)
def holder_pair_scan(anchor, vidx, start, holders, ids, n_holders, smaller_only, times, bound):
    """``holder_pairs`` of rows grouped by anchor: per anchor, each holder of its values counted
    in ``counts`` (indexed by ``holders``, below ``n_holders``; the holder's id is ``ids[h]``, or
    ``h`` when ``ids`` is empty), and those counted ``times`` times or more emitted as codes in no
    particular order. ``bound``: at least the number of rows (the output's room)."""
    counts = np.zeros(n_holders, np.int32)
    touched = np.empty(n_holders, np.int64)
    out = np.empty(bound, np.uint64)
    named = ids.size > 0
    n = 0
    i = 0
    while i < anchor.size:
        a = anchor[i]
        low = uint64(a)
        nt = 0
        while i < anchor.size and anchor[i] == a:
            v = vidx[i]
            for q in range(start[v], start[v + 1]):
                h = holders[q]
                hid = ids[h] if named else h
                if smaller_only and hid >= a:
                    continue
                if counts[h] == 0:
                    touched[nt] = h
                    nt += 1
                counts[h] += 1
            i += 1
        for t in range(nt):
            h = touched[t]
            if counts[h] >= times:
                hid = ids[h] if named else h
                out[n] = (uint64(hid) << uint64(32)) | low
                n += 1
            counts[h] = 0
    return out[:n]


@njit(cache=True, inline="always")
def _room(out_a, out_b, n):
    """``out_a``/``out_b`` with room for element ``n`` (doubled when full)."""
    if n < out_a.size:
        return out_a, out_b
    na = np.empty(2 * out_a.size, np.int64)
    nb = np.empty(2 * out_b.size, np.int64)
    na[:n] = out_a[:n]
    nb[:n] = out_b[:n]
    return na, nb


def resumed(kernel, total: int, args: tuple, buffers: tuple):
    """Drive a kernel that fills fixed ``buffers`` from item ``i0`` on and stops before they could
    overflow (``kernel(*args, i0, *buffers) -> (next i, n)``): yields each call's ``n`` (what it
    wrote) until all ``total`` items are done; the caller reads ``buffers[k][:n]`` before the next."""
    i = 0
    while i < total:
        i, n = kernel(*args, i, *buffers)
        yield n


@njit(cache=True)
def _room3(out_a, out_b, out_d, n):
    """``_room`` for three output columns."""
    if n < out_a.size:
        return out_a, out_b, out_d
    na, nb = _room(out_a, out_b, n)
    nd = np.empty(na.size, np.int64)
    nd[:n] = out_d[:n]
    return na, nb, nd


@njit(cache=True, inline="always")
def _popcount64(x):
    x = x - ((x >> uint64(1)) & uint64(0x5555555555555555))
    x = (x & uint64(0x3333333333333333)) + ((x >> uint64(2)) & uint64(0x3333333333333333))
    x = (x + (x >> uint64(4))) & uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * uint64(0x0101010101010101)) >> uint64(56))


@njit(cache=True, nogil=True)
def simhash_table_hits(old_values, keys, values, starts, shift, m, bits, i0, hit_old, hit_new):
    """The (older value, batch value) positions within ``bits`` bits that agree on a table, from older
    value ``i0`` on, until the buffers ``hit_old``/``hit_new`` would overflow: returns ``(next i, n)``
    (hits ``[:n]``; ``next i == old_values.size`` when done). ``keys`` are the batch's simhashes
    masked by the table's mask ``m``, sorted, ``values`` the simhashes in that order; ``starts[k]``
    is where keys with ``key >> shift == k`` begin, so an older value is looked up in its bucket
    only (a binary search over a few keys) and its candidates are read in a row. The buffers are
    never reallocated and every candidate is written (the count advances only for a hit), so the
    candidate loop has no branch but its own: 2.4x faster than growing the output as hits come."""
    cap = hit_old.size
    n = 0
    sh = uint64(shift)
    i = i0
    while i < old_values.size:
        v = old_values[i]
        km = v & m
        k = np.int64(km >> sh)
        e = starts[k + 1]
        p = _lower(keys, km, starts[k], e)
        if n + (e - p) > cap and n > 0:  # the bucket's candidates might not fit: hand these hits over
            break
        while p < e and keys[p] == km:
            hit_old[n] = i
            hit_new[n] = p
            n += _popcount64(v ^ values[p]) <= bits
            p += 1
        i += 1
    return i, n


@njit(cache=True, inline="always")
def _masked_lower(values, m, q, a, b):
    """The first position in ``values[a:b]`` (sorted on ``value & m``) whose masked value is >= ``q``
    (``b`` when none): ``_lower`` on the masked values."""
    while a < b:
        c = (a + b) >> 1
        if (values[c] & m) < q:
            a = c + 1
        else:
            b = c
    return a


@njit(cache=True, inline="always")
def _masked_gallop(values, m, q, a, n):
    """``_masked_lower`` of ``values[a:n]``, searching from ``a`` in steps that double (``_gallop``)."""
    prev, step = a, 1
    while a < n and (values[a] & m) < q:
        prev = a + 1
        a = prev + step
        step <<= 1
    return _masked_lower(values, m, q, prev, min(a, n))


@njit(cache=True, nogil=True)
def simhash_sorted_hits(old_values, masks, t, keys, values, bits, j0, hit_old, hit_new):
    """The (older position, batch position) pairs within ``bits`` bits that agree on table ``t``
    (masked bits ``masks[t]``) and on no table before it, from batch position ``j0`` on, until the
    buffers would overflow: returns ``(next j, n)`` (hits ``[:n]``; ``next j == keys.size`` when
    done). ``old_values`` are older simhashes sorted on their masked bits, ``keys`` the batch's
    masked simhashes sorted and ``values`` its simhashes in that order: the two sorted lists are
    merged, the older position moving forward by doubling steps and then a binary search within
    the last step, so a key costs the logarithm of its distance from the one before and the older
    values are read in order. A binary search over all of them per batch value read them at
    random: the held tables' scan of 100,000 documents against 800,000 of the scale corpus took
    1.20-1.24 s that way, 0.81-0.84 s merged (``benchmarks/simhash_scan.py``)."""
    cap = hit_old.size
    m = masks[t]
    n_old = old_values.size
    n = 0
    a = e = 0  # the older positions whose key is the current key: a to e - 1
    j = j0
    while j < keys.size:
        km = keys[j]
        if j == j0 or km != keys[j - 1]:
            # where the merge (re)starts, a binary search; after, doubling steps from the last key's end
            a = _masked_lower(old_values, m, km, 0, n_old) if j == j0 else _masked_gallop(old_values, m, km, e, n_old)
            e = a
            while e < n_old and (old_values[e] & m) == km:
                e += 1
        if n + (e - a) > cap and n > 0:  # the key's candidates might not fit: hand these hits over
            break
        v = values[j]
        for p in range(a, e):
            x = v ^ old_values[p]
            ok = _popcount64(x) <= bits
            for s in range(t):  # kept from the first table it agrees on only
                if (x & masks[s]) == 0:
                    ok = False
            hit_old[n] = p
            hit_new[n] = j
            n += ok
        j += 1
    return j, n


@njit(cache=True, inline="always")
def _lower(keys, q, a, b):
    """The first position in ``keys[a:b]`` whose key is >= ``q`` (``b`` when none)."""
    while a < b:
        m = (a + b) >> 1
        if keys[m] < q:
            a = m + 1
        else:
            b = m
    return a


@njit(cache=True, inline="always")
def _upper(keys, q, a, b):
    """The first position in ``keys[a:b]`` whose key is > ``q`` (``b`` when none)."""
    while a < b:
        m = (a + b) >> 1
        if keys[m] <= q:
            a = m + 1
        else:
            b = m
    return a


@njit(cache=True, inline="always")
def _gallop(keys, q, a, n, upper):
    """``_lower`` (``_upper`` when ``upper``) of ``keys[a:n]``, searching from ``a`` in steps that
    double: ``log2`` of the distance moved, in pages near ``a``."""
    if a >= n or (keys[a] > q if upper else keys[a] >= q):
        return a
    prev, step = a, 1
    while True:
        nxt = a + step
        if nxt >= n:
            return _upper(keys, q, prev + 1, n) if upper else _lower(keys, q, prev + 1, n)
        if keys[nxt] > q if upper else keys[nxt] >= q:
            return _upper(keys, q, prev + 1, nxt) if upper else _lower(keys, q, prev + 1, nxt)
        prev = nxt
        step <<= 1


@njit(cache=True, nogil=True)
def run_ranges(keys, fences, queries, fence):
    """For each query key, the range ``[lo, hi)`` of its entries in the sorted ``keys`` of a run;
    ``fences`` holds every ``fence``-th key, so each search reads one block of the (mapped) keys.
    Ascending queries (as the pair and neighbour searches ask) are found by galloping from the
    previous one's end instead: their pages are read in order, most of them once."""
    n = keys.size
    lo = np.empty(queries.size, np.int64)
    hi = np.empty(queries.size, np.int64)
    ascending = True
    for i in range(1, queries.size):
        if queries[i] <= queries[i - 1]:
            ascending = False
            break
    if ascending and queries.size:
        # the first from the fences, the rest from where the one before ended
        j = _lower(fences, queries[0], 0, fences.size)
        pos = (j - 1) * fence + 1 if j > 0 else 0
        for i in range(queries.size):
            q = queries[i]
            lo[i] = _gallop(keys, q, pos, n, False)
            hi[i] = _gallop(keys, q, lo[i], n, True)
            pos = hi[i]
        return lo, hi
    for i in range(queries.size):
        q = queries[i]
        j = _lower(fences, q, 0, fences.size)
        a = (j - 1) * fence + 1 if j > 0 else 0
        lo[i] = _lower(keys, q, a, min(n, j * fence))
        j2 = _upper(fences, q, 0, fences.size)
        a2 = max(lo[i], (j2 - 1) * fence + 1 if j2 > 0 else 0)
        hi[i] = _upper(keys, q, a2, min(n, j2 * fence))
    return lo, hi


@njit(cache=True, nogil=True)
def group_simhash_pairs(d, h, group_first, bits):
    """Within key groups, the pairs within ``bits`` bits, without listing the others: rows sorted by
    key then doc id (``d`` their doc ids, ``h`` their simhashes, ``group_first[r]`` the first row
    of row ``r``'s group); each row is compared with the earlier rows of its group. Returns
    ``(a, b, distance)``, ``a <= b`` by doc id, one row per shared key (a pair may repeat)."""
    n = 0
    out_a = np.empty(1024, np.int64)
    out_b = np.empty(1024, np.int64)
    out_d = np.empty(1024, np.int64)
    for r in range(d.size):
        for e in range(group_first[r], r):
            if d[e] == d[r]:
                continue
            dist = _popcount64(h[e] ^ h[r])
            if dist > bits:
                continue
            out_a, out_b, out_d = _room3(out_a, out_b, out_d, n)
            out_a[n] = d[e]
            out_b[n] = d[r]
            out_d[n] = dist
            n += 1
    return out_a[:n], out_b[:n], out_d[:n]
