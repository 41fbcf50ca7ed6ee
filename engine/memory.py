"""The memory plan of a write: one size (``neardup ingest --memory``) scales every budget it holds.

Ingest keeps in memory, besides a fixed part (Python, numba's compiled
kernels, the DuckDB, Arrow and LMDB libraries: about 0.4 GB), what these
budgets allow. Each is its module's constant at the default plan (4 GB) and
scales in proportion to the size given:

=================================  =========================  ===============
budget                             where                      at 4 GB
=================================  =========================  ===============
input read per batch               ``ingest`` (``--batch-mb``) 128 MB
DuckDB's buffer pool               ``store.index``            1 GB
partners' values kept per batch    ``pairs.values``           256 MiB
candidate rows per slice           ``pairs.batch``            4,000,000
neighbour rows per slice           ``neighbours``             4,000,000
freed memory kept for reuse        ``keep_freed_memory``      1 GiB (CLI ingest)
=================================  =========================  ===============

Pages of the postings the process maps while it reads them are file-backed
but counted in the resident size until released: the run files
(``store.runs``) are read ``LOOKUP_SPAN`` entries at a time (about 48 MB
mapped) and released in between, LMDB's after every 2,048 keys or values
read and 16,384 records written. The catalog file's pages are dropped from
the page cache after each checkpoint (``store.catalog.drop_cached``): not
the process's memory, but the machine's. What it does not bound: a single
document or posting list larger than a slice (a slice holds at least one
document).
docs/benchmarks.md has the peak resident sizes measured at several sizes.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator
from dataclasses import dataclass

#: the plan's size when none is given
DEFAULT_MEMORY = 4_000_000_000
#: text (MB read) committed per batch by a plan of ``DEFAULT_MEMORY``: a bigger input is committed as
#: several batches (``neardup.ingest``; scaled with the plan)
DEFAULT_BATCH_MB = 128
#: below this the fixed part dominates and the budgets would slice batches into crumbs
MIN_MEMORY = 500_000_000

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


@dataclass(frozen=True)
class MemoryPlan:
    """Budgets for ``total`` bytes; ``scale`` multiplies each module's default budget."""

    total: int = DEFAULT_MEMORY

    def __post_init__(self) -> None:
        if self.total < MIN_MEMORY:
            raise ValueError(f"memory {self.total:,} bytes is below the least neardup plans for ({MIN_MEMORY // 10**6} MB)")

    @property
    def scale(self) -> float:
        return self.total / DEFAULT_MEMORY

    def scaled(self, default: int) -> int:
        """A budget whose value at the default plan is ``default``."""
        return max(1, int(default * self.scale))


_current: contextvars.ContextVar[MemoryPlan] = contextvars.ContextVar("neardup_memory_plan", default=MemoryPlan())


def current() -> MemoryPlan:
    """The plan of the write in progress (the default one outside ``using``)."""
    return _current.get()


@contextlib.contextmanager
def using(plan: MemoryPlan) -> Iterator[MemoryPlan]:
    """Make ``plan`` the current one for the calls inside the block."""
    token = _current.set(plan)
    try:
        yield plan
    finally:
        _current.reset(token)


def parse_size(text: str) -> int:
    """Bytes of a size such as ``2GB``, ``1.5 GiB`` or ``750MB`` (a bare number is bytes)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).upper() if m else None
    if m is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size: give a number with a unit, e.g. 2GB, 1.5GiB or 750MB")
    return int(float(m.group(1)) * _UNITS[unit])


#: glibc ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
#: free memory at the top of the heap an ingest keeps for reuse at the default plan (scaled with it)
KEEP_FREED = 1 << 30


def one_malloc_arena() -> bool:
    """Have every thread of this process allocate from glibc's main arena.

    By default glibc gives each thread that allocates an arena of its own (up to eight per core),
    so what one thread frees (a chunk's arrays, freed by the main thread once stored) is not
    reused by the thread that allocates next (a preparing thread), and each arena keeps its own
    free memory: more fresh pages, each faulted in and zeroed by the kernel, and a larger resident
    size. With one arena, ``keep_freed_memory``'s heap serves them all: on the real site's
    22,000 pages an ingest took 3-5% less time and CPU and 17% less peak RSS (docs/benchmarks.md).
    A thread picks its arena at its first allocation, so this must run before the libraries that
    start threads load (numpy's OpenBLAS starts its own when imported): the CLI calls it when
    ``neardup.cli`` is imported (``import neardup`` loads no array library). Returns False where
    the C library has no ``mallopt`` (not glibc), which changes nothing."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_ARENA_MAX, 1))


def keep_freed_memory(plan: MemoryPlan | None = None) -> bool:
    """Let this process reuse the memory it frees instead of handing it back to the kernel at once.

    A batch allocates and frees arrays of tens to hundreds of MB many times
    (shingle hashes, sketches, candidate rows, pair codes). glibc serves each
    large one with a fresh ``mmap`` and unmaps it when it is freed, so every
    one costs page faults and the kernel's zeroing of every page again, and
    Arrow's default pool (mimalloc) returns freed pages within milliseconds
    too: on the real site's 22,000 pages the kernel's zeroing of fresh pages
    was a fifth of the ingest's CPU (``perf``, ``clear_page_erms``). Here
    glibc's large blocks come from its heap (``M_MMAP_MAX`` 0), which keeps
    up to ``plan.scaled(KEEP_FREED)`` of free memory at its top
    (``M_TRIM_THRESHOLD``; 1 GiB at the default 4 GB plan), and Arrow
    allocates through the same malloc. For a process that runs one ingest
    (the CLI's), set before its batches; returns False where the C library
    has no ``mallopt`` (not glibc), which changes nothing else."""
    import ctypes

    import pyarrow as pa

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    keep = min((plan or MemoryPlan()).scaled(KEEP_FREED), (1 << 31) - 1)
    ok = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, keep))
    pa.set_memory_pool(pa.system_memory_pool())
    return ok
