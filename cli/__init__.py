"""The ``neardup`` command line: a thin typer layer over the engine."""

from neardup.memory import one_malloc_arena

# this process is neardup's: every thread allocates from one malloc arena, set before numpy, Arrow
# and DuckDB load and start their threads (neardup.memory.one_malloc_arena)
one_malloc_arena()
