"""``load_kernels_lean``: cached kernels load without numba's compiler registries, and give the
same results; a kernel the cache lacks is compiled as before.

Each case runs in fresh interpreters (numba loads its registries once per process). Whether the
registries were loaded shows in ``sys.modules``: the refresh imports ``numba.np.linalg``, which
nothing else in these processes imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

MODULE = '''
from numba import njit


@njit(cache=True)
def weighted(xs, w):
    total = 0
    for i in range(xs.size):
        total += xs[i] * w
    return total
'''

USE = """
import json, sys
{install}
import numpy as np
import kern
out = [int(kern.weighted(np.arange(5, dtype=np.int64), 3)), float(kern.weighted(np.arange(4, dtype=np.float64), 0.5))]
print(json.dumps({{"out": out, "registries": "numba.np.linalg" in sys.modules}}))
"""

LEAN = "from neardup.kernel_cache import load_kernels_lean\nload_kernels_lean()"


def _run(folder: Path, code: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(folder / "cache"),
               PYTHONPATH=os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, env=env, cwd=folder,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_kernel_compiles_with_the_lean_load_then_loads_lean_from_the_cache(tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(MODULE)
    first = _run(tmp_path, USE.format(install=LEAN))  # nothing cached: numba's own load, then its compiler
    assert first == {"out": [30, 3.0], "registries": True}
    assert any((tmp_path / "cache").rglob("*.nbi"))
    again = _run(tmp_path, USE.format(install=LEAN))  # both signatures from the cache, registries untouched
    assert again == {"out": [30, 3.0], "registries": False}
    plain = _run(tmp_path, USE.format(install=""))  # numba's own load refreshes them (and, on a CPU with AVX-512, compiles
    assert plain == {"out": [30, 3.0], "registries": True}  # for its default features: _wide_vectors)


def test_the_signatures_compiled_are_counted_and_the_first_is_told(tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(MODULE)
    code = """
    import json, sys
    from neardup import kernel_cache
    kernel_cache.load_kernels_lean()
    told = []
    kernel_cache.on_first_compile(lambda: told.append(kernel_cache.compiled_here()))
    import numpy as np
    import kern
    kern.weighted(np.arange(5, dtype=np.int64), 3)
    kern.weighted(np.arange(4, dtype=np.float64), 0.5)
    print(json.dumps({"out": [kernel_cache.compiled_here(), told], "registries": None}))
    """
    first = _run(tmp_path, code)  # nothing cached: both signatures compiled, the notice given once, at the first
    assert first["out"] == [2, [1]]
    again = _run(tmp_path, code)  # both from the cache: none compiled, nothing told
    assert again["out"] == [0, []]


def test_installed_after_numba_is_imported_and_twice(tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(MODULE)
    _run(tmp_path, USE.format(install=LEAN))  # compiled and cached (with the features of a lean process)
    late = "import numba.core.caching\n" + LEAN + "\nload_kernels_lean()"
    assert _run(tmp_path, USE.format(install=late)) == {"out": [30, 3.0], "registries": False}


def test_a_new_signature_of_a_cached_kernel_is_compiled(tmp_path: Path) -> None:
    (tmp_path / "kern.py").write_text(MODULE)
    _run(tmp_path, USE.format(install=""))
    code = USE.format(install=LEAN) + "print(json.dumps({'out': [int(kern.weighted(np.arange(3, dtype=np.int32), 2))], 'registries': True}))\n"
    assert _run(tmp_path, code) == {"out": [6], "registries": True}


def test_the_cli_loads_the_kernels_lean(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"url": f"u{i}", "text": "one two three four five six seven eight nine ten " * (i + 1)}) + "\n"
                              for i in range(3)))
    mark = tmp_path / "mark.json"
    code = f"""
    import atexit, json, sys
    def mark():
        import llvmlite.binding as ll
        from numba.core.registry import cpu_target
        wide = cpu_target.target_context.codegen()._tm_features.endswith(",-prefer-256-bit")
        open({str(mark)!r}, "w").write(json.dumps(["numba.np.linalg" in sys.modules, wide, "+avx512f" in ll.get_host_cpu_features().flatten().split(",")]))
    atexit.register(mark)
    sys.argv = ["neardup", "ingest", "-q", "--index", {str(tmp_path / 'idx')!r}, {str(corpus)!r}]
    from neardup.cli.app import main
    main()
    """
    for _ in range(2):  # the first may compile (a fresh checkout's cache is empty); the second loads
        (tmp_path / "idx").exists() and __import__("shutil").rmtree(tmp_path / "idx")
        subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, cwd=tmp_path)
    registries, wide, avx512 = json.loads(mark.read_text())
    assert registries is False and wide is avx512  # the CLI's kernels: loaded lean, compiled with the widest vectors
    assert (tmp_path / "idx" / "catalog.duckdb").exists()


def test_elf_defined_symbols_are_those_numba_reads_from_the_bitcode() -> None:
    """The names ``elf_defined_symbols`` reads from a kernel's object code are exactly the defined
    functions and globals numba reads from the bitcode cached beside it (what its own load adds)."""
    import llvmlite.binding as ll
    import numpy as np
    from numba import njit

    from neardup.kernel_cache import elf_defined_symbols

    @njit
    def helper(x):
        return x * 3 + 1

    @njit
    def kernel(xs):
        out = np.empty(xs.size, np.int64)
        for i in range(xs.size):
            out[i] = helper(xs[i])
        return out

    assert kernel(np.arange(4, dtype=np.int64)).tolist() == [1, 4, 7, 10]
    library = next(iter(kernel.overloads.values())).library
    name, kind, (obj, bitcode) = library.serialize_using_object_code()
    assert kind == "object"
    module = ll.parse_bitcode(bitcode)
    numba_reads = {g.name for group in (module.functions, module.global_variables) for g in group if not g.is_declaration}
    assert len(numba_reads) > 2 and any("kernel" in n for n in numba_reads)
    assert elf_defined_symbols(obj) == numba_reads
    assert elf_defined_symbols(b"\x7fELF\x01" + bytes(80)) is None  # 32-bit: not read
    assert elf_defined_symbols(bitcode) is None


CALLER = '''
import json, sys
from neardup.kernel_cache import load_kernels_lean
load_kernels_lean()
import numpy as np
from numba import njit
import kern
xs = np.arange(5, dtype=np.int64)
first = int(kern.weighted(xs, 3))  # from the cache
library = next(iter(kern.weighted.overloads.values())).library
lean = "_lean_bitcode" in library.__dict__


@njit
def twice(xs, w):  # compiled now: calls the cached kernel with its cached signature, so links against it
    return 2 * kern.weighted(xs, w)


print(json.dumps({"out": [first, int(twice(xs, 3))], "lean": lean, "linked": "_lean_bitcode" not in library.__dict__}))
'''


def test_a_kernel_loaded_lean_is_linked_into_one_compiled_later(tmp_path: Path) -> None:
    """A cached kernel loads without its bitcode parsed (``_lean_bitcode`` kept), gives the same
    results, and a kernel compiled later in the process that calls it links against it (the bitcode
    is parsed then)."""
    (tmp_path / "kern.py").write_text(MODULE)
    _run(tmp_path, USE.format(install=LEAN))  # compiled and cached (with the features of a lean process)
    assert _run(tmp_path, CALLER) == {"out": [30, 60], "lean": True, "linked": True}


FEATURES = '''
import json, os, sys
{install}
import numpy as np
import llvmlite.binding as ll
from numba.core.registry import cpu_target
import kern
out = [int(kern.weighted(np.arange(5, dtype=np.int64), 3))]
from neardup.fingerprints import sketch_kernels
rng = np.random.default_rng(7)
counts = rng.integers(0, 300, 50).astype(np.int64)
values = rng.integers(0, 2**63, int(counts.sum()), dtype=np.uint64)
a = rng.integers(0, 2**63, 20, dtype=np.uint64) | np.uint64(1)
b = rng.integers(0, 2**63, 20, dtype=np.uint64)
sig = sketch_kernels.minhash_universal(values, np.concatenate([[0], np.cumsum(counts)[:-1]]), counts, a, b, a)
features = cpu_target.target_context.codegen()._tm_features
print(json.dumps({{"out": out, "minhash": int(np.bitwise_xor.reduce(sig.ravel())), "wide": features.endswith(",-prefer-256-bit"),
                  "avx512": "+avx512f" in ll.get_host_cpu_features().flatten().split(",")}}))
'''


def test_kernels_compile_with_wide_vectors_where_the_cpu_has_them_and_compute_the_same(tmp_path: Path) -> None:
    """With ``load_kernels_lean``, kernels compile without LLVM's 256-bit preference exactly where
    the CPU has AVX-512 (and give the results of the default features), never when the user set
    ``NUMBA_CPU_FEATURES``, and not without it."""
    (tmp_path / "kern.py").write_text(MODULE)
    lean = _run(tmp_path, FEATURES.format(install=LEAN))
    plain = _run(tmp_path, FEATURES.format(install=""))
    assert lean["wide"] is lean["avx512"] and plain["wide"] is False
    assert lean["out"] == plain["out"] == [30] and lean["minhash"] == plain["minhash"]
    user = FEATURES.format(install="import llvmlite.binding as ll; ll.initialize_native_target(); "
                                   "os.environ['NUMBA_CPU_FEATURES'] = ll.get_host_cpu_features().flatten()\n" + LEAN)
    set_by_user = _run(tmp_path, user)
    assert set_by_user["wide"] is False and set_by_user["minhash"] == plain["minhash"]


LITERALS = """
import json, sys
import numpy as np
import pyarrow as pa
from numba.core.registry import CPUDispatcher
from neardup import concepts, text
from neardup.fingerprints import hashing
from neardup.kernels import occurring

