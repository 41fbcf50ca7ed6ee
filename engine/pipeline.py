"""Run the reading side of ingest in a background thread.

Reading (JSON decoding, WARC parsing, HTML extraction) holds the GIL; the
Arrow compute and DuckDB work of the main thread mostly releases it. On a
2-core machine overlapping the two is the cheapest speed-up there is, and it
keeps memory bounded: at most ``depth`` chunks wait in the queue.
"""

from __future__ import annotations

import collections
import contextvars
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")
_DONE = object()
#: threads a compiled kernel's rows are split over (``in_parts``): the cores this process may use, at most 8
KERNEL_THREADS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
#: rows below which a kernel's work is not split (a thread's start costs more than it saves)
MIN_PART = 8_192


def lap(timings: dict[str, float], stage: str, since: float) -> float:
    """Add the seconds since ``since`` to ``timings[stage]``; returns now (the next lap's start)."""
    now = time.perf_counter()
    timings[stage] = timings.get(stage, 0.0) + now - since
    return now


class Beside:
    """``fn()`` run in a thread of its own (``name``) while the caller goes on, in a copy of the
    caller's context (so under the same memory plan). ``result()`` waits for it and returns what
    ``fn`` returned or raises what it raised; ``join()`` only waits (a caller that fails must wait
    before closing what ``fn`` reads); either calls ``done`` once the thread has ended (the first
    time only: closing what ``fn`` read). ``seconds`` is then the thread's own time."""

    def __init__(self, fn: Callable[[], T], name: str, done: Callable[[], None] | None = None):
        self._out: T | None = None
        self._exc: BaseException | None = None
        self._done = done
        self.seconds = 0.0

        def run() -> None:
            t = time.perf_counter()
            try:
                self._out = fn()
            except BaseException as exc:  # raised again by result()
                self._exc = exc
            self.seconds = time.perf_counter() - t

        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), name=name, daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join()
        done, self._done = self._done, None
        if done is not None:
            done()

    def result(self) -> T:
        self.join()
        if self._exc is not None:
            raise self._exc
        return self._out


def prefetch(items: Iterable[T], depth: int = 2) -> Prefetch[T]:
    """Yield ``items`` in order, producing them in a daemon thread ``depth`` ahead.

    The thread starts at once, not at the first ``next``: a caller reads ahead while it does
    something else first (an ingest opens the index). An exception raised by the producer is
    re-raised here, at the point it occurred in the sequence. Closing the iterator early (or
    dropping it, read or not) stops the producer at its next item.
    """
    return Prefetch(items, depth)


class Prefetch(Iterator, Generic[T]):
    """The iterator ``prefetch`` returns (see there)."""

    def __init__(self, items: Iterable[T], depth: int = 2):
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._ended = False
        q, stop = self._q, self._stop

        def run() -> None:
            try:
                for item in items:
                    if stop.is_set():
                        return
                    q.put((item, None))
                q.put((_DONE, None))
            except BaseException as exc:  # handed to the consumer
                q.put((_DONE, exc))

        self._thread = threading.Thread(target=run, name="neardup-reader", daemon=True)
        self._thread.start()

    def __next__(self) -> T:
        if self._ended:
            raise StopIteration
        item, exc = self._q.get()
        if item is _DONE:
            self._ended = True
            self._thread.join()
            if exc is not None:
                raise exc
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the producer (at its next item) and wait for it; idempotent."""
        self._ended = True
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._q.get_nowait()
            except queue.Empty:
                self._thread.join(timeout=0.05)

    def __enter__(self) -> Prefetch[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, "_thread"):
            self.close()


class _Raised:
    """An exception of the items' producer, in its place in the sequence."""

    def __init__(self, exc: BaseException):
        self.exc = exc


