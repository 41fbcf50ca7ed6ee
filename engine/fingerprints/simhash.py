"""64-bit simhashes.

* ``charikar`` (004 §"Simhash"): every word occurrence maps to a 64-dimensional
  +-1 vector through its 64-bit hash (bit set -> +1, clear -> -1); a document
  sums the vectors of all its words (repeats counted, unit weights) and bit i
  of its simhash is 1 when component i is >= 0 (the notes print ">≥"; we take
  >=).
* ``hyperplanes`` (002): 64 random hyperplanes through the origin of a
  37-dimensional space, integer coordinates uniform in [-100, 100]. Every word
  occurrence adds, for j = 0, 1, 2, the value ``(H_{B_{j+1}}(w) mod 11) - 5``
  to coordinate ``H_{B_j}(w) mod 37``, where ``H_B(w) = sum_i (c_i - 'a' + 1) B^i
  mod 2^64`` over the word's characters (code points here; the report's C++
  used bytes) for four bases ``B_0..B_3`` (not given in the report; drawn from
  the index seed). Bit i is 1 when the dot product with hyperplane i is > 0.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DIM = 37
BITS = 64


def charikar(word_hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``charikar_reference``, compiled (``neardup.fingerprints.sketch_kernels.charikar``: byte-lane counters, 4x faster than a bit test per hash bit)."""
    from . import sketch_kernels

    return sketch_kernels.charikar(word_hashes, counts.astype(np.int64))


def charikar_reference(word_hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Simhash per document from its words' 64-bit hashes.

    Counted a byte at a time: per document a histogram of each hash byte's
    value (8 ``bincount`` passes over the words), then a 256x8 bit table
    turns histograms into per-bit counts.
    """
    n_docs = counts.size
    out = np.zeros(n_docs, dtype=np.uint64)
    if word_hashes.size == 0:
        return out
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), counts) * 256
    bytes_ = word_hashes.astype("<u8").view(np.uint8).reshape(-1, 8)
    bit_table = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.int64)  # (256, 8)
    ones = np.empty((n_docs, 64), dtype=np.int64)
    for p in range(8):
        hist = np.bincount(doc + bytes_[:, p], minlength=n_docs * 256).reshape(n_docs, 256)
        ones[:, 8 * p : 8 * p + 8] = hist @ bit_table
    set_bits = (2 * ones - counts[:, None]) >= 0  # sum of +1/-1 >= 0
    set_bits[counts == 0] = False
    weights = np.uint64(1) << np.arange(BITS, dtype=np.uint64)
    out[:] = (set_bits.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    return out


@functools.cache
def _hyperplane_params(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, 0x73696D68])
    planes = rng.integers(-100, 100, size=(BITS, DIM), endpoint=True).astype(np.int64)
    bases = rng.integers(3, 2**63, size=4, dtype=np.uint64) | np.uint64(1)
    return planes, bases


def poly_hashes(words: pa.Array, bases: np.ndarray) -> np.ndarray:
    """``(len(words), len(bases))`` uint64: ``sum_i (c_i - 96) * B^i mod 2^64`` over code points."""
    n = len(words)
    if n == 0:
        return np.zeros((0, bases.size), dtype=np.uint64)
    lengths = pc.utf8_length(words).to_numpy(zero_copy_only=False).astype(np.int64)
    joined = "".join(words.to_pylist())
    cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    vals = (cps - 96).view(np.uint64)  # two's complement, as the report's C++ arithmetic wraps
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    pos = np.arange(cps.size, dtype=np.int64) - np.repeat(starts, lengths)
    out = np.empty((n, bases.size), dtype=np.uint64)
    maxlen = int(lengths.max()) if n else 0
    for j, b in enumerate(bases):
        powers = np.empty(maxlen + 1, dtype=np.uint64)
        powers[0] = 1
        with np.errstate(over="ignore"):
            for i in range(1, maxlen + 1):
                powers[i] = powers[i - 1] * b
        out[:, j] = np.add.reduceat(vals * powers[pos], starts) if cps.size else 0
        out[lengths == 0, j] = 0
    return out


def hyperplanes(words: pa.Array, counts: np.ndarray, seed: int) -> np.ndarray:
    """Simhash per document by the report's hyperplane construction (see the module docstring)."""
    planes, bases = _hyperplane_params(seed)
    n_docs = counts.size
    out = np.zeros(n_docs, dtype=np.uint64)
    if len(words) == 0:
        return out
    enc = pc.dictionary_encode(words)
    h = poly_hashes(enc.dictionary, bases)  # per distinct word
    idx = (h[:, 0:3] % np.uint64(DIM)).astype(np.int64)
    add = (h[:, 1:4] % np.uint64(11)).astype(np.int64) - 5
    w = enc.indices.to_numpy(zero_copy_only=False)
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), counts)
    temp = np.zeros(n_docs * DIM, dtype=np.int64)
    for j in range(3):
        temp += np.bincount(doc * DIM + idx[w, j], weights=add[w, j], minlength=n_docs * DIM).astype(np.int64)
    q = temp.reshape(n_docs, DIM) @ planes.T  # (n_docs, 64)
    weights = np.uint64(1) << np.arange(BITS, dtype=np.uint64)
    out[:] = ((q > 0).astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    return out
