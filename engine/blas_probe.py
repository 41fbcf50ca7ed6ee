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

import sys
from collections.abc import Callable

from .import_hooks import around_import

_TARGET = "numba.np.arraymath"
_HIDDEN = "scipy.linalg"


def _hidden(run: Callable[[], None], module) -> None:
    """Runs ``numba.np.arraymath``'s code with ``scipy.linalg`` hidden."""
    if _HIDDEN in sys.modules:  # already imported: the probe is cheap, nothing to hide
        run()
        return
    sys.modules[_HIDDEN] = None  # ``import scipy.linalg...`` now raises ImportError at once
    try:
        run()
    finally:
        if sys.modules.get(_HIDDEN, 0) is None:
            del sys.modules[_HIDDEN]


def skip_numba_blas_probe() -> None:
    """Skip numba's BLAS probe in this process (see the module's text); idempotent. Does nothing
    once ``numba.np.arraymath`` is imported (the probe has then run)."""
    around_import(_TARGET, _hidden)
