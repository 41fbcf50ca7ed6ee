"""Keys of the inverted index, derived from catalog rows.

The postings are a pure function of the ``documents`` rows of a batch, which
is what lets a crashed batch's postings be re-derived from the catalog.

Tables:

* ``url``: xxh3-64 of the url (UTF-8, seed 0) -> doc ids (all versions).
* ``val:docinfo`` (a row table of 16 bytes): doc id -> its content hash and the
  xxh3-64 of its url with seed 1, big-endian. With the ``url`` list it tells a
  batch the versions of a url without reading the catalog: the url's documents
  are those of its list whose second hash matches (two independent 64-bit
  hashes: a chance match is a 2^-128 event), its versions 1..n in doc-id order,
  the last one latest (the catalog's rule, kept by ``neardup delete`` too).
* ``content``: ``content_hash`` -> doc ids (exact duplicates share a list).
* one table per equal-key fingerprint method (A0-A10 and ``a6_36``):
  its keys (``neardup.fingerprints.POSTINGS``) -> doc ids.
* the pair generators' keys (``neardup.pairs.candidate_postings``): ``lsh``
  (min-hash bands), ``simhash_tables``/``simhash_hp_tables`` (permuted
  tables), ``bottomk_prefix``, ``a11`` (bottom-k shingles), ``a12_ss``
  (A12 sentence signatures) -> doc ids.
* ``concept_values`` (every bottom-k sketch value) and ``concept_frequent``
  (values a batch held in many documents) -> doc ids, for the concept
  neighbours (``neardup.neighbours``), and the value table ``val:bottomk``
  (doc id -> sketch).
"""

from __future__ import annotations

import numpy as np
import xxhash


def hash64(strings: list[str], seed: int = 0) -> np.ndarray:
    """xxh3-64 of each string's UTF-8 bytes, as uint64 (same on every machine)."""
    h = xxhash.xxh3_64_intdigest
    return np.fromiter((h(s.encode("utf-8"), seed) for s in strings), dtype=np.uint64, count=len(strings))


#: seed of the url's second hash in ``val:docinfo``
URL_CHECK_SEED = 1
DOCINFO = "docinfo"


def docinfo_rows(content_hashes: np.ndarray, urls: list[str]) -> np.ndarray:
    """``(n, 16)`` uint8 rows of ``val:docinfo``: content hash and the url's check hash, big-endian."""
    both = np.stack([np.asarray(content_hashes, dtype=np.uint64), hash64(urls, URL_CHECK_SEED)], axis=1)
    return both.astype(">u8").view(np.uint8).reshape(len(urls), 16)


def derive_postings(doc_ids: np.ndarray, urls: list[str], content_hashes: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{table: (keys, doc_ids)}`` for a set of documents (``val:`` tables: ``(doc_ids, values)``)."""
    ids = np.asarray(doc_ids, dtype=np.uint64)
    raw = docinfo_rows(content_hashes, urls).tobytes()
    return {
        "url": (hash64(urls), ids),
        "content": (np.asarray(content_hashes, dtype=np.uint64), ids),
        "val:" + DOCINFO: (ids, [raw[i : i + 16] for i in range(0, len(raw), 16)]),
    }


#: tables whose rows a batch writes for itself as a whole (keyed to its first doc id), not per
#: document: ``fingerprint_postings`` of part of a batch gets them wrong (``neardup check`` skips them then)
BATCH_TABLES = ("concept_frequent",)


def batch_postings(con, batch_id: int, settings, fingerprints: dict | None = None, written=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every posting of one batch, read back from its catalog rows; ``fingerprints``: its
    ``fingerprint_postings``, when the batch computed them from the same rows before its commit
    (they are then not read again); ``written``: the batch's rows as it inserted them
    (``store.rows.WrittenRows``, every document of the batch), read instead of the catalog's."""
    from .sqlfiles import query

    if written is not None and written.column("documents", "url") is not None:
        t = written.table()
    else:
        t = con.sql(query("catalog", "batch_posting_rows"), params=[batch_id]).to_arrow_table()
    out = derive_postings(t.column("doc_id").to_numpy(), t.column("url").to_pylist(), t.column("content_hash").to_numpy())
    if t.num_rows == 0:
        return out
    if fingerprints is not None:
        out.update(fingerprints)
        return out
    lo, hi = int(t.column("doc_id")[0].as_py()), int(t.column("doc_id")[-1].as_py())
    out.update(fingerprint_postings(con, lo, hi, settings))
    return out


def fingerprint_postings(con, lo: int, hi: int, settings, candidates: dict | None = None,
                         concept: dict | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The postings of documents ``lo..hi`` that come from their fingerprint rows (every table but
    ``url`` and ``content``); per document, except ``BATCH_TABLES`` (right for a whole batch only).
    ``candidates``/``concept``: their ``candidate_postings``/``concept_postings`` when the caller
    has them already (an ingest batch derives them from the same rows for its searches)."""
    from .pairs import candidate_postings

    out = dict(candidates) if candidates is not None else candidate_postings(con, lo, hi, settings)
    if "concept" in settings.clusters:
        from .clusters import concept_postings

        out.update(concept if concept is not None else concept_postings(con, lo, hi, settings))
    return out
