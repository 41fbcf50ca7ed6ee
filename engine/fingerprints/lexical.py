"""Lexical methods of 000 and 003: collection statistics, the lexical image, A1-A5, A10, A12.

Terms are the RCDL-preprocessed words (``rcdl.preprocessed_words``). Methods
that need collection statistics (``lexical``, A1 is local but shares the
path, A2, A3, A5, A10) run at the end of a batch, inside its transaction,
after the batch's terms were added to ``term_stats``: a document's signature
uses the statistics as they are when its batch commits (the batch included).
Later batches move the statistics without touching older signatures.

Formulas (003 §4, natural logarithms; N documents, dl and avg_dl in terms):

* A1 TF: weight tf.
* A2 TF*IDF: ``tf / (2 (0.25 + 0.75 dl/avg_dl) + tf) * ln((N - df + 0.5) / (df + 0.5))`` (BM25, k=2, b=0.75).
* A3 TF*RIDF: ``(0.5 + 0.5 tf/tf_max) * (-ln(df/N) + ln(1 - exp(-cf/N)))``.
* A10 OptFreq: ``(0.5 + 0.5 tf/tf_max) * IDF_opt``, ``IDF = -ln(df/N)``,
  ``IDF_opt = sqrt(IDF/11.5)`` if ``IDF < 11.5`` else ``11.5/IDF``.

A1/A2/A3/A10: the 6 terms of largest weight (ties: alphabetical), sorted
alphabetically (code point order), joined by single spaces; the signature is
CRC32 (zlib) of the UTF-8 string. A4: the 2 longest sentences (in words; ties
alphabetical), sorted alphabetically, joined by a space, CRC32. A5: the same
with the 2 heaviest sentences, a sentence's weight being the sum of the A2
weights of its term occurrences. A12 (003 §6.2): CRC32 signatures of the 3
longest sentences and of the 5 longest distinct words (longest first, ties by
signature), the number of words of 3 or more letters, the number of sentences.
000's lexical image: the document's terms whose collection frequency lies in
``[0.00001, 0.5]`` times the largest collection frequency.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..sqlfiles import query
from ..text import Analysis

STATS_METHODS = ("lexical", "a1", "a2", "a3", "a5", "a7", "a9", "a10")
#: A9 (Ilyinsky's support words, 003 §2): thresholds on a grid of relative frequencies, the "Δ-neighbourhood"
#: that measures a word's precision, the precision floor of phase 1, and the size of the final set
#: (003: "оставить набор в 3-5 тысяч").
DESCR_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))
DESCR_DELTA = 0.05
DESCR_MIN_PRECISION = 0.8
DESCR_WORDS = 4000
#: A7: the lexicon keeps terms whose normalised IDF ln(N/df)/ln(N) lies in this band (003 drops "the words
#: with the largest and smallest IDF" without numbers); K thinned lexicons each drop a term with probability P.
LEXRAND_IDF = (0.2, 0.9)
LEXRAND_K = 10
LEXRAND_P = 0.33
LOCAL_METHODS = ("a4", "a12")
LEXICON = (0.00001, 0.5)


def crc32(s: str) -> int:
    return zlib.crc32(s.encode("utf-8"))


def doc_terms(terms: pa.Array, counts: np.ndarray) -> pa.Table:
    """``(doc, term, tf)`` rows: each document's distinct terms with their counts."""
    doc = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    t = pa.table({"doc": doc, "term": terms})
    g = t.group_by(["doc", "term"], use_threads=False).aggregate([([], "count_all")])
    return g.rename_columns(["doc", "term", "tf"])


