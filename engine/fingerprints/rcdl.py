"""The preprocessing of the RCDL 2007 study (003) and its syntactic methods A0, A6, A8.

Preprocessing (003 §5: "удаление стоп-слов (служебной лексики и коротких слов
длиной 3 и менее букв), символов новой строки, лишних пробелов, специальных
знаков"): the document's normal-form words, dropping words of 3 or fewer
characters and the words of ``STOP_WORDS``. The study does not print its
stop list; ours holds common Russian and English function words of four or
more letters (shorter ones are dropped by length anyway).

* A0: MD5 of the preprocessed words joined by single spaces.
* A6 (Fetterly's megashingles as 003 describes them): the set of 5-word
  shingles; ``n`` min-hashes (84, or the 36 the authors ran); the minima in
  function order cut into 6 groups (14 or 6 each), each hashed into a
  supershingle together with its group number; the 15 pairs ``i < j`` of
  supershingles hashed into megashingles together with ``(i, j)``, so two
  documents share a megashingle exactly when two corresponding supershingles
  agree. Duplicates share at least one megashingle.
* A8 LogShingles: 5-word shingles with the words at the end wrapping round to
  the start (a document of L words has L shingles); of these, those whose
  hash is divisible by ``2**k``, with ``k = round(log2(L / log2 L))`` so that
  about ``log2 L`` are kept (003 leaves the exact rule open); the signature is
  the hash of the sorted kept set, compared for equality.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from . import hashing, sketches

STOP_WORDS = frozenset(
    """
    который которая которое которые которого которой котором которых также только более между после через
    перед когда если чтобы потому этого этой этом этих того тому тогда себя свой своих всех всего была были
    было будет есть даже однако можно нужно очень здесь там этот эта
    about above after again also been before being between both could does doing down during each from
    further have having here into itself just more most once only other over same should some such than
    that their them then there these they this those through under until very were what when where which
    while with would your
    """.split()
)
SHINGLE = 5


def keep_mask(words: pa.Array) -> np.ndarray:
    """Which words the RCDL preprocessing keeps (more than 3 characters, not a stop word)."""
    if len(words) == 0:
        return np.zeros(0, dtype=bool)
    keep = pc.and_(pc.greater(pc.utf8_length(words), 3), pc.invert(pc.is_in(words, value_set=pa.array(sorted(STOP_WORDS), words.type))))
    return keep.to_numpy(zero_copy_only=False)


def preprocessed_words(words: pa.Array, counts: np.ndarray, keep: np.ndarray | None = None) -> tuple[pa.Array, np.ndarray]:
    """Words kept by the RCDL preprocessing, and how many each document keeps (``keep``: the
    ``keep_mask`` of ``words``, when the caller has it already)."""
    if len(words) == 0:
        return words, counts.copy()
    keep_np = keep_mask(words) if keep is None else keep
    doc = np.repeat(np.arange(counts.size), counts)
    return words.filter(pa.array(keep_np)), np.bincount(doc[keep_np], minlength=counts.size)


def a0(words: pa.Array, counts: np.ndarray) -> list[str]:
    """MD5 (hex) of each document's preprocessed words joined by single spaces."""
    import hashlib

    offs = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    joined = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offs), words), pa.scalar(" ", pa.large_string()))
    md5 = hashlib.md5
    return [md5(s.as_buffer()).hexdigest() for s in joined]


def a6(word_hashes: np.ndarray, counts: np.ndarray, n_hashes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(supershingles (n_docs, 6), megashingles (n_docs, 15))``; rows of documents without words are all ``EMPTY``."""
    h, doc = hashing.shingle_hashes(word_hashes, counts, SHINGLE, 1, seed)
    values, per_doc = hashing.distinct_sorted(h, doc, counts.size)
    a, b = sketches.universal_params(n_hashes, seed ^ 0xA6)
    n_docs = counts.size
    mins = np.full((n_docs, n_hashes), sketches.EMPTY, dtype=np.uint64)
    nonempty = per_doc > 0
    starts = sketches.doc_starts(per_doc)[nonempty]
    if nonempty.any():
        for i in range(n_hashes):
            mins[nonempty, i] = np.minimum.reduceat(values * a[i] + b[i], starts)
    group = n_hashes // 6
    supers = np.empty((n_docs, 6), dtype=np.uint64)
    for g in range(6):
        acc = np.full(n_docs, np.uint64(seed) ^ hashing.P2 ^ np.uint64(g + 1), dtype=np.uint64)
        for col in range(g * group, (g + 1) * group):
            acc = (hashing._rotl(acc, 31) ^ mins[:, col]) * hashing.P1
        supers[:, g] = hashing.avalanche(acc)
    megas = np.empty((n_docs, 15), dtype=np.uint64)
    k = 0
    for i in range(6):
        for j in range(i + 1, 6):
            acc = np.full(n_docs, np.uint64((i << 8) | j) ^ hashing.P2, dtype=np.uint64)
            acc = (hashing._rotl(acc, 31) ^ supers[:, i]) * hashing.P1
            acc = (hashing._rotl(acc, 31) ^ supers[:, j]) * hashing.P1
            megas[:, k] = hashing.avalanche(acc)
            k += 1
    supers[~nonempty] = sketches.EMPTY
    megas[~nonempty] = sketches.EMPTY
    return supers, megas


def a8(word_hashes: np.ndarray, counts: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(kept hashes, kept per document, signature per document)``."""
    h, doc = hashing.shingle_hashes_wrapped(word_hashes, counts, SHINGLE, seed)
    n_docs = counts.size
    L = counts.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(L > 2, np.round(np.log2(L / np.log2(np.maximum(L, 2)))), 0).astype(np.int64)
    k = np.clip(k, 0, 63)
    mask = (np.uint64(1) << k.astype(np.uint64)) - np.uint64(1)
    keep = (h & mask[doc]) == 0
    values, per_doc = hashing.distinct_sorted(h[keep], doc[keep], n_docs)
    sig = np.empty(n_docs, dtype=np.uint64)
    starts = sketches.doc_starts(per_doc)
    x = xxhash.xxh3_64_intdigest
    for d in range(n_docs):
        # a document without words has no signature: 0, which matches nothing
        sig[d] = x(values[starts[d] : starts[d] + per_doc[d]].astype("<u8").tobytes(), seed) if counts[d] else 0
    return values, per_doc, sig
