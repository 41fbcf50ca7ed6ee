"""``skip_numba_blas_probe``: numba's import of ``scipy.linalg`` is skipped, and only that one.

Each case runs in a fresh interpreter (the probe runs once per process) with a stand-in SciPy
first on the path, whose ``scipy.linalg`` leaves a mark when it is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.fixture()
def fake_scipy(tmp_path: Path) -> Path:
    pkg = tmp_path / "scipy"
    (pkg / "linalg").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import os\n__version__ = '1.99.0'\n"
        "if os.environ.get('SCIPY_MARK'):\n    open(os.environ['SCIPY_MARK'], 'a').write('scipy\\n')\n"
    )
    (pkg / "linalg" / "__init__.py").write_text(
        "import os\nopen(os.environ['LINALG_MARK'], 'a').write('imported\\n')\n"
    )
    return tmp_path


def _run(fake: Path, code: str, scipy_mark: bool = False) -> str:
    mark = fake / "mark.txt"
    mark.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), *filter(None, [os.environ.get("PYTHONPATH")])]),
               LINALG_MARK=str(mark), SCIPY_MARK=str(mark) if scipy_mark else "")
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, env=env, cwd=fake)
    return mark.read_text() if mark.exists() else ""


KERNEL = """
import numpy as np
from neardup import kernels
assert kernels.occurring(np.array([3, 1, 3], dtype=np.uint64)).tolist() == [1, 3]
"""


def test_numba_imports_scipy_linalg_at_its_first_kernel_without_the_skip(fake_scipy: Path) -> None:
    assert _run(fake_scipy, KERNEL) == "imported\n"


def test_the_skip_keeps_scipy_linalg_out_and_importable_afterwards(fake_scipy: Path) -> None:
    code = "\n".join([
        "import sys",
        "from neardup.blas_probe import skip_numba_blas_probe",
        "skip_numba_blas_probe()",
        "skip_numba_blas_probe()  # idempotent",
        KERNEL,
        "import numba.np.arraymath as am",
        "assert am._HAVE_BLAS is False",
        "assert 'scipy.linalg' not in sys.modules  # neither imported nor left hidden",
        "import scipy.linalg  # the program's own import still works (and leaves the mark)",
    ])
    assert _run(fake_scipy, code) == "imported\n"


def test_the_cli_skips_the_probe(fake_scipy: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"url": "u1", "text": "one two three four five six seven eight nine ten eleven"}\n')
    code = f"""
    import sys
    sys.argv = ["neardup", "ingest", "-q", "--index", {str(tmp_path / 'idx')!r}, {str(corpus)!r}]
    from neardup.cli.app import main
    main()
    """
    assert _run(fake_scipy, code) == ""
    assert (tmp_path / "idx" / "catalog.duckdb").exists()


def test_numba_imports_scipy_for_its_version_check_without_the_skip(fake_scipy: Path) -> None:
    assert _run(fake_scipy, "import numba", scipy_mark=True) == "scipy\n"


def test_the_cli_package_keeps_scipy_out_of_numbas_import_and_importable_afterwards(fake_scipy: Path) -> None:
    code = "\n".join([
        "import sys",
        "import neardup.cli",
        "import numba",
        "assert 'scipy' not in sys.modules  # neither imported nor left hidden",
        "import scipy  # the program's own import still works (and leaves the mark)",
        "assert scipy.__version__ == '1.99.0'",
    ])
    assert _run(fake_scipy, code, scipy_mark=True) == "scipy\n"
    assert _run(fake_scipy, code.replace("import scipy  #", "pass  #").replace("assert scipy", "# "), scipy_mark=True) == ""
