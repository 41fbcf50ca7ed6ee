"""Linux libc calls the stores use where Python has no binding (``madvise`` on a raw address,
``sync_file_range``): looked up once, None elsewhere (the callers then skip what they would do)."""

from __future__ import annotations

import ctypes
import sys


def function(name: str, argtypes: tuple, restype=ctypes.c_int):
    """libc's ``name`` with its argument and result types on Linux, else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = argtypes
    fn.restype = restype
    return fn


_sync_file_range = function("sync_file_range", (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint))
_SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int, offset: int = 0, n: int = 0) -> bool:
    """Start writing ``n`` bytes of file ``fd`` from ``offset`` (``n`` 0: to the end) to disk without
    waiting for them (``sync_file_range(..., SYNC_FILE_RANGE_WRITE)``), so a later ``fsync`` waits
    for what was written since only. Advice: returns whether it was given (not without the call,
    or on an error, which only loses the head start)."""
    if _sync_file_range is None:
        return False
    return _sync_file_range(fd, offset, n, _SYNC_FILE_RANGE_WRITE) == 0
