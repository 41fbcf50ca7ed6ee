"""numba's two looks at SciPy, skipped in neardup's own processes: its BLAS probe and its
version check.

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

numba's own import also imports SciPy, where it is installed, only to check that it is not older
than 1.0 (``numba._ensure_critical_deps``): 15-40 ms on the CLI's main thread before anything else
can start. ``skip_numba_scipy_check()`` hides ``scipy`` in the same way while ``numba``'s module
code runs. Nothing of numba's depends on it: its linear algebra imports SciPy when it is compiled.
The CLI's package (``neardup.cli``) calls it, since numba loads with the CLI's modules.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from .import_hooks import around_import

_TARGET = "numba.np.arraymath"
_HIDDEN = "scipy.linalg"


def _hiding(hidden: str) -> Callable[[Callable[[], None], object], None]:
    """What runs a module's code with module ``hidden`` reading as absent."""

    def around(run: Callable[[], None], module) -> None:
        if hidden in sys.modules:  # already imported: the look is cheap, nothing to hide
            run()
            return
        sys.modules[hidden] = None  # ``import <hidden>...`` now raises ImportError at once
        try:
            run()
        finally:
            if sys.modules.get(hidden, 0) is None:
                del sys.modules[hidden]

    return around


_hidden = _hiding(_HIDDEN)
_scipy_hidden = _hiding("scipy")


def skip_numba_blas_probe() -> None:
    """Skip numba's BLAS probe in this process (see the module's text); idempotent. Does nothing
    once ``numba.np.arraymath`` is imported (the probe has then run)."""
    around_import(_TARGET, _hidden)


def skip_numba_scipy_check() -> None:
    """Skip numba's import of SciPy for its version check in this process (see the module's
    text); idempotent. Does nothing once ``numba`` is imported."""
    around_import("numba", _scipy_hidden)