def ordered_map(fn, items: Iterable, workers: int = 2, window: int = 3) -> Iterator:
    """``map(fn, items)`` on a thread pool, results in input order, at most ``window`` in flight.

    Worth it for work that releases the GIL (numpy, Arrow compute); an
    exception from ``fn`` is raised when its item's turn comes, as is one from
    ``items``. A feeding thread hands the pool the next item as soon as a
    result is taken, so the pool keeps ``window`` items in hand while the
    consumer works on the last one (an ingest's pairs, clusters and commit at
    the end of a batch), not one fewer.
    """
    from concurrent.futures import ThreadPoolExecutor

    slots = threading.Semaphore(window)
    handed: queue.Queue = queue.Queue()
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="neardup-prepare")

    def feed() -> None:
        it = iter(items)
        try:
            while True:
                slots.acquire()  # before taking an item: never more than ``window`` taken and not yet consumed
                if stop.is_set():
                    return
                try:
                    item = next(it)
                except StopIteration:
                    handed.put(_DONE)
                    return
                handed.put(pool.submit(fn, item))
        except BaseException as exc:  # handed to the consumer in its place
            handed.put(_Raised(exc))

    feeder = threading.Thread(target=feed, name="neardup-feeder", daemon=True)
    feeder.start()
    try:
        while True:
            f = handed.get()
            if f is _DONE:
                return
            if isinstance(f, _Raised):
                raise f.exc
            result = f.result()
            slots.release()
            yield result
    finally:
        stop.set()
        slots.release()  # a feeder waiting for a slot sees the stop
        while True:
            try:
                f = handed.get_nowait()
            except queue.Empty:
                break
            if hasattr(f, "cancel"):
                f.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def in_parts(fn: Callable[..., np.ndarray], *rows: np.ndarray, threads: int | None = None) -> np.ndarray:
    """``fn(*rows)`` for a function of aligned row arrays whose result has one value per row,
    computed on ``threads`` (default ``KERNEL_THREADS``) threads over consecutive parts of the rows
    and concatenated in order: the same array as one call. Worth it for compiled kernels that
    release the GIL (``nogil``) and treat each row on its own (pair similarities)."""
    n = rows[0].shape[0]
    threads = KERNEL_THREADS if threads is None else threads
    parts = min(threads * 4, n // MIN_PART) if threads > 1 else 1  # several parts a thread: rows differ in cost
    if parts <= 1:
        return fn(*rows)
    from concurrent.futures import ThreadPoolExecutor

    cuts = np.linspace(0, n, parts + 1).astype(np.int64).tolist()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="neardup-kernel") as pool:
        outs = list(pool.map(lambda se: fn(*(r[se[0] : se[1]] for r in rows)), zip(cuts[:-1], cuts[1:])))
    return np.concatenate(outs)


class _Failed:
    """What reading ahead raised, kept to be raised where its item would have been read."""

    def __init__(self, exc: Exception):
        self.exc = exc


class Peekable:
    """An iterator that can tell whether anything is left, or how little, without losing it. An
    error met while reading ahead is raised where the item would have been read, not earlier (a
    batch that reads ahead to decide where it ends still commits what it read before it)."""

    def __init__(self, it, size: Callable[[object], int] = lambda item: 0):
        self.it = iter(it)
        self.ahead: collections.deque = collections.deque()
        self.size = size  # an item's bytes, for ``ends_within``

    def __iter__(self):
        return self

    def __next__(self):
        if self.ahead:
            item = self.ahead.popleft()
            if isinstance(item, _Failed):
                raise item.exc
            return item
        return next(self.it)

    def put_back(self, item) -> None:
        """Make ``item`` (the one ``__next__`` gave last) the next one again."""
        self.ahead.appendleft(item)

    def exhausted(self) -> bool:
        """Nothing is left."""
        return not self.ahead and self._read_ahead() is None

    def ends_within(self, limit: int) -> bool:
        """What is left comes to at most ``limit`` bytes: read ahead until it passes them or ends (an
        error met reading counts as more)."""
        total = 0
        for item in self.ahead:
            if isinstance(item, _Failed):
                return False
            total += self.size(item)
        while total <= limit:
            item = self._read_ahead()
            if item is None:
                return True
            if isinstance(item, _Failed):
                return False
            total += self.size(item)
        return False

    def _read_ahead(self):
        """The next item, kept for ``__next__`` (or a ``_Failed``), or None at the end."""
        try:
            item = next(self.it)
        except StopIteration:
            return None
        except Exception as exc:
            item = _Failed(exc)
        self.ahead.append(item)
        return item
