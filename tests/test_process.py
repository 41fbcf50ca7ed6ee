"""The CLI process's set-up: ``import neardup`` loads no array library, so ``neardup.cli`` sets
glibc's malloc to one arena (``neardup.memory.one_malloc_arena``) before numpy, Arrow and DuckDB
start their threads."""

from __future__ import annotations

import subprocess
import sys

import pytest

_ARENAS = """
import ctypes, sys, threading
{setup}
import numpy as np
def work():
    keep = [np.ones(200_000) for _ in range(20)]
threads = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
sys.stderr.flush()
ctypes.CDLL(None).malloc_stats()
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_importing_neardup_or_its_cli_package_loads_no_array_library():
    code = ("import sys, neardup, neardup.cli; "
            "print(sorted(m for m in ('numpy', 'pyarrow', 'duckdb', 'numba') if m in sys.modules))")
    assert _run(code).stdout.strip() == "[]"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_cli_process_allocates_from_one_malloc_arena():
    """glibc's ``malloc_stats`` lists an arena per thread that allocated; once ``neardup.cli`` is
    imported, threads share the first."""
    tuned = _run(_ARENAS.format(setup="import neardup.cli"))
    plain = _run(_ARENAS.format(setup=""))
    assert tuned.returncode == 0 and plain.returncode == 0, tuned.stderr + plain.stderr
    assert tuned.stderr.count("Arena ") == 1, tuned.stderr
    assert plain.stderr.count("Arena ") > 1  # the check can tell the two apart
