"""Tables a process would otherwise compute at its start, kept in a file between processes.

The text normalisation's tables (``text._word_table``, ``text._careful_table``) are functions of
the running Python's Unicode database and of Arrow's case mapping, over every code point: 0.22 s
of Python at each process's start, beside the index's opening and numba's first load. They are
kept in ``__pycache__`` beside this module (where numba keeps the compiled kernels), in a file
named by everything they depend on, so a file is never read for other versions; a file that is
missing, unreadable or not what was written is computed again (and rewritten when the folder is
writable). The tables are the same either way.
"""

from __future__ import annotations

import os
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

#: the layout of a file; a change of what a table holds must change it
FORMAT = 2
FOLDER = Path(__file__).parent / "__pycache__"


def path_for(name: str) -> Path:
    """The file of table set ``name`` for this Unicode database, Arrow and ``FORMAT``."""
    return FOLDER / f"{name}.tables{FORMAT}.unicode-{unicodedata.unidata_version}.arrow-{pa.__version__}.npz"


def cached(name: str, compute: Callable[[], dict[str, np.ndarray]],
           check: Callable[[dict[str, np.ndarray]], bool]) -> dict[str, np.ndarray]:
    """``compute()`` (named arrays), read from its file when that passes ``check``, else computed
    and written to it (atomically; not at all where the folder is not writable)."""
    path = path_for(name)
    try:
        with np.load(path, allow_pickle=False) as f:
            got = {k: f[k] for k in f.files}
        if check(got):
            return got
    except Exception:  # missing, damaged, cut short or not an npz file: computed again
        pass
    arrays = compute()
    try:
        FOLDER.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=FOLDER, prefix=f".{name}-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **arrays)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:  # a read-only install: computed in each process, as before
        pass
    return arrays
