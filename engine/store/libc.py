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
