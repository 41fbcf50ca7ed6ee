"""Code run around one module's import, installed before the module is imported.

The CLI changes two things numba does when it first loads a kernel (``neardup.blas_probe``,
``neardup.kernel_cache``). Importing numba to change them would cost its import (about 0.1 s)
on the CLI's main thread, where it otherwise happens in the thread that loads the first kernels
while the index opens. ``around_import`` instead puts a finder first on ``sys.meta_path``: when
the module is imported, by whichever thread, its code runs inside the given function.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable
from types import ModuleType

#: ``around(run, module)``: must call ``run()`` once, which executes the module's code
Around = Callable[[Callable[[], None], ModuleType], None]


class _Loader(importlib.abc.Loader):
    """Runs the real loader's ``exec_module`` inside ``around``."""

    def __init__(self, real: importlib.abc.Loader, around: Around) -> None:
        self.real = real
        self.around = around

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module) -> None:
        self.around(lambda: self.real.exec_module(module), module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds module ``name`` as the path finder does, with ``_Loader`` around its loader."""

    def __init__(self, name: str, around: Around) -> None:
        self.name = name
        self.around = around

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self.around)
        return spec


_installed: set[tuple[str, Around]] = set()
_lock = threading.Lock()


def around_import(name: str, around: Around) -> bool:
    """Run module ``name``'s import inside ``around`` (once: a module is executed once); idempotent
    and safe from several threads. Returns whether ``around`` will run or has run: False, installing
    nothing, when the module was imported before it was asked for."""
    with _lock:
        if (name, around) in _installed:
            return True
        if name in sys.modules:
            return False
        sys.meta_path.insert(0, _Finder(name, around))
        _installed.add((name, around))
        return True
