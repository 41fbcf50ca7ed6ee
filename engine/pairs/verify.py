"""Verification: each pair method's similarity of candidate pairs, computed on the stored values."""

from __future__ import annotations

import functools
import math
import sys

import numpy as np

from ..pipeline import in_parts
from ..settings import Settings
from .keys import lsh_params
from .values import SIGNATURE_VALUES, ValueCache, _fixed_values, _matrix, _rows_of, _signature_rows, _simhash_rows, _values

#: chance that the agreement filter drops a pair at the threshold (one-sided binomial tail): a
#: hundredth of what the LSH bands miss there by design (``lsh_params``' target 0.999)
AGREEMENT_RISK = 1e-5


@functools.cache
def min_agreements(threshold: float, perms: int, risk: float = AGREEMENT_RISK) -> int:
    """The most min-hash agreements ``m`` such that a pair of Jaccard ``threshold`` agrees on
    fewer than ``m`` of ``perms`` positions with probability at most ``risk``
    (``P[Binomial(perms, threshold) < m] <= risk``); pairs of higher Jaccard fall below it
    even more rarely."""
    tail, m = 0.0, 0
    for x in range(perms + 1):
        tail += math.comb(perms, x) * threshold**x * (1 - threshold) ** (perms - x)
        if tail > risk:
            break
        m = x + 1
    return m


#: share of the pairs at the threshold whose min-hash agreements fall below ``sure_agreements``
SURE_SHARE = 0.01


def sure_agreements(threshold: float, perms: int) -> int:
    """The min-hash agreements that all but ``SURE_SHARE`` of the pairs at the threshold reach (70
    of 100 at 0.8): ``jaccard``'s candidates agreeing this often are verified without the bottom-k
    screen (``sketch_filter``). A pair of a site's frame (Jaccard about 0.5) practically never
    agrees this often, and a pair that does nearly always passes the screen: screening it would
    only cost time."""
    return min_agreements(threshold, perms, SURE_SHARE)


def agree_enough(con, a: np.ndarray, b: np.ndarray, perms: int, need: int, postings=None, lo: int = 0,
                 cache: ValueCache | None = None) -> np.ndarray:
    """Whether the min-hash signatures of each pair agree on at least ``need`` positions, comparing
    each value's low 8 bits: equal values always agree, so no pair the full values would keep is
    dropped; two different values agree by chance with probability 1/256 per position, which only
    lets a few more pairs through to the exact verification. (One byte per position is a
    quarter of the memory the comparison reads for the millions of candidate pairs of a
    frame-heavy site.)"""
    if a.size == 0:
        return np.zeros(0, bool)
    ids, rows = _fixed_values(con, postings, lo, np.concatenate([a, b]), "fp_minhash", "signature", SIGNATURE_VALUES,
                              perms, _signature_rows, cache)
    return low_byte_agreements(rows, _rows_of(ids, a), _rows_of(ids, b), need)


def low_byte_agreements(low: np.ndarray, ra: np.ndarray, rb: np.ndarray, need: int) -> np.ndarray:
    """``agree_enough`` on values in memory: ``low`` is ``(n, perms)`` uint8, each min-hash's
    lowest byte; pair ``i`` is rows ``ra[i]``, ``rb[i]``. Linear in pairs x perms."""
    from .. import row_kernels

    return row_kernels.pair_agreements(row_kernels.byte_words(low), ra, rb, need + row_kernels.padded(low.shape[1]) - low.shape[1])


def shingle_jaccard(con, a: np.ndarray, b: np.ndarray, postings=None, lo: int = 0, at_least: float | None = None,
                    cache: ValueCache | None = None) -> np.ndarray:
    """Exact Jaccard of the stored word-shingle sets of each pair; with ``at_least``, -1.0 for
    the pairs below it (their merge stops early)."""
    if a.size == 0:
        return np.zeros(0)
    ids, blobs = _values(con, postings, lo, np.concatenate([a, b]), "fp_shingles", "hashes", "shingles", cache)
    return set_jaccard(blobs, _rows_of(ids, a), _rows_of(ids, b), at_least)


