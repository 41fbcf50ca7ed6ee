"""Simhash pairs of a big batch by scanning: the permuted tables sorted in memory.

The keyed path (``find_batch_pairs`` over the ``simhash_tables`` postings)
looks up each new document's table keys and reads every holder's simhash
back. On a site whose pages share a frame, the frame dominates the bit sums,
so thousands of pages agree on a table's blocks while differing in more than
``bits`` bits: the candidates grow with the index, and each costs a posting
entry and a value read. Here a batch's own simhashes are sorted once per table
(on the table's masked bits, ``simhash_plan``), and the older documents'
simhashes are streamed from the catalog in steps of ``OLD_STEP`` documents and
matched by binary search; every candidate is then one XOR and a popcount of
two values already in memory. The candidates are the same (equal masked
bits is equal key), so the pairs are the same; a pair that agrees on several
tables is kept from the first of them only.

The cost is one pass over the older simhashes (8 bytes each, read in steps)
plus the candidates, with no posting lookups: cheaper than the keyed path
once a batch is not tiny against the index (``use_scan``).
"""

from __future__ import annotations

import numpy as np

from ..pipeline import Beside
from ..sort_kernels import masked_order, masked_sorted
from ..store import catalog
from .groups import _within
from .keys import table_masks

#: older documents read from the catalog per step (16 bytes each, plus their matches)
OLD_STEP = 1 << 20
#: a batch of n documents is scanned when n * SCAN_RATIO >= the documents older than it. Measured on the
#: frame-heavy scale corpus (100,000 documents into 500,000): the keyed path spent 23 s on 64 million
#: candidates (0.34 ms per new document), the scan 2.4 s per batch of 33,000 documents; scanning
#: 500,000 older simhashes costs about what 500 documents' lookups do, hence 1/256 of the index
SCAN_RATIO = 256


def use_scan(n_new: int, n_old: int) -> bool:
    """Whether a batch of ``n_new`` documents against ``n_old`` older ones is paired by scanning."""
    return n_new > 0 and n_new * SCAN_RATIO >= n_old


def _first_table(x: np.ndarray, masks: list[np.uint64], t: int) -> np.ndarray:
    """For XORs ``x`` of pairs that agree on table ``t``: whether no earlier table agrees too."""
    keep = np.ones(x.size, dtype=bool)
    for s in range(t):
        keep &= (x & masks[s]) != 0
    return keep


