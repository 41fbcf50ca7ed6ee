"""Near-duplicate pairs, one batch at a time: candidate generators, then verification.

Every pair method writes rows ``(doc_a, doc_b, method, similarity, batch_id)``
to ``duplicates``, ``doc_a < doc_b``, found by the batch of ``doc_b``. A batch
is matched against itself and against every older document; nothing older is
compared again. Each generator's candidates depend only on the two documents
of a pair (equal keys, or a length window), so ingesting a corpus in one batch
or in many gives the same pairs.

Generators (their keys go to LMDB posting tables, so a batch finds its older
partners by lookups, not by scanning):

* ``lsh``: min-hash LSH bands. ``bands x rows`` come from the index threshold
  (``lsh_params``): the most rows per band for which a pair at the threshold
  still becomes a candidate with probability >= 0.999.
* ``simhash``/``simhash_hp``: Manku et al.'s permuted tables. The 64 bits are
  cut into ``B`` blocks and each table keys on ``B - n`` of them, so two
  simhashes within ``n`` bits agree on every block of at least one table
  (pigeonhole). Exact for ``n <= 7``; beyond that the keys get too short, and
  report 002's length window (word counts within +-20%) is searched in SQL:
  exact inside the window, pairs outside it are not looked for.
* ``bottomk``: prefix filtering on the sorted sketches: a pair whose Broder
  estimate reaches the threshold shares one of the first
  ``len - ceil(t * len) + 1`` values of each sketch.
* equal keys: A0-A5, A7-A10 signatures, A6 megashingles.
* chains in SQL (``sql/chains.sql``): A11 over the bottom-k shingles, A12 over
  the 3+5 sentence signatures.

Verification: ``jaccard`` (the default) keeps the LSH candidates whose full
shingle sets have Jaccard >= threshold, computed exactly; the other methods
keep what their own similarity accepts (see ``PAIR_METHODS``).
"""

from __future__ import annotations

import functools
import itertools
import math
import time

import numpy as np
import pyarrow as pa

from .fingerprints import POSTINGS
from .fingerprints.hashing import P1 as _M1  # the shingle combine's odd multipliers
from .fingerprints.hashing import P2 as _M2
from .settings import PAIR_METHODS, Settings
from .store.postings import VALUES
from .sqlfiles import query

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
#: 003's chain ratio for similarity 0.85, and A12's sentence-count ratio
CHAIN_RATIO = 1.15
SENTENCE_RATIO = 1.20
#: beyond this many bits, simhash pairs come from report 002's length window
MAX_TABLE_BITS = 7


def pair_methods(settings: Settings) -> list[str]:
    """The pair methods an index computes (``settings.pairs``), in a fixed order."""
    return [m for m in PAIR_METHODS if m in settings.pairs]


# -- keys --------------------------------------------------------------------


@functools.cache
def lsh_params(threshold: float, perms: int, target: float = 0.999) -> tuple[int, int]:
    """``(bands, rows)``: the most rows per band (fewest chance candidates) for which a pair
    of Jaccard ``threshold`` becomes a candidate with probability >= ``target``."""
    best = (perms, 1)
    for rows in range(1, perms + 1):
        bands = perms // rows
        if 1 - (1 - threshold**rows) ** bands >= target:
            best = (bands, rows)
    return best




def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * _M2
    return h ^ (h >> np.uint64(29))


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``(n_docs, bands)`` keys: band ``j`` hashes positions ``j*rows .. j*rows+rows-1`` with ``j``."""
    n = sig.shape[0]
    out = np.empty((n, bands), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(bands):
            h = np.full(n, np.uint64(j + 1) * _M1, dtype=np.uint64)
            for r in range(rows):
                h = _mix(h ^ sig[:, j * rows + r]) * _M1
            out[:, j] = _mix(h)
    return out


@functools.cache
def simhash_plan(bits: int) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, ...], ...]] | None:
    """``(blocks, tables)`` for pairs within ``bits`` bits, or None past ``MAX_TABLE_BITS``.

    ``blocks``: ``(shift, width)`` of ``B`` contiguous bit ranges covering 64 bits;
    ``tables``: which blocks each table keys on (``B - bits`` of them, every
    choice). With ``B = bits + 2`` each table keys on two blocks: at 3 bits, 10
    tables of about 26 bits; at 7, 36 tables of about 14 bits. (One block per
    table, ``B = bits + 1``, would need only 4 tables at 3 bits, but 16-bit keys
    collide often: simhashes are far from uniform, as report 002 observed.)
    """
    if bits > MAX_TABLE_BITS:
        return None
    n_blocks = bits + 2 if bits else 1
    edges = [round(64 * i / n_blocks) for i in range(n_blocks + 1)]
    blocks = tuple((edges[i], edges[i + 1] - edges[i]) for i in range(n_blocks))
    tables = tuple(itertools.combinations(range(n_blocks), n_blocks - bits))
    return blocks, tables


def simhash_keys(values: np.ndarray, bits: int) -> np.ndarray:
    """``(n_docs, tables)`` keys of ``simhash_plan(bits)``: a table's key is the table's
    number and the bits of its blocks (everything else masked), hashed."""
    plan = simhash_plan(bits)
    assert plan is not None
    blocks, tables = plan
    v = np.asarray(values, dtype=np.uint64)
    out = np.empty((v.size, len(tables)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for t, chosen in enumerate(tables):
            mask = 0
            for b in chosen:
                shift, width = blocks[b]
                mask |= ((1 << width) - 1) << shift
            out[:, t] = _mix((v & np.uint64(mask)) ^ (np.uint64(t + 1) * _M1)) * _M2
    return out


def prefix_lengths(sizes: np.ndarray, threshold: float, shared: int = 1) -> np.ndarray:
    """Prefix-filter lengths ``size - ceil(t * size) + shared``, at most ``size``.

    Two sorted sets that must share ``o >= ceil(t * size)`` values (for each of
    the two sizes) share at least ``min(shared, o)`` values among these
    prefixes: the j-th common value sits at most ``size - o`` places after
    position j in either set.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    need = np.ceil(threshold * sizes - 1e-9).astype(np.int64)
    return np.minimum(np.where(sizes > 0, sizes - need + shared, 0), sizes)