def set_jaccard(blobs: list[bytes], ra: np.ndarray, rb: np.ndarray, at_least: float | None = None) -> np.ndarray:
    """``shingle_jaccard`` on values in memory: ``blobs`` are stored shingle sets (``fp_shingles.hashes``:
    ascending big-endian uint64), pair ``i`` is blobs ``ra[i]``, ``rb[i]``. One merge per pair, or
    with ``at_least`` one per set and one of two small differences per pair (``pairs.hubdiff``)."""
    from .. import kernels

    offs = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum([len(x) // 8 for x in blobs], out=offs[1:])
    # read in place: the kernels reverse each value's bytes as they load it (no converted copy of
    # what can be gigabytes of shingle sets per slice)
    data = np.frombuffer(b"".join(blobs), dtype=np.uint64)
    if not data.flags.aligned:  # pragma: no cover - a bytes object's data is 8-byte aligned in CPython
        data = data.copy()
    swap = sys.byteorder == "little"
    if at_least is not None:
        from .hubdiff import pair_jaccard_at_least

        # the pairs of one template's pages through each page's difference from one of them
        return pair_jaccard_at_least(data, offs, ra, rb, float(at_least), swap)
    return in_parts(lambda x, y: kernels.pair_jaccard(data, offs, x, y, swap), ra, rb)


def minhash_similarity(con, a: np.ndarray, b: np.ndarray, perms: int) -> np.ndarray:
    ids, flat, _ = _matrix(con, "fp_minhash", "signature", np.concatenate([a, b]))
    sig = flat.reshape(ids.size, perms)
    return (sig[_rows_of(ids, a)] == sig[_rows_of(ids, b)]).mean(axis=1)


def bottomk_similarity(con, a: np.ndarray, b: np.ndarray, settings: Settings) -> np.ndarray:
    """Broder's resemblance estimate from the bottom-k sketches of each pair."""
    from .. import kernels
    from ..fingerprints import sketches

    ids, flat, lens = _matrix(con, "fp_bottomk", "sketch", np.concatenate([a, b]))
    k = settings.bottomk
    if settings.permutation != "universal":  # sketches list original hashes in permuted order
        flat = sketches.permute(flat, 0, 1, settings.seed, settings.permutation)
    offs = np.concatenate([[0], np.cumsum(lens)])
    return kernels.pair_bottomk(flat, offs, _rows_of(ids, a), _rows_of(ids, b), k)


def _simhash_distance(con, method: str, a: np.ndarray, b: np.ndarray, postings=None, lo: int = 0,
                      cache: ValueCache | None = None) -> np.ndarray:
    ids, rows = _fixed_values(con, postings, lo, np.concatenate([a, b]), f"fp_{method}", "simhash", method, 8, _simhash_rows, cache)
    v = rows.view(">u8").ravel().astype(np.uint64)
    return np.bitwise_count(v[_rows_of(ids, a)] ^ v[_rows_of(ids, b)]).astype(np.int64)


def _shared_lists(con, table: str, column: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many values each pair's two lists share."""
    ids, flat, lens = _matrix(con, table, column, np.concatenate([a, b]))
    offs = np.concatenate([[0], np.cumsum(lens)])
    ra, rb = _rows_of(ids, a), _rows_of(ids, b)
    return np.array([np.intersect1d(flat[offs[x] : offs[x + 1]], flat[offs[y] : offs[y + 1]]).size for x, y in zip(ra.tolist(), rb.tolist())], dtype=np.int64)


def expected_candidate_rate(threshold: float, perms: int, jaccard: float) -> float:
    """Probability that a pair of this Jaccard becomes an LSH candidate (docs and tests)."""
    bands, rows = lsh_params(threshold, perms)
    return 1 - (1 - jaccard**rows) ** bands
