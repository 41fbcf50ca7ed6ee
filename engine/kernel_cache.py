"""numba's cached kernels loaded without its compiler's implementations, in neardup's processes.

numba loads a kernel compiled by an earlier process (``cache=True``) in ``Cache.load_overload``,
which first refreshes the target context: it imports the modules that implement numba's
built-in functions for its compiler (``numba.cpython.*``, ``numba.np.*``, ``numba.typed``, ...)
and installs their registries, in the typing context too. Loading compiled code needs none of
that, only numba's runtime (NRT), which the refresh also starts. In the CLI's ingest of a real
site (22,000 pages), where every kernel comes from the cache, the first kernel took 122 ms to
load with the refresh and 55 ms without it, all of it holding the interpreter's lock while the
index opens and the first chunk is read.

``load_kernels_lean()`` replaces ``Cache.load_overload`` with one that starts NRT and loads the
cached code. Where the cache has no code for the signature, or loading it fails, numba's own
method runs instead: it refreshes the context and returns what it finds, and numba then compiles
(its compiler refreshes the contexts itself before every compile, so a kernel compiled later in
the process is compiled as before). The CLI calls it at its start, as it skips the BLAS probe
(``neardup.blas_probe``); a program that imports neardup as a library keeps numba's behaviour
unless it calls it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from .import_hooks import around_import

_TARGET = "numba.core.caching"
_lock = threading.Lock()


def _lean(module) -> None:
    """Give ``Cache`` (of the imported ``numba.core.caching``) the lean ``load_overload``."""
    cache = getattr(module, "Cache", None)
    original = getattr(cache, "load_overload", None)
    if original is None or not hasattr(cache, "_load_overload"):  # a numba unlike the one this was written for
        return
    if getattr(original, "lean", False):  # given already
        return

    def load_overload(self, sig, target_context):
        try:
            from numba.core.runtime import rtsys

            rtsys.initialize(target_context)  # the runtime the compiled code calls (what the refresh started first)
            got = self._load_overload(sig, target_context)
        except Exception:  # noqa: BLE001 - numba's own load below reports what it meets
            got = None
        return got if got is not None else original(self, sig, target_context)

    load_overload.__doc__ = original.__doc__
    load_overload.lean = True
    cache.load_overload = load_overload


def _after(run: Callable[[], None], module) -> None:
    run()
    _lean(module)


def load_kernels_lean() -> None:
    """Load cached kernels without refreshing numba's target context, in this process (see the
    module's text); idempotent. Installed when ``numba.core.caching`` is imported, or at once if it
    is already."""
    if not around_import(_TARGET, _after):
        with _lock:  # two threads must not both wrap numba's method
            _lean(sys.modules[_TARGET])
