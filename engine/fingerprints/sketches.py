"""Sketches of shingle sets: bottom-k (n minimal elements in one permutation)
and min-hash (the minimal element in each of n permutations).

As in the seeds (000: "в поле Fingerprint записывается выбранный хеш
соответствующего шингла"), a sketch holds the *original hash codes* of the
winning shingles, not their permuted numbers; since every permutation is a
bijection, two documents agree on a min-hash coordinate exactly when the
permuted minima agree, so Jaccard estimation is unchanged.

Inputs are per-document sorted distinct shingle hashes (``values`` with
``counts`` per document, see ``hashing.distinct_sorted``). Outputs are
``(n_docs, k)`` uint64 matrices; a document with fewer than ``k`` distinct
shingles (bottom-k) or none (min-hash) is padded with ``EMPTY``.

Permutations, two schemes:

* ``universal`` (default): ``pi_i(x) = a_i * x + b_i mod 2**64`` with odd
  ``a_i`` — a bijection of 64-bit values, one multiply-add per element, so
  128 permutations run at numpy speed. Shingle hashes are already uniform
  (seeded xxh3 + avalanche), which is what min-wise sampling needs from them.
* ``matrix``: the seeds' own scheme (000): the shingle hash as a 64-bit vector
  times a random invertible 64x64 binary matrix over GF(2). Computed with
  eight 256-entry lookup tables per matrix (one per byte of the input) —
  exact, but ~8x the cost of the universal scheme.

All constants come from ``numpy.random.default_rng(seed)``, so the same seed
gives the same permutations on every machine.
"""

from __future__ import annotations

import functools

import numpy as np

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)


def doc_starts(counts: np.ndarray) -> np.ndarray:
    starts = np.zeros(counts.size, dtype=np.int64)
    if counts.size:
        np.cumsum(counts[:-1], out=starts[1:])
    return starts


@functools.cache
def universal_params(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, 0x6D696E68])
    a = rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    return a, b


@functools.cache
def matrix_tables(n: int, seed: int) -> np.ndarray:
    """``(n, 8, 256)`` tables: ``T[i, p, v]`` is matrix i times the vector ``v << 8p`` over GF(2)."""
    rng = np.random.default_rng([seed, 0x6D617472])
    out = np.empty((n, 8, 256), dtype=np.uint64)
    for i in range(n):
        while True:
            cols = rng.integers(0, 2**64 - 1, 64, dtype=np.uint64, endpoint=True)  # column j = M e_j
            if _rank64(cols) == 64:
                break
        for p in range(8):
            byte_cols = cols[8 * p : 8 * p + 8]
            t = np.zeros(256, dtype=np.uint64)
            for bit in range(8):
                t[np.arange(256) & (1 << bit) != 0] ^= byte_cols[bit]
            out[i, p] = t
    return out


