"""The inverted index: fingerprint -> sorted doc ids, in named tables.

Two back ends share one small interface: ``LmdbPostings`` (the real one, an
LMDB environment in the index folder) and ``MemoryPostings`` (a dict, for fast
tests). A posting list is the ascending doc ids of a key. In LMDB each id is
its own sorted duplicate of the key (``MDB_DUPSORT | MDB_DUPFIXED``, 8-byte
big-endian ids), so adding a document to a long list costs a B-tree insert,
not a rewrite of the list. Doc ids grow with every batch, so a batch only
ever appends.

Besides posting lists, a table named ``val:<name>`` maps a doc id to one
value (bytes): the fingerprints that verification reads for older
documents, so that a batch reads only its partners' values instead of
scanning a catalog column. ``apply_batch`` takes such a table as
``(doc_ids, list of bytes)``. The value tables of ``ROW_TABLES`` hold one
short value of the same width for every document and are read for
millions of candidates a batch; LMDB stores them in blocks of
``ROWS_PER_BLOCK`` consecutive doc ids (one record a block, each row a
presence byte and the value), so a read costs a copy per block, not a
lookup and a Python object per document. Through the interface they are
value tables like the others.

The store also records ``applied_batch``: the last catalog batch whose
postings it holds. The catalog is the source of truth; postings are derived
from it and re-applied after a crash (see ``neardup.store.index``).
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import lmdb
import numpy as np

from . import libc
from .runs import RUN_TABLES
from ..arrays import unique

_META = b"__meta__"
#: format 2: one duplicate per id (format 1 stored a list per key, under unprefixed names)
_APPLIED = b"applied_batch_v2"
_MAX_ID = b"max_doc_id_v2"
_PREFIX = "v2/"
_RECENT_PREFIX = "v2r/"
_VAL_PREFIX = "v2val/"
_ROWS_PREFIX = "v2rows/"
#: value tables stored as fixed-width rows in blocks of consecutive doc ids (see the module docstring)
ROW_TABLES = frozenset({"minhash8", "docinfo"})
#: doc ids per block of a row table
ROWS_PER_BLOCK = 1024
#: table-name prefix of value tables in ``apply_batch``'s argument
VALUES = "val:"
#: keys looked up per read transaction; the mapped pages are released after each slice. Each random
#: read maps the page cache's pages around it too: the kernel's fault-around (64 KB a fault, whatever
#: the madvise), or a whole 2 MB folio where the page cache holds the file in large folios (Linux 6.x
#: on ext4 once the file was read sequentially: 2,048 shingle sets, 10 MB of values, mapped 3.0 GB
#: of the file, ``FilePmdMapped``). 256 reads map at most about 512 MB
LOOKUP_SLICE = 256
#: values (one document's shingle set, signature or sketch each) read per transaction, likewise
VALUE_SLICE = 256
#: keys or values read between two releases of the mapped pages (smaller reads add up to it)
RELEASE_AFTER = 256
#: records written by one ``putmulti`` before the mapped pages are released
PUT_RUN = 1 << 14
_MADV_DONTNEED = 4
#: blocks of a row table read per transaction (each about ROWS_PER_BLOCK x (width + 1) bytes)
_BLOCK_SLICE = 64


#: libc's ``madvise`` on Linux, else None (releasing mapped pages is then skipped)
_madvise = libc.function("madvise", (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int))
_KEY_DTYPE = np.dtype(">u8")  # big-endian keys and ids sort numerically in LMDB
_VAL_DTYPE = np.dtype(">u8")


def distinct(x: np.ndarray, dtype=np.uint64) -> np.ndarray:
    """``np.unique(x)``, without sorting again when ``x`` is already strictly ascending (as the keys
    and ids the pair search passes are)."""
    x = np.asarray(x, dtype=dtype)
    if x.size < 2 or bool((x[1:] > x[:-1]).all()):
        return x
    return unique(x)


def group_postings(keys: np.ndarray, doc_ids: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Group ``(key, doc_id)`` pairs by key: yields ``(key, sorted unique ids)`` in key order."""
    keys = np.asarray(keys, dtype=np.uint64)
    doc_ids = np.asarray(doc_ids, dtype=np.uint64)
    if keys.size == 0:
        return
    order = np.lexsort((doc_ids, keys))
    k, d = keys[order], doc_ids[order]
    keep = np.ones(k.size, dtype=bool)
    keep[1:] = (k[1:] != k[:-1]) | (d[1:] != d[:-1])
    k, d = k[keep], d[keep]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], k.size]
    for s, e in zip(starts.tolist(), ends.tolist()):
        yield int(k[s]), d[s:e]


