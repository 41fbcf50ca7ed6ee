"""numba's cached kernels loaded without its compiler's implementations, and their code without
its symbols read through LLVM, in neardup's processes; kernels compiled there use the CPU's widest
vectors (``_wide_vectors``).

numba loads a kernel compiled by an earlier process (``cache=True``) in ``Cache.load_overload``,
which first refreshes the target context: it imports the modules that implement numba's
built-in functions for its compiler (``numba.cpython.*``, ``numba.np.*``, ``numba.typed``, ...)
and installs their registries, in the typing context too. Loading compiled code needs none of
that, only numba's runtime (NRT), which the refresh also starts. In the CLI's ingest of a real
site (22,000 pages), where every kernel comes from the cache, the first kernel took 122 ms to
load with the refresh and 55 ms without it, all of it holding the interpreter's lock while the
index opens and the first chunk is read.

``load_kernels_lean()`` replaces ``Cache.load_overload`` with one that starts NRT and loads the
cached code. It also makes loading that code itself cheaper (``_lean_libraries``). A cached kernel
is its object code plus LLVM bitcode of the same functions, kept for linking it into kernels
compiled later. numba's load parses that bitcode and reads the name of every function and global
in it through LLVM (a few hundred calls a kernel, each taking LLVM's lock and sending two of
numba's events), only to know which symbols the object code defines. The lean load reads those
names from the object's own ELF symbol table (``elf_defined_symbols``; the same set for each of
neardup's 70 cached kernels), and parses the bitcode only if another kernel is ever linked against
this one. The 13 kernels of a real site's ingest loaded in 0.09 s instead of 0.17 s
(docs/benchmarks.md, the fortieth session). A cache entry of any other kind, or an object that is
not ELF, loads as numba loads it.

Where the cache has no code for the signature, or loading it fails, numba's own
method runs instead: it refreshes the context and returns what it finds, and numba then compiles
(its compiler refreshes the contexts itself before every compile, so a kernel compiled later in
the process is compiled as before). ``neardup.cli`` calls it when imported, before the commands' module imports numba (numba
makes its target context, and with it the vector width, during those imports), as it skips
numba's SciPy check (``neardup.blas_probe``); a program that imports neardup as a library keeps
numba's behaviour unless it calls it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from .import_hooks import around_import

_TARGET = "numba.core.caching"
_CODEGEN = "numba.core.codegen"
_lock = threading.Lock()
#: kernel signatures this process found no cached code for, so that numba compiled them (counted by
#: the lean load: ``compiled_here``); and who is told of the first one (``on_first_compile``)
_compiled = 0
_first_compile: Callable[[], None] | None = None


def compiled_here() -> int:
    """How many kernel signatures this process has compiled because the cache had no code for them
    (the first run after installing, or on a CPU whose features the cache has not seen). Counted only
    where ``load_kernels_lean`` is installed."""
    return _compiled


def on_first_compile(notice: Callable[[], None] | None) -> None:
    """Call ``notice`` (once, in the thread that meets it) when the next kernel has no cached code
    and numba is about to compile it, which takes a second or so a kernel; ``None`` stops it."""
    global _first_compile
    with _lock:
        _first_compile = notice


def _missed() -> None:
    global _compiled, _first_compile
    with _lock:
        _compiled += 1
        notice, _first_compile = _first_compile, None
    if notice is not None:
        try:
            notice()
        except Exception:  # noqa: BLE001 - a notice must not stop the compile
            pass


def _lean(module) -> None:
    """Give ``Cache`` (of the imported ``numba.core.caching``) the lean ``load_overload``."""
    cache = getattr(module, "Cache", None)
    original = getattr(cache, "load_overload", None)
    if original is None or not hasattr(cache, "_load_overload"):  # a numba unlike the one this was written for
        return
    if getattr(original, "lean", False):  # given already
        return

    def load_overload(self, sig, target_context):
        try:
            from numba.core.runtime import rtsys

            rtsys.initialize(target_context)  # the runtime the compiled code calls (what the refresh started first)
            got = self._load_overload(sig, target_context)
        except Exception:  # noqa: BLE001 - numba's own load below reports what it meets
            got = None
        if got is None:
            got = original(self, sig, target_context)
            if got is None:  # numba compiles it next
                _missed()
        return got

    load_overload.__doc__ = original.__doc__
    load_overload.lean = True
    cache.load_overload = load_overload


def _after(run: Callable[[], None], module) -> None:
    run()
    _lean(module)


def _after_codegen(run: Callable[[], None], module) -> None:
    run()
    _lean_libraries(module)
    _wide_vectors(module)


def load_kernels_lean() -> None:
    """Load cached kernels without refreshing numba's target context, and their code without
    reading its symbols through LLVM, in this process (see the module's text), and compile kernels
    with the CPU's widest vectors (``_wide_vectors``); idempotent.
    Installed when ``numba.core.caching`` and ``numba.core.codegen`` are imported, or at once for
    those that already are."""
    if not around_import(_TARGET, _after):
        with _lock:  # two threads must not both wrap numba's method
            _lean(sys.modules[_TARGET])
    if not around_import(_CODEGEN, _after_codegen):
        with _lock:
            _lean_libraries(sys.modules[_CODEGEN])
            _wide_vectors(sys.modules[_CODEGEN])


def elf_defined_symbols(obj: bytes) -> set[str] | None:
    """The names an ELF64 little-endian object defines (its symbol table's entries with a section,
    sections and file names left out); None for any other format."""
    import struct

    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    shoff = struct.unpack_from("<Q", obj, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    out: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, _ in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        names = sections[link][4]
        for i in range(1, size // 24):
            name, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", obj, offset + i * 24)
            if shndx == 0 or (info & 0xF) in (3, 4):  # undefined; STT_SECTION, STT_FILE
                continue
            start = names + name
            out.add(obj[start : obj.index(b"\0", start)].decode())
    return out


def _lean_libraries(module) -> None:
    """Give ``CPUCodeLibrary`` (of the imported ``numba.core.codegen``) a lean load of cached object code."""
    lib = getattr(module, "CPUCodeLibrary", None)
    original = lib.__dict__.get("_unserialize") if lib is not None else None
    linking = getattr(lib, "_get_module_for_linking", None)
    if not isinstance(original, classmethod) or linking is None or getattr(original.__func__, "lean", False):
        return
    import llvmlite.binding as ll

    def _unserialize(cls, codegen, state):
        name, kind, data = state
        symbols = elf_defined_symbols(data[0]) if kind == "object" else None
        if symbols is None or not isinstance(getattr(codegen._engine, "_defined_symbols", None), set):
            return original.__func__(cls, codegen, state)
        object_code, shared_bitcode = data
        self = codegen.create_library(name)
        self.enable_object_caching()
        self._set_compiled_object(object_code)
        self._lean_bitcode = shared_bitcode  # parsed when another library links against this one
        self._finalize_final_module()
        codegen._engine._defined_symbols |= symbols
        return self

    def _get_module_for_linking(self):
        bitcode = self.__dict__.pop("_lean_bitcode", None)
        if bitcode is not None and self._shared_module is None:
            self._shared_module = ll.parse_bitcode(bitcode)
        return linking(self)

    _unserialize.lean = True
    lib._unserialize = classmethod(_unserialize)
    lib._get_module_for_linking = _get_module_for_linking


#: the LLVM tuning feature that makes it vectorize loops 256 bits at a time on a CPU with 512-bit vectors
_PREFER_256 = "prefer-256-bit"


def _wide_vectors(module) -> None:
    """Let the kernels that ``numba.core.codegen`` (imported) compiles from now on use 512-bit vectors
    where the CPU has them: LLVM's tuning for Intel's AVX-512 server CPUs (and what it takes this
    machine for) vectorizes 256 bits at a time, so the min-hash loop multiplied four 64-bit lanes
    where the CPU multiplies eight (its 100 permutations of 10 million values: 0.25 -> 0.18 s,
    docs/benchmarks.md, the fortieth session). The features string numba asks LLVM for gets
    ``-prefer-256-bit`` when it holds ``+avx512f``; nothing changes where the user set
    ``NUMBA_CPU_FEATURES``, or on a CPU without AVX-512. The results are the same: the kernels'
    integer arithmetic is exact, and numba reorders no floating-point sum (no fastmath). The kernels
    so compiled are cached beside, not in place of, those of the default features (numba keys its
    cache on them)."""
    jit = getattr(module, "JITCPUCodegen", None)
    original = getattr(jit, "_customize_tm_features", None)
    if original is None or getattr(original, "wide", False):
        return
    config = sys.modules.get("numba.core.config")

    def _customize_tm_features(self):
        features = original(self)
        if config is None or config.CPU_FEATURES is not None or not isinstance(features, str):
            return features
        names = features.split(",")
        if "+avx512f" not in names or any(f.endswith(_PREFER_256) for f in names):
            return features
        return features + ",-" + _PREFER_256

    _customize_tm_features.wide = True
    jit._customize_tm_features = _customize_tm_features
