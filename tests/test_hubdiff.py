"""Exact Jaccard of near-identical sets through their differences from a hub (``neardup.pairs.hubdiff``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import kernels
from neardup.pairs import hubdiff


def _layout(sets: list[set[int]]) -> tuple[np.ndarray, np.ndarray]:
    arrays = [np.array(sorted(v * 1_000_003 for v in s), dtype=np.uint64) for s in sets]
    offs = np.concatenate([[0], np.cumsum([a.size for a in arrays])]).astype(np.int64)
    return (np.concatenate(arrays) if arrays else np.zeros(0, np.uint64)), offs


def test_four_pages_of_one_template_exactly():
    """H = 1..20, the hub (in three pairs); A drops 1 and adds 21, B drops 2 and adds 21 and 22
    (differences of 2 and 3: kept, at most a quarter of 20 and 21); C drops 1-3 and adds 21-26
    (9, more than a quarter of 23: its pair is merged whole). A & B = 3-20 and 21: 19 values,
    |H| - |X_A| - |X_B| + |X_A & X_B| + |Y_A & Y_B| = 20 - 1 - 1 + 0 + 1."""
    h = set(range(1, 21))
    a = (h - {1}) | {21}
    b = (h - {2}) | {21, 22}
    c = (h - {1, 2, 3}) | set(range(21, 27))
    data, offs = _layout([h, a, b, c])
    ra, rb = np.array([0, 0, 0, 1]), np.array([1, 2, 3, 2])
    d = hubdiff.differences(data, offs, ra, rb)
    assert d.hub.tolist() == [0, 0, 0, 0]
    assert d.keep.tolist() == [True, True, True, False]
    assert (d.xs[d.xo[2] : d.xo[3]] // 1_000_003).tolist() == [2]
    assert (d.ys[d.yo[2] : d.yo[3]] // 1_000_003).tolist() == [21, 22]
    got = hubdiff.pair_jaccard_at_least(data, offs, ra, rb, 0.0)
    assert got.tolist() == [19 / 21, 19 / 22, 17 / 26, 19 / 22]
    # at 0.8 the pair below it is -1.0, as the merge that stops early gives it
    assert hubdiff.pair_jaccard_at_least(data, offs, ra, rb, 0.8).tolist() == [19 / 21, 19 / 22, -1.0, 19 / 22]


def test_the_hub_is_the_set_in_most_pairs_of_its_component():
    ra = np.array([0, 1, 1, 3, 5])
    rb = np.array([1, 2, 4, 4, 6])
    assert hubdiff.hubs(8, ra, rb).tolist() == [1, 1, 1, 1, 1, 5, 5, 7]


@st.composite
def _families(draw):
    """Sets of a few templates, each page its template with a few values dropped and added, and
    pairs among them (within and across templates, a set with itself too)."""
    sets = []
    for _ in range(draw(st.integers(1, 3))):
        base = draw(st.sets(st.integers(0, 400), min_size=12, max_size=60))  # empty sets: test_pairs
        for _ in range(draw(st.integers(1, 6))):
            dropped = draw(st.sets(st.sampled_from(sorted(base)), max_size=8)) if base else set()
            added = draw(st.sets(st.integers(401, 412), max_size=8))  # pages often add the same values
            sets.append((base - dropped) | added)
    n = len(sets)
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=40))
    return sets, pairs


@settings(max_examples=300, deadline=None)
@given(_families(), st.sampled_from([0.0, 0.5, 0.8, 0.9, 0.95, 1.0]), st.booleans())
def test_the_same_values_as_a_merge_per_pair(family, t, stored):
    """Value for value those of ``kernels.pair_jaccard_at_least`` (and, at and above ``t``, Python's
    sets), on native and on stored (big-endian, read with swap) values; the differences kept are
    those of Python's sets."""
    sets, pairs_ = family
    data, offs = _layout(sets)
    ra = np.array([p[0] for p in pairs_], dtype=np.int64)
    rb = np.array([p[1] for p in pairs_], dtype=np.int64)
    if stored:
        data = data.byteswap()
    want = kernels.pair_jaccard_at_least(data, offs, ra, rb, t, stored)
    got = hubdiff.pair_jaccard_at_least(data, offs, ra, rb, t, stored)
    assert np.array_equal(got, want)
    for (a, b), j in zip(pairs_, got.tolist()):
        union = sets[a] | sets[b]
        exact = len(sets[a] & sets[b]) / len(union) if union else 0.0
        assert j == (exact if exact >= t or not union else -1.0)  # two empty sets: 0.0, as the merge gives
    d = hubdiff.differences(data, offs, ra, rb, stored)
    native = data.byteswap() if stored else data
    xs, ys = (d.xs.byteswap() if stored else d.xs), (d.ys.byteswap() if stored else d.ys)
    for r in np.flatnonzero(d.keep).tolist():
        hub = set((native[offs[d.hub[r]] : offs[d.hub[r] + 1]] // 1_000_003).tolist())
        assert set((xs[d.xo[r] : d.xo[r + 1]] // 1_000_003).tolist()) == hub - sets[r]
        assert set((ys[d.yo[r] : d.yo[r + 1]] // 1_000_003).tolist()) == sets[r] - hub
        assert len(hub ^ sets[r]) <= hubdiff.MAX_DIFF * len(sets[r])