def sentence_spans(a: Analysis) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per sentence: its document, first word, word count, and byte span ``[start, end)``."""
    first = a.sentence_first
    n_s = first.size
    nxt = np.empty(n_s, dtype=np.int64)
    nxt[:-1] = first[1:]
    if n_s:
        nxt[-1] = a.word_starts.size
    words = nxt - first
    doc = np.repeat(np.arange(a.sentence_counts.size), a.sentence_counts)
    start = a.word_starts[first] if n_s else first
    end = a.word_ends[nxt - 1] if n_s else first
    return doc, first, words, np.stack([start, end]) if n_s else np.zeros((2, 0), dtype=np.int64)


def _sentence_texts(a: Analysis, span: np.ndarray) -> list[str]:
    data = a.data
    return [bytes(data[s:e]).decode("utf-8") for s, e in zip(span[0].tolist(), span[1].tolist())]


def a4(a: Analysis) -> tuple[list[list[str]], list[int]]:
    doc, _, words, span = sentence_spans(a)
    texts = _sentence_texts(a, span)
    per_doc: list[list[tuple[int, str]]] = [[] for _ in range(a.sentence_counts.size)]
    for d, n, t in zip(doc.tolist(), words.tolist(), texts):
        per_doc[d].append((-n, t))
    out_s, out_c = [], []
    for sents in per_doc:
        top = sorted(t for _, t in sorted(sents)[:2])
        out_s.append(top)
        out_c.append(crc32(" ".join(top)) if top else 0)
    return out_s, out_c


def a12(a: Analysis, words: pa.Array) -> tuple[pa.Array, pa.Array, np.ndarray, np.ndarray]:
    """A12 records of a chunk: ``(ss lists, ws lists, len, num)``.

    Ranking is vectorised: every candidate becomes one integer key
    ``(document, -length, signature)`` and one ``np.unique`` sorts them and drops
    repeated words; CRC32 is computed once per sentence and once per distinct
    word of the chunk.
    """
    n_docs = a.sentence_counts.size
    doc, _, n_words, span = sentence_spans(a)
    mv = memoryview(a.data)
    s_sig = np.fromiter((zlib.crc32(mv[x:y]) for x, y in zip(span[0].tolist(), span[1].tolist())), dtype=np.int64, count=doc.size)
    ss = _top_per_doc(doc, n_words, s_sig, 3, n_docs)
    wdoc = np.repeat(np.arange(n_docs, dtype=np.int64), a.word_counts)
    wl = pc.utf8_length(words).to_numpy(zero_copy_only=False).astype(np.int64) if len(words) else np.zeros(0, np.int64)
    long_enough = np.bincount(wdoc[wl >= 3], minlength=n_docs)
    w_sig = np.zeros(0, np.int64)
    if len(words):
        enc = pc.dictionary_encode(words)
        uniq_sig = np.fromiter((crc32(w) for w in enc.dictionary.to_pylist()), dtype=np.int64, count=len(enc.dictionary))
        w_sig = uniq_sig[enc.indices.to_numpy(zero_copy_only=False)]
    ws = _top_per_doc(wdoc, wl, w_sig, 5, n_docs)
    return ss, ws, long_enough.astype(np.int32), a.sentence_counts.astype(np.int32)


def _top_per_doc(doc: np.ndarray, length: np.ndarray, sig: np.ndarray, k: int, n_docs: int) -> pa.Array:
    """Per document, the distinct signatures of its ``k`` longest items (ties by signature), longest first."""
    if n_docs >= 1 << 15:
        raise ValueError("at most 32767 documents per chunk")
    key = np.sort((doc << 48) | ((0xFFFF - np.minimum(length, 0xFFFF)) << 32) | sig)
    if key.size:
        distinct = np.ones(key.size, dtype=bool)
        distinct[1:] = key[1:] != key[:-1]
        key = key[distinct]
    d = key >> 48
    starts = np.searchsorted(d, np.arange(n_docs))
    rank = np.arange(key.size) - starts[d] if key.size else np.zeros(0, dtype=np.int64)
    # the same signature at two lengths cannot happen for one word or sentence text
    take = key[rank < k]
    counts = np.bincount(take >> 48, minlength=n_docs)
    offs = np.zeros(n_docs + 1, dtype=np.int32)
    np.cumsum(counts, out=offs[1:])
    return pa.ListArray.from_arrays(pa.array(offs), pa.array((take & 0xFFFFFFFF).astype(np.uint32)))


def sentence_tables(a: Analysis, keep: np.ndarray, terms: pa.Array) -> tuple[pa.Table, pa.Table]:
    """For A5: ``(doc, sent, term)`` for every preprocessed term occurrence and ``(doc, sent, text)``
    for every sentence; ``sent`` numbers the chunk's sentences."""
    doc, first, n_words, span = sentence_spans(a)
    sent_of_word = np.repeat(np.arange(first.size, dtype=np.int64), n_words)
    s = sent_of_word[np.flatnonzero(keep)]
    occurrences = pa.table({"doc": doc[s], "sent": s, "term": terms})
    texts = pa.table({"doc": doc, "sent": np.arange(first.size, dtype=np.int64), "text": pa.array(_sentence_texts(a, span), pa.string())})
    return occurrences, texts


def weights(kind: str, t: pa.Table, n: int, avg_dl: float) -> np.ndarray:
    tf = t.column("tf").to_numpy().astype(np.float64)
    if kind == "a1":
        return tf
    df = t.column("df").to_numpy().astype(np.float64)
    N = float(max(n, 1))
    if kind == "a2":
        dl = t.column("dl").to_numpy().astype(np.float64)
        return tf / (2 * (0.25 + 0.75 * dl / max(avg_dl, 1e-12)) + tf) * np.log((N - df + 0.5) / (df + 0.5))
    tf_max = t.column("tf_max").to_numpy().astype(np.float64)
    tfn = 0.5 + 0.5 * tf / tf_max
    if kind == "a3":
        cf = t.column("cf").to_numpy().astype(np.float64)
        return tfn * (-np.log(df / N) + np.log(-np.expm1(-cf / N)))
    if kind == "a10":
        idf = -np.log(df / N)
        with np.errstate(divide="ignore", invalid="ignore"):
            opt = np.where(idf < 11.5, np.sqrt(np.maximum(idf, 0) / 11.5), 11.5 / idf)
        return tfn * opt
    raise ValueError(kind)