normal = text.normal_form(pa.array(["\\u00dcn\\u00efcode \\u216b words here. And more words\\nsecond line \\ufb01", "plain words only"]))
words = text.analyze(normal)
hashing.shingle_sets(words.word_hashes, words.word_counts, 2)
hashing.distinct_sorted(np.arange(40, dtype=np.uint64)[::-1].copy(), np.repeat(np.arange(2), 20), 2)
occurring(np.arange(50, dtype=np.uint64) % 7, 2)
sketches = {d: np.arange(d, d + 12, dtype=np.uint64) for d in range(6)}
concepts.mine_anchors([0, 1], sketches, {0: [1, 2, 3], 1: [0, 2, 4, 5]}, 3)
print(json.dumps({"out": sorted({f"{n}{s}" for m, mod in list(sys.modules.items()) if m.startswith("neardup")
                                 for n, d in vars(mod).items() if isinstance(d, CPUDispatcher)
                                 for s in d.signatures if "Literal" in str(s)}), "registries": None}))
"""


def test_kernels_compile_no_variant_for_a_literal_argument(tmp_path: Path) -> None:
    """A compiled kernel that calls another with the literal 0 (or a counter still at its first
    value, 0, while numba infers its type) makes numba compile the callee once more for that literal,
    which on a first run after installing was a quarter of the kernels' compile time. The kernels of
    normalising, tokenising, shingling and the concept miner, compiled from nothing, have none."""
    assert _run(tmp_path, LITERALS)["out"] == []
