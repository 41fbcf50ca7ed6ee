"""Deterministic 64-bit hashing of words and word shingles, over whole chunks.

* A word's hash is XXH64 of its UTF-8 bytes with the index's seed (computed
  while tokenising, ``neardup.kernels``; the same as the ``xxhash`` package's
  ``xxh64``).
* A shingle's hash combines the hashes of its words in order with a
  multiply-rotate step per word and the xxh3 avalanche at the end, in numpy
  uint64 arithmetic (wrapping, so the same bits on every machine). Changing
  one word, or the order of two, changes the hash.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from ..text import Analysis

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
AV = np.uint64(0x165667919E3779F9)


def avalanche(h: np.ndarray) -> np.ndarray:
    """xxh3's final mix: every input bit affects every output bit."""
    h = h ^ (h >> np.uint64(37))
    h = h * AV
    return h ^ (h >> np.uint64(32))


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def word_array(a: Analysis) -> pa.LargeStringArray:
    """All words of the chunk, in order, as one Arrow string array."""
    woffs = np.zeros(a.word_starts.size + 1, dtype=np.int64)
    np.cumsum(a.word_ends - a.word_starts, out=woffs[1:])
    return pa.LargeStringArray.from_buffers(a.word_starts.size, pa.py_buffer(woffs), pa.py_buffer(a.data[a.in_word]))


def string_hashes(strings: pa.Array, seed: int) -> np.ndarray:
    """XXH64 (seeded) of every string's UTF-8 bytes; each distinct string hashed once."""
    if len(strings) == 0:
        return np.empty(0, dtype=np.uint64)
    enc = pc.dictionary_encode(strings)
    uniq = enc.dictionary
    _, obuf, dbuf = uniq.buffers()
    offs = np.frombuffer(obuf, dtype=np.int64)[uniq.offset : uniq.offset + len(uniq) + 1]
    mv = memoryview(dbuf) if dbuf is not None else memoryview(b"")
    h = xxhash.xxh64_intdigest
    ol = offs.tolist()
    uh = np.fromiter((h(mv[ol[i] : ol[i + 1]], seed) for i in range(len(uniq))), dtype=np.uint64, count=len(uniq))
    return uh[enc.indices.to_numpy(zero_copy_only=False)]


