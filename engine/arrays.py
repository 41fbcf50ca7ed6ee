"""Array helpers the engine uses in place of numpy's where numpy is slow for its data.

``np.unique(x)`` without ``return_*`` options takes a hash-table path since
numpy 2.3, which on millions of 64-bit ids or pair codes is an order of
magnitude slower than sorting them (2 million random uint64: 1.8 s against
0.11 s with numpy 2.4 on this project's machine); ``unique`` sorts.

``np.lexsort`` and ``np.argsort(kind="stable")`` on 64-bit keys are merge sorts, several times
slower than numpy's default (vectorised) sort: ``key_order`` and ``sorted_distinct_pairs`` use a
compiled bucket sort (``neardup.sort_kernels``) on hash keys; ``key_order`` on other keys sorts
unstably and puts the ties in order after.
"""

from __future__ import annotations

import numpy as np


def unique(x) -> np.ndarray:
    """The distinct values of an integer array, ascending: ``np.unique(x)``, by a sort."""
    s = np.sort(np.asarray(x).ravel())
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _runs(s: np.ndarray) -> np.ndarray:
    """Where the runs of equal values of ascending ``s`` start, and ``s.size`` (``sort_segments``' offsets)."""
    edge = np.ones(s.size + 1, dtype=bool)
    np.not_equal(s[1:], s[:-1], out=edge[1 : s.size])
    return np.flatnonzero(edge)


def key_order(keys: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """``np.lexsort((docs, keys))``: the order by key, then doc, then position. Where ``docs`` never
    decrease along the input (keys made document after document), by a stable sort of the keys:
    uint64 keys by the compiled bucket sort (660,000 LSH band keys: 0.011 s against 0.035-0.09 s),
    others by numpy's unstable sort and each run of equal keys put back in input order
    (``kernels.sort_segments``; 1.8 million keys: 0.05 s against lexsort's 0.14 s)."""
    keys, docs = np.asarray(keys), np.asarray(docs)
    if keys.size < 2 or not (docs[1:] >= docs[:-1]).all():
        return np.lexsort((docs, keys))
    if keys.dtype == np.uint64:  # hash keys: the compiled bucket sort
        return hash_order(keys)
    from . import kernels

    order = np.argsort(keys)
    kernels.sort_segments(order, _runs(keys[order]))
    return order


def hash_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for uint64 hash values (spread over the range) by the
    compiled bucket sort: 791,000 values, 0.017-0.022 s against 0.075 s."""
    from . import sort_kernels

    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    return sort_kernels.key_order(keys, sort_kernels.bucket_bits(keys.size))


def small_order(x: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(x, kind="stable")`` for integers in ``[0, bound)``, by a radix sort of their
    bits: 900,000 values below 2^20, 0.025-0.036 s against 0.08 s."""
    from .sort_kernels import masked_order

    return masked_order(np.asarray(x).astype(np.uint64), (1 << max(1, int(bound - 1).bit_length())) - 1)


def pair_order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The order of the pairs ``(a[i], b[i])`` by ``a``, then ``b`` (``np.lexsort((b, a))``): one sort
    of ``a * 2^32 + b`` when the ids fit in 32 bits (a stable sort: equal pairs keep their order;
    ``sort_kernels.masked_order``)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.size and int(min(a.min(), b.min())) >= 0 and int(max(a.max(), b.max())) < 1 << 32:
        from .sort_kernels import masked_order

        # a radix sort of the codes' used bits (32 + those of the largest a): 1,000,000 pairs of
        # ids below 2^15, 0.036 s against numpy's stable sort's 0.09-0.11 s
        code = (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
        return masked_order(code, (1 << (32 + int(a.max()).bit_length())) - 1)
    return np.lexsort((b, a))


def sorted_distinct_pairs(keys: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``(key, doc)`` rows, sorted by key then doc (``keys``, ``docs``: uint64), by the
    compiled bucket sort of ``neardup.sort_kernels`` (the keys are hash values)."""
    from . import sort_kernels

    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    docs = np.ascontiguousarray(docs, dtype=np.uint64)
    return sort_kernels.sorted_distinct_pairs(keys, docs, sort_kernels.bucket_bits(keys.size))
