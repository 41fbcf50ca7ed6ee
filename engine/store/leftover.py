"""What a process that ends as soon as its command is done leaves for its exit to close.

Closing the catalog's connection after a write took 55-65 ms of an ingest of the real site's
22,000 pages (DuckDB gives back its buffers and stops its threads; nothing is written: the writer
has checkpointed the catalog before, and it does not checkpoint on shutdown). The CLI ends its
process with ``os._exit`` right after a command, and the kernel then does the same at no cost
to the command: it closes the file and drops the locks. So the CLI calls ``leave_to_exit()``, and a
writer's or a reader's end then hands its connection's closing (and the writer lock's release,
which must not come before it: another writer could otherwise take the lock and find DuckDB's
still held) to ``close_or_leave``, which keeps them instead of running them.

What is left is closed before this process opens an index again (``close_left``, called by
every open of a catalog connection and of the writer lock): a command that writes several inputs
one after another, or reads after writing, opens each as before. A process that has not called
``leave_to_exit`` (the library's users, the tests) closes everything at once, as it did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_leaving = False
_left: list[Callable[[], None]] = []
_lock = threading.Lock()


def leave_to_exit() -> None:
    """This process ends with ``os._exit`` once its command is done: leave closings to it."""
    global _leaving
    _leaving = True


def close_or_leave(*closers: Callable[[], None]) -> None:
    """Run ``closers`` in order, or keep them for ``close_left`` or the process's exit."""
    if _leaving:
        with _lock:
            _left.extend(closers)
        return
    for close in closers:
        close()


def close_left() -> None:
    """Run what was left (in the order it was left); the first error is raised once all have run."""
    with _lock:
        todo = list(_left)
        _left.clear()
    failed: BaseException | None = None
    for close in todo:
        try:
            close()
        except BaseException as exc:  # the others still run: a lock is released after a failed close
            failed = failed or exc
    if failed is not None:
        raise failed


def left() -> int:
    """How many closings wait (for tests)."""
    return len(_left)
