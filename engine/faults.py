"""Crash points for the crash-consistency tests.

``NEARDUP_CRASH_AT=<name>`` (or ``<name>@N``, the N-th time) in the
environment makes the process kill itself with SIGKILL when it reaches the
named point, exactly like a power cut or
``kill -9`` there. Unset (always, outside tests), a crash point costs one
dictionary lookup.
"""

from __future__ import annotations

import os
import signal

_TARGET = os.environ.get("NEARDUP_CRASH_AT")

#: Every crash point, in the order an ingest passes them.
POINTS = (
    "batch-start",
    "after-first-chunk",
    "before-pairs",
    "duckdb-before-commit",
    "lmdb-mid-write",  # an ingest fills its postings beside the catalog's commit: before or after it
    "duckdb-after-commit",
    "lmdb-before-commit",
    "lmdb-after-commit",
    "before-done",
    "after-batch",
)
#: Crash points only ``neardup rebuild`` passes (it passes "batch-start" and "lmdb-mid-write" too).
REBUILD_POINTS = ("rebuild-postings-done",)
#: A crash point of the background run merges (after each block a merge writes), reached only
#: while a merge is due (``neardup.store.runs``).
COMPACT_POINT = "compact-block"


_NAME, _, _NTH = (_TARGET or "").partition("@")
_seen = [0]


def crashpoint(name: str) -> None:
    """Die here if ``NEARDUP_CRASH_AT`` names this point (``name@N``: the N-th time it is reached)."""
    if _NAME == name:
        _seen[0] += 1
        if _seen[0] >= int(_NTH or 1):
            os.kill(os.getpid(), signal.SIGKILL)
