"""Array helpers: ``arrays.unique`` is ``np.unique`` by a sort; ``pipeline.in_parts`` is one call."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import pipeline
from neardup.arrays import unique


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