def _rank64(cols: np.ndarray) -> int:
    rows = [int(c) for c in cols]
    rank = 0
    for bit in range(64):
        pivot = next((r for r in range(rank, 64) if rows[r] >> bit & 1), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for r in range(64):
            if r != rank and rows[r] >> bit & 1:
                rows[r] ^= rows[rank]
        rank += 1
    return rank


def permute(values: np.ndarray, i: int, n: int, seed: int, scheme: str) -> np.ndarray:
    """Permutation ``i`` of ``n`` applied to every value."""
    if scheme == "universal":
        a, b = universal_params(n, seed)
        return values * a[i] + b[i]
    if scheme == "matrix":
        t = matrix_tables(n, seed)[i]
        out = t[0][values & np.uint64(0xFF)]
        for p in range(1, 8):
            out ^= t[p][(values >> np.uint64(8 * p)) & np.uint64(0xFF)]
        return out
    raise ValueError(f"unknown permutation scheme {scheme!r}: use universal or matrix")


@functools.cache
def universal_inverses(n: int, seed: int) -> np.ndarray:
    """The multiplicative inverses of ``universal_params(n, seed)``'s multipliers (computed once)."""
    return _inverse_odd(universal_params(n, seed)[0])


def _inverse_odd(a: np.ndarray) -> np.ndarray:
    """Multiplicative inverse mod 2^64 of odd numbers (Newton's iteration)."""
    inv = a.copy()
    for _ in range(6):
        inv = inv * (np.uint64(2) - a * inv)
    return inv


@functools.cache
def inverse_matrix_tables(n: int, seed: int) -> np.ndarray:
    """Tables of the inverse matrices, in the layout of ``matrix_tables``."""
    fwd = matrix_tables(n, seed)
    out = np.empty_like(fwd)
    for i in range(n):
        cols = [0] * 64  # column j of M = M e_j = table entry of byte p=j//8, value 1 << (j%8)
        for j in range(64):
            cols[j] = int(fwd[i, j // 8, 1 << (j % 8)])
        inv_cols = _invert_gf2(cols)
        for p in range(8):
            t = np.zeros(256, dtype=np.uint64)
            for bit in range(8):
                t[np.arange(256) & (1 << bit) != 0] ^= np.uint64(inv_cols[8 * p + bit])
            out[i, p] = t
    return out


def _invert_gf2(cols: list[int]) -> list[int]:
    """Columns of the inverse of the 64x64 GF(2) matrix with the given columns."""
    # rows of M: row r has bit j set when column j has bit r set
    rows = [sum(((cols[j] >> r) & 1) << j for j in range(64)) for r in range(64)]
    inv = [1 << r for r in range(64)]
    for c in range(64):
        p = next(r for r in range(c, 64) if rows[r] >> c & 1)
        rows[c], rows[p] = rows[p], rows[c]
        inv[c], inv[p] = inv[p], inv[c]
        for r in range(64):
            if r != c and rows[r] >> c & 1:
                rows[r] ^= rows[c]
                inv[r] ^= inv[c]
    # inv holds the rows of M^-1; return its columns
    return [sum(((inv[r] >> j) & 1) << r for r in range(64)) for j in range(64)]


def unpermute(values: np.ndarray, i: int, n: int, seed: int, scheme: str) -> np.ndarray:
    """The inverse of ``permute``: the original value of each permuted one."""
    if scheme == "universal":
        _, b = universal_params(n, seed)
        return (values - b[i]) * universal_inverses(n, seed)[i]
    t = inverse_matrix_tables(n, seed)[i]
    out = t[0][values & np.uint64(0xFF)]
    for p in range(1, 8):
        out ^= t[p][(values >> np.uint64(8 * p)) & np.uint64(0xFF)]
    return out


def minhash(values: np.ndarray, counts: np.ndarray, n_perm: int, seed: int, scheme: str = "universal") -> np.ndarray:
    """Min-hash signatures: for each of ``n_perm`` permutations, the original hash of the
    shingle with the smallest permuted number (one column per permutation).

    ``universal`` runs compiled (``neardup.fingerprints.sketch_kernels.minhash_universal``);
    ``matrix`` works on blocks of documents whose shingles fit in the CPU
    cache, with table lookups.
    """
    a, b = universal_params(n_perm, seed)
    if scheme == "universal":  # compiled: four permutations per pass over a document's values
        from . import sketch_kernels

        return sketch_kernels.minhash_universal(values, doc_starts(counts), counts.astype(np.int64), a, b,
                                                universal_inverses(n_perm, seed))
    n_docs = counts.size
    out = np.full((n_perm, n_docs), EMPTY, dtype=np.uint64)
    nonempty = np.flatnonzero(counts > 0)
    if nonempty.size == 0:
        return out.T
    starts = doc_starts(counts)[nonempty]
    ends = starts + counts[nonempty]
    for k0 in range(0, nonempty.size, _BLOCK_DOCS):
        k1 = min(nonempty.size, k0 + _BLOCK_DOCS)
        s0, s1 = starts[k0], ends[k1 - 1]
        block = values[s0:s1]
        local = starts[k0:k1] - s0
        buf = np.empty_like(block)
        cols = nonempty[k0:k1]
        for i in range(n_perm):
            if scheme == "universal":
                np.multiply(block, a[i], out=buf)
                np.add(buf, b[i], out=buf)
            else:
                buf = permute(block, i, n_perm, seed, scheme)
            out[i, cols] = np.minimum.reduceat(buf, local)
    for i in range(n_perm):
        out[i, nonempty] = unpermute(out[i, nonempty], i, n_perm, seed, scheme)
    return out.T


_BLOCK_DOCS = 64


def bottom_k(values: np.ndarray, counts: np.ndarray, k: int, seed: int, scheme: str = "universal") -> np.ndarray:
    """The ``k`` smallest values of each document's set under one permutation, ascending.

    With ``universal`` the permutation is the identity on the (already
    seeded, uniform) shingle hashes, so the sketch is a prefix of the sorted
    set and costs nothing more; with ``matrix`` it is one GF(2) matrix and
    the sketch lists the winners' original hashes in permuted order.
    """
    n_docs = counts.size
    out = np.full((n_docs, k), EMPTY, dtype=np.uint64)
    starts = doc_starts(counts)
    if scheme == "universal":
        take = np.minimum(counts, k)
        rows = np.repeat(np.arange(n_docs), take)
        cols = np.arange(rows.size) - np.repeat(np.cumsum(take) - take, take)
        out[rows, cols] = values[np.repeat(starts, take) + cols]
        return out
    perm = permute(values, 0, 1, seed, scheme)
    for d in np.flatnonzero(counts).tolist():
        seg = perm[starts[d] : starts[d] + counts[d]]
        m = min(k, seg.size)
        low = np.sort(np.partition(seg, m - 1)[:m]) if m < seg.size else np.sort(seg)
        out[d, :m] = unpermute(low, 0, 1, seed, scheme)  # in permuted order, as original hashes
    return out