def lexrand(docs: list[list[str]], seed: int) -> tuple[list[list[str]], list[list[int]]]:
    """A7 signatures: SHA1 of the sorted lexicon terms of each document, then of its terms in each of
    ``LEXRAND_K`` thinned lexicons; ``keys`` are 64-bit posting keys that include the coordinate, so only
    the same coordinate of two documents can match.

    Thinned lexicon k keeps a term when xxh3-64 of (term, seed + k) is at least ``P * 2^64``: a fixed
    random draw per term, so membership does not move as the vocabulary grows. An empty intersection
    gives the SHA1 of the empty string.
    """
    import hashlib

    import xxhash

    limit = int(LEXRAND_P * 2**64)
    member: dict[str, list[bool]] = {}
    sigs, keys = [], []
    for terms in docs:
        subsets = [terms] + [[] for _ in range(LEXRAND_K)]
        for t in terms:
            m = member.get(t)
            if m is None:
                b = t.encode("utf-8")
                m = member[t] = [xxhash.xxh3_64_intdigest(b, seed + k) >= limit for k in range(1, LEXRAND_K + 1)]
            for k, keep in enumerate(m, start=1):
                if keep:
                    subsets[k].append(t)
        s = [hashlib.sha1(" ".join(x).encode("utf-8")).hexdigest() for x in subsets]
        sigs.append(s)
        keys.append([xxhash.xxh3_64_intdigest(f"{k}:{h}".encode(), seed) for k, h in enumerate(s)])
    return sigs, keys


def choose_support_words(terms: np.ndarray, rtf: np.ndarray) -> pa.Table:
    """A9's dictionary: for every candidate word a threshold, then the best ``DESCR_WORDS`` words.

    A word's precision at threshold t is 1 - (documents with rtf within t ± Δ) / (documents with the
    word): the fewer documents sit near the threshold, the less a small edit flips the bit. Phase 1
    picks the threshold of largest coverage (documents with rtf > t) among those of precision at least
    ``DESCR_MIN_PRECISION``; phase 2 picks, among thresholds keeping that coverage, the most precise.
    Words with no admissible threshold are dropped; the rest are ranked by precision, then coverage,
    then alphabetically, and the first ``DESCR_WORDS`` kept. (003 sketches an iteration of the two
    phases that drops the worst words each round; with per-word thresholds that do not depend on the
    other words, one round followed by the ranking is the same.)
    """
    order = np.argsort(terms, kind="stable")
    terms, rtf = terms[order], rtf[order]
    uniq, start = np.unique(terms, return_index=True)
    bounds = np.append(start, terms.size)
    grid = np.array(DESCR_GRID)
    out_t, out_thr, out_cov, out_prec = [], [], [], []
    for k, word in enumerate(uniq.tolist()):
        r = np.sort(rtf[bounds[k] : bounds[k + 1]])
        n = r.size
        cov = n - np.searchsorted(r, grid, side="right")
        near = np.searchsorted(r, grid + DESCR_DELTA + 1e-12, side="right") - np.searchsorted(r, grid - DESCR_DELTA - 1e-12, side="left")
        prec = 1.0 - near / n
        ok = prec >= DESCR_MIN_PRECISION
        if not ok.any():
            continue
        best_cov = cov[ok].max()
        keep = cov >= best_cov
        if best_cov == 0:
            continue
        cand = np.flatnonzero(keep)
        i = cand[np.lexsort((grid[cand], -prec[cand]))[0]]
        out_t.append(word)
        out_thr.append(float(grid[i]))
        out_cov.append(int(cov[i]))
        out_prec.append(float(prec[i]))
    t = pa.table({"term": pa.array(out_t, pa.string()), "threshold": out_thr, "coverage": pa.array(out_cov, pa.int64()), "precision": out_prec})
    if t.num_rows > DESCR_WORDS:
        idx = sorted(range(t.num_rows), key=lambda i: (-out_prec[i], -out_cov[i], out_t[i]))[:DESCR_WORDS]
        t = t.take(pa.array(sorted(idx)))
    return t