def _small_sketches(con, ids: np.ndarray, threshold: float) -> np.ndarray:
    """Of ``ids``, the documents whose sketch needs fewer than 2 shared values."""
    if ids.size == 0:
        return ids
    t = _fetch(con, "fp_bottomk", "len(f.sketch) AS n", ids)
    n = t.column("n").to_numpy()
    return t.column("doc_id").to_numpy()[np.ceil(threshold * n - 1e-9) < 2]


# -- reading fingerprints back ----------------------------------------------


def _lists(con, table: str, column: str, lo: int, hi: int) -> tuple[np.ndarray, pa.Array]:
    t = con.sql(f"SELECT doc_id, {column} FROM {table} WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id", params=[lo, hi]).to_arrow_table()
    return t.column("doc_id").to_numpy(), t.column(column).combine_chunks()


def _flat(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.compute as pc

    lens = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64)
    return col.flatten().to_numpy(zero_copy_only=False).astype(np.uint64), lens


def candidate_postings(con, lo: int, hi: int, settings: Settings) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{table: (keys, doc_ids)}`` of the pair generators for documents ``lo..hi``,
    from their catalog rows (so crash recovery derives them the same way)."""
    from .fingerprints import posting_keys

    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    on = set(settings.pairs)
    if on & {"jaccard", "minhash"}:
        ids, col = _lists(con, "fp_minhash", "signature", lo, hi)
        if ids.size:
            bands, rows = lsh_params(settings.threshold, settings.minhash_perms)
            flat, _ = _flat(col)
            sig = flat.reshape(ids.size, settings.minhash_perms)
            keys = band_keys(sig, bands, rows)
            ok = ~(sig == EMPTY).any(axis=1)
            out["lsh"] = (keys[ok].ravel(), np.repeat(ids[ok], bands).astype(np.uint64))
            if "jaccard" in on:  # the low 32 bits of each min-hash, for the agreement filter
                raw = (sig & np.uint64(0xFFFFFFFF)).astype(">u4").tobytes()
                width = 4 * settings.minhash_perms
                out[VALUES + SIGNATURE_VALUES] = (ids.astype(np.uint64), [raw[i : i + width] for i in range(0, len(raw), width)])
    if on & {"jaccard", "a11"}:  # the full sets, read back by later batches' verification
        t = con.sql("SELECT doc_id, hashes FROM fp_shingles WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id", params=[lo, hi]).to_arrow_table()
        out[VALUES + "shingles"] = (t.column("doc_id").to_numpy().astype(np.uint64), t.column("hashes").to_pylist())
    for m in ("simhash", "simhash_hp"):
        if m in on and simhash_plan(settings.simhash_bits) is not None:
            t = con.sql(f"SELECT doc_id, simhash FROM fp_{m} WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id", params=[lo, hi]).to_arrow_table()
            ids = t.column("doc_id").to_numpy()
            h = t.column("simhash").to_numpy().astype(np.uint64)
            keys = simhash_keys(h, settings.simhash_bits)
            out[f"{m}_tables"] = (keys.ravel(), np.repeat(ids, keys.shape[1]).astype(np.uint64))
            raw = h.astype(">u8").tobytes()
            out[VALUES + m] = (ids.astype(np.uint64), [raw[i : i + 8] for i in range(0, len(raw), 8)])
    if on & {"bottomk", "a11"}:
        ids, col = _lists(con, "fp_bottomk", "sketch", lo, hi)
        flat, lens = _flat(col)
        if "bottomk" in on:
            pre = prefix_lengths(lens, settings.threshold, shared=2)
            starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) if lens.size else lens
            take = np.concatenate([np.arange(s, s + p) for s, p in zip(starts.tolist(), pre.tolist())]) if pre.sum() else np.zeros(0, np.int64)
            out["bottomk_prefix"] = (flat[take], np.repeat(ids, pre).astype(np.uint64))
        if "a11" in on:
            out["a11"] = (flat, np.repeat(ids, lens).astype(np.uint64))
    for m, (column, kind) in POSTINGS.items():
        if m in on:
            t = con.sql(f"SELECT doc_id, {column} FROM fp_{m} WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id", params=[lo, hi]).to_arrow_table()
            out[m] = posting_keys(kind, t.column(column).combine_chunks(), t.column("doc_id").to_numpy())
    if "a12" in on:
        ids, col = _lists(con, "fp_a12", "ss", lo, hi)
        flat, lens = _flat(col)
        out["a12_ss"] = (flat, np.repeat(ids, lens).astype(np.uint64))
    return out


# -- candidate pairs from keys ------------------------------------------------


def _within(rep: np.ndarray) -> np.ndarray:
    """For runs of lengths ``rep`` laid end to end: each element's position in its run."""
    return np.arange(int(rep.sum())) - np.repeat(np.cumsum(rep) - rep, rep)


