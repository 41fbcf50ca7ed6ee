"""Reading fingerprints back for verification: from the catalog, from the postings' value tables
(older documents), and from a per-batch cache (``ValueCache``)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pyarrow as pa

from ..store.postings import distinct
from ..arrays import unique

#: value table of the min-hash signatures' lowest bytes, one per position (the agreement filter of
#: ``jaccard``); a row table of the postings (``store.postings.ROW_TABLES``)
SIGNATURE_VALUES = "minhash8"


def _lists(con, table: str, column: str, lo: int, hi: int, written=None) -> tuple[np.ndarray, pa.Array]:
    """``(doc ids ascending, values)`` of ``table.column`` for documents ``lo..hi``: from ``written``
    (a ``store.rows.WrittenRows`` holding exactly those documents' rows) when it holds the column,
    else from the catalog."""
    if written is not None:
        held = written.column(table, column)
        if held is not None:
            return held
    t = con.sql(f"SELECT doc_id, {column} FROM {table} WHERE doc_id BETWEEN ? AND ? ORDER BY doc_id", params=[lo, hi]).to_arrow_table()
    return t.column("doc_id").to_numpy(), t.column(column).combine_chunks()


def blob_views(col: pa.Array | pa.ChunkedArray) -> list:
    """Each value of a binary column as a ``memoryview`` of the column's own data (no copy), for
    what takes any bytes-like value (LMDB's puts, ``bytes.join``, ``np.frombuffer``). A batch's
    shingle sets (81 MB of rust-1.63's pages) went through ``to_pylist`` once each batch: a copy
    into 22,000 new objects, on the main thread, into memory the process had never touched.
    A column with nulls gives ``to_pylist``'s values (None for a null)."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    out: list = []
    for c in chunks:
        if c.null_count or not (pa.types.is_binary(c.type) or pa.types.is_large_binary(c.type)):
            out.extend(c.to_pylist())
            continue
        if len(c) == 0:
            continue
        _, offsets, data = c.buffers()
        width = np.int64 if pa.types.is_large_binary(c.type) else np.int32
        o = np.frombuffer(offsets, dtype=width)[c.offset : c.offset + len(c) + 1].tolist()
        view = memoryview(data) if data is not None else memoryview(b"")
        out.extend(view[o[i] : o[i + 1]] for i in range(len(c)))
    return out


def _flat(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.compute as pc

    lens = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64)
    return col.flatten().to_numpy(zero_copy_only=False).astype(np.uint64), lens


def _fetch(con, table: str, columns: str, ids: np.ndarray) -> pa.Table:
    con.register("want_ids", pa.table({"doc_id": pa.array(distinct(ids, np.int64), pa.int64())}))
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
    """Values read for one batch, per value table, within ``VALUE_CACHE_BYTES``: variable-width ones
    (shingle sets) by ``(table, doc_id)``, the least recently used dropped first when a new one
    needs room (the partners of a batch's slices overlap, most with the slices just before);
    fixed-width ones (signatures, simhashes) as ``FixedRows`` (found by doc id without a search),
    dropped whole when the variable ones alone cannot make room."""

    #: bytes counted per cached variable-width value beyond its own (the dict entry and the object)
    ENTRY_BYTES = 100

    def __init__(self, limit: int | None = None) -> None:
        from .. import memory

        self.limit = limit if limit is not None else memory.current().scaled(VALUE_CACHE_BYTES)
        self._var: OrderedDict[tuple[str, int], bytes] = OrderedDict()  # least recently used first
        self.fixed: dict[str, FixedRows] = {}
        self.size = 0
        #: the simhash scan's older documents sorted on its tables, by catalog table (``simhash.sorted_old``;
        #: bounded by a document count of their own, not by ``limit``)
        self.sorted_simhashes: dict = {}
        #: the bottom-k sketches of the batch being verified: ``((lo, hi), (ids, values, offsets))``
        #: (``sketch_filter._batch_sketches``)
        self.batch_sketches: tuple | None = None

    def _bytes(self, value) -> int:
        return (len(value) if isinstance(value, (bytes, bytearray, memoryview)) else 64) + self.ENTRY_BYTES

    def own(self) -> None:
        """Make every cached variable-width value a ``bytes`` of its own: a batch's own values are
        cached as views of its rows (``blob_views``), which would otherwise keep all of those rows
        in memory while the cache keeps any of them, into the batches after it."""
        var = self._var
        for k, v in list(var.items()):
            if isinstance(v, memoryview):
                var[k] = v.tobytes()

    def _room(self, n_bytes: int) -> bool:
        """Make room for ``n_bytes`` more (dropping the least recently used variable values, then
        the fixed tables); False when they would not fit even in an empty cache."""
        if n_bytes > self.limit:
            return False
        while self.size + n_bytes > self.limit and self._var:
            self.size -= self._bytes(self._var.popitem(last=False)[1])
        if self.size + n_bytes > self.limit:
            self.size -= sum(f.nbytes for f in self.fixed.values())
            self.fixed.clear()
        self.size += n_bytes
        return True

    def get(self, table: str, ids: list[int]) -> dict[int, bytes]:
        """The cached values of ``ids`` (marked as just used)."""
        out = {}
        var = self._var
        for i in ids:
            v = var.get((table, i))
            if v is not None:
                var.move_to_end((table, i))
                out[i] = v
        return out

    def add(self, table: str, got: dict) -> None:
        var = self._var
        for doc, value in got.items():
            if (table, doc) not in var and self._room(self._bytes(value)):
                var[(table, doc)] = value

    def add_fixed(self, table: str, ids: np.ndarray, rows: np.ndarray) -> None:
        """Cache rows of ids not cached yet (counted at the bytes they hold; the arrays reserve room
        for what the cache could hold at all, so adding a slice's rows copies only them)."""
        ids = np.asarray(ids, np.int64)
        if not ids.size:
            return
        if ids.size > 1 and not (ids[1:] > ids[:-1]).all():  # ids read come ascending and distinct
            ids, first = np.unique(ids, return_index=True)
            rows = rows[first]
        have = self.fixed.get(table)
        if have is not None:
            new = have.find(ids) == 0
            ids, rows = ids[new], rows[new]
            if not ids.size:
                return
        from ..row_kernels import padded  # compiled kernels load on first use, not with the module

        width = rows.shape[1]
        held = padded(width)  # bytes a row holds
        reserve = self.limit // held
        base = have if have is not None else FixedRows(width)
        grown = base.grown(ids, reserve)
        extra = grown.slot.nbytes - base.slot.nbytes + ids.size * held
        if not self._room(extra):
            return
        if have is not None and table not in self.fixed:  # dropped to make room: start from nothing
            self.size -= extra
            grown = FixedRows(width).grown(ids, reserve)
            if not self._room(grown.slot.nbytes + ids.size * held):
                return
        grown.put(ids, rows)
        self.fixed[table] = grown


class FixedRows:
    """Fixed-width rows of one value table by doc id: ``slot[id]`` is the row's place plus one (0:
    not held), so a slice's thousands of lookups are one gather. The slot array spans the ids
    seen (4 bytes an id below the largest; 4 MB for a million-document index). ``rows`` holds each
    row in ``width`` bytes followed by zero bytes up to a multiple of 8 (``row_kernels.padded``), so the compiled
    comparisons read them eight bytes at a time where they lie (``row_kernels.byte_words``)."""

    def __init__(self, width: int, slot: np.ndarray | None = None, rows: np.ndarray | None = None, n: int = 0):
        from ..row_kernels import padded

        self.width = width
        self.slot = slot if slot is not None else np.zeros(0, np.int32)
        self.rows = rows if rows is not None else np.zeros((0, padded(width)), np.uint8)
        self.n = n

    @property
    def nbytes(self) -> int:
        """Bytes held: the slot array and the rows in use (the rows' reserved room is not touched
        until used, so it is not resident)."""
        return self.slot.nbytes + self.n * self.rows.shape[1]

    def find(self, ids: np.ndarray) -> np.ndarray:
        """Each id's row place plus one, 0 for an id not held."""
        out = np.zeros(ids.size, np.int64)
        inside = ids < self.slot.size
        out[inside] = self.slot[ids[inside]]
        return out

    def grown(self, ids: np.ndarray, reserve: int = 0) -> "FixedRows":
        """This store with room for the rows of ``ids`` (distinct, none held yet): the same
        arrays when they have room, else copies a quarter larger than needed at least, and with room
        for ``reserve`` rows (left untouched, so not resident until used)."""
        top = int(ids.max()) + 1
        slot, rows = self.slot, self.rows
        if top > slot.size:
            slot = np.zeros(max(top, slot.size + slot.size // 4), np.int32)
            slot[: self.slot.size] = self.slot
        need = self.n + ids.size
        if need > rows.shape[0]:
            rows = np.empty((max(need, rows.shape[0] + rows.shape[0] // 4, reserve), rows.shape[1]), np.uint8)  # rows past n unread
            rows[: self.n] = self.rows[: self.n]
        return FixedRows(self.width, slot, rows, self.n)

    def put(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Hold ``rows`` of ``ids`` (distinct, none held yet; room made by ``grown``)."""
        at = slice(self.n, self.n + ids.size)
        self.rows[at, : self.width] = rows
        self.rows[at, self.width :] = 0
        self.slot[ids] = np.arange(self.n + 1, self.n + ids.size + 1, dtype=np.int32)
        self.n += ids.size

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids ascending, their rows)``: everything held (for tests and inspection)."""
        ids = np.flatnonzero(self.slot)
        return ids, self.rows[self.slot[ids] - 1, : self.width]


def _fixed_values(con, postings, lo: int, ids: np.ndarray, fp_table: str, column: str, value_table: str,
                  width: int, encode, cache: ValueCache | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(sorted ids, (n, width) uint8 rows)`` of a fixed-width value: from ``cache``, older
    documents' from the postings' value table (as one buffer, no object per document), the
    rest from the catalog column (``encode(arrow column) -> rows``)."""
    ids = distinct(ids, np.int64)
    rows = np.zeros((ids.size, width), np.uint8)
    have = np.zeros(ids.size, bool)
    if cache is not None and value_table in cache.fixed:
        held = cache.fixed[value_table]
        pos = held.find(ids)
        have = pos > 0
        rows[have] = held.rows[pos[have] - 1, :width]
    got_ids, got_rows = [], []
    todo = ids[~have & (ids < lo)]
    if postings is not None and todo.size:
        f_ids, f_rows = postings.get_fixed(value_table, todo, width)
        at = np.searchsorted(ids, f_ids)
        rows[at], have[at] = f_rows, True
        got_ids.append(f_ids)
        got_rows.append(f_rows)
    rest = ids[~have]
    t = _fetch(con, fp_table, f"f.{column}", rest) if rest.size else None
    if t is not None and t.num_rows:  # (none found: the error below names the ids)
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


def _signature_rows(col) -> np.ndarray:
    """Min-hash signatures (a catalog column, or an ``(n, perms)`` array) as the value table stores
    them: the lowest byte of each position, ``(n, perms)`` uint8."""
    if isinstance(col, np.ndarray):
        return (col & np.uint64(0xFF)).astype(np.uint8)
    flat = col.combine_chunks().flatten().to_numpy().astype(np.uint64)
    return (flat & np.uint64(0xFF)).astype(np.uint8).reshape(len(col), -1)


def _simhash_rows(col: pa.ChunkedArray) -> np.ndarray:
    """Catalog simhashes as the value table stores them: 8 bytes, big-endian."""
    return col.to_numpy().astype(np.uint64).astype(">u8").view(np.uint8).reshape(len(col), 8)


def _values(con, postings, lo: int, ids: np.ndarray, fp_table: str, column: str, value_table: str,
            cache: ValueCache | None = None, encode=None) -> tuple[np.ndarray, list[bytes]]:
    """``(sorted ids, their values)``: older documents' from the postings' value table
    (a lookup per document), the batch's own (and any missing) from the catalog; those in
    ``cache`` from there (and the rest are added to it). ``encode``: the catalog column's values
    as the value table stores them (``encode(arrow array) -> list of bytes``; default: as Python
    gives them)."""
    ids = unique(ids)
    known = cache.get(value_table, ids.tolist()) if cache is not None else {}
    todo = np.array([i for i in ids.tolist() if i not in known], dtype=np.int64) if known else ids
    got: dict[int, bytes] = {}
    if postings is not None:
        got = postings.get_values(value_table, todo[todo < lo])
    rest = np.array([i for i in todo.tolist() if i not in got], dtype=np.int64)
    if rest.size:
        t = _fetch(con, fp_table, f"f.{column}", rest)
        col = t.column(column)
        got.update(zip(t.column("doc_id").to_pylist(), encode(col.combine_chunks()) if encode is not None else col.to_pylist()))
    out = [known[i] if i in known else got[i] for i in ids.tolist()]
    if cache is not None:
        cache.add(value_table, got)
    return ids, out


def big_endian_lists(col: pa.Array) -> list[bytes]:
    """Each list of uint64 in ``col`` as big-endian bytes (how the value tables store sketches)."""
    flat, lens = _flat(col)
    raw = flat.astype(">u8").tobytes()
    bounds = (np.concatenate([[0], np.cumsum(lens)]) * 8).tolist()
    return [raw[s:e] for s, e in zip(bounds[:-1], bounds[1:])]


def _matrix(con, table: str, column: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = _fetch(con, table, f"f.{column}", ids)
    flat, lens = _flat(t.column(column).combine_chunks())
    return t.column("doc_id").to_numpy(), flat, lens
