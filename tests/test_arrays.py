"""Array helpers: ``arrays.unique`` is ``np.unique`` by a sort, ``key_order`` is ``np.lexsort``,
``sorted_distinct_pairs`` the distinct rows in order; ``pipeline.in_parts`` is one call."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import pipeline
from neardup.arrays import key_order, sorted_distinct_pairs, unique


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
@given(_keyed, st.booleans(), st.booleans())
def test_key_order_is_lexsort(rows, docs_ascending, huge_keys):
    """Equal to ``np.lexsort((docs, keys))`` position by position (ties by position), with docs in
    input order (the sorting path) or not (lexsort's); keys anywhere in the uint64 range."""
    keys = np.array([k for k, _ in rows], dtype=np.uint64)
    if huge_keys:
        keys = keys * np.uint64(0x9E3779B97F4A7C15)  # spread over the range, ties kept
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
