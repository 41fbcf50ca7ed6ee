"""Array helpers: ``arrays.unique`` is ``np.unique`` by a sort, ``key_order`` and ``pair_order`` are ``np.lexsort``,
``sorted_distinct_pairs`` the distinct rows in order; ``pipeline.in_parts`` is one call."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import pipeline
from neardup.arrays import key_order, pair_order, sorted_distinct_pairs, unique


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=500), st.sampled_from([np.int64, np.uint64, np.int32]))
def test_unique_is_numpys(values, dtype):
    x = np.array([v % (2**31) if dtype == np.int32 else (v % 2**64 if dtype == np.uint64 else v) for v in values], dtype=dtype)
    got = unique(x)
    assert got.dtype == x.dtype and np.array_equal(got, np.unique(x))


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 60_000), st.integers(1, 5))
def test_in_parts_is_one_call(n, threads):
    rng = np.random.default_rng(n)
    a, b = rng.integers(0, 1000, n), rng.integers(0, 1000, n)
    calls = []

    def fn(x, y):
        calls.append(x.size)
        return x * 1000 + y

    got = pipeline.in_parts(fn, a, b, threads=threads)
    assert np.array_equal(got, a * 1000 + b)
    assert sum(calls) == n
    # split only when there is enough for more than one part, and then over several parts
    assert len(calls) == (1 if threads == 1 or n < 2 * pipeline.MIN_PART else min(threads * 4, n // pipeline.MIN_PART))


# few distinct keys and docs, so that runs of equal keys (and equal key and doc) are common
_keyed = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 5)), max_size=300)


@settings(max_examples=150, deadline=None)
@given(_keyed, st.booleans(), st.booleans(), st.booleans())
def test_key_order_is_lexsort(rows, docs_ascending, huge_keys, signed):
    """Equal to ``np.lexsort((docs, keys))`` position by position (ties by position), with docs in
    input order (the sorting paths: the bucket sort of uint64 keys, numpy's of others) or not
    (lexsort's); keys anywhere in the uint64 range."""
    keys = np.array([k for k, _ in rows], dtype=np.uint64)
    if huge_keys:
        keys = keys * np.uint64(0x9E3779B97F4A7C15)  # spread over the range, ties kept
    if signed:
        keys = keys.view(np.int64)
    docs = np.array([d for _, d in rows], dtype=np.uint64)
    if docs_ascending:
        docs = np.sort(docs)
    assert np.array_equal(key_order(keys, docs), np.lexsort((docs, keys)))


@settings(max_examples=150, deadline=None)
@given(_keyed)
def test_sorted_distinct_pairs(rows):
    keys = np.array([k for k, _ in rows], dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    docs = np.array([d for _, d in rows], dtype=np.uint64)
    k, d = sorted_distinct_pairs(keys, docs)
    want = sorted(set(zip(keys.tolist(), docs.tolist())))
    assert list(zip(k.tolist(), d.tolist())) == want
    assert k.dtype == np.uint64 and d.dtype == np.uint64


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 40)), max_size=400), st.integers(1, 12),
       st.integers(0, 3))
def test_bucket_sort_of_pairs_at_any_bucket_count(rows, bits, repeat):
    """The compiled bucket sort at any number of buckets (few: large buckets, sorted by the merge
    path; many: small ones, by insertion) gives the distinct rows in order, for keys anywhere in the
    uint64 range, repeated rows and a key held by many docs included."""
    from neardup import sort_kernels

    rows = rows + rows[: repeat * 5] + [(rows[0][0] if rows else 7, d) for d in range(repeat * 20, 0, -1)]
    keys = np.array([k for k, _ in rows], dtype=np.uint64)
    docs = np.array([d for _, d in rows], dtype=np.uint64)
    k, d = sort_kernels.sorted_distinct_pairs(keys, docs, bits)
    assert list(zip(k.tolist(), d.tolist())) == sorted(set(rows))


def test_sorted_distinct_pairs_of_many_rows():
    """Hash-like keys over many buckets, with frame-like keys held by thousands of docs."""
    rng = np.random.default_rng(5)
    keys = np.concatenate([rng.integers(0, 2**63, 50_000, dtype=np.uint64) * np.uint64(2), np.full(3_000, 12345, np.uint64),
                           np.full(3_000, 2**64 - 1, np.uint64)])
    docs = rng.integers(0, 10_000, keys.size, dtype=np.uint64)
    k, d = sorted_distinct_pairs(keys, docs)
    o = np.lexsort((docs, keys))
    sk, sd = keys[o], docs[o]
    keep = np.ones(sk.size, dtype=bool)
    keep[1:] = (sk[1:] != sk[:-1]) | (sd[1:] != sd[:-1])
    assert np.array_equal(k, sk[keep]) and np.array_equal(d, sd[keep])


_pair_id = st.one_of(st.integers(0, 50), st.integers(0, 2**32 - 1))


