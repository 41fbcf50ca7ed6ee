"""Concept neighbours: the rarest-values filter finds exactly the pairs sharing >= k values."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import neighbours
from neardup.clusters import _as_arrays
from neardup.concepts import neighbours_brute
from neardup.store.postings import MemoryPostings


def brute_pairs(sk: dict[int, np.ndarray], k: int, lo: int = 0) -> set[tuple[int, int, int]]:
    """(a, b, common) of every pair sharing >= k values with b >= lo, by comparing all pairs."""
    out = set()
    ids = sorted(sk)
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            c = np.intersect1d(sk[a], sk[b]).size
            if c >= k and b >= lo:
                out.add((a, b, c))
    return out


# sketches over a small universe, plus a "frame" of values that most documents hold
corpora = st.tuples(
    st.integers(2, 30),  # documents
    st.integers(1, 12),  # k
    st.integers(0, 2**32 - 1),  # seed
    st.integers(1, 60),  # pair budget per slice
    st.integers(1, 5),  # frequent threshold
)


def make(n: int, seed: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = rng.choice(1000, size=8, replace=False)
    sk = {}
    for d in range(1, n + 1):
        body = rng.choice(np.arange(1000, 1040), size=rng.integers(0, 14), replace=False)
        keep = frame[rng.random(frame.size) < rng.random()]
        if d > 1 and rng.random() < 0.3:  # a near copy of an earlier document
            src = sk[int(rng.integers(1, d))]
            body = np.unique(np.concatenate([src[rng.random(src.size) < 0.8], body[:2]]))
            keep = np.zeros(0, np.int64)
        sk[d] = np.unique(np.concatenate([body, keep]).astype(np.uint64))
    return sk


@settings(max_examples=200, deadline=None)
@given(corpora, st.data())
def test_search_equals_brute_force_for_any_split_budget_and_hint(args, data):
    n, k, seed, budget, freq = args
    sk = make(n, seed)
    lo = data.draw(st.integers(1, n + 1))
    old = {d: v for d, v in sk.items() if d < lo}
    new = {d: v for d, v in sk.items() if d >= lo}
    postings = MemoryPostings()
    saved = neighbours.FREQUENT
    neighbours.FREQUENT = freq
    try:
        if old:
            ids, flat, offs = _as_arrays(old)
            postings.apply_batch(1, neighbours.postings_of(ids, flat, np.diff(offs), k))
        if not new:
            return
        ids, flat, offs = _as_arrays(new)
        exact = data.draw(st.booleans())
        frequent: list = []
        held: dict = {}
        a, b, c = neighbours.search(ids, flat, np.diff(offs), k, lo=lo, postings=postings,
                                    old_sketches=lambda want: _as_arrays({d: old[d] for d in want.tolist()}), budget=budget,
                                    exact=exact, frequent_out=frequent, old_out=held)
        # the sketch of every older document in a pair found, kept as read
        assert sorted(held) == sorted(set(a[a < lo].tolist()))
        assert all(held[d].tolist() == sorted(old[d].tolist()) for d in held)
        # the batch's frequent values, as search counts them and as postings_of does: those held by
        # FREQUENT or more of the new documents with k or more values
        held = Counter(v for d in new if new[d].size >= k for v in new[d].tolist())
        want = sorted(v for v, n_docs in held.items() if n_docs >= freq)
        assert len(frequent) == 1 and frequent[0].tolist() == want
        assert neighbours.postings_of(ids, flat, np.diff(offs), k)[neighbours.FREQUENT_TABLE][0].tolist() == want
    finally:
        neighbours.FREQUENT = saved
    got = list(zip(a.tolist(), b.tolist(), c.tolist()))
    assert len(got) == len(set(got)), "a pair reported twice"
    # exact=False: the same pairs, each with k for its count (the comparison stopped there)
    assert set(got) == ({(x, y, k) for x, y, _ in brute_pairs(sk, k, lo)} if not exact else brute_pairs(sk, k, lo))


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 25), st.integers(1, 10), st.integers(0, 2**32 - 1))
def test_all_pairs_gives_the_neighbour_lists_of_brute_force(n, k, seed):
    sk = make(n, seed)
    a, b, _ = neighbours.all_pairs(sk, k)
    nb = neighbours.neighbour_lists(a, b)
    brute = {d: sorted(v) for d, v in neighbours_brute(sk, k).items() if v}
    assert {d: sorted(v) for d, v in nb.items()} == brute


def test_a_page_of_frame_and_body_looks_up_its_body_values_only():
    """Frame values held by every page are frequent; a page with enough body values looks up
    none of them, so its candidates are the pages sharing its body."""
    frame = np.arange(10_000, 10_060, dtype=np.uint64)
    sk = {d: np.concatenate([frame, np.arange(d * 100, d * 100 + 40, dtype=np.uint64)]) for d in range(1, 201)}
    sk[201] = sk[7].copy()  # an exact copy of page 7
    ids, flat, offs = _as_arrays(sk)
    looked_up = []
    postings = MemoryPostings()

    class Spy(MemoryPostings):
        def get_flat(self, table, keys):
            looked_up.extend(np.asarray(keys).tolist())
            return postings.get_flat(table, keys)

        def keys(self, table):
            return postings.keys(table)

    old = {d: v for d, v in sk.items() if d <= 200}
    oi, of, oo = _as_arrays(old)
    postings.apply_batch(1, neighbours.postings_of(oi, of, np.diff(oo), 80))
    assert neighbours.FREQUENT_TABLE in postings.dump()  # the frame is known frequent from batch 1
    a, b, c = neighbours.search(np.array([201]), sk[201], np.array([100]), 80, lo=201, postings=Spy(),
                                old_sketches=lambda want: _as_arrays({d: old[d] for d in want.tolist()}))
    assert (a.tolist(), b.tolist(), c.tolist()) == ([7], [201], [100])
    assert looked_up and not set(looked_up) & set(frame.tolist())


def test_ids_beyond_the_pair_encoder_are_refused():
    with pytest.raises(ValueError, match="2\\^32"):
        neighbours.search(np.array([1 << 32]), np.arange(5, dtype=np.uint64), np.array([5]), 3)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 40), st.just(2**64 - 1), st.integers(0, 2**64 - 1)), max_size=3000),
       st.integers(1, 5), st.integers(1, 12))
def test_occurring_counts_as_unique_does(values, times, bits):
    from neardup import kernels

    x = np.array(values, dtype=np.uint64)
    u, n = np.unique(x, return_counts=True)
    assert np.array_equal(kernels.occurring(x, times), u[n >= times])
    # from a table of any starting size: it doubles as it fills (tiny starts double many times)
    v, c = kernels.distinct_counts(x, bits)
    order = np.argsort(v)
    assert np.array_equal(v[order], u) and np.array_equal(c[order], n)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 60), max_size=12), min_size=1, max_size=8),  # each value's holders
       st.lists(st.tuples(st.integers(0, 60), st.integers(0, 7)), max_size=40),  # (anchor, value) rows
       st.booleans(), st.integers(1, 4), st.sampled_from([1, 1 << 21]))
def test_holder_pairs_counts_the_rows_it_does_not_list(holders, rows, smaller_only, times, spread):
    # rows in any order (grouped by anchor inside), holders repeated in a list, and holder ids
    # spread far apart (``spread``: numbered densely inside) or not
    from neardup import kernels

    holders = [[h * spread for h in hs] for hs in holders]
    rows = [(a * spread, v % len(holders)) for a, v in rows]
    listed = [(h << 32) | a for a, v in rows for h in holders[v] if not smaller_only or h < a]
    u, n = np.unique(np.array(listed, dtype=np.uint64), return_counts=True)
    start = np.zeros(len(holders) + 1, np.int64)
    start[1:] = np.cumsum([len(h) for h in holders])
    flat = np.array([h for hs in holders for h in hs], dtype=np.int64)
    anchor = np.array([a for a, _ in rows], dtype=np.int64)
    vidx = np.array([v for _, v in rows], dtype=np.int64)
    got = kernels.holder_pairs(anchor, vidx, start, flat, smaller_only, times, len(listed))
    assert np.array_equal(got, u[n >= times])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**45), st.booleans()), min_size=1, max_size=60), st.integers(0, 2**32 - 1))
def test_slot_ranks_put_frequent_values_last_then_the_most_held(table, seed):
    """Each value's rank: its slot's frequent flag above every count, then the slot's count
    (capped below the flag's bit), as the search's selection of rarest values reads it."""
    from neardup import neighbour_kernels

    counts = np.array([c for c, _ in table], dtype=np.int64)
    frequent = np.array([f for _, f in table], dtype=bool)
    slot = np.random.default_rng(seed).integers(0, len(table), 200)
    got = neighbour_kernels.slot_ranks(slot, counts, frequent)
    want = [(int(frequent[s]) << 40) | min(int(counts[s]), (1 << 40) - 1) for s in slot.tolist()]
    assert got.tolist() == want


def test_slot_ranks_of_a_small_table():
    from neardup import neighbour_kernels

    got = neighbour_kernels.slot_ranks(np.array([2, 0, 1, 2]), np.array([5, 1, 1 << 41]), np.array([False, True, False]))
    assert got.tolist() == [(1 << 40) - 1, 5, (1 << 40) | 1, (1 << 40) - 1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 6), max_size=30), st.integers(-2, 32)), max_size=12))
def test_smallest_per_segment_is_a_stable_sort_cut(runs):
    """Per run, the positions of its ``take`` smallest ranks in the order of a stable sort (many
    equal ranks: the small range), as ``np.argsort(kind='stable')[:take]`` gives them."""
    from neardup import neighbour_kernels

    rank = np.array([r for values, _ in runs for r in values], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum([len(values) for values, _ in runs])]).astype(np.int64)
    take = np.array([t for _, t in runs], dtype=np.int64)
    want = []
    for (values, t), s in zip(runs, offs[:-1].tolist()):
        if t > 0:
            want += [s + int(i) for i in np.argsort(np.array(values, dtype=np.int64), kind="stable")[:t]]
    assert neighbour_kernels.smallest_per_segment(rank, offs, take).tolist() == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 5), max_size=200))
def test_group_numbers_the_distinct_values_in_ascending_order_and_counts_them(values):
    """``neighbours._group``: the keys are the distinct values ascending (0 included), each value's
    group is its value's rank among them, and each group counts its value's occurrences."""
    from neardup import neighbours

    data = np.array(values, dtype=np.uint64)
    slot, keys, counts = neighbours._group(data)
    distinct = sorted(set(values))
    assert keys.tolist() == distinct
    assert slot.tolist() == [distinct.index(v) for v in values]
    assert counts.tolist() == [Counter(values)[v] for v in distinct]
    assert neighbours._frequent(keys, counts).tolist() == [v for v in distinct if Counter(values)[v] >= neighbours.FREQUENT]
