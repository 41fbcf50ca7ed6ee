"""The ``neardup`` command line: a thin typer layer over the engine."""

import gc
import os

from neardup.blas_probe import skip_numba_scipy_check
from neardup.import_hooks import around_import
from neardup.kernel_cache import load_kernels_lean
from neardup.memory import one_malloc_arena

# this process is neardup's: every thread allocates from one malloc arena, set before numpy, Arrow
# and DuckDB load and start their threads (neardup.memory.one_malloc_arena)
one_malloc_arena()
# No neardup stage calls BLAS, and its preparing threads already use every core: numpy's OpenBLAS
# would otherwise start a thread per core when imported, which spins a while before it sleeps
# (about 0.1 s of CPU of a 2.2 s ingest of the real site's 22,000 pages: docs/benchmarks.md).
# A value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# numpy asks the kernel for transparent huge pages for every array of 4 MB or more. Each huge page
# is a fresh 2 MB block the kernel zeroes at its first touch, and on a virtual machine that hands
# its free 2 MB blocks back to the host (free page reporting) that touch costs the host's fault as
# well: a 2 MB page took about 4 ms, twenty times a small page's cost per byte. A late batch of
# the million (docs/benchmarks.md) spent 1.0 s of its 9.7 s of CPU zeroing 240 of them; without
# them its system CPU fell by 0.6 s. A value the user set is kept.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
# numba, which loads with the CLI's modules, would import SciPy (where installed) to check its
# version (neardup.blas_probe)
skip_numba_scipy_check()
# ... and its cached kernels load lean, and kernels compile with the CPU's widest vectors
# (neardup.kernel_cache), installed before the commands' module imports numba: its target context,
# whose features the vector width is part of, is made during those imports
load_kernels_lean()


def _without_collections(run, module) -> None:
    """Runs the commands' module (``neardup.cli.app``), and every import it makes, with the cyclic
    garbage collector off: those imports (typer, Arrow, DuckDB, numba and the engine) create
    objects by the hundred thousand and few cycles, and triggered about 140 collections of the
    real site's ingest's 160, 45-90 ms holding the interpreter's lock before anything else could
    start. The objects made are then frozen (``gc.freeze``: the collector leaves them alone, as
    it would have after they survived a few collections) and the collector is on again if it was."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        run()
    finally:
        gc.freeze()
        if was_on:
            gc.enable()


around_import("neardup.cli.app", _without_collections)
