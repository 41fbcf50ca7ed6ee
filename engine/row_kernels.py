"""Compiled comparisons of one-byte signature rows (the low byte of each minhash position): how
many positions two rows agree on, for listed row pairs (``pair_agreements``) and for the LSH
candidates of a batch without listing them (``band_agreements``), the filter that keeps a candidate
pair only when its rows agree on enough positions to reach the Jaccard threshold."""

from __future__ import annotations

import numpy as np
from numba import int64, njit, uint64

from .intrinsics import prefetch
from .kernels import resumed

#: one-byte rows are compared eight bytes at a time (``_equal_bytes``); a word's lanes count to
#: at most this many words before they are summed (a byte lane must not reach 256)
_WORDS_PER_SUM = 31


#: older holders' rows ``band_agreement_hits`` asks the processor to fetch ahead of comparing them (a
#: key's older rows lie anywhere among the cached ones; 8 measured best of 4-32 on a late batch of
#: the scale corpus, its comparisons 12% faster, docs/benchmarks.md)
PREFETCH_AHEAD = 8


def padded(width: int) -> int:
    """``width`` bytes rounded up to a multiple of 8 (the rows ``byte_words`` reads as words)."""
    return -(-width // 8) * 8


def byte_words(low: np.ndarray, width: int | None = None) -> np.ndarray:
    """One-byte rows as uint64 words: rows of ``width`` bytes (default: all of ``low``'s columns)
    followed by zero bytes up to a multiple of 8, which ``low`` may already hold (then it is viewed
    as it lies, without a copy) or which are appended (a copy). The zero bytes agree, so a
    comparison's ``need`` counts them too."""
    low = np.ascontiguousarray(low, dtype=np.uint8)
    width = low.shape[1] if width is None else width
    full = padded(width)
    if low.shape[1] != full:
        if low.shape[1] != width:
            raise ValueError(f"rows of {low.shape[1]} bytes are neither {width} nor {full}")
        low = np.concatenate([low, np.zeros((low.shape[0], full - width), np.uint8)], axis=1)
    return low.view(np.uint64).reshape(low.shape[0], full // 8)


@njit(cache=True, inline="always")
def _equal_bytes(wa, x, wb, y):
    """How many bytes rows ``wa[x]`` and ``wb[y]`` (uint64 words) have equal. Per word, a byte of
    ``v = a ^ b`` is nonzero exactly when its low seven bits plus 0x7F carry into its top bit or its
    top bit is set (no carry crosses a byte); those top bits, moved to each byte's lowest bit, are
    summed lane-wise over up to ``_WORDS_PER_SUM`` words and then across the lanes by one
    multiplication: about twice as fast as comparing byte by byte."""
    lo7 = uint64(0x7F7F7F7F7F7F7F7F)
    one = uint64(0x0101010101010101)
    n_words = wa.shape[1]
    if n_words <= _WORDS_PER_SUM:  # one lane sum (the default 100 positions: 13 words), a plain loop
        s = uint64(0)
        for k in range(n_words):
            v = wa[x, k] ^ wb[y, k]
            s += ((((v & lo7) + lo7) | v) >> uint64(7)) & one
        return 8 * n_words - int64((s * one) >> uint64(56))
    differ = 0
    for j in range(0, n_words, _WORDS_PER_SUM):
        s = uint64(0)
        for k in range(j, min(j + _WORDS_PER_SUM, n_words)):
            v = wa[x, k] ^ wb[y, k]
            s += ((((v & lo7) + lo7) | v) >> uint64(7)) & one
        differ += int64((s * one) >> uint64(56))
    return 8 * n_words - differ


@njit(cache=True, nogil=True)
def pair_agreements(words, ra, rb, need):
    """For each row pair, whether the one-byte signature rows ``ra[p]`` and ``rb[p]`` (as
    ``byte_words`` gives them, their zero padding counted in ``need``) agree on at least ``need`` positions.
    Every position is counted, without an early exit."""
    out = np.zeros(ra.size, np.bool_)
    for p in range(ra.size):
        out[p] = _equal_bytes(words, ra[p], words, rb[p]) >= need
    return out


#: candidate rows whose outcome ``band_agreements`` holds at once (16 bytes each)
BAND_HITS = 1 << 20
#: older holders' rows ``band_agreement_hits`` compares with a key's new documents at a time (a
#: tile of rows, 104 bytes each for the default 100 positions, stays in the first-level cache; 32
#: measured best of 8-512 on the scale corpus)
BAND_TILE = 32


def band_agreements(d, group_first, sel, sel_old, o_start, o_ids, o_rows, new_row, base, low_new, low_old, need,
                    band=None, band_keys=None, key_row=None):
    """The LSH candidates of a slice that pass the agreement filter, without listing the candidates.

    ``d``: the doc ids of a batch's (key, doc) rows sorted by key then id; for each selected row
    ``sel[i]``, its doc is paired with every earlier doc of its key group (rows ``group_first[i]`` to
    ``sel[i] - 1``) and with every older holder of its key (``o_ids[o_start[j]:o_start[j + 1]]``,
    ``j = sel_old[i]``, -1 for none). A pair is kept when the one-byte rows of the two docs agree on
    at least ``need`` positions (``low_new[new_row[doc - base]]`` for the batch's docs,
    ``low_old[o_rows[q]]`` for older holder ``q``; ``low_old`` may hold its rows padded with zero
    bytes to a multiple of 8, as ``byte_words`` reads them).
    Returns ``(a, b)``, ``a < b``, one row per shared key (a pair sharing two keys comes twice),
    except that with ``band`` (each row of ``d``'s band), ``band_keys`` (a row of every band's key
    per batch document) and ``key_row`` (doc - base -> its row there), two of the batch's documents
    come only from the first band whose keys they share (or, where two bands' keys collide, from
    the collision too)."""
    most = np.asarray(sel - group_first, dtype=np.int64)
    has = sel_old >= 0
    most[has] += np.diff(o_start)[sel_old[has]]
    cap = max(BAND_HITS, int(most.max()) if most.size else 0)  # room for any one row's candidates
    out_a, out_b = np.empty(cap, np.int64), np.empty(cap, np.int64)
    got_a, got_b = [], []
    width = low_new.shape[1]
    w_new, w_old = byte_words(low_new), byte_words(low_old, width)
    pad = padded(width) - width
    if band is None:  # no band per row: every shared key's row
        band, band_keys, key_row = np.zeros(0, np.int64), np.zeros((0, 0), np.uint64), np.zeros(0, np.int64)
    for n in resumed(band_agreement_hits, sel.size, (d, group_first, sel, sel_old, o_start, o_ids, o_rows, new_row,
                                                     base, w_new, w_old, need + pad, BAND_TILE,
                                                     band, band_keys, key_row), (out_a, out_b)):
        got_a.append(out_a[:n].copy())
        got_b.append(out_b[:n].copy())
    if not got_a:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(got_a), np.concatenate(got_b)


@njit(cache=True, nogil=True)
def band_agreement_hits(d, group_first, sel, sel_old, o_start, o_ids, o_rows, new_row, base, w_new, w_old,
                        need, tile, band, band_keys, key_row, i0, out_a, out_b):
    """``band_agreements`` from selected row ``i0`` on, into ``out_a``/``out_b`` until the next rows'
    candidates might not fit: returns ``(next i, n)``. Every candidate is written and the count
    advances only for a kept one, and the buffers are never reallocated, so the loops have no
    branch but their own: a quarter faster than growing the output as pairs come. ``w_new``/``w_old``:
    the one-byte rows as ``byte_words`` (``need`` counting their padding).

    The selected rows of one key (adjacent: ``sel`` is in key order) are taken together, and their
    older holders' rows are walked in tiles of ``tile`` (``BAND_TILE``), each tile against every one of those
    rows: an older row is then loaded from memory once per tile instead of once per new document
    (the older rows of a frame-heavy site are hundreds of megabytes, read in key order, not id order),
    and its first pass asks for the row ``PREFETCH_AHEAD`` entries on while it compares one.

    With ``band`` not empty, a pair of the batch's documents is skipped at a key of band j when
    their keys of an earlier band are equal: it comes from that band's key (``band_agreements``)."""
    cap = out_a.size
    by_band = band.size > 0
    n = 0
    i = i0
    while i < sel.size:
        g = sel_old[i]
        n_old = o_start[g + 1] - o_start[g] if g >= 0 else 0
        j = i  # rows i..j-1: those of this key that fit
        room = cap - n
        while j < sel.size and (j == i or (g >= 0 and sel_old[j] == g)):
            most = sel[j] - group_first[j] + n_old
            if most > room and (n > 0 or j > i):
                break
            room -= most
            j += 1
        if j == i:
            break
        for ii in range(i, j):  # each with the earlier documents of its key in the batch
            r = sel[ii]
            b = d[r]
            yb = new_row[b - base]
            jb = band[r] if by_band else 0
            kb = key_row[b - base] if by_band else 0
            for e in range(group_first[ii], r):
                a = d[e]
                if jb > 0:
                    ka = key_row[a - base]
                    earlier = False
                    for q in range(jb):
                        if band_keys[ka, q] == band_keys[kb, q]:
                            earlier = True
                            break
                    if earlier:
                        continue
                same = _equal_bytes(w_new, new_row[a - base], w_new, yb)
                out_a[n] = a
                out_b[n] = b
                n += (same >= need) & (a != b)
        if g >= 0:  # and with the key's older holders, a tile at a time
            end = o_start[g + 1]
            for t0 in range(o_start[g], end, tile):
                t1 = min(t0 + tile, end)
                for ii in range(i, j):
                    b = d[sel[ii]]
                    yb = new_row[b - base]
                    for q in range(t0, t1):
                        if ii == i and q + PREFETCH_AHEAD < end:  # the tile's first pass loads its rows
                            prefetch(w_old, o_rows[q + PREFETCH_AHEAD])
                        same = _equal_bytes(w_old, o_rows[q], w_new, yb)
                        out_a[n] = o_ids[q]
                        out_b[n] = b
                        n += same >= need
        i = j
    return i, n
