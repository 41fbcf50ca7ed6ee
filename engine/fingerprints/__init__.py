"""Document images (fingerprints) of the seeds' methods, computed per chunk of documents.

``compute(normal, analysis, settings)`` returns, for every enabled method, a
dict of Arrow columns aligned with the chunk's documents; ``neardup.ingest``
stores them in the method's ``fp_<method>`` table (docs/sql.md), and
``postings(method, table)`` names the equal-key fingerprints that go to the
LMDB inverted index. Intermediate results (word hashes, shingle hashes,
sorted shingle sets, the RCDL word lists) are computed once per chunk and
shared by the methods that need them.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import pyarrow as pa

from ..pipeline import lap
from ..settings import Settings
from ..text import Analysis
from . import hashing, lexical, rcdl, sketches
from . import simhash as simhash_mod


class Chunk:
    """A chunk's documents plus lazily computed shared intermediates."""

    def __init__(self, normal: pa.Array, analysis: Analysis, settings: Settings):
        self.normal = normal
        self.a = analysis
        self.s = settings
        self.n = len(normal)

    @functools.cached_property
    def words(self) -> pa.Array:
        return hashing.word_array(self.a)

    @functools.cached_property
    def word_hashes(self) -> np.ndarray:
        if self.a.word_hashes is not None and self.a.seed == self.s.seed:
            return self.a.word_hashes
        return hashing.string_hashes(self.words, self.s.seed)

    @functools.cached_property
    def shingle_hashes(self) -> tuple[np.ndarray, np.ndarray]:
        """Every word shingle's hash and its document's index, in document order."""
        return hashing.shingle_hashes(self.word_hashes, self.a.word_counts, self.s.shingle_size, self.s.shingle_offset, self.s.seed)

    @functools.cached_property
    def shingle_set(self) -> tuple[np.ndarray, np.ndarray]:
        """Each document's distinct shingle hashes, ascending (``values, counts``): from the hashes
        when they are made already, else straight from the words (``hashing.shingle_sets``)."""
        if "shingle_hashes" in self.__dict__:
            return hashing.distinct_sorted(*self.shingle_hashes, self.n)
        return hashing.shingle_sets(self.word_hashes, self.a.word_counts, self.s.shingle_size, self.s.shingle_offset, self.s.seed)

    def shingle_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """Each document's shingle hashes, grouped by document (``values, counts``): the sorted
        sets when they exist, else all hashes as they come (repeats included), which is
        enough for anything that takes a minimum over the set."""
        if "shingle_set" in self.__dict__:
            return self.shingle_set
        h, doc = self.shingle_hashes
        return h, np.bincount(doc, minlength=self.n)

    def smallest_shingles(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` smallest distinct shingle hashes of each document, ascending (a prefix of
        each ``shingle_set`` run); without sorting whole sets unless they are sorted already."""
        if "shingle_set" in self.__dict__:
            return self.shingle_set
        return hashing.smallest_distinct(*self.shingle_hashes, self.n, k)

    @functools.cached_property
    def rcdl_keep(self) -> np.ndarray:
        """Which words the RCDL preprocessing keeps."""
        return rcdl.keep_mask(self.words)

    @functools.cached_property
    def rcdl_words(self) -> tuple[pa.Array, np.ndarray]:
        """The RCDL-preprocessed words and how many each document keeps."""
        return rcdl.preprocessed_words(self.words, self.a.word_counts, self.rcdl_keep)

    @functools.cached_property
    def rcdl_hashes(self) -> np.ndarray:
        return hashing.string_hashes(self.rcdl_words[0], self.s.seed)


def lists(values: np.ndarray, counts: np.ndarray) -> pa.Array:
    offs = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    return pa.LargeListArray.from_arrays(pa.array(offs), pa.array(values, pa.uint64()))


def packed(values: np.ndarray, counts: np.ndarray) -> dict[str, pa.Array]:
    """Per-document sets as ``n`` (size) and ``hashes`` (big-endian uint64s packed in a binary value)."""
    offs = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    data = values.astype(">u8")
    blobs = pa.LargeBinaryArray.from_buffers(pa.large_binary(), counts.size, [None, pa.py_buffer(offs * 8), pa.py_buffer(data)])
    return {"n": pa.array(counts, pa.int32()), "hashes": blobs}


def unpack(blob: bytes) -> np.ndarray:
    """The uint64 values of one packed set."""
    return np.frombuffer(blob, dtype=">u8").astype(np.uint64)


def rows(m: np.ndarray) -> pa.Array:
    """Rows of a (n_docs, k) matrix as lists, dropping the ``EMPTY`` padding."""
    keep = m != sketches.EMPTY
    return lists(m[keep], keep.sum(axis=1))


def _bottomk(c: Chunk) -> pa.Array:
    """The bottom-k sketches as lists (``rows`` of ``sketches.bottom_k``, without its padding)."""
    k = c.s.bottomk
    if c.s.permutation == "universal":  # the k smallest hashes: a prefix of each sorted set, taken as it is
        from . import sketch_kernels

        values, counts = c.smallest_shingles(k)
        return lists(*sketch_kernels.prefixes(values, counts.astype(np.int64), k))
    return rows(sketches.bottom_k(*c.shingle_set, k, c.s.seed, c.s.permutation))


def _a6(c: Chunk, n_hashes: int) -> dict[str, pa.Array]:
    counts, wh = c.rcdl_words[1], c.rcdl_hashes
    supers, megas = rcdl.a6(wh, counts, n_hashes, c.s.seed)
    return {"supershingles": rows(supers), "megashingles": rows(megas)}


def _a8(c: Chunk) -> dict[str, pa.Array]:
    counts, wh = c.rcdl_words[1], c.rcdl_hashes
    values, per_doc, sig = rcdl.a8(wh, counts, c.s.seed)
    return {"kept": lists(values, per_doc), "signature": pa.array(sig, pa.uint64())}


def _a12(c: Chunk) -> dict[str, pa.Array]:
    ss, ws, length, num = lexical.a12(c.a, c.words)
    return {
        "ss": ss,
        "ws": ws,
        "len": pa.array(length, pa.int32()),
        "num": pa.array(num, pa.int32()),
    }


def _a4(c: Chunk) -> dict[str, pa.Array]:
    sentences, sigs = lexical.a4(c.a)
    return {"sentences": pa.array(sentences, pa.list_(pa.string())), "crc32": pa.array(sigs, pa.uint32())}


COMPUTE = {
    "shingles": lambda c: packed(*c.shingle_set),
    "chars": lambda c: packed(*hashing.distinct_sorted(*hashing.char_shingle_hashes(c.normal, c.s.char_shingle_size, c.s.seed), c.n)),
    "bottomk": lambda c: {"sketch": _bottomk(c)},
    "minhash": lambda c: {"signature": rows(sketches.minhash(*c.shingle_groups(), c.s.minhash_perms, c.s.seed, c.s.permutation))},
    "simhash": lambda c: {"simhash": pa.array(simhash_mod.charikar(c.word_hashes, c.a.word_counts), pa.uint64())},
    "simhash_hp": lambda c: {"simhash": pa.array(simhash_mod.hyperplanes(c.words, c.a.word_counts, c.s.seed), pa.uint64())},
    "a0": lambda c: {"md5": pa.array(rcdl.a0(*c.rcdl_words), pa.string())},
    "a6": lambda c: _a6(c, 84),
    "a6_36": lambda c: _a6(c, 36),
    "a8": _a8,
    "a4": lambda c: _a4(c),
    "a12": _a12,
}


def _terms(c: Chunk) -> tuple[pa.Table | None, pa.Table | None, pa.Table | None]:
    """For the statistics-based lexical methods: ``(doc_terms, a5 occurrences, a5 sentence texts)``;
    ``doc`` columns index the chunk's documents. ``(None, None, None)`` when no such method is enabled."""
    wanted = [m for m in c.s.methods if m in lexical.STATS_METHODS]
    if not wanted:
        return None, None, None
    kept_terms, kept_counts = c.rcdl_words
    dt = lexical.doc_terms(kept_terms, kept_counts)
    if "a5" not in wanted:
        return dt, None, None
    occ, texts = lexical.sentence_tables(c.a, c.rcdl_keep, kept_terms)
    return dt, occ, texts


#: Equal-key methods: ``{method: (column, how the column becomes uint64 keys)}``; their keys go to the
#: LMDB postings table named after the method.
#: equal-key methods: ``{method: (fingerprint column, posting kind)}`` (kinds: ``posting_keys``);
#: their LMDB posting table is named after the method (see ``neardup.pairs``)
POSTINGS = {
    "a0": ("md5", "md5"),
    "a1": ("crc32", "nonzero"),
    "a2": ("crc32", "nonzero"),
    "a3": ("crc32", "nonzero"),
    "a4": ("crc32", "nonzero"),
    "a5": ("crc32", "nonzero"),
    "a6": ("megashingles", "list"),
    "a6_36": ("megashingles", "list"),
    "a7": ("keys", "list"),
    "a8": ("signature", "nonzero"),
    "a9": ("signature", "nonzero"),
    "a10": ("crc32", "nonzero"),
}


def compute(normal: pa.Array, analysis: Analysis, settings: Settings) -> dict[str, dict[str, pa.Array]]:
    """``{method: {column: array aligned with the documents}}`` for every enabled method."""
    return compute_all(normal, analysis, settings)[0]


#: Methods computed from the word-shingle hashes (made once per chunk, timed as "shingles").
SHINGLE_METHODS = ("shingles", "bottomk", "minhash")


def compute_all(normal: pa.Array, analysis: Analysis, settings: Settings, timings: dict[str, float] | None = None):
    """``(compute(...), doc_terms, a5 occurrences, a5 sentence texts)`` from one shared ``Chunk``,
    so that words, their hashes and the RCDL word lists are made once.

    ``timings`` gets the seconds of the word shingles (``shingles``), of each method
    (``fingerprint <method>``) and of the term lists (``terms``), added to what it holds."""
    c = Chunk(normal, analysis, settings)
    if timings is None:
        images = {m: COMPUTE[m](c) for m in settings.methods if m in COMPUTE}
        return (images, *_terms(c))
    t = time.perf_counter()
    if "shingles" in settings.methods:  # the sets, which the other shingle methods then read
        c.shingle_set  # noqa: B018 - made here so that their time is not charged to one method
        t = lap(timings, "shingles", t)
    elif any(m in SHINGLE_METHODS for m in settings.methods):
        c.shingle_hashes  # noqa: B018 - as above
        t = lap(timings, "shingles", t)
    images = {}
    for m in settings.methods:
        if m in COMPUTE:
            images[m] = COMPUTE[m](c)
            t = lap(timings, f"fingerprint {m}", t)
    terms = _terms(c)
    lap(timings, "terms", t)
    return (images, *terms)


def posting_keys(kind: str, column: pa.Array, doc_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, doc_ids)`` of one equal-key fingerprint column."""
    ids = np.asarray(doc_ids, dtype=np.uint64)
    if kind == "nonzero":
        keys = column.to_numpy(zero_copy_only=False).astype(np.uint64)
        return keys[keys != 0], ids[keys != 0]
    if kind == "md5":
        keys = np.array([int(h[:16], 16) for h in column.to_pylist()], dtype=np.uint64)
        return keys, ids
    if kind == "list":
        import pyarrow.compute as pc

        lens = pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)
        return column.flatten().to_numpy(zero_copy_only=False).astype(np.uint64), np.repeat(ids, lens)
    raise ValueError(kind)
