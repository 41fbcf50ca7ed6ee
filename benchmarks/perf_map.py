"""Name neardup's compiled kernels in a Linux ``perf`` profile.

numba's kernels run as code generated at run time, so ``perf report`` shows their samples as
``[JIT] tid N`` at bare addresses. This script runs one neardup command (the CLI, in this
process) and, when the process exits, writes ``/tmp/perf-<pid>.map`` (perf's map format: start,
size, name, one line per entry point). perf then names the samples:

    perf record -F 499 -o /tmp/perf.data -- python benchmarks/perf_map.py ingest --quiet --index /tmp/i pages.jsonl
    perf report -i /tmp/perf.data --sort dso,sym

Each kernel that has run is named ``<module>.<function>``; its Python-facing wrapper
``<module>.<function>:w``. The sizes are approximate: an entry covers the code up to the next entry
point, so a function's samples may land on the name of its own wrapper (add the two up). Kernels
whose dispatcher is gone when the process ends are not named.
"""

from __future__ import annotations

import gc
import os
import sys

#: at most this many bytes of code are attributed to an entry point (the last one, or before a gap)
MAX_SPAN = 1 << 20


def kernel_entries() -> list[tuple[int, str]]:
    """``(address, name)`` of every loaded numba kernel's entry point and wrapper, by address."""
    from numba.core.registry import CPUDispatcher

    out = []
    for obj in _dispatchers(CPUDispatcher):
        name = f"{obj.py_func.__module__.rsplit('.', 1)[-1]}.{obj.py_func.__name__}"
        for cres in obj.overloads.values():
            for symbol, tag in ((cres.fndesc.llvm_func_name, ""), (cres.fndesc.llvm_cpython_wrapper_name, ":w")):
                try:
                    address = cres.library.get_pointer_to_function(symbol)
                except Exception:  # noqa: BLE001 - a symbol the library does not export: not named
                    continue
                if address:
                    out.append((address, name + tag))
    return sorted(out)


def _dispatchers(kind: type) -> list:
    """Every live ``kind`` object: those the collector tracks, and those the modules hold (the
    CLI freezes the objects made at import, ``gc.freeze``, and ``gc.get_objects`` leaves frozen
    objects out: without this the kernels of modules imported before the freeze went unnamed)."""
    found = {id(o): o for o in gc.get_objects() if isinstance(o, kind)}
    for module in list(sys.modules.values()):
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, kind):
                found.setdefault(id(value), value)
    return list(found.values())


def write_map(path: str | None = None) -> str:
    """Write perf's map of this process's kernels; returns its path."""
    path = path or f"/tmp/perf-{os.getpid()}.map"
    entries = kernel_entries()
    with open(path, "w") as fh:
        for i, (address, name) in enumerate(entries):
            gap = entries[i + 1][0] - address if i + 1 < len(entries) else MAX_SPAN
            fh.write(f"{address:x} {min(gap, MAX_SPAN):x} {name}\n")
    return path


def main() -> None:
    import atexit

    atexit.register(write_map)  # the CLI runs the exit functions before it leaves (``os._exit``)
    sys.argv = ["neardup", *sys.argv[1:]]
    from neardup.cli.app import main as cli

    cli()


if __name__ == "__main__":
    main()