class Postings:
    """Interface of a posting store (see the module docstring)."""

    tables: tuple[str, ...] = ()

    def get(self, table: str, key: int) -> np.ndarray:
        """Doc ids of ``key`` (empty array when absent)."""
        raise NotImplementedError

    def get_many(self, table: str, keys: Iterable[int]) -> dict[int, np.ndarray]:
        """``{key: ids}`` for the keys that are present."""
        out = {}
        for k in keys:
            ids = self.get(table, k)
            if ids.size:
                out[int(k)] = ids
        return out

    def get_values(self, table: str, ids: np.ndarray) -> dict[int, bytes]:
        """``{doc_id: value}`` of value table ``table`` (without ``val:``) for the ids present."""
        raise NotImplementedError

    def get_fixed(self, table: str, ids: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """``(found ids ascending, their values as a (n, width) uint8 array)`` of a value table whose
        values are all ``width`` bytes."""
        found, data, _ = self.get_packed(table, ids)
        if data.size != found.size * width:
            raise ValueError(f"value table {table}: values are not all {width} bytes")
        return found, data.reshape(found.size, width)

    def get_packed(self, table: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(found ids ascending, their values end to end as uint8, offsets)`` of value table ``table``:
        id ``found[i]``'s value is ``data[offsets[i]:offsets[i + 1]]`` (values of any width, read
        without a Python object per value beyond the store's own)."""
        got = self.get_values(table, ids)
        found = np.array(sorted(got), dtype=np.int64)
        parts = [got[i] for i in found.tolist()]
        offs = np.zeros(found.size + 1, dtype=np.int64)
        np.cumsum([len(v) for v in parts], out=offs[1:])
        return found, np.frombuffer(b"".join(parts), dtype=np.uint8), offs

    def get_flat(self, table: str, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For many keys at once: ``(which, ids)``, every stored id of ``keys[which[i]]``,
        grouped by key in the order of ``keys``."""
        which, ids = [], []
        for i, k in enumerate(np.asarray(keys, dtype=np.uint64).tolist()):
            v = self.get(table, k)
            which.append(np.full(v.size, i, np.int64))
            ids.append(v)
        if not ids:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        return np.concatenate(which), np.concatenate(ids).astype(np.uint64)

    def keys(self, table: str) -> np.ndarray:
        """Every key of a (small) posting table, ascending."""
        raise NotImplementedError

    def applied_batch(self) -> int:
        """Last batch id whose postings are stored (0 for none)."""
        raise NotImplementedError

    def apply_batch(self, batch_id: int, postings: dict[str, tuple[np.ndarray, np.ndarray]],
                    ready: Callable[[], None] | None = None) -> None:
        """Append one batch's ``{table: (keys, doc_ids)}`` and record ``batch_id``, atomically.

        Idempotent: a batch at or below ``applied_batch()`` is ignored. Every new
        doc id must exceed every id already stored (ids grow per batch). ``ready``, when given, is
        called before the write commits (it waits for the catalog's commit; what it raises
        abandons the write).
        """
        raise NotImplementedError

    def remove_batch(self, batch_id: int, removed: dict[str, tuple[np.ndarray, np.ndarray]],
                     added: dict[str, tuple[np.ndarray, np.ndarray]] | None = None, max_doc_id: int = 0) -> None:
        """A delete batch (``neardup delete``): remove the ``(key, doc_id)`` entries of ``removed``
        (``val:`` tables: ``(doc_ids, values)`` as ``apply_batch`` takes them; the ids go), add those of ``added`` (rows a batch keeps for itself
        as a whole, whose key moved), and record ``batch_id`` and ``max_doc_id`` (the largest id
        still indexed), atomically. Idempotent like ``apply_batch``; absent entries are ignored."""
        raise NotImplementedError

    def dump(self) -> dict[str, dict[int, list[int]]]:
        """Everything, as plain Python (tests and consistency checks only)."""
        raise NotImplementedError

    def compact(self) -> None:
        """Merge stored runs in the background from now on, where the store keeps runs."""

    def close(self, finish: bool = True) -> None:
        pass


class MemoryPostings(Postings):
    """In-memory twin of ``LmdbPostings`` with the same semantics."""

    def __init__(self) -> None:
        self._data: dict[str, dict[int, np.ndarray]] = {}
        self._values: dict[str, dict[int, bytes]] = {}
        self._applied = 0

    def get_values(self, table, ids):
        tab = self._values.get(table, {})
        return {int(i): tab[int(i)] for i in np.asarray(ids).tolist() if int(i) in tab}

    def get(self, table: str, key: int) -> np.ndarray:
        return self._data.get(table, {}).get(int(key), np.empty(0, dtype=np.uint64))

    def keys(self, table):
        return np.array(sorted(self._data.get(table, {})), dtype=np.uint64)

    def applied_batch(self) -> int:
        return self._applied

    def apply_batch(self, batch_id, postings, ready=None):
        if batch_id <= self._applied:
            return
        if ready is not None:
            ready()
        # check every append first, then apply in place (copying the store per batch made a
        # rebuild's replay quadratic in the number of batches)
        grouped = {t: list(group_postings(k, i)) for t, (k, i) in postings.items() if not t.startswith(VALUES)}
        for table, items in grouped.items():
            tab = self._data.get(table, {})
            for k, new in items:
                old = tab.get(k)
                if old is not None:
                    _append(old[-1:], new, table, k)
        for table, items in grouped.items():
            tab = self._data.setdefault(table, {})
            for k, new in items:
                old = tab.get(k)
                tab[k] = new if old is None else np.concatenate([old, new])
        for table, (keys, vals) in postings.items():
            if table.startswith(VALUES):
                self._values.setdefault(table[len(VALUES) :], {}).update(zip(np.asarray(keys).tolist(), map(bytes, vals)))
        self._applied = batch_id

    def remove_batch(self, batch_id, removed, added=None, max_doc_id=0):
        if batch_id <= self._applied:
            return
        for table, (keys, ids) in removed.items():
            if table.startswith(VALUES):
                tab = self._values.get(table[len(VALUES) :], {})
                for i in np.asarray(keys).tolist():  # a value table is keyed by doc id
                    tab.pop(int(i), None)
                continue
            tab = self._data.get(table, {})
            for k, gone in group_postings(keys, ids):
                old = tab.get(k)
                if old is not None:
                    left = old[~np.isin(old, gone)]
                    if left.size:
                        tab[k] = left
                    else:
                        del tab[k]
        for table, (keys, ids) in (added or {}).items():
            tab = self._data.setdefault(table, {})
            for k, new in group_postings(keys, ids):
                old = tab.get(k)
                tab[k] = new if old is None else np.union1d(old, new).astype(np.uint64)
        self._applied = batch_id

    def dump(self):
        out = {t: {k: v.tolist() for k, v in sorted(tab.items())} for t, tab in sorted(self._data.items()) if tab}
        out.update({VALUES + t: {k: v.hex() for k, v in sorted(tab.items())} for t, tab in sorted(self._values.items()) if tab})
        return dict(sorted(out.items()))


class LmdbPostings(Postings):
    """Postings in an LMDB environment (a folder ``postings/`` in the index).

    One named LMDB database per table. Writes happen in one write transaction
    per batch, so a crash leaves the previous state. A writer opens the map at
    twice the file's size (at least 64 MiB; on Linux this reserves address
    space, not disk); it doubles before a batch's write that may not fit in it
    (``_room_for``), and again whenever a write still finds it full (the
    transaction is retried), so a full map never fails an ingest; only a full
    disk does.

    Concurrency: LMDB allows one writer and many readers across processes;
    neardup adds its own writer lock on the index folder above this.
    """

    INITIAL_MAP = 64 << 20
    #: a batch's postings go to a small "recent" level of each table (random-key inserts
    #: there touch few pages); it is folded into the main level once it holds more than
    #: MERGE_RATIO of the main level's entries (and at least MERGE_MIN)
    MERGE_RATIO = 0.1
    MERGE_MIN = 50_000

    def __init__(self, path: str | os.PathLike, readonly: bool = False):
        self.path = Path(path)
        if not readonly:
            self.path.mkdir(parents=True, exist_ok=True)
        self.readonly = readonly
        self._unreleased = 0  # keys or values read since the mapped pages were last released
        self._spans: tuple[int, list[tuple[int, int]]] | None = None  # (map size, where data.mdb is mapped)
        self.env = lmdb.open(
            str(self.path),
            map_size=self.INITIAL_MAP,
            max_dbs=64,
            readonly=readonly,
            lock=not readonly,
            subdir=True,
            metasync=False,  # a system crash may undo the last commit: repair re-applies it from the catalog
        )
        if readonly:
            # another process may have grown the map; adopt its size
            self.env.set_mapsize(0)
        else:
            # LMDB opens an existing environment with a map as large as its file, so the first
            # write of a batch would fail full and be redone; reserve room to grow instead (address
            # space only: the file grows with the pages written)
            self.env.set_mapsize(_headroom(self.env.info()["map_size"]))
        self._dbs: dict[str, object] = {}
        self._open_lock = threading.Lock()
        from .runs import RunStore

        #: the tables of ``RUN_TABLES``, kept as sorted runs in files (``neardup.store.runs``)
        self.runs = RunStore(self.path, self.env, lambda: self._db(_META.decode()), readonly)
        if not readonly:
            self.runs.collect()  # files of a write a crash interrupted

    def _db(self, table: str, create: bool = False, recent: bool = False):
        """The LMDB database of ``table``: meta, a value table, or a posting table's main
        (``recent=False``) or recent level."""
        slot = _slot(table, recent)
        db = self._dbs.get(slot)
        if db is None:
            with self._open_lock:  # LMDB opens a database in one transaction at a time (the concept search reads beside the pairs)
                return self._open_db(table, slot, create, recent)
        return db

    def _open_db(self, table: str, slot: str, create: bool, recent: bool):
        db = self._dbs.get(slot)
        if db is None:
            name, plain = self._db_name(table, recent)
            if not create:
                with self.env.begin() as txn:
                    if txn.get(name, db=None) is None:
                        return None
            db = self._open_named(name, plain, create)
            self._dbs[slot] = db
        return db

    def _open_named(self, name: bytes, plain: bool, create: bool, txn=None):
        """LMDB's handle of database ``name`` (``_db_name``): a plain one, or sorted fixed-size duplicates."""
        if plain:
            return self.env.open_db(name, txn=txn, create=create)
        return self.env.open_db(name, txn=txn, create=create, dupsort=True, dupfixed=True)

    def _db_name(self, table: str, recent: bool) -> tuple[bytes, bool]:
        """The LMDB name of ``table``'s database (its recent level's with ``recent``), and whether it
        is a plain one (meta or values: one value a key) rather than a posting list's (sorted
        fixed-size duplicates)."""
        meta = table == _META.decode()
        value = table.startswith(VALUES)
        if meta:
            name = table
        elif value:
            rest = table[len(VALUES) :]
            name = (_ROWS_PREFIX if rest in ROW_TABLES else _VAL_PREFIX) + rest
        else:
            name = (_RECENT_PREFIX if recent else _PREFIX) + table
        return name.encode("utf-8"), meta or value

    def _create_dbs(self, wanted: list[tuple[str, bool]]) -> None:
        """Open the databases of ``wanted`` (``(table, recent)`` pairs, as ``_db`` names them), creating
        those missing, all in one write transaction. LMDB syncs each transaction that creates a
        database, and ``_db`` opens each in one of its own: a new index's first batch creates eight
        (about 10 ms each on this machine's disk). The handles are kept once the transaction has
        committed (a creating transaction that aborts leaves its handles invalid)."""
        slots = {_slot(table, recent): (table, recent) for table, recent in wanted}
        if all(slot in self._dbs for slot in slots):
            return
        with self._open_lock:
            missing = {slot: tr for slot, tr in slots.items() if slot not in self._dbs}
            if not missing:
                return
            opened = {}
            with self.env.begin(write=True) as txn:
                for slot, (table, recent) in missing.items():
                    opened[slot] = self._open_named(*self._db_name(table, recent), True, txn)
            self._dbs.update(opened)

    def _lookup(self, table: str, keys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``(key, id)`` rows of ``keys`` (every key when None), both levels, sorted by key then id."""
        want = None
        if keys is not None:
            keys = distinct(keys)
            if keys.size == 0:
                return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        if table in RUN_TABLES:
            return self.runs.lookup(table, keys)
        if keys is not None:
            kb = keys.astype(_KEY_DTYPE).tobytes()
            want = [kb[i : i + 8] for i in range(0, len(kb), 8)]
        kk, vv = [], []
        levels = 0  # levels that gave rows: each is in key order, two must be merged
        for recent in (False, True):
            db = self._db(table, recent=recent)
            if db is None:
                continue
            if want is not None:  # one buffer of (key, id) records per slice, no object per row
                had = len(kk)
                for s in range(0, len(want), LOOKUP_SLICE):
                    with self.env.begin(db=db) as txn:
                        buf = txn.cursor().getmulti(want[s : s + LOOKUP_SLICE], dupdata=True, dupfixed_bytes=8, keyfixed=True)
                        rec = np.frombuffer(buf, dtype=_KEY_DTYPE)
                        if rec.size:
                            kk.append(rec[0::2].astype(np.uint64))
                            vv.append(rec[1::2].astype(np.uint64))
                    self._read(min(LOOKUP_SLICE, len(want) - s))
                levels += len(kk) > had
                continue
            with self.env.begin(db=db) as txn:
                rows = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
            if rows:
                levels += 1
                kk.append(np.frombuffer(b"".join(r[0] for r in rows), dtype=_KEY_DTYPE).astype(np.uint64))
                vv.append(np.frombuffer(b"".join(r[1] for r in rows), dtype=_VAL_DTYPE).astype(np.uint64))
        if not kk:
            return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        k, v = np.concatenate(kk), np.concatenate(vv)
        if levels > 1 or keys is None:
            order = np.lexsort((v, k))
            k, v = k[order], v[order]
        return k, v

    def get(self, table: str, key: int) -> np.ndarray:
        return self._lookup(table, np.array([key], dtype=np.uint64))[1]

    def get_many(self, table, keys):
        k, v = self._lookup(table, np.fromiter((int(x) for x in keys), dtype=np.uint64))
        if k.size == 0:
            return {}
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        return {int(k[s]): v[s:e] for s, e in zip(starts.tolist(), np.r_[starts[1:], k.size].tolist())}

    def get_values(self, table, ids):
        if table in ROW_TABLES:
            found, rows = self._get_rows(table, ids)
            return {int(i): r.tobytes() for i, r in zip(found.tolist(), rows)}
        db = self._db(VALUES + table)
        ids = distinct(ids)
        if db is None or ids.size == 0:
            return {}
        kb = ids.astype(_KEY_DTYPE).tobytes()
        want = [kb[i : i + 8] for i in range(0, len(kb), 8)]
        out = {}
        for s in range(0, len(want), VALUE_SLICE):
            with self.env.begin(db=db) as txn:
                out.update((int.from_bytes(k, "big"), bytes(v)) for k, v in txn.cursor().getmulti(want[s : s + VALUE_SLICE]))
            self._read(min(VALUE_SLICE, len(want) - s))
        return out

    def get_packed(self, table, ids):
        if table in ROW_TABLES:
            return super().get_packed(table, ids)
        db = self._db(VALUES + table)
        ids = distinct(ids)
        if db is None or ids.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(1, np.int64)
        kb = ids.astype(_KEY_DTYPE).tobytes()
        want = [kb[i : i + 8] for i in range(0, len(kb), 8)]
        keys, vals, lens = [], [], []
        for s in range(0, len(want), VALUE_SLICE):
            with self.env.begin(db=db) as txn:
                got = txn.cursor().getmulti(want[s : s + VALUE_SLICE])
                if got:
                    k, v = zip(*got)
                    keys.append(b"".join(k))
                    vals.append(b"".join(v))  # copied out of the map before the transaction ends
                    lens.extend(map(len, v))
            self._read(min(VALUE_SLICE, len(want) - s))
        found = np.frombuffer(b"".join(keys), dtype=_KEY_DTYPE).astype(np.int64)
        offs = np.zeros(found.size + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        return found, np.frombuffer(b"".join(vals), dtype=np.uint8), offs

    def get_fixed(self, table, ids, width):
        if table in ROW_TABLES:
            found, rows = self._get_rows(table, ids)
            if rows.shape[1] != width and found.size:
                raise ValueError(f"value table {table}: values are {rows.shape[1]} bytes, not {width}")
            return found, rows.reshape(found.size, width)
        return super().get_fixed(table, ids, width)

    def _get_rows(self, table: str, ids) -> tuple[np.ndarray, np.ndarray]:
        """``(found ids ascending, (n, width) uint8 rows)`` of a row table (``ROW_TABLES``): the
        blocks holding ``ids`` are read whole, one copy each."""
        db = self._db(VALUES + table)
        ids = distinct(ids).astype(np.int64)
        if db is None or ids.size == 0:
            return np.zeros(0, np.int64), np.zeros((0, 0), np.uint8)
        block = ids // ROWS_PER_BLOCK
        wanted = unique(block)
        kb = wanted.astype(np.uint64).astype(_KEY_DTYPE).tobytes()
        keys = [kb[i : i + 8] for i in range(0, len(kb), 8)]
        # where each wanted block's ids start, found once (a lookup of a few ids in each of a large
        # index's blocks cost 20 us a block when each block searched for its own)
        first = np.searchsorted(block, wanted)
        starts, ends = first.tolist(), np.append(first[1:], ids.size).tolist()
        at = ids - block * ROWS_PER_BLOCK
        wanted_list = wanted.tolist()
        found, rows = [], []
        j = 0
        for s in range(0, len(keys), _BLOCK_SLICE):
            with self.env.begin(db=db) as txn:
                for k, v in txn.cursor().getmulti(keys[s : s + _BLOCK_SLICE]):
                    b = int.from_bytes(k, "big")
                    while wanted_list[j] != b:  # blocks come in the order asked, absent ones left out
                        j += 1
                    lo, hi = starts[j], ends[j]
                    found.append(ids[lo:hi])
                    rows.append(np.frombuffer(v, dtype=np.uint8).reshape(ROWS_PER_BLOCK, -1)[at[lo:hi]])  # a copy
            self._release()
        if not found:
            return np.zeros(0, np.int64), np.zeros((0, 0), np.uint8)
        found_ids, got = np.concatenate(found), np.concatenate(rows)
        present = got[:, 0] == 1
        return found_ids[present], got[present, 1:]

    def _row_count(self, table: str) -> int:
        """Documents present in a row table."""
        db = self._db(table)
        if db is None:
            return 0
        n = 0
        with self.env.begin(db=db) as txn:
            for _, v in txn.cursor():
                n += int(np.count_nonzero(np.frombuffer(v, dtype=np.uint8).reshape(ROWS_PER_BLOCK, -1)[:, 0]))
        self._release()
        return n

    def _put_rows(self, txn, db, ids, vals: list, table: str) -> None:
        """Write one batch's rows into their blocks (a block the batch shares with earlier ids is
        read, updated and written back)."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return
        width = len(vals[0])
        rows = np.frombuffer(b"".join(vals), dtype=np.uint8)
        if rows.size != ids.size * width:
            raise ValueError(f"value table {table}: values are not all {width} bytes")
        rows = rows.reshape(ids.size, width)
        self._update_blocks(txn, db, ids, rows, table)

    def _update_blocks(self, txn, db, ids: np.ndarray, rows: np.ndarray | None, table: str) -> None:
        """Set the rows of ``ids`` (``rows`` None: clear them) in their blocks."""
        if ids.size == 0:
            return
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        block = ids // ROWS_PER_BLOCK
        starts = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])
        for s, e in zip(starts.tolist(), np.r_[starts[1:], ids.size].tolist()):
            b = int(block[s])
            key = b.to_bytes(8, "big")
            old = txn.get(key, db=db)
            width = rows.shape[1] if rows is not None else None
            if old is not None:
                arr = np.frombuffer(old, dtype=np.uint8).reshape(ROWS_PER_BLOCK, -1).copy()
                if width is not None and arr.shape[1] != width + 1:
                    raise ValueError(f"value table {table}: values are {arr.shape[1] - 1} bytes, not {width}")
            elif rows is None:
                continue
            else:
                arr = np.zeros((ROWS_PER_BLOCK, width + 1), dtype=np.uint8)
            at = ids[s:e] - b * ROWS_PER_BLOCK
            if rows is None:
                arr[at] = 0
            else:
                arr[at, 0] = 1
                arr[at, 1:] = rows[order[s:e]]
            if rows is None and not arr[:, 0].any():
                txn.delete(key, db=db)
            else:
                txn.put(key, arr.tobytes(), db=db)

    def _read(self, n: int) -> None:
        """``n`` keys or values were just read: release the mapped pages once ``RELEASE_AFTER`` have
        been read since the last release (a tiny lookup, such as one query document's, then costs
        no scan of the process's memory map, and what stays mapped is still bounded)."""
        self._unreleased += n
        if self._unreleased >= RELEASE_AFTER:
            self._release()

    def _release(self) -> None:
        """Unmap the environment's pages from this process (they stay in the page cache): every
        page a lookup reads is mapped, with its neighbours, and would otherwise count as this
        process's resident memory until the end, however large the index."""
        self._unreleased = 0
        if _madvise is None:
            return
        for lo, hi in self._map_spans():
            _madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), _MADV_DONTNEED)

    def _map_spans(self) -> list[tuple[int, int]]:
        """The address ranges where this process maps ``data.mdb``, read from ``/proc/self/maps``
        once per map size (LMDB maps the file once and maps it anew only when the map is resized;
        the maps file of a process with numba's and DuckDB's libraries loaded has thousands of
        lines, and reading it at every release cost seconds per batch)."""
        size = self.env.info()["map_size"]
        if self._spans is not None and self._spans[0] == size:
            return self._spans[1]
        target = str((self.path / "data.mdb").resolve())
        try:
            with open("/proc/self/maps") as fh:
                found = [line.split()[0] for line in fh if line.rstrip().endswith(target)]
        except OSError:
            return []
        spans = [tuple(int(x, 16) for x in span.split("-")) for span in found]
        self._spans = (size, spans)
        return spans

    def get_flat(self, table, keys):
        keys = np.asarray(keys, dtype=np.uint64)
        k, v = self._lookup(table, keys)
        if k.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        order = np.argsort(keys, kind="stable")
        which = order[np.searchsorted(keys[order], k)]
        o = np.argsort(which, kind="stable")
        return which[o].astype(np.int64), v[o]

    def keys(self, table):
        if table in RUN_TABLES:
            return unique(self._lookup(table, None)[0])
        parts = []  # each level's distinct keys, read without their (duplicate-sorted) ids
        for recent in (False, True):
            db = self._db(table, recent=recent)
            if db is None:
                continue
            with self.env.begin(db=db) as txn:
                parts.append(np.frombuffer(b"".join(txn.cursor().iternext_nodup(keys=True, values=False)), dtype=_KEY_DTYPE))
        self._release()
        return unique(np.concatenate(parts).astype(np.uint64)) if parts else np.zeros(0, np.uint64)

    def tables(self) -> list[str]:
        """The posting tables present."""
        return sorted(set(self._tables()) | set(self.runs.tables()))

    def applied_batch(self) -> int:
        return self._meta_int(_APPLIED)

    def _max_id(self) -> int:
        """The largest doc id stored (ids only grow, batch by batch)."""
        return self._meta_int(_MAX_ID)

    def _meta_int(self, key: bytes) -> int:
        db = self._db(_META.decode())
        if db is None:
            return 0
        with self.env.begin(db=db) as txn:
            v = txn.get(key)
            return int(v) if v is not None else 0

    def _room_for(self, lists: dict, values: dict) -> None:
        """Grow the map before a batch's write when what it adds may not fit: a write that finds
        the map full is aborted and done again in a map twice as large (every list sorted again,
        every run file written again), which cost 0.33 s of a batch of 28,807 pages of the real
        site's second release into the first one's 21,866 (130 MB added to a 100 MB file). The
        estimate is generous: a value of more than half a page rounded up to whole pages (LMDB's
        overflow pages), 64 bytes a posting (a key that gets its second id becomes a sub-page),
        and all of it twice, for the copies a write makes of the pages it changes (LMDB copies on
        write); the map is address space, not disk. What still does not fit, or a map
        that cannot be made this large (``ulimit -v``), grows as before. The map grows by doublings,
        as before: sized to the estimate alone it grew at almost every batch of a long input, and
        each resize maps the file anew (the million in one 4 GB file: 192.8 s against 170.0 s)."""
        info, psize = self.env.info(), self.env.stat()["psize"]
        used = (info["last_pgno"] + 1) * psize
        need = sum(64 * len(k) for t, (k, _) in lists.items() if t not in RUN_TABLES)
        for _, (_, vals) in values.items():
            nb = np.fromiter((memoryview(v).nbytes for v in vals), np.int64, len(vals)) + 16
            need += int(np.where(nb > psize // 2, -(-nb // psize) * psize, 2 * nb).sum())
        want, size = used + 2 * need, info["map_size"]  # a small batch fits in the map a writer opens
        if want <= size:
            return
        while size < want:  # doubled, as a full map is: a resize maps the file anew, so it stays rare
            size *= 2
        try:
            self.env.set_mapsize(size)
        except lmdb.MemoryError:
            pass

    def apply_batch(self, batch_id, postings, ready=None):
        if batch_id <= self.applied_batch():
            return
        lists = {t: v for t, v in postings.items() if not t.startswith(VALUES)}
        values = {t: v for t, v in postings.items() if t.startswith(VALUES)}
        last = self._max_id()
        for table, (k, d) in lists.items():
            d = np.asarray(d, dtype=np.uint64)
            if d.size and int(d.min()) <= last:
                i = int(np.argmin(d))
                raise ValueError(f"posting {table}/{int(np.asarray(k)[i])}: doc id {int(d[i])} does not follow {last}")
        self._room_for(lists, values)
        while True:
            try:
                self._write(batch_id, lists, values, last, ready)
                self.runs.after_commit()
                return
            except lmdb.MapFullError:
                self.runs.after_abort()
                self.env.set_mapsize(self.env.info()["map_size"] * 2)
            except BaseException:
                self.runs.after_abort()
                raise

    def _write(self, batch_id: int, lists: dict[str, tuple[np.ndarray, np.ndarray]], values: dict, last: int,
               ready: Callable[[], None] | None = None) -> None:
        from ..faults import crashpoint

        self._create_dbs([(_META.decode(), False)] + [(t, False) for t in values]
                         + [(t, recent) for t in lists if t not in RUN_TABLES for recent in (True, False)])
        meta = self._db(_META.decode(), create=True)
        dbs = {t: self._db(t, create=True) for t in values}
        dbs.update({t: self._db(t, create=True, recent=True) for t in lists if t not in RUN_TABLES})
        mains = {t: self._db(t, create=True) for t in lists if t not in RUN_TABLES}
        top = 0
        with self.env.begin(write=True) as txn:
            self.runs.install(txn, meta)  # what a background merge finished since the last batch
            for table, raw in lists.items():
                k, d = _sorted_pairs(*raw)  # one table at a time: memory is the largest table's
                top = max(top, int(d.max()) if d.size else 0)
                if table in RUN_TABLES:
                    self.runs.add(txn, meta, table, k, d)
                    crashpoint("lmdb-mid-write")
                    continue
                kb = k.astype(_KEY_DTYPE).tobytes()
                vb = d.astype(_VAL_DTYPE).tobytes()
                n_recent, n_main = txn.stat(dbs[table])["entries"], txn.stat(mains[table])["entries"]
                # a batch as large as the recent level may grow goes straight to the main one, and so
                # does any batch while the main level is small (inserts into it touch few pages, and
                # the recent level would only be copied over later)
                big = n_recent == 0 and (n_main < self.MERGE_MIN or k.size > max(self.MERGE_MIN, self.MERGE_RATIO * n_main))
                self._put(txn.cursor(db=mains[table] if big else dbs[table]), ((kb[i : i + 8], vb[i : i + 8]) for i in range(0, len(kb), 8)), True)
                crashpoint("lmdb-mid-write")
                n_recent += 0 if big else k.size
                if n_recent > max(self.MERGE_MIN, self.MERGE_RATIO * n_main):
                    # fold the recent level into the main one (in key order), then empty it
                    self._put(txn.cursor(db=mains[table]), txn.cursor(db=dbs[table]).iternext(), True)
                    txn.drop(dbs[table], delete=False)
                del k, d, kb, vb
            # the values' pages after the lists: the runs' disk writes, started as each was written, go
            # on meanwhile
            for table, (ids, vals) in values.items():
                if table[len(VALUES) :] in ROW_TABLES:
                    self._put_rows(txn, dbs[table], ids, vals, table)
                    continue
                order = np.argsort(np.asarray(ids, dtype=np.uint64), kind="stable")
                kb = np.asarray(ids, dtype=np.uint64)[order].astype(_KEY_DTYPE).tobytes()
                self._put(txn.cursor(db=dbs[table]), ((kb[8 * j : 8 * j + 8], vals[i]) for j, i in enumerate(order.tolist())), False)
            self.runs.sync_written()  # the runs this transaction names, on disk before it commits
            if top:
                txn.put(_MAX_ID, str(max(top, last)).encode(), db=meta)
            txn.put(_APPLIED, str(batch_id).encode(), db=meta)
            if ready is not None:
                ready()
            crashpoint("lmdb-before-commit")

    def remove_batch(self, batch_id, removed, added=None, max_doc_id=0):
        if batch_id <= self.applied_batch():
            return
        self.runs.settle(wait=True)  # a delete rewrites runs: none may be in a background merge
        while True:
            try:
                self._remove(batch_id, removed, added or {}, max_doc_id)
                self.runs.after_commit()
                return
            except lmdb.MapFullError:  # deleting rewrites pages too (copy on write)
                self.runs.after_abort()
                self.env.set_mapsize(self.env.info()["map_size"] * 2)
            except BaseException:
                self.runs.after_abort()
                raise

    def _remove(self, batch_id: int, removed: dict, added: dict, max_doc_id: int) -> None:
        from ..faults import crashpoint

        meta = self._db(_META.decode(), create=True)
        # every database is opened before the write transaction (opening one takes a transaction of its own)
        levels = {t: [db for db in ((self._db(t),) if t.startswith(VALUES) else (self._db(t), self._db(t, recent=True)))
                      if db is not None] for t in removed if t not in RUN_TABLES}
        if any(t in RUN_TABLES for t in added):
            raise ValueError(f"a delete adds no entries to the run tables ({', '.join(sorted(set(added) & RUN_TABLES))})")
        into = {t: self._db(t, create=True, recent=True) for t in added}
        with self.env.begin(write=True) as txn:
            for table, (keys, ids) in sorted(removed.items()):
                if table in RUN_TABLES:  # a deleted document loses every entry: the runs holding one are rewritten
                    self.runs.remove(txn, meta, table, np.asarray(ids, dtype=np.uint64))
                    crashpoint("lmdb-mid-write")
                    continue
                if table.startswith(VALUES):
                    if table[len(VALUES) :] in ROW_TABLES:
                        for db in levels[table]:
                            self._update_blocks(txn, db, unique(np.asarray(keys, dtype=np.int64)), None, table)
                        continue
                    for db in levels[table]:
                        kb = unique(np.asarray(keys, dtype=np.uint64)).astype(_KEY_DTYPE).tobytes()  # a value table is keyed by doc id
                        for j in range(0, len(kb), 8):
                            txn.delete(kb[j : j + 8], db=db)
                    continue
                k, d = _sorted_pairs(keys, ids)
                kb, vb = k.astype(_KEY_DTYPE).tobytes(), d.astype(_VAL_DTYPE).tobytes()
                for db in levels[table]:
                    cur = txn.cursor(db=db)
                    for j in range(0, len(kb), 8):
                        if cur.set_key_dup(kb[j : j + 8], vb[j : j + 8]):
                            cur.delete()
                        if j % (8 * PUT_RUN) == 0:
                            self._release()
                crashpoint("lmdb-mid-write")
            for table, raw in sorted(added.items()):
                k, d = _sorted_pairs(*raw)
                kb, vb = k.astype(_KEY_DTYPE).tobytes(), d.astype(_VAL_DTYPE).tobytes()
                self._put(txn.cursor(db=into[table]),
                          ((kb[i : i + 8], vb[i : i + 8]) for i in range(0, len(kb), 8)), True)
            txn.put(_MAX_ID, str(max_doc_id).encode(), db=meta)
            txn.put(_APPLIED, str(batch_id).encode(), db=meta)
            crashpoint("lmdb-before-commit")
        self._release()

    def _put(self, cursor, items: Iterator, dupdata: bool) -> None:
        """``putmulti`` in runs of ``PUT_RUN`` records, the map's pages released after each run: the pages
        a B-tree walk maps would otherwise stay in the process's resident memory (growing with the index)
        until the table is written. Dirty pages are LMDB's own buffers (spilled past its limit), not the map."""
        it = iter(items)
        while True:
            consumed, _ = cursor.putmulti(itertools.islice(it, PUT_RUN), dupdata=dupdata)
            self._release()
            if consumed < PUT_RUN:
                return

    def _tables(self, values: bool = False) -> list[str]:
        with self.env.begin() as txn:
            names = [bytes(k).decode() for k, _ in txn.cursor()]
        if values:
            return sorted(VALUES + n[len(p) :] for n in names for p in (_VAL_PREFIX, _ROWS_PREFIX) if n.startswith(p))
        return sorted({n[len(p) :] for n in names for p in (_PREFIX, _RECENT_PREFIX) if n.startswith(p)})

    def stats(self) -> dict[str, int]:
        """Number of distinct keys per table."""
        return {name: int(unique(self._lookup(name, None)[0]).size) for name in self.tables()}

    def dump(self):
        out: dict = {}
        for name in self.tables():
            k, v = self._lookup(name, None)
            tab: dict[int, list[int]] = {}
            for key, i in zip(k.tolist(), v.tolist()):
                tab.setdefault(key, []).append(i)
            if tab:
                out[name] = tab
        for name in self._tables(values=True):
            with self.env.begin(db=self._db(name)) as txn:
                if name[len(VALUES) :] in ROW_TABLES:  # blocks of rows: one value per present row
                    vals = {}
                    for k, v in txn.cursor():
                        arr = np.frombuffer(v, dtype=np.uint8).reshape(ROWS_PER_BLOCK, -1)
                        base = int.from_bytes(bytes(k), "big") * ROWS_PER_BLOCK
                        vals.update({base + int(i): arr[i, 1:].tobytes().hex() for i in np.flatnonzero(arr[:, 0])})
                else:
                    vals = {int.from_bytes(bytes(k), "big"): bytes(v).hex() for k, v in txn.cursor()}
            if vals:
                out[name] = vals
        return dict(sorted(out.items()))

    def compact(self) -> None:
        """Large run merges from now on in the background (``RunStore.compact``); starts those due."""
        self.runs.compact()

    def close(self, finish: bool = True) -> None:
        """Close; a background merge is waited for and kept (``finish``) or stopped and dropped."""
        try:
            self.runs.settle(wait=finish)
        finally:
            self.runs.close()
            self.env.close()


def _slot(table: str, recent: bool) -> str:
    """Where ``LmdbPostings`` keeps the handle of ``table``'s database (its recent level's with ``recent``)."""
    return ("r:" if recent else "") + table


def _headroom(map_size: int) -> int:
    """The map size a writer opens with: twice the file's, at least ``LmdbPostings.INITIAL_MAP``, in MiB."""
    return max(LmdbPostings.INITIAL_MAP, -(-2 * map_size // (1 << 20)) << 20)


def _sorted_pairs(keys: np.ndarray, doc_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``(key, id)`` rows sorted by key then id (LMDB inserts them fastest in order)."""
    from ..arrays import sorted_distinct_pairs

    return sorted_distinct_pairs(np.asarray(keys, dtype=np.uint64), np.asarray(doc_ids, dtype=np.uint64))


def _append(old: np.ndarray, new: np.ndarray, table: str, key: int) -> np.ndarray:
    if int(new[0]) <= int(old[-1]):
        raise ValueError(f"posting {table}/{key}: doc id {int(new[0])} does not follow {int(old[-1])}")
    return np.concatenate([old, new])
