"""numba's BLAS probe, skipped in neardup's own processes.

The first compiled kernel a process loads makes numba import its array functions
(``numba.np.arraymath``), and that module asks at import whether a BLAS is at hand by
importing ``scipy.linalg.cython_blas``: the whole of ``scipy.linalg``, which with SciPy 1.17
also imports NumPy's ``f2py`` and SciPy's array-API layer. Where SciPy is installed (datasketch
brings it) that is 0.3 s of a one-record ingest's 1.7 s, all of it under the interpreter's lock.
No neardup kernel calls BLAS. The answer only chooses how numba's own ``np.correlate`` and
``np.convolve`` multiply (``np.dot`` or a loop: the same sums), and every linear-algebra function
of numba still imports SciPy when it is compiled.

``skip_numba_blas_probe()`` makes that one import fail fast: while ``numba.np.arraymath`` runs
its module code, ``scipy.linalg`` reads as absent (``None`` in ``sys.modules``); right after, it
is importable again as before. The CLI calls it at its start, since that process is neardup's
alone; a program that imports neardup as a library keeps numba's behaviour unless it calls it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading

_TARGET = "numba.np.arraymath"
_HIDDEN = "scipy.linalg"
_installed = False
_lock = threading.Lock()


class _Loader(importlib.abc.Loader):
    """Runs the real loader of ``numba.np.arraymath`` with ``scipy.linalg`` hidden."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module) -> None:
        if _HIDDEN in sys.modules:  # already imported: the probe is cheap, nothing to hide
            self.real.exec_module(module)
            return
        sys.modules[_HIDDEN] = None  # ``import scipy.linalg...`` now raises ImportError at once
        try:
            self.real.exec_module(module)
        finally:
            if sys.modules.get(_HIDDEN, 0) is None:
                del sys.modules[_HIDDEN]


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``numba.np.arraymath`` as the path finder does, with ``_Loader`` around its loader."""

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def skip_numba_blas_probe() -> None:
    """Skip numba's BLAS probe in this process (see the module's text); idempotent. Does nothing
    once ``numba.np.arraymath`` is imported (the probe has then run)."""
    global _installed
    with _lock:
        if _installed or _TARGET in sys.modules:
            return
        sys.meta_path.insert(0, _Finder())
        _installed = True
