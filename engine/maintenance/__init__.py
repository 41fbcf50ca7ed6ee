"""Keeping an index safe: ``neardup backup`` (``backup``) and ``neardup check`` (``check``).

Both hold the index's writer lock while they read it, so that no batch can
start meanwhile (readers such as ``neardup sql`` go on working).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from ..errors import IndexLocked
from ..store.index import Index, WriterLock

#: seconds between two attempts to take a held writer lock
LOCK_POLL = 0.5


@contextlib.contextmanager
def writer_lock(index: Index, wait: float = 0.0) -> Iterator[WriterLock]:
    """Hold ``index``'s writer lock; a held one is waited for up to ``wait`` seconds, then
    ``IndexLocked`` (naming the writer) is raised. Neither command writes to the index, so a
    read-only folder is no obstacle (``WriterLock.acquire``'s ``read_only_ok``)."""
    index.require()
    lock = WriterLock(index.path)
    deadline = time.monotonic() + max(wait, 0.0)
    while True:
        try:
            lock.acquire(read_only_ok=True)
            break
        except IndexLocked as exc:
            if time.monotonic() >= deadline:
                raise IndexLocked(exc.args[0], hint=f"{IndexLocked.hint}; or pass --wait SECONDS to wait for it") from None
            time.sleep(min(LOCK_POLL, max(deadline - time.monotonic(), 0.01)))
    try:
        yield lock
    finally:
        lock.release()
