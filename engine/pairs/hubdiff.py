"""Exact Jaccard of many pairs of near-identical sets, through each set's difference from a hub.

On a real site most verified pairs join pages of one template: their word-shingle sets are large
(thousands of values) and differ in a few percent of them. A merge per pair reads both sets whole
(on the rust-1.63 pages, 1.28 billion values for 275,596 pairs). Here the pairs' sets are grouped
by the connected components of the pairs; each component gets a hub (its set in the most pairs),
and each other set ``A`` of it is written once as its difference from the hub ``H``:
``X_A = H - A`` and ``Y_A = A - H``. For two sets of one component,

    A & B = (H - X_A - X_B) | (Y_A & Y_B),   so   |A & B| = |H| - |X_A| - |X_B| + |X_A & X_B| + |Y_A & Y_B|

(``Y`` holds no value of ``H``, ``X`` only values of ``H``): the pair merges its two small
differences instead of its two sets. A set whose difference from its hub is not small
(``MAX_DIFF`` of its size) keeps none, and its pairs are merged whole, as are the pairs whose
differences together are not smaller than their sets. Every count is exact, so the similarities
are those of ``kernels.pair_jaccard_at_least``, value for value.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .. import kernels
from ..arrays import unique
from ..kernels import _at
from ..pipeline import in_parts

#: a set keeps its difference from its hub when that is at most this share of its size (the
#: differences then take at most this share of the sets' memory beside them)
MAX_DIFF = 0.25


@njit(cache=True, nogil=True)
def _diff_sizes(data, offs, rows, hub, limit, swap):
    """Per row ``d`` of ``rows``: ``(|H - A|, |A - H|)`` against its hub's set, in a ``(rows, 2)``
    array; a row whose two together pass ``limit[r]`` gets a sum above it (the merge stops
    there); a hub gets zeros."""
    out = np.zeros((rows.size, 2), np.int64)
    for r in range(rows.size):
        d = rows[r]
        h = hub[d]
        if h == d:
            continue
        i, ie = offs[h], offs[h + 1]
        j, je = offs[d], offs[d + 1]
        x, y = 0, 0
        cap = limit[r]
        while i < ie and j < je and x + y <= cap:
            u, v = _at(data, i, swap), _at(data, j, swap)
            if u == v:
                i += 1
                j += 1
            elif u < v:
                x += 1
                i += 1
            else:
                y += 1
                j += 1
        if x + y <= cap:
            x += ie - i
            y += je - j
        out[r, 0] = x
        out[r, 1] = y
    return out


@njit(cache=True, nogil=True)
def _fill_diffs(data, offs, rows, hub, keep, xo, yo, xs, ys, swap):
    """Write ``X = H - A`` at ``xs[xo[d]:]`` and ``Y = A - H`` at ``ys[yo[d]:]`` for each kept row
    ``d`` of ``rows`` (values as stored, ascending); returns how many values each row wrote."""
    out = np.zeros(rows.size, np.int64)
    for r in range(rows.size):
        d = rows[r]
        h = hub[d]
        if not keep[d] or h == d:
            continue
        i, ie = offs[h], offs[h + 1]
        j, je = offs[d], offs[d + 1]
        x, y = xo[d], yo[d]
        while i < ie and j < je:
            u, v = _at(data, i, swap), _at(data, j, swap)
            if u == v:
                i += 1
                j += 1
            elif u < v:
                xs[x] = data[i]
                x += 1
                i += 1
            else:
                ys[y] = data[j]
                y += 1
                j += 1
        xs[x : x + (ie - i)] = data[i:ie]  # the rest of either set is in no other
        ys[y : y + (je - j)] = data[j:je]
        out[r] = (x + ie - i - xo[d]) + (y + je - j - yo[d])
    return out


@njit(cache=True, nogil=True)
def _pair_jaccard(data, offs, ra, rb, t, swap, hub, keep, xo, yo, xs, ys):
    """``kernels.pair_jaccard_at_least`` of each pair, by the differences where both sets keep one."""
    out = np.empty(ra.size, np.float64)
    for p in range(ra.size):
        a, b = ra[p], rb[p]
        na, nb = offs[a + 1] - offs[a], offs[b + 1] - offs[b]
        xa, xb = xo[a + 1] - xo[a], xo[b + 1] - xo[b]
        cost = xa + xb + (yo[a + 1] - yo[a]) + (yo[b + 1] - yo[b])
        if not (keep[a] and keep[b] and hub[a] == hub[b] and 2 * cost < na + nb):
            out[p] = kernels.jaccard_at_least(data, offs[a], offs[a + 1], offs[b], offs[b + 1], t, swap)
            continue
        h = hub[a]
        inter = (offs[h + 1] - offs[h]) - xa - xb + kernels._common(xs, xo[a], xo[a + 1], xo[b], xo[b + 1], swap) \
            + kernels._common(ys, yo[a], yo[a + 1], yo[b], yo[b + 1], swap)
        if inter < kernels.needed_common(na, nb, t):  # the whole sets' merge stops for the same pairs
            out[p] = -1.0
        else:
            union = na + nb - inter
            out[p] = inter / union if union > 0 else 0.0
    return out


def hubs(n: int, ra: np.ndarray, rb: np.ndarray) -> np.ndarray:
    """Each row's hub: of its component (by the pairs ``ra``, ``rb`` over rows ``0..n-1``), the row
    in the most pairs, the smallest such row on a tie; a row in no pair is its own hub."""
    roots = kernels.component_roots(n, ra, rb)
    degree = np.bincount(ra, minlength=n) + np.bincount(rb, minlength=n)
    order = np.lexsort((np.arange(n), -degree, roots))
    first = np.ones(n, dtype=bool)
    first[1:] = roots[order[1:]] != roots[order[:-1]]
    hub_of_root = np.zeros(n, dtype=np.int64)
    hub_of_root[roots[order[first]]] = order[first]
    return hub_of_root[roots]


class Differences(NamedTuple):
    """Each row's hub and, for the rows that keep one, ``X = H - A`` at ``xs[xo[d]:xo[d+1]]`` and
    ``Y = A - H`` at ``ys[yo[d]:yo[d+1]]`` (values as stored, ascending; empty for the others)."""

    hub: np.ndarray
    keep: np.ndarray
    xo: np.ndarray
    yo: np.ndarray
    xs: np.ndarray
    ys: np.ndarray


def differences(data: np.ndarray, offs: np.ndarray, ra: np.ndarray, rb: np.ndarray, swap: bool = False) -> Differences:
    """The hubs of the pairs' components and the differences of the pairs' sets from them: one merge
    per set (stopped once the difference passes ``MAX_DIFF`` of the set), on ``KERNEL_THREADS`` threads."""
    n = offs.size - 1
    hub = hubs(n, ra, rb)
    rows = unique(np.concatenate([ra, rb]))  # by a sort (np.unique's hash path is slow here, arrays.py)
    limit = (np.diff(offs)[rows] * MAX_DIFF).astype(np.int64)
    sizes = in_parts(lambda r, c: _diff_sizes(data, offs, r, hub, c, swap), rows, limit)
    kept = sizes.sum(axis=1) <= limit
    keep = np.zeros(n, dtype=bool)
    keep[rows[kept]] = True
    xo = np.zeros(n + 1, dtype=np.int64)
    yo = np.zeros(n + 1, dtype=np.int64)
    xo[rows[kept] + 1] = sizes[kept, 0]
    yo[rows[kept] + 1] = sizes[kept, 1]
    np.cumsum(xo, out=xo)
    np.cumsum(yo, out=yo)
    xs = np.empty(int(xo[-1]), dtype=np.uint64)
    ys = np.empty(int(yo[-1]), dtype=np.uint64)
    in_parts(lambda r: _fill_diffs(data, offs, r, hub, keep, xo, yo, xs, ys, swap), rows)
    return Differences(hub, keep, xo, yo, xs, ys)


def pair_jaccard_at_least(data: np.ndarray, offs: np.ndarray, ra: np.ndarray, rb: np.ndarray, t: float,
                          swap: bool = False) -> np.ndarray:
    """The values of ``kernels.pair_jaccard_at_least(data, offs, ra, rb, t, swap)`` (the Jaccard of
    each pair of sorted sets ``data[offs[r]:offs[r+1]]``, -1.0 below ``t``), computed through the
    sets' differences from their hubs (module docstring), on ``KERNEL_THREADS`` threads."""
    ra = np.ascontiguousarray(ra, dtype=np.int64)
    rb = np.ascontiguousarray(rb, dtype=np.int64)
    if ra.size == 0:
        return np.zeros(0, np.float64)
    d = differences(data, offs, ra, rb, swap)
    return in_parts(lambda x, y: _pair_jaccard(data, offs, x, y, float(t), swap, *d), ra, rb)