def _encode(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)


def _decode(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (code >> np.uint64(32)).astype(np.int64), (code & np.uint64(0xFFFFFFFF)).astype(np.int64)


class KeyGroups:
    """A batch's candidate keys grouped once (equal keys adjacent, ids ascending within a key), so
    the pairs of any range of its documents can be emitted without sorting the batch again."""

    def __init__(self, keys: np.ndarray, docs: np.ndarray):
        if docs.size and int(docs.max()) >= 1 << 32:
            raise ValueError("doc ids beyond 2^32 are not supported by the pair encoder")
        order = np.lexsort((docs, keys))
        self.k, self.d = keys[order], docs[order].astype(np.int64)
        self.uk, self.first = np.unique(self.k, return_index=True)
        size = np.diff(np.r_[self.first, self.k.size])
        self.group = np.repeat(np.arange(self.uk.size), size)
        self.pos = np.arange(self.k.size) - self.first[self.group]  # earlier holders in the batch

    def pairs(self, lo: int, postings, table: str, first: int, last: int,
              min_shared: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The distinct pairs ``(a, b)``, ``a < b``, with ``b`` among the new documents
        ``first..last`` and ``a`` any earlier document (new, or older from ``postings[table]``),
        sharing at least ``min_shared`` keys; how many each shares; the rows emitted."""
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
        sel = np.flatnonzero((self.d >= first) & (self.d <= last))
        if sel.size == 0:
            return none
        codes = []
        # within the batch: each element with each earlier element of its key group
        rep = self.pos[sel]
        if rep.any():
            codes.append(_encode(self.d[np.repeat(self.first[self.group[sel]], rep) + _within(rep)], np.repeat(self.d[sel], rep)))
        # against older documents: every old id of a key with every document of the range holding it
        if postings is not None:
            g, g_at, g_cnt = np.unique(self.group[sel], return_index=True, return_counts=True)
            which, old = postings.get_flat(table, self.uk[g])
            keep = old < np.uint64(lo)
            which, old = which[keep], old[keep].astype(np.int64)
            if old.size:
                rep = g_cnt[which]  # the range's documents per key (adjacent in sel: ids ascend in a group)
                codes.append(_encode(np.repeat(old, rep), self.d[sel[np.repeat(g_at[which], rep) + _within(rep)]]))
        if not codes:
            return none
        code = np.concatenate(codes)
        rows = int(code.size)
        code.sort()
        starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        shared = np.diff(np.r_[starts, code.size])
        a, b = _decode(code[starts])
        keep = (a != b) & (shared >= min_shared)
        return a[keep], b[keep], shared[keep], rows


def key_pairs(keys: np.ndarray, docs: np.ndarray, lo: int, postings, table: str,
              min_shared: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct pairs ``(a, b)``, ``a < b``, of documents sharing at least ``min_shared`` keys,
    at least one of them new, and how many keys each shares: ``keys``/``docs`` are the new
    documents' keys (ids >= ``lo``, a key at most once per document); older partners
    (ids < ``lo``) come from ``postings[table]``."""
    if keys.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    a, b, shared, _ = KeyGroups(keys, docs).pairs(lo, postings, table, int(docs.min()), int(docs.max()), min_shared)
    return a, b, shared


# -- verification -------------------------------------------------------------


def _fetch(con, table: str, columns: str, ids: np.ndarray) -> pa.Table:
    con.register("want_ids", pa.table({"doc_id": pa.array(np.unique(ids), pa.int64())}))
    try:
        return con.sql(f"SELECT f.doc_id, {columns} FROM {table} f SEMI JOIN want_ids w ON f.doc_id = w.doc_id ORDER BY f.doc_id").to_arrow_table()
    finally:
        con.unregister("want_ids")


def _rows_of(ids_sorted: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.searchsorted(ids_sorted, want)


#: bytes of older and batch documents' values (signatures, shingle sets, simhashes) kept while a batch
#: is verified slice by slice, so partners shared by many slices are read once
VALUE_CACHE_BYTES = 256 << 20


class ValueCache:
    """Values read for one batch, per value table, dropped whole when they outgrow ``VALUE_CACHE_BYTES``:
    variable-width ones (shingle sets) as ``{doc_id: bytes}``, fixed-width ones (signatures,
    simhashes) as ``(ids ascending, (n, width) uint8 rows)``."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[int, bytes]] = {}
        self.fixed: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.size = 0

    def _grow(self, n_bytes: int) -> bool:
        self.size += n_bytes
        if self.size > VALUE_CACHE_BYTES:
            self.tables.clear()
            self.fixed.clear()
            self.size = 0
            return False
        return True

    def add(self, table: str, got: dict) -> None:
        if self._grow(sum(len(v) if isinstance(v, (bytes, bytearray)) else 64 for v in got.values()) + 100 * len(got)):
            self.tables.setdefault(table, {}).update(got)

    def add_fixed(self, table: str, ids: np.ndarray, rows: np.ndarray) -> None:
        if not ids.size or not self._grow(rows.nbytes + 8 * ids.size):
            return
        if table in self.fixed:
            old_ids, old_rows = self.fixed[table]
            ids, rows = np.concatenate([old_ids, ids]), np.concatenate([old_rows, rows])
        order = np.argsort(ids, kind="stable")
        self.fixed[table] = (ids[order], rows[order])


def _fixed_values(con, postings, lo: int, ids: np.ndarray, fp_table: str, column: str, value_table: str,
                  width: int, encode, cache: ValueCache | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(sorted ids, (n, width) uint8 rows)`` of a fixed-width value: from ``cache``, older
    documents' from the postings' value table (as one buffer, no object per document), the
    rest from the catalog column (``encode(arrow column) -> rows``)."""
    ids = np.unique(ids)
    rows = np.zeros((ids.size, width), np.uint8)
    have = np.zeros(ids.size, bool)
    if cache is not None and value_table in cache.fixed:
        c_ids, c_rows = cache.fixed[value_table]
        pos = np.minimum(np.searchsorted(c_ids, ids), c_ids.size - 1)
        hit = c_ids[pos] == ids
        rows[hit] = c_rows[pos[hit]]
        have = hit
    got_ids, got_rows = [], []
    todo = ids[~have & (ids < lo)]
    if postings is not None and todo.size:
        f_ids, f_rows = postings.get_fixed(value_table, todo, width)
        at = np.searchsorted(ids, f_ids)
        rows[at], have[at] = f_rows, True
        got_ids.append(f_ids)
        got_rows.append(f_rows)
    rest = ids[~have]
    if rest.size:
        t = _fetch(con, fp_table, f"f.{column}", rest)
        r_ids = t.column("doc_id").to_numpy()
        r_rows = encode(t.column(column))
        at = np.searchsorted(ids, r_ids)
        rows[at], have[at] = r_rows, True
        got_ids.append(r_ids)
        got_rows.append(r_rows)
    if not have.all():
        raise ValueError(f"{fp_table}: no {column} for documents {ids[~have][:5].tolist()}")
    if cache is not None and got_ids:
        cache.add_fixed(value_table, np.concatenate(got_ids).astype(np.int64), np.concatenate(got_rows))
    return ids, rows


def _signature_rows(col: pa.ChunkedArray) -> np.ndarray:
    """Catalog min-hash signatures as the value table stores them: the low 32 bits, big-endian."""
    flat = col.combine_chunks().flatten().to_numpy().astype(np.uint64)
    n = len(col)
    return (flat & np.uint64(0xFFFFFFFF)).astype(">u4").view(np.uint8).reshape(n, -1)


def _simhash_rows(col: pa.ChunkedArray) -> np.ndarray:
    """Catalog simhashes as the value table stores them: 8 bytes, big-endian."""
    return col.to_numpy().astype(np.uint64).astype(">u8").view(np.uint8).reshape(len(col), 8)


def _values(con, postings, lo: int, ids: np.ndarray, fp_table: str, column: str, value_table: str,
            cache: ValueCache | None = None) -> tuple[np.ndarray, list[bytes]]:
    """``(sorted ids, their values)``: older documents' from the postings' value table
    (a lookup per document), the batch's own (and any missing) from the catalog; those in
    ``cache`` from there (and the rest are added to it)."""
    ids = np.unique(ids)
    known = cache.tables.get(value_table, {}) if cache is not None else {}
    todo = np.array([i for i in ids.tolist() if i not in known], dtype=np.int64) if known else ids
    got: dict[int, bytes] = {}
    if postings is not None:
        got = postings.get_values(value_table, todo[todo < lo])
    rest = np.array([i for i in todo.tolist() if i not in got], dtype=np.int64)
    if rest.size:
        t = _fetch(con, fp_table, f"f.{column}", rest)
        got.update(zip(t.column("doc_id").to_pylist(), t.column(column).to_pylist()))
    out = [known[i] if i in known else got[i] for i in ids.tolist()]
    if cache is not None:
        cache.add(value_table, got)
    return ids, out


#: value table of the min-hash signatures' low 32 bits (the agreement filter of ``jaccard``)
SIGNATURE_VALUES = "minhash32"
#: chance that the agreement filter drops a pair at the threshold (one-sided binomial tail)
AGREEMENT_RISK = 1e-7


@functools.cache
def min_agreements(threshold: float, perms: int, risk: float = AGREEMENT_RISK) -> int:
    """The most min-hash agreements ``m`` such that a pair of Jaccard ``threshold`` agrees on
    fewer than ``m`` of ``perms`` positions with probability at most ``risk``
    (``P[Binomial(perms, threshold) < m] <= risk``); pairs of higher Jaccard fall below it
    even more rarely."""
    tail, m = 0.0, 0
    for x in range(perms + 1):
        tail += math.comb(perms, x) * threshold**x * (1 - threshold) ** (perms - x)
        if tail > risk:
            break
        m = x + 1
    return m


def agree_enough(con, a: np.ndarray, b: np.ndarray, perms: int, need: int, postings=None, lo: int = 0,
                 cache: ValueCache | None = None) -> np.ndarray:
    """Whether the min-hash signatures of each pair agree on at least ``need`` positions (low
    32 bits compared: a chance agreement of two different values adds at most 2^-32 per position)."""
    from . import kernels

    if a.size == 0:
        return np.zeros(0, bool)
    ids, rows = _fixed_values(con, postings, lo, np.concatenate([a, b]), "fp_minhash", "signature", SIGNATURE_VALUES,
                              4 * perms, _signature_rows, cache)
    sig = rows.view(">u4").reshape(ids.size, perms).astype(np.uint32)
    return kernels.pair_agreements(sig, _rows_of(ids, a), _rows_of(ids, b), need)


def shingle_jaccard(con, a: np.ndarray, b: np.ndarray, postings=None, lo: int = 0, at_least: float | None = None,
                    cache: ValueCache | None = None) -> np.ndarray:
    """Exact Jaccard of the stored word-shingle sets of each pair; with ``at_least``, -1.0 for
    the pairs below it (their merge stops early)."""
    from . import kernels

    if a.size == 0:
        return np.zeros(0)
    ids, blobs = _values(con, postings, lo, np.concatenate([a, b]), "fp_shingles", "hashes", "shingles", cache)
    offs = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum([len(x) // 8 for x in blobs], out=offs[1:])
    data = np.frombuffer(b"".join(blobs), dtype=">u8").astype(np.uint64)
    if at_least is not None:
        return kernels.pair_jaccard_at_least(data, offs, _rows_of(ids, a), _rows_of(ids, b), float(at_least))
    return kernels.pair_jaccard(data, offs, _rows_of(ids, a), _rows_of(ids, b))


def _matrix(con, table: str, column: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = _fetch(con, table, f"f.{column}", ids)
    flat, lens = _flat(t.column(column).combine_chunks())
    return t.column("doc_id").to_numpy(), flat, lens


def minhash_similarity(con, a: np.ndarray, b: np.ndarray, perms: int) -> np.ndarray:
    ids, flat, _ = _matrix(con, "fp_minhash", "signature", np.concatenate([a, b]))
    sig = flat.reshape(ids.size, perms)
    return (sig[_rows_of(ids, a)] == sig[_rows_of(ids, b)]).mean(axis=1)


def bottomk_similarity(con, a: np.ndarray, b: np.ndarray, settings: Settings) -> np.ndarray:
    """Broder's resemblance estimate from the bottom-k sketches of each pair."""
    from . import kernels
    from .fingerprints import sketches

    ids, flat, lens = _matrix(con, "fp_bottomk", "sketch", np.concatenate([a, b]))
    k = settings.bottomk
    if settings.permutation != "universal":  # sketches list original hashes in permuted order
        flat = sketches.permute(flat, 0, 1, settings.seed, settings.permutation)
    offs = np.concatenate([[0], np.cumsum(lens)])
    return kernels.pair_bottomk(flat, offs, _rows_of(ids, a), _rows_of(ids, b), k)


def _simhash_distance(con, method: str, a: np.ndarray, b: np.ndarray, postings=None, lo: int = 0,
                      cache: ValueCache | None = None) -> np.ndarray:
    ids, rows = _fixed_values(con, postings, lo, np.concatenate([a, b]), f"fp_{method}", "simhash", method, 8, _simhash_rows, cache)
    v = rows.view(">u8").ravel().astype(np.uint64)
    return np.bitwise_count(v[_rows_of(ids, a)] ^ v[_rows_of(ids, b)]).astype(np.int64)


def _shared_lists(con, table: str, column: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many values each pair's two lists share."""
    ids, flat, lens = _matrix(con, table, column, np.concatenate([a, b]))
    offs = np.concatenate([[0], np.cumsum(lens)])
    ra, rb = _rows_of(ids, a), _rows_of(ids, b)
    return np.array([np.intersect1d(flat[offs[x] : offs[x + 1]], flat[offs[y] : offs[y + 1]]).size for x, y in zip(ra.tolist(), rb.tolist())], dtype=np.int64)


# -- one batch ------------------------------------------------------------------


#: candidate rows (key matches before deduplication) one slice of a batch's documents may emit; the
#: slices' documents are chosen from the rows per document seen so far (bounds the memory of a batch)
CANDIDATE_BUDGET = 4_000_000
#: documents in a batch's first slice
FIRST_SLICE = 2_000
#: methods whose candidates are not keys of the new documents: found once over the whole batch
_WHOLE_BATCH = ("a11", "a12")


def find_batch_pairs(con, postings, lo: int, hi: int, batch_id: int, settings: Settings,
                     timings: dict[str, float] | None = None, keys: dict | None = None,
                     budget: int | None = None) -> dict[str, int]:
    """Find and insert every pair method's pairs for new documents ``lo..hi`` (the batch's
    own catalog rows must be written; ``postings`` holds the older documents' keys and
    may hold more: only ids below ``lo`` are read from it). Returns pairs per method.

    Key-matched candidates are found and verified for slices of the batch's documents (the
    pairs whose newer member is in the slice), each emitting about ``budget`` rows
    (``CANDIDATE_BUDGET``), so memory
    does not grow with the batch or with the longest posting lists; the pairs do not depend on
    the slicing."""
    methods = pair_methods(settings)
    if not methods or hi < lo:
        return {}
    budget = budget or CANDIDATE_BUDGET
    t0 = time.perf_counter()
    if keys is None:
        keys = candidate_postings(con, lo, hi, settings)
    t_keys = time.perf_counter()
    found: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {m: [] for m in methods}
    spent = [0.0]  # seconds finding candidates; the rest of the loop verifies them

    def timed(fn, *args):
        t_in = time.perf_counter()
        out = fn(*args)
        spent[0] += time.perf_counter() - t_in
        return out

    whole = [m for m in methods if m in _WHOLE_BATCH or (m in ("simhash", "simhash_hp") and simhash_plan(settings.simhash_bits) is None)]
    for m in whole:
        found[m].append(_whole_batch_pairs(con, m, keys, lo, hi, postings, settings, timed))
    keyed = [m for m in methods if m not in whole]
    groups: dict[str, KeyGroups] = {}
    values = ValueCache()
    first, step = lo, FIRST_SLICE
    while keyed and first <= hi:
        last = min(hi, first + step - 1)
        cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        rows = [0]

        def cand(table: str) -> tuple[np.ndarray, np.ndarray]:
            if table not in cache:
                cache[table] = timed(_cand, table)
            return cache[table]

        def _cand(table: str) -> tuple[np.ndarray, np.ndarray]:
            if table not in groups:
                k, d = keys.get(table, (np.zeros(0, np.uint64), np.zeros(0, np.uint64)))
                groups[table] = KeyGroups(k, d)
            a, b, shared, n = groups[table].pairs(lo, postings, table, first, last)
            rows[0] += n
            if table == "bottomk_prefix":  # two shared prefix values, or a sketch too small for two
                small = _small_sketches(con, np.unique(np.concatenate([a, b])), settings.threshold)
                ok = (shared >= 2) | np.isin(a, small) | np.isin(b, small)
                a, b = a[ok], b[ok]
            return a, b

        for m in keyed:
            found[m].append(_verify(con, m, cand, postings, lo, settings, values))
        step = max(1, int(budget * (last - first + 1) / max(rows[0], 1)))
        first = last + 1
    t_verify = time.perf_counter()
    counts = {}
    for m, parts in found.items():
        a, b, sim = (np.concatenate(c) for c in zip(*parts)) if parts else (np.zeros(0, np.int64),) * 3
        counts[m] = int(a.size)
        if a.size:
            order = np.lexsort((b, a))
            rows = pa.table({
                "doc_a": pa.array(a[order], pa.int64()), "doc_b": pa.array(b[order], pa.int64()),
                "method": pa.array([m] * a.size, pa.string()), "similarity": pa.array(np.asarray(sim, np.float64)[order], pa.float64()),
                "batch_id": pa.array(np.full(a.size, batch_id, np.int32)),
            })
            con.register("new_pairs", rows)
            try:
                con.execute("INSERT INTO duplicates BY NAME SELECT * FROM new_pairs")
            finally:
                con.unregister("new_pairs")
    if timings is not None:
        timings["candidate keys"] = timings.get("candidate keys", 0.0) + t_keys - t0
        timings["candidates"] = timings.get("candidates", 0.0) + spent[0]
        timings["verify"] = timings.get("verify", 0.0) + t_verify - t_keys - spent[0]
        timings["store pairs"] = timings.get("store pairs", 0.0) + time.perf_counter() - t_verify
    return counts


def _verify(con, m: str, cand, postings, lo: int, settings: Settings,
            cache: ValueCache | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of method ``m`` among the candidates ``cand(table)`` of one slice, with their similarity."""
    t = settings.threshold
    if m == "jaccard":
        a, b = cand("lsh")
        # pairs whose signatures agree too rarely for the threshold are not verified
        ok = agree_enough(con, a, b, settings.minhash_perms, min_agreements(t, settings.minhash_perms), postings, lo, cache)
        a, b = a[ok], b[ok]
        sim = shingle_jaccard(con, a, b, postings, lo, at_least=t, cache=cache)
        keep = sim >= t - 1e-12
    elif m == "minhash":
        a, b = cand("lsh")
        sim = minhash_similarity(con, a, b, settings.minhash_perms) if a.size else np.zeros(0)
        keep = sim >= t - 1e-12
    elif m == "bottomk":
        a, b = cand("bottomk_prefix")
        sim = bottomk_similarity(con, a, b, settings) if a.size else np.zeros(0)
        keep = sim >= t - 1e-12
    elif m in ("simhash", "simhash_hp"):
        a, b = cand(f"{m}_tables")
        dist = _simhash_distance(con, m, a, b, postings, lo, cache) if a.size else np.zeros(0, np.int64)
        sim = 1.0 - dist / 64.0
        keep = dist <= settings.simhash_bits
    elif m in ("a6", "a6_36"):
        a, b = cand(m)
        sim = _shared_lists(con, f"fp_{m}", "supershingles", a, b) / 6.0 if a.size else np.zeros(0)
        keep = np.ones(a.size, dtype=bool)
    elif m == "a7":
        a, b = cand("a7")
        sim = _shared_lists(con, "fp_a7", "keys", a, b) / 11.0 if a.size else np.zeros(0)
        keep = np.ones(a.size, dtype=bool)
    elif m in POSTINGS:
        a, b = cand(m)
        sim = np.ones(a.size)
        keep = np.ones(a.size, dtype=bool)
    else:  # pragma: no cover - PAIR_METHODS and this dispatch are kept in step
        raise AssertionError(m)
    return a[keep], b[keep], np.asarray(sim, dtype=np.float64)[keep]


def _whole_batch_pairs(con, m: str, keys: dict, lo: int, hi: int, postings, settings: Settings,
                       timed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of a method found over the whole batch at once: the chains (A11, A12) and the
    simhash length window (SQL)."""
    t = settings.threshold
    if m == "a11":
        a, b = timed(_chain_pairs, con, keys.get("a11"), lo, postings, "a11", "a11")
        sim = shingle_jaccard(con, a, b, postings, lo, at_least=t)
        keep = sim >= t - 1e-12
        return a[keep], b[keep], sim[keep]
    if m == "a12":
        return timed(_a12_pairs, con, keys.get("a12_ss"), lo, postings)  # the chain query also applies the rules
    sql = query("chains", "simhash_window_pairs").replace("FP_TABLE", f"fp_{m}")
    r = timed(lambda: con.sql(sql, params={"lo": lo, "hi": hi, "bits": settings.simhash_bits}).to_arrow_table())
    return r.column("doc_a").to_numpy(), r.column("doc_b").to_numpy(), r.column("similarity").to_numpy()


def _records(con, keys_docs, lo: int, postings, table: str, lengths_sql: str) -> pa.Table | None:
    """``chain_records`` rows: for each key of the new documents, the new and older documents
    holding it, with the length the chain orders by."""
    if keys_docs is None or keys_docs[0].size == 0:
        return None
    k, d = keys_docs
    k = k.astype(np.uint64)
    d = d.astype(np.int64)
    rec_k, rec_d = [k], [d]
    uk = np.unique(k)
    for key, ids in (postings.get_many(table, uk.tolist()) if postings is not None else {}).items():
        old = ids[ids < lo].astype(np.int64)
        if old.size:
            rec_k.append(np.full(old.size, key, np.uint64))
            rec_d.append(old)
    kk, dd = np.concatenate(rec_k), np.concatenate(rec_d)
    con.register("want_ids", pa.table({"doc_id": pa.array(np.unique(dd), pa.int64())}))
    try:
        lens = con.sql(lengths_sql).to_arrow_table()
    finally:
        con.unregister("want_ids")
    lid = lens.column("doc_id").to_numpy()
    lv = lens.column("len").to_numpy()
    return pa.table({
        "key": pa.array(kk, pa.uint64()), "doc_id": pa.array(dd, pa.int64()),
        "len": pa.array(lv[np.searchsorted(lid, dd)], pa.int32()), "is_new": pa.array(dd >= lo),
    })


def _chain_pairs(con, keys_docs, lo: int, postings, table: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
    lengths = {
        # A11: a document's length is its number of words
        "a11": "SELECT d.doc_id, d.n_words AS len FROM documents d SEMI JOIN want_ids w ON d.doc_id = w.doc_id ORDER BY d.doc_id",
        # A12: its number of words of three letters or more (003 section 6.2)
        "a12": "SELECT f.doc_id, f.len FROM fp_a12 f SEMI JOIN want_ids w ON f.doc_id = w.doc_id ORDER BY f.doc_id",
    }[kind]
    recs = _records(con, keys_docs, lo, postings, table, lengths)
    if recs is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    con.register("chain_records", recs)
    try:
        con.execute(query("chains", "chain_members"), {"ratio": CHAIN_RATIO})
        r = con.sql(query("chains", "chain_pairs"), params={"ratio": CHAIN_RATIO}).to_arrow_table()
    finally:
        con.unregister("chain_records")
        con.execute("DROP TABLE IF EXISTS chain_members")
    return r.column("doc_a").to_numpy(), r.column("doc_b").to_numpy()


def _a12_pairs(con, keys_docs, lo: int, postings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = _chain_pairs(con, keys_docs, lo, postings, "a12_ss", "a12")
    if a.size == 0:
        return a, b, np.zeros(0)
    con.register("chain_pair", pa.table({"doc_a": pa.array(a, pa.int64()), "doc_b": pa.array(b, pa.int64())}))
    con.register("want_ids", pa.table({"doc_id": pa.array(np.unique(np.concatenate([a, b])), pa.int64())}))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE a12_rows AS SELECT f.doc_id, f.ss, f.ws, f.num FROM fp_a12 f SEMI JOIN want_ids w ON f.doc_id = w.doc_id")
        r = con.sql(query("chains", "a12_pairs"), params={"num_ratio": SENTENCE_RATIO}).to_arrow_table()
    finally:
        con.unregister("chain_pair")
        con.unregister("want_ids")
        con.execute("DROP TABLE IF EXISTS a12_rows")
    return r.column("doc_a").to_numpy(), r.column("doc_b").to_numpy(), r.column("similarity").to_numpy()


def expected_candidate_rate(threshold: float, perms: int, jaccard: float) -> float:
    """Probability that a pair of this Jaccard becomes an LSH candidate (docs and tests)."""
    bands, rows = lsh_params(threshold, perms)
    return 1 - (1 - jaccard**rows) ** bands


__all__ = [
    "PAIR_METHODS", "pair_methods", "lsh_params", "band_keys", "simhash_plan", "simhash_keys", "prefix_lengths",
    "candidate_postings", "key_pairs", "find_batch_pairs", "shingle_jaccard", "expected_candidate_rate",
]


def rebuild_pairs(con, settings: Settings, timings: dict[str, float] | None = None) -> dict[str, int]:
    """Recompute ``duplicates`` from the current fingerprints, batch by batch in commit order
    (each pair keeps the batch that completes it), inside the caller's transaction. Older
    documents' keys are kept in memory as the batches are replayed."""
    from .store.postings import MemoryPostings

    con.execute("DELETE FROM duplicates")
    seen = MemoryPostings()
    total: dict[str, int] = {}
    batches = con.execute(
        "SELECT batch_id, first_doc_id, last_doc_id FROM batches "
        "WHERE status = 'committed' AND first_doc_id IS NOT NULL ORDER BY batch_id"
    ).fetchall()
    for batch_id, lo, hi in batches:
        keys = candidate_postings(con, lo, hi, settings)  # found once: to match the batch, then to remember it
        for m, n in find_batch_pairs(con, seen, lo, hi, batch_id, settings, timings, keys).items():
            total[m] = total.get(m, 0) + n
        seen.apply_batch(batch_id, keys)
    return total