def shingle_hashes(tok: np.ndarray, counts: np.ndarray, length: int, offset: int = 1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``shingle_hashes_reference``, compiled (``neardup.kernels.shingles``; ~15x faster)."""
    from .. import kernels

    return kernels.shingles(tok, counts.astype(np.int64), length, offset, seed)


def shingle_sets(tok: np.ndarray, counts: np.ndarray, length: int, offset: int = 1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Each document's distinct word-shingle hashes, ascending: ``(values, counts)``, the same as
    ``distinct_sorted(*shingle_hashes(...))``, made a document at a time
    (``neardup.fingerprints.sketch_kernels.shingle_sets``): on the real site's 22,000 pages
    0.2 s against 0.28 s, without writing the chunk's 12 million hashes and their documents'
    indexes (200 MB) out first."""
    from . import sketch_kernels

    return sketch_kernels.shingle_sets(tok, counts.astype(np.int64), length, offset, seed)


def shingle_hashes_reference(tok: np.ndarray, counts: np.ndarray, length: int, offset: int = 1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of the word shingles of every document of a chunk.

    ``tok``: word hashes in order; ``counts``: words per document. A shingle
    is ``length`` consecutive words; shingles start at word 0, ``offset``,
    ``2*offset``, ... while a whole shingle fits; a document shorter than
    ``length`` (but not empty) has one shingle of all its words. Returns
    ``(hashes, doc)``: each shingle's hash and the index of its document, in
    document order. Cost: ``length`` vector passes over the chunk's words.
    """
    n = tok.size
    n_docs = counts.size
    if n == 0:
        return np.empty(0, np.uint64), np.empty(0, np.int64)
    counts = counts.astype(np.int64)
    doc_start = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_start[1:])
    # shingles per document: starts 0, offset, 2*offset, ... up to m - length (one shingle when 0 < m < length)
    n_sh = np.where(counts >= length, (counts - length) // offset + 1, (counts > 0).astype(np.int64))
    first = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(n_sh, out=first[1:])
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), n_sh)
    local = np.arange(first[-1], dtype=np.int64) - first[:-1][doc_of]
    idx = doc_start[:-1][doc_of] + local * offset
    h = np.full(idx.size, np.uint64(seed) ^ P2, dtype=np.uint64)
    if ((counts == 0) | (counts >= length)).all():  # every shingle has full length: no masking
        for j in range(length):
            _step(h, tok[idx + j])
    else:
        end_idx = doc_start[1:][doc_of]
        for j in range(length):
            k = idx + j
            step = h.copy()
            _step(step, tok[np.minimum(k, n - 1)])
            h = np.where(k < end_idx, step, h)
    return avalanche(h), doc_of


def _step(h: np.ndarray, t: np.ndarray) -> None:
    """``h = (rotl(h, 31) ^ t) * P1`` in place."""
    r = h >> np.uint64(33)
    np.left_shift(h, np.uint64(31), out=h)
    np.bitwise_or(h, r, out=h)
    np.bitwise_xor(h, t, out=h)
    np.multiply(h, P1, out=h)


def char_shingle_hashes(normal: pa.Array, length: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of the character shingles (``length`` consecutive code points of the
    normal form, white space runs counted as one space) of every document."""
    texts = pc.utf8_trim_whitespace(pc.replace_substring_regex(normal, r"\s+", " "))
    lengths = pc.utf8_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
    joined = "".join(texts.to_pylist())
    cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    tok = avalanche((cps ^ np.uint64(seed)) * P1)
    return shingle_hashes(tok, lengths, length, 1, seed)


def shingle_hashes_wrapped(tok: np.ndarray, counts: np.ndarray, length: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Like ``shingle_hashes`` with offset 1, but the words at the end wrap round to the
    start: a document of L words has L shingles (003's A8)."""
    n = tok.size
    if n == 0:
        return np.empty(0, np.uint64), np.empty(0, np.int64)
    n_docs = counts.size
    doc_start = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_start[1:])
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), counts)
    base = doc_start[:-1][doc]
    pos = np.arange(n, dtype=np.int64) - base
    m = counts[doc]
    h = np.full(n, np.uint64(seed) ^ P2, dtype=np.uint64)
    for j in range(length):
        h = (_rotl(h, 31) ^ tok[base + (pos + j) % m]) * P1
    return avalanche(h), doc


def distinct_sorted(hashes: np.ndarray, doc: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document, its distinct hashes in ascending order: ``(values, counts)``.

    ``doc`` must be non-decreasing (shingles come in document order).
    ``values`` holds document 0's sorted set, then document 1's, ... Each
    document's run is sorted on its own by a compiled bucket sort
    (``neardup.fingerprints.sketch_kernels.distinct_sorted``): on the real
    site's 12.4 million shingles 0.15 s, against 0.35-0.5 s for numpy's sort
    of each run from a Python loop, which also held the interpreter's lock.
    """
    if hashes.size == 0:
        return hashes, np.zeros(n_docs, dtype=np.int64)
    from . import sketch_kernels

    at = np.searchsorted(doc, np.arange(n_docs + 1)).astype(np.int64)
    return sketch_kernels.distinct_sorted(hashes.astype(np.uint64, copy=False), at)


def smallest_distinct(hashes: np.ndarray, doc: np.ndarray, n_docs: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document, its ``min(k, distinct)`` smallest distinct hashes in ascending order:
    the first ``k`` of each document's ``distinct_sorted`` run, which defines the result.

    Compiled (``neardup.fingerprints.sketch_kernels.smallest_distinct``). Shingle hashes are uniform
    over 64 bits, so of a document's ``m > 4k`` shingles about ``2k`` fall below
    ``2^64 * 2k / m``, and only those are sorted (a bucket sort, as they are
    uniform); when fewer than ``k`` distinct values survive the cut (many
    repeated shingles) the document is done again from all its hashes, so the
    cut never changes the answer.
    """
    from . import sketch_kernels

    if hashes.size == 0:
        return hashes, np.zeros(n_docs, dtype=np.int64)
    return sketch_kernels.smallest_distinct(hashes, doc.astype(np.int64), n_docs, k)
