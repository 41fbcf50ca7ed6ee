"""The ingest's reading pipeline: ``prefetch`` and ``ordered_map`` keep order, bounds and errors."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.pipeline import ordered_map, prefetch


class Counted:
    """An iterable that records how many of its items were taken."""

    def __init__(self, n: int, fail_at: int | None = None):
        self.n, self.fail_at, self.taken = n, fail_at, 0

    def __iter__(self):
        for i in range(self.n):
            if i == self.fail_at:
                raise ValueError(f"item {i}")
            self.taken += 1
            yield i


def _slow_square(x: int) -> int:
    time.sleep(0.001 * (x % 3))  # later items may finish first
    return x * x


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 40), workers=st.integers(1, 3), window=st.integers(1, 5))
def test_results_come_in_input_order(n, workers, window):
    assert list(ordered_map(_slow_square, Counted(n), workers=workers, window=window)) == [i * i for i in range(n)]


@pytest.mark.parametrize("window", [1, 2, 3, 5])
def test_no_more_than_window_items_are_taken_ahead_of_the_consumer(window):
    items = Counted(50)
    seen = []
    for i, r in enumerate(ordered_map(lambda x: x, items, window=window)):
        time.sleep(0.002)  # the feeder runs ahead as far as it may
        seen.append(items.taken - (i + 1))
    assert max(seen) <= window
    assert max(seen) == window  # it does run ahead while the consumer works


def test_an_error_of_fn_is_raised_at_its_items_turn():
    def fn(x):
        if x == 4:
            raise KeyError(x)
        return x

    got = []
    with pytest.raises(KeyError):
        for r in ordered_map(fn, Counted(10)):
            got.append(r)
    assert got == [0, 1, 2, 3]


def test_an_error_of_the_items_is_raised_in_its_place():
    got = []
    with pytest.raises(ValueError, match="item 6"):
        for r in ordered_map(lambda x: x, prefetch(Counted(10, fail_at=6))):
            got.append(r)
    assert got == [0, 1, 2, 3, 4, 5]


def test_closing_early_stops_the_feeding():
    items = Counted(1000)
    gen = ordered_map(lambda x: x, items, window=3)
    assert [next(gen) for _ in range(5)] == [0, 1, 2, 3, 4]
    gen.close()
    time.sleep(0.05)
    assert items.taken <= 5 + 3
    assert not any(t.name.startswith("neardup-prepare") for t in threading.enumerate())


def test_prefetch_reads_ahead_before_it_is_asked_and_stops_when_closed_unread():
    """The producer starts at once (an ingest reads its first chunks while the index opens), reads
    no more than ``depth`` ahead (one more is held by the blocked producer), and closing the
    iterator before any ``next`` stops it."""
    items = Counted(1000)
    it = prefetch(items, depth=2)
    deadline = time.monotonic() + 10
    while items.taken < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert items.taken == 3  # two in the queue, the third waiting to be put
    it.close()
    assert not any(t.name == "neardup-reader" for t in threading.enumerate())
    assert items.taken <= 4  # the producer stops at the item after the one it was putting
    assert list(it) == []


def test_prefetch_used_as_a_context_stops_its_producer_on_the_way_out():
    items = Counted(1000)
    with pytest.raises(RuntimeError):
        with prefetch(items) as it:
            assert next(it) == 0
            raise RuntimeError("the index did not open")
    assert not any(t.name == "neardup-reader" for t in threading.enumerate())
    # the one read, two in the queue, one being put, and the one after it, where the producer stops
    assert items.taken <= 5


def test_beside_runs_in_the_callers_context_and_raises_what_it_raised():
    """``Beside`` (the concept neighbour search's and the simhash scan's thread) sees the memory plan
    of the caller that started it, even once the caller has left it, and ``result()`` raises the
    thread's error in the caller."""
    from neardup import memory
    from neardup.pipeline import Beside

    with memory.using(memory.MemoryPlan(1_000_000_000)):
        job = Beside(lambda: memory.current().total, "neardup-test")
    assert memory.current().total == memory.DEFAULT_MEMORY
    assert job.result() == 1_000_000_000 and job.seconds >= 0

    def boom():
        raise KeyError("in the thread")

    with pytest.raises(KeyError, match="in the thread"):
        Beside(boom, "neardup-test").result()


def test_beside_calls_done_once_after_the_thread_ends():
    """``done`` (closing what the thread read) runs after the thread, once, however often the caller waits."""
    from neardup.pipeline import Beside

    order = []
    job = Beside(lambda: (time.sleep(0.05), order.append("fn"))[1], "neardup-test", done=lambda: order.append("done"))
    job.join()
    job.result()
    job.join()
    assert order == ["fn", "done"]