def _slices(counts: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive ranges of ``counts`` whose sums stay near ``budget`` (a single element may exceed it)."""
    if counts.size == 0:
        return []
    ends = np.cumsum(counts)
    out, start = [], 0
    while start < counts.size:
        base = ends[start - 1] if start else 0
        stop = int(np.searchsorted(ends, base + budget, side="right"))
        stop = max(stop, start + 1)
        out.append((start, stop))
        start = stop
    return out


#: a table's sorted keys are bucketed on their top bits (at most this many) for the older documents' lookups
BUCKET_BITS = 16


class _Sorted:
    """A batch's simhashes sorted on each table's masked bits (stable: ids ascend within a key), the
    simhashes in that order, and where each bucket of keys (their top ``BUCKET_BITS`` bits below the
    table's highest bit) starts."""

    def __init__(self, ids: np.ndarray, values: np.ndarray, masks: list[np.uint64]):
        self.ids, self.values, self.masks = ids, values, masks
        self.order, self.keys, self.sorted_values, self.shifts, self.starts = [], [], [], [], []
        for m in masks:
            k = values & m
            o = masked_order(values, m)
            self.order.append(o)
            self.keys.append(k[o])
            self.sorted_values.append(values[o])
            top = int(m).bit_length()  # keys are below 2**top
            shift = max(top - BUCKET_BITS, 0)
            self.shifts.append(shift)
            buckets = np.arange((1 << (top - shift)) + 1, dtype=np.uint64)
            self.starts.append(np.searchsorted(k[o] >> np.uint64(shift), buckets).astype(np.int64))


def _keep(oa, ob, va, vb, bits, masks, t):
    x = va ^ vb
    d = np.bitwise_count(x).astype(np.int64)
    ok = d <= bits
    ok[ok] = _first_table(x[ok], masks, t)
    return oa[ok], ob[ok], d[ok]


def _within_batch(s: _Sorted, bits: int, budget: int, out: list) -> None:
    for t, m in enumerate(s.masks):
        k, o = s.keys[t], s.order[t]
        if k.size < 2:
            continue
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        size = np.diff(np.r_[starts, k.size])
        group_start = np.repeat(starts, size)
        rep = np.arange(k.size) - group_start  # earlier members of each element's key group
        for a0, a1 in _slices(rep, budget):
            r = rep[a0:a1]
            if not r.any():
                continue
            later = np.repeat(np.arange(a0, a1), r)
            earlier = np.repeat(group_start[a0:a1], r) + _within(r)
            ia, ib = o[earlier], o[later]
            out.append(_keep(s.ids[ia], s.ids[ib], s.values[ia], s.values[ib], bits, s.masks, t))


#: (older, batch) positions a table's scan hands over at once (16 bytes each)
HITS_STEP = 1 << 20


def _against_old(s: _Sorted, old_ids: np.ndarray, old_values: np.ndarray, bits: int, budget: int, out: list) -> None:
    """The older documents' pairs with the batch, table by table: the compiled scan
    (``kernels.simhash_table_hits``) lists the positions within ``bits`` bits on each table, and a
    pair is kept from the first table it agrees on only."""
    from .. import kernels

    for t, m in enumerate(s.masks):
        cap = max(HITS_STEP, s.keys[t].size + 1)  # room for any one bucket's candidates
        hit_old, hit_new = np.empty(cap, np.int64), np.empty(cap, np.int64)
        for n in kernels.resumed(kernels.simhash_table_hits, old_values.size,
                                 (old_values, s.keys[t], s.sorted_values[t], s.starts[t], s.shifts[t], np.uint64(m), bits),
                                 (hit_old, hit_new)):
            if n:
                io, ip = hit_old[:n], hit_new[:n]
                x = old_values[io] ^ s.sorted_values[t][ip]
                keep = _first_table(x, s.masks, t)
                out.append((old_ids[io[keep]], s.ids[s.order[t][ip[keep]]], np.bitwise_count(x[keep]).astype(np.int64)))


#: older documents whose simhashes an ingest keeps sorted on every table, for its later batches
#: (12 bytes a document and table: 120 MB for a million documents at 3 bits), at the default memory plan
SORTED_OLD_DOCS = 2_000_000


class SortedOld:
    """The simhashes of the documents older than ``upto``, sorted on each table's masked bits, with
    their ids: built once by an ingest's first scanned batch and kept for its next batches (the
    older documents do not change; the ones an ingest adds itself are read as the scan reads them).

    The batch's values, sorted on the same tables (``_Sorted``), are then merged with them
    (``kernels.simhash_sorted_hits``), where the scan looks up every older value among the batch's:
    a batch of 33,000 documents of the scale corpus against the 867,000 before it (10 tables) took
    0.28 s against 0.58 s by a binary search per batch value, and 0.51 s when it sorted them first
    (``benchmarks/simhash_scan.py``)."""

    def __init__(self, ids: np.ndarray, values: np.ndarray, bits: int, upto: int):
        self.upto = upto
        self.masks = np.array(table_masks(bits), dtype=np.uint64)
        self.tables = []
        ids = np.asarray(ids).astype(np.uint32)
        values = np.ascontiguousarray(values, dtype=np.uint64)
        scratch = (np.empty_like(values), np.empty_like(ids))  # the passes between, for every table
        for m in self.masks:
            self.tables.append(masked_sorted(values, ids, m, scratch))

    def pairs(self, s: _Sorted, bits: int, out: list) -> None:
        """The pairs of the batch's simhashes (``s``, sorted on the same tables) with the older
        documents held, as ``(older id, batch id, distance)`` parts appended to ``out``, each pair
        from the first table it agrees on."""
        from .. import kernels

        cap = max(HITS_STEP, self.tables[0][0].size)  # room for any one key's candidates (every table holds them all)
        hit_old, hit_new = np.empty(cap, np.int64), np.empty(cap, np.int64)
        for t, (old_values, old_ids) in enumerate(self.tables):
            for n in kernels.resumed(kernels.simhash_sorted_hits, s.keys[t].size,
                                     (old_values, self.masks, t, s.keys[t], s.sorted_values[t], bits), (hit_old, hit_new)):
                if n:
                    io, ip = hit_old[:n], hit_new[:n]
                    d = np.bitwise_count(old_values[io] ^ s.sorted_values[t][ip]).astype(np.int64)
                    out.append((old_ids[io].astype(np.int64), s.ids[s.order[t][ip]], d))


#: the held tables are sorted again, for every document below the batch, once the documents added
#: since they were sorted (read as the scan reads them) reach this share of those held: an input of
#: many batches sorts about twice its documents in all, and no batch reads more than a third of
#: its older documents' simhashes
RESORT_SHARE = 0.5


def sorted_old(con, table: str, lo: int, bits: int, cache: dict | None) -> SortedOld | None:
    """The ``SortedOld`` of ``table`` held in ``cache`` (an ingest's, kept across its batches), built
    for the documents below ``lo`` when there is none yet, or when those added since reach
    ``RESORT_SHARE`` of those held, and they are at most ``SORTED_OLD_DOCS`` (scaled by the memory
    plan); None without a cache or past that."""
    from .. import memory

    if cache is None:
        return None
    held = cache.get(table)
    if held is not None and held.upto <= lo and lo - held.upto < RESORT_SHARE * held.upto:
        return held
    cache.pop(table, None)
    n_old = con.sql(f"SELECT count(*) FROM {table} WHERE doc_id < ?", params=[lo]).fetchall()[0][0]
    if n_old == 0 or n_old > memory.current().scaled(SORTED_OLD_DOCS) or lo > 1 << 32:
        return None
    ids, values = _read(con, table, 0, lo - 1)
    held = cache[table] = SortedOld(ids, values, bits, lo)
    return held


def _read(con, table: str, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """``(doc_id, simhash)`` of documents ``a..b`` of ``table``, ids ascending."""
    t = con.sql(f"SELECT doc_id, simhash FROM {table} WHERE doc_id >= ? AND doc_id <= ? ORDER BY doc_id",
                params=[a, b]).to_arrow_table()
    return t.column("doc_id").to_numpy().astype(np.int64), t.column("simhash").to_numpy().astype(np.uint64)


def _scan(ids: np.ndarray, values: np.ndarray, read_old, lo: int, bits: int, budget: int, step: int,
          timed, held: SortedOld | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of the batch's simhashes ``values`` (documents ``ids``) among themselves and with
    the older documents ``0..lo-1``: those below ``held.upto`` through their sorted tables
    (``SortedOld``), the others read ``step`` ids at a time by ``read_old(a, b)``."""
    masks = table_masks(bits)
    found: list = []
    if ids.size:
        s = timed(_Sorted, ids, values, masks)
        timed(_within_batch, s, bits, budget, found)
        first = 0
        if held is not None and held.upto <= lo:
            timed(held.pairs, s, bits, found)
            first = held.upto
        for start in range(first, lo, step):
            old_ids, old_values = read_old(start, min(start + step, lo) - 1)
            if old_ids.size:
                timed(_against_old, s, old_ids, old_values, bits, budget, found)
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    a, b, d = (np.concatenate(c) for c in zip(*found))
    return a, b, 1.0 - d / 64.0


def _untimed(fn, *args):
    return fn(*args)


def scan_pairs(con, method: str, lo: int, hi: int, bits: int, budget: int,
               timed=None, step: int = OLD_STEP, cache: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(doc_a, doc_b, similarity)`` of every pair within ``bits`` bits with ``doc_b`` in
    ``lo..hi`` and ``doc_a`` any earlier document of the catalog's ``fp_<method>`` (read ``step`` ids at a time;
    ``budget``: candidates expanded at once; ``cache``: where the older documents' sorted tables
    are kept from batch to batch, ``sorted_old``)."""
    table = f"fp_{method}"
    timed = timed or _untimed
    ids, values = _read(con, table, lo, hi)
    held = timed(sorted_old, con, table, lo, bits, cache) if ids.size else None
    return _scan(ids, values, lambda a, b: _read(con, table, a, b), lo, bits, budget, step, timed, held)


class ScanBeside:
    """``scan_pairs`` in a thread of its own, run while the batch's other pairs are found (an
    ingest's: the simhash scan reads nothing the other pair methods write).

    The batch's own simhashes are read here, in its transaction; the thread reads the older
    documents' through a connection of its own (they are committed), in a copy of the caller's
    context (the same memory plan). ``result()`` waits for the pairs and raises what the scan
    raised; ``seconds`` is then the thread's own time. A caller that fails must still call
    ``result()`` (or ``abandon()``) before the catalog closes."""

    def __init__(self, con, method: str, lo: int, hi: int, bits: int, budget: int, step: int = OLD_STEP,
                 cache: dict | None = None):
        table = f"fp_{method}"
        ids, values = _read(con, table, lo, hi)
        cur = catalog.cursor(con)

        def run():
            held = sorted_old(cur, table, lo, bits, cache) if ids.size else None
            return _scan(ids, values, lambda a, b: _read(cur, table, a, b), lo, bits, budget, step, _untimed, held)

        self._job = Beside(run, f"neardup-{method}-scan", done=cur.close)

    @property
    def seconds(self) -> float:
        return self._job.seconds

    def abandon(self) -> None:
        self._job.join()

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._job.result()
