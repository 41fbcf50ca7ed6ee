"""Exact all-pairs set similarity: the ground truth that pair methods are measured against.

Independent of ``neardup.pairs`` (no sketches, no LSH, no posting store): given
each document's set, ``all_pairs`` returns every pair whose Jaccard reaches the
threshold, by the prefix filter of the AllPairs family (Bayardo et al., 2007):
order the elements globally (rarest first), and two sets with Jaccard >= t
must share an element among the first ``|x| - ceil(t |x|) + 1`` of each; the
length filter ``t |x| <= |y| <= |x| / t`` prunes further. Every candidate is
verified by intersecting the full sets, so the result is exact. ``brute_force``
compares every pair and checks the other on small inputs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np


def jaccard(x: np.ndarray, y: np.ndarray) -> float:
    """Jaccard of two sets given as arrays of distinct values."""
    inter = np.intersect1d(x, y, assume_unique=True).size
    union = x.size + y.size - inter
    return inter / union if union else 0.0  # empty sets are similar to nothing


def brute_force(sets: Sequence[np.ndarray], threshold: float) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, J)``, ``i < j``, with Jaccard >= ``threshold``, by comparing all pairs."""
    out = []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            s = jaccard(sets[i], sets[j])
            if s >= threshold - 1e-12:
                out.append((i, j, s))
    return out


def _need(threshold: float, size: int) -> int:
    # the fewest shared elements a set of this size needs with any partner
    return math.ceil(threshold * size - 1e-9)


def all_pairs(sets: Sequence[np.ndarray], threshold: float) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, J)``, ``i < j``, whose sets have Jaccard >= ``threshold`` (exact).

    ``sets``: one array of distinct values per document (any integer type).
    Cost: one pass to count element frequencies, one over the prefixes, and an
    exact intersection per candidate; empty sets pair with nothing.
    """
    if not 0 < threshold <= 1:
        raise ValueError("threshold must lie in (0, 1]")
    freq: dict[int, int] = defaultdict(int)
    for s in sets:
        for v in s.tolist():
            freq[v] += 1
    # global order: rarest first, ties by value (any fixed order is correct; rare-first prunes most)
    ordered = [sorted(s.tolist(), key=lambda v: (freq[v], v)) for s in sets]
    index: dict[int, list[int]] = defaultdict(list)
    by_size = sorted(range(len(sets)), key=lambda i: (len(ordered[i]), i))
    out = []
    for i in by_size:  # shorter sets first: a probe's partners so far are no longer than it
        x = ordered[i]
        if not x:
            continue
        prefix = x[: len(x) - _need(threshold, len(x)) + 1]
        cands = set()
        for v in prefix:
            for j in index[v]:
                if len(ordered[j]) >= threshold * len(x) - 1e-9:
                    cands.add(j)
            index[v].append(i)
        for j in cands:
            s = jaccard(sets[i], sets[j])
            if s >= threshold - 1e-12:
                out.append((min(i, j), max(i, j), s))
    out.sort()
    return out


def shingle_sets(texts: Sequence[str], settings=None) -> list[np.ndarray]:
    """Each text's distinct word-shingle hashes under ``settings`` (the index's definition of a
    shingle: normal form, words, ``shingle_size``/``shingle_offset``, seeded XXH64)."""
    import pyarrow as pa

    from . import text
    from .fingerprints import hashing
    from .settings import Settings

    s = settings or Settings()
    normal = text.normal_form(pa.array(list(texts), pa.large_string()))
    a = text.analyze(normal, s.seed, spans=False)
    h, doc = hashing.shingle_hashes(a.word_hashes, a.word_counts, s.shingle_size, s.shingle_offset, s.seed)
    values, counts = hashing.distinct_sorted(h, doc, len(texts))
    return np.split(values, np.cumsum(counts)[:-1]) if len(texts) else []
