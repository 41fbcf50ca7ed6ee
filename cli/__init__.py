"""The ``neardup`` command line: a thin typer layer over the engine."""

import os

from neardup.memory import one_malloc_arena

# this process is neardup's: every thread allocates from one malloc arena, set before numpy, Arrow
# and DuckDB load and start their threads (neardup.memory.one_malloc_arena)
one_malloc_arena()
# No neardup stage calls BLAS, and its preparing threads already use every core: numpy's OpenBLAS
# would otherwise start a thread per core when imported, which spins a while before it sleeps
# (about 0.1 s of CPU of a 2.2 s ingest of the real site's 22,000 pages: docs/benchmarks.md).
# A value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