@given(st.lists(st.tuples(_pair_id, _pair_id), max_size=60), st.booleans())
def test_pair_order_is_lexsort_by_first_then_second(pairs, big):
    """One sort of packed keys orders pairs as ``np.lexsort((b, a))`` does (ties in input order),
    for ids anywhere below 2^32, and ids past 32 bits fall back to lexsort itself."""
    a = np.array([p[0] for p in pairs], dtype=np.int64) + (1 << 40 if big else 0)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    assert pair_order(a, b).tolist() == np.lexsort((b, a)).tolist()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=300), st.integers(0, 2**64 - 1), st.integers(0, 3), st.integers(0, 40))
def test_masked_order_is_a_stable_argsort_of_the_masked_values(values, mask, low_bits, repeat):
    """The radix sort on a mask's bits orders as numpy's stable argsort of the masked values, for
    any mask (none, all 64 bits, scattered runs), values that differ only outside the mask and
    repeated values included."""
    from neardup import sort_kernels

    values = values + values[:repeat] + [(v | ((1 << 64) - 1 - mask)) for v in values[:repeat]]
    x = np.array([v ^ (i % (1 << low_bits)) for i, v in enumerate(values)], dtype=np.uint64)
    for m in (mask, 0, 2**64 - 1, mask & 0x03FFFFFF, mask | 1 << 63):
        got = sort_kernels.masked_order(x, m)
        assert np.array_equal(got, np.argsort(x & np.uint64(m), kind="stable"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=300), st.integers(0, 2**64 - 1), st.integers(0, 40))
def test_masked_sorted_is_the_values_and_ids_in_masked_order(values, mask, repeat):
    """The values and ids the payload-carrying sort returns are those at ``masked_order``'s
    positions (so ties keep their input order), for any mask and repeated values."""
    from neardup import sort_kernels

    x = np.array(values + values[:repeat], dtype=np.uint64)
    ids = np.arange(x.size, dtype=np.uint32)[::-1].copy()
    for m in (mask, 0, 2**64 - 1, mask & 0x03FFFFFF, mask | 1 << 63):
        o = np.argsort(x & np.uint64(m), kind="stable")
        got_v, got_i = sort_kernels.masked_sorted(x, ids, m)
        assert got_v.dtype == np.uint64 and got_i.dtype == np.uint32
        assert np.array_equal(got_v, x[o]) and np.array_equal(got_i, ids[o])


def test_masked_sorted_of_simhash_table_masks():
    """Every table of the default plan, many values with long runs of equal masked bits, int64 ids."""
    from neardup import sort_kernels
    from neardup.pairs.keys import table_masks

    rng = np.random.default_rng(12)
    x = rng.integers(0, 2**64 - 1, 40_000, dtype=np.uint64, endpoint=True)
    x[::7] = x[1]
    x[::5] &= np.uint64(0xFFFF0000FFFF0000)
    ids = rng.permutation(x.size).astype(np.int64)
    for m in table_masks(3) + table_masks(6):
        o = np.argsort(x & m, kind="stable")
        got_v, got_i = sort_kernels.masked_sorted(x, ids, m)
        assert np.array_equal(got_v, x[o]) and np.array_equal(got_i, ids[o])


def test_masked_order_of_simhash_table_masks():
    """Every table of the default plan, many values with long runs of equal masked bits."""
    from neardup import sort_kernels
    from neardup.pairs.keys import table_masks

    rng = np.random.default_rng(11)
    x = rng.integers(0, 2**64 - 1, 40_000, dtype=np.uint64, endpoint=True)
    x[::7] = x[1]  # a frame's simhash held by many pages
    x[::5] &= np.uint64(0xFFFF0000FFFF0000)
    for m in table_masks(3) + table_masks(6):
        assert np.array_equal(sort_kernels.masked_order(x, m), np.argsort(x & m, kind="stable"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=400), st.integers(1, 12), st.integers(0, 60))
def test_bucket_key_order_at_any_bucket_count(values, bits, repeat):
    """The compiled bucket order at any number of buckets (small ones sorted by insertion, large
    ones by the merge path) is the stable argsort, with a key repeated many times among others."""
    from neardup import sort_kernels

    keys = np.array(values + [values[0] if values else 3] * repeat + values[: repeat // 3], dtype=np.uint64)
    assert np.array_equal(sort_kernels.key_order(keys, bits), np.argsort(keys, kind="stable"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=300), st.lists(st.integers(0, 70), max_size=300), st.integers(1, 2**40))
def test_hash_and_small_orders_are_stable_argsorts(values, small, bound):
    """``hash_order`` of any uint64 values (repeats included) and ``small_order`` of integers below
    a bound (the bound a power of two or not) are numpy's stable argsort."""
    from neardup.arrays import hash_order, small_order

    x = np.array(values + values[:7], dtype=np.uint64)
    assert np.array_equal(hash_order(x), np.argsort(x, kind="stable"))
    y = np.array([v % bound for v in small + [bound - 1, 0]], dtype=np.int64)
    for b in (bound, int(y.max()) + 1):
        assert np.array_equal(small_order(y, b), np.argsort(y, kind="stable"))