def descr_words(con, lo: int, hi: int, seed: int) -> None:
    """A9 signatures of documents lo..hi; chooses the support words first if there are none yet."""
    import xxhash

    if con.execute("SELECT count(*) FROM support_words").fetchall()[0][0] == 0:
        rows = con.sql(query("lexical", "relative_tf"), params=[lo, hi, lo, hi]).to_arrow_table()
        chosen = choose_support_words(rows.column("term").to_numpy(zero_copy_only=False).astype(str), rows.column("rtf").to_numpy())
        _insert(con, "support_words", chosen)
    rows = con.sql(query("lexical", "descr_signatures"), params=[lo, hi, lo, hi]).to_arrow_table()
    found = dict(zip(rows.column("doc_id").to_pylist(), rows.column("words").to_pylist()))
    ids = _doc_ids(con, lo, hi)
    words = [found.get(i, []) for i in ids]
    # the empty signature (no support word above its threshold) is 0 and matches nothing
    sig = [xxhash.xxh64_intdigest(" ".join(w).encode("utf-8"), seed) if w else 0 for w in words]
    _insert(con, "fp_a9", pa.table({"doc_id": pa.array(ids, pa.int64()), "words": pa.array(words, pa.list_(pa.string())),
                                    "signature": pa.array(sig, pa.uint64())}))


def batch_end(con, lo: int, hi: int, methods: tuple[str, ...], seed: int = 0) -> None:
    """Update ``term_stats`` with batch documents ``lo..hi`` and write their statistics-based fingerprints."""
    con.execute(query("lexical", "update_term_stats"), [lo, hi])
    n, avg_dl, max_cf = con.execute(query("lexical", "stats")).fetchall()[0]
    wanted = [m for m in methods if m in STATS_METHODS]
    if "lexical" in wanted:
        rows = con.sql(query("lexical", "lexical_image"), params=[LEXICON[0] * max_cf, LEXICON[1] * max_cf, lo, hi]).to_arrow_table()
        _insert(con, "fp_lexical", _every_doc(con, rows, lo, hi, {"words": []}))
    if "a7" in wanted:
        rows = con.sql(query("lexical", "lexrand_terms"), params=[n, n, LEXRAND_IDF[0], LEXRAND_IDF[1], lo, hi]).to_arrow_table()
        found = dict(zip(rows.column("doc_id").to_pylist(), rows.column("terms").to_pylist()))
        ids = _doc_ids(con, lo, hi)  # the batch's documents; those without lexicon terms sign the empty set
        sigs, keys = lexrand([found.get(i, []) for i in ids], seed)
        _insert(con, "fp_a7", pa.table({"doc_id": pa.array(ids, pa.int64()), "signatures": pa.array(sigs, pa.list_(pa.string())),
                                         "keys": pa.array(keys, pa.list_(pa.uint64()))}))
    if "a9" in wanted:
        descr_words(con, lo, hi, seed)
    need = [m for m in wanted if m in ("a1", "a2", "a3", "a10", "a5")]
    if not need:
        return
    t = con.sql(query("lexical", "weights"), params=[lo, hi, lo, hi]).to_arrow_table()
    for m in need:
        kind = "a2" if m == "a5" else m
        w = pa.table({"doc_id": t.column("doc_id"), "term": t.column("term"), "wt": weights(kind, t, n, avg_dl)})
        con.register("w", w)
        try:
            if m == "a5":
                rows = con.sql(query("lexical", "heavy_sentences")).to_arrow_table()
                col = "sentences"
            else:
                rows = con.sql(query("lexical", "top6")).to_arrow_table()
                col = "words"
        finally:
            con.unregister("w")
        # a document without terms (or sentences) gets no signature: 0, which matches nothing
        sigs = pa.array([crc32(" ".join(x)) if x else 0 for x in rows.column(col).to_pylist()], pa.uint32())
        _insert(con, f"fp_{m}", _every_doc(con, rows.append_column("crc32", sigs), lo, hi, {col: [], "crc32": 0}))


def _doc_ids(con, lo: int, hi: int) -> list[int]:
    """The documents with ids lo..hi, ascending (`neardup delete` leaves gaps in a batch's range)."""
    return [d for (d,) in con.execute("SELECT doc_id FROM documents WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id", [lo, hi]).fetchall()]


def _every_doc(con, rows: pa.Table, lo: int, hi: int, empty: dict) -> pa.Table:
    """``rows`` (one per document that has any) completed with ``empty`` rows for the other
    documents lo..hi, so that every method has one row per document."""
    have = set(rows.column("doc_id").to_pylist())
    missing = [i for i in _doc_ids(con, lo, hi) if i not in have]
    if not missing:
        return rows
    extra = pa.table({"doc_id": pa.array(missing, pa.int64()), **{k: pa.array([v] * len(missing), rows.schema.field(k).type) for k, v in empty.items()}})
    return pa.concat_tables([rows, extra.select(rows.column_names)]).sort_by("doc_id")


def _insert(con, table: str, rows: pa.Table) -> None:
    con.register("new_fp", rows)
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_fp")
    finally:
        con.unregister("new_fp")
