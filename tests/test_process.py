"""The CLI process's set-up: ``import neardup`` loads no array library, so ``neardup.cli`` sets
glibc's malloc to one arena (``neardup.memory.one_malloc_arena``) and numpy's OpenBLAS to one
thread before numpy, Arrow and DuckDB start their threads."""

from __future__ import annotations

import os
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


def _run(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_importing_neardup_or_its_cli_package_loads_no_array_library():
    code = ("import sys, neardup, neardup.cli; "
            "print(sorted(m for m in ('numpy', 'pyarrow', 'duckdb', 'numba') if m in sys.modules))")
    assert _run(code).stdout.strip() == "[]"


def test_the_commands_module_loads_no_compiled_kernels():
    """Every command's start imports ``neardup.cli.app`` with all its commands' modules: numba and the
    kernel modules load with the commands that run kernels (an ingest loads them in a thread while the
    index opens), not with ``neardup sql`` (0.36 s with it, against 0.53 s when the delete command's
    module loaded the concept search: docs/benchmarks.md)."""
    code = ("import sys, neardup, neardup.cli, neardup.cli.app; "
            "print(sorted(m for m in ('numba', 'neardup.neighbours', 'neardup.pairs', 'neardup.kernels') if m in sys.modules))")
    assert _run(code).stdout.strip() == "[]"


def test_the_version_is_the_installed_packages_and_read_without_its_metadata():
    """``neardup.__version__`` is what the installed package's metadata says (pyproject.toml reads
    it from the package), and ``import neardup`` does not import ``importlib.metadata`` for it."""
    from importlib.metadata import version

    import neardup

    assert neardup.__version__ == version("neardup")
    assert _run("import sys, neardup; print('importlib.metadata' in sys.modules)").stdout.strip() == "False"


def test_the_commands_module_loads_without_garbage_collections_and_leaves_the_collector_on():
    """``neardup.cli.app`` and all it imports load with the cyclic collector off (its imports
    triggered about 140 collections), then the collector is on again, with its thresholds kept."""
    code = ("import gc, neardup, neardup.cli; n = [0]; "
            "gc.callbacks.append(lambda phase, info: n.__setitem__(0, n[0] + (phase == 'start'))); "
            "before = gc.get_threshold(); import neardup.cli.app; "
            "print(n[0], gc.isenabled(), gc.get_threshold() == before, gc.get_freeze_count() > 0)")
    assert _run(code).stdout.split() == ["0", "True", "True", "True"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_cli_process_allocates_from_one_malloc_arena():
    """glibc's ``malloc_stats`` lists an arena per thread that allocated; once ``neardup.cli`` is
    imported, threads share the first."""
    tuned = _run(_ARENAS.format(setup="import neardup.cli"))
    plain = _run(_ARENAS.format(setup=""))
    assert tuned.returncode == 0 and plain.returncode == 0, tuned.stderr + plain.stderr
    assert tuned.stderr.count("Arena ") == 1, tuned.stderr
    assert plain.stderr.count("Arena ") > 1  # the check can tell the two apart


_THREADS = """
import os
{setup}
import numpy
print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2, reason="threads counted in /proc, on 2+ cores")
def test_the_cli_process_starts_no_blas_threads_unless_the_user_asks():
    """numpy's OpenBLAS starts a thread per core at import; with ``neardup.cli`` imported first it
    starts none, and a value the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    tuned = _run(_THREADS.format(setup="import neardup.cli"), env).stdout.split()
    plain = _run(_THREADS.format(setup=""), env).stdout.split()
    asked = _run(_THREADS.format(setup="import neardup.cli"), {**env, "OPENBLAS_NUM_THREADS": "2"}).stdout.split()
    assert tuned == ["1", "1"]
    assert int(plain[0]) > 1  # the check can tell the two apart
    assert asked[1] == "2"


_HUGEPAGES = """
import os
{setup}
import numpy._core.multiarray as m
print(m._get_madvise_hugepage(), os.environ.get("NUMPY_MADVISE_HUGEPAGE"))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="numpy asks for huge pages on Linux only")
def test_the_cli_process_asks_for_no_huge_pages_unless_the_user_does():
    """numpy asks the kernel for transparent huge pages for its large arrays; with ``neardup.cli``
    imported first it does not, and a value the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    tuned = _run(_HUGEPAGES.format(setup="import neardup.cli"), env).stdout.split()
    plain = _run(_HUGEPAGES.format(setup=""), env).stdout.split()
    asked = _run(_HUGEPAGES.format(setup="import neardup.cli"), {**env, "NUMPY_MADVISE_HUGEPAGE": "1"}).stdout.split()
    assert tuned == ["False", "0"]
    assert plain[0] == "True"  # the check can tell the two apart
    assert asked == ["True", "1"]
