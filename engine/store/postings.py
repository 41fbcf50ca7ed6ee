"""The inverted index: fingerprint -> sorted doc ids, in named tables.

Two back ends share one small interface: ``LmdbPostings`` (the real one, an
LMDB environment in the index folder) and ``MemoryPostings`` (a dict, for fast
tests). Both store a posting list as little-endian uint64 doc ids in
ascending order. Doc ids grow with every batch, so a batch only ever
*appends* to a list, which keeps lists sorted without re-sorting.

The store also records ``applied_batch``: the last catalog batch whose
postings it holds. The catalog is the source of truth; postings are derived
from it and re-applied after a crash (see ``neardup.store.index``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import lmdb
import numpy as np

_META = b"__meta__"
_APPLIED = b"applied_batch"
_KEY_DTYPE = np.dtype(">u8")  # big-endian keys sort numerically in LMDB
_ID_DTYPE = np.dtype("<u8")


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

    def applied_batch(self) -> int:
        """Last batch id whose postings are stored (0 for none)."""
        raise NotImplementedError

    def apply_batch(self, batch_id: int, postings: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Append one batch's ``{table: (keys, doc_ids)}`` and record ``batch_id``, atomically.

        Idempotent: a batch at or below ``applied_batch()`` is ignored. Every new
        doc id must exceed every id already stored (ids grow per batch).
        """
        raise NotImplementedError

    def dump(self) -> dict[str, dict[int, list[int]]]:
        """Everything, as plain Python (tests and consistency checks only)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class MemoryPostings(Postings):
    """In-memory twin of ``LmdbPostings`` with the same semantics."""

    def __init__(self) -> None:
        self._data: dict[str, dict[int, np.ndarray]] = {}
        self._applied = 0

    def get(self, table: str, key: int) -> np.ndarray:
        return self._data.get(table, {}).get(int(key), np.empty(0, dtype=np.uint64))

    def applied_batch(self) -> int:
        return self._applied

    def apply_batch(self, batch_id, postings):
        if batch_id <= self._applied:
            return
        staged = {t: dict(v) for t, v in self._data.items()}
        for table, (keys, ids) in postings.items():
            tab = staged.setdefault(table, {})
            for k, new in group_postings(keys, ids):
                old = tab.get(k)
                tab[k] = new if old is None else _append(old, new, table, k)
        self._data = staged
        self._applied = batch_id

    def dump(self):
        return {t: {k: v.tolist() for k, v in sorted(tab.items())} for t, tab in sorted(self._data.items()) if tab}


class LmdbPostings(Postings):
    """Postings in an LMDB environment (a folder ``postings/`` in the index).

    One named LMDB database per table. Writes happen in one write transaction
    per batch, so a crash leaves the previous state. The map starts at 64 MiB
    and doubles whenever a write finds it full (the transaction is retried),
    so a full map never fails an ingest; only a full disk does.

    Concurrency: LMDB allows one writer and many readers across processes;
    neardup adds its own writer lock on the index folder above this.
    """

    INITIAL_MAP = 64 << 20

    def __init__(self, path: str | os.PathLike, readonly: bool = False):
        self.path = Path(path)
        if not readonly:
            self.path.mkdir(parents=True, exist_ok=True)
        self.readonly = readonly
        self.env = lmdb.open(
            str(self.path),
            map_size=self.INITIAL_MAP,
            max_dbs=64,
            readonly=readonly,
            lock=not readonly,
            subdir=True,
        )
        if readonly:
            # another process may have grown the map; adopt its size
            self.env.set_mapsize(0)
        self._dbs: dict[str, object] = {}

    def _db(self, table: str, create: bool = False):
        db = self._dbs.get(table)
        if db is None:
            name = table.encode("utf-8")
            if not create:
                with self.env.begin() as txn:
                    if txn.get(name, db=None) is None:
                        return None
            db = self.env.open_db(name, create=create)
            self._dbs[table] = db
        return db

    def get(self, table: str, key: int) -> np.ndarray:
        db = self._db(table)
        if db is None:
            return np.empty(0, dtype=np.uint64)
        with self.env.begin(db=db, buffers=True) as txn:
            v = txn.get(_key(key))
            return np.frombuffer(bytes(v), dtype=_ID_DTYPE).astype(np.uint64) if v is not None else np.empty(0, dtype=np.uint64)

    def get_many(self, table, keys):
        db = self._db(table)
        out: dict[int, np.ndarray] = {}
        if db is None:
            return out
        kb = np.asarray(list(keys), dtype=np.uint64).astype(_KEY_DTYPE).tobytes()
        with self.env.begin(db=db) as txn:
            for k, v in txn.cursor().getmulti([kb[i : i + 8] for i in range(0, len(kb), 8)]):
                out[int.from_bytes(k, "big")] = np.frombuffer(v, dtype=_ID_DTYPE).astype(np.uint64)
        return out

    def get_flat(self, table, keys):
        db = self._db(table)
        keys = np.asarray(keys, dtype=np.uint64)
        if db is None or keys.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        kb = keys.astype(_KEY_DTYPE).tobytes()
        pos = {kb[i : i + 8]: i // 8 for i in range(0, len(kb), 8)}
        with self.env.begin(db=db) as txn:
            hits = txn.cursor().getmulti(list(pos))
        if not hits:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        which = np.repeat(np.array([pos[bytes(k)] for k, _ in hits], np.int64), [len(v) // 8 for _, v in hits])
        ids = np.frombuffer(b"".join(bytes(v) for _, v in hits), dtype=_ID_DTYPE).astype(np.uint64)
        return which, ids

    def applied_batch(self) -> int:
        db = self._db(_META.decode())
        if db is None:
            return 0
        with self.env.begin(db=db) as txn:
            v = txn.get(_APPLIED)
            return int(v) if v is not None else 0

    def apply_batch(self, batch_id, postings):
        if batch_id <= self.applied_batch():
            return
        grouped = {t: _group_bytes(k, i) for t, (k, i) in postings.items()}
        while True:
            try:
                self._write(batch_id, grouped)
                return
            except lmdb.MapFullError:
                self.env.set_mapsize(self.env.info()["map_size"] * 2)

    def _write(self, batch_id: int, grouped: dict[str, tuple[list[bytes], list[bytes]]]) -> None:
        from ..faults import crashpoint

        meta = self._db(_META.decode(), create=True)
        dbs = {t: self._db(t, create=True) for t in grouped}
        with self.env.begin(write=True) as txn:
            for table, (keys, values) in grouped.items():
                cur = txn.cursor(db=dbs[table])
                old = dict(cur.getmulti(keys)) if keys else {}
                merged = values
                if old:  # a new list: this write may be retried with a larger map
                    merged = list(values)
                    for i, kb in enumerate(keys):
                        prev = old.get(kb)
                        if prev is not None:
                            _check_append(prev, values[i], table, int.from_bytes(kb, "big"))
                            merged[i] = bytes(prev) + values[i]
                cur.putmulti(zip(keys, merged))
                crashpoint("lmdb-mid-write")
            txn.put(_APPLIED, str(batch_id).encode(), db=meta)
            crashpoint("lmdb-before-commit")

    def stats(self) -> dict[str, int]:
        """Number of keys per table."""
        with self.env.begin() as txn:
            names = [bytes(k).decode() for k, _ in txn.cursor()]
        out = {}
        for name in sorted(names):
            if name != _META.decode():
                db = self._db(name)
                with self.env.begin() as txn:
                    out[name] = txn.stat(db)["entries"]
        return out

    def dump(self):
        out: dict[str, dict[int, list[int]]] = {}
        with self.env.begin() as txn:
            names = [bytes(k).decode() for k, _ in txn.cursor()]
        for name in sorted(names):
            if name == _META.decode():
                continue
            db = self._db(name)
            with self.env.begin(db=db) as txn:
                tab = {int.from_bytes(bytes(k), "big"): np.frombuffer(bytes(v), dtype=_ID_DTYPE).tolist() for k, v in txn.cursor()}
            if tab:
                out[name] = tab
        return out

    def close(self) -> None:
        self.env.close()


def _key(k: int) -> bytes:
    return int(k).to_bytes(8, "big")


def _check_append(old: bytes, new: bytes, table: str, key: int) -> None:
    last = int.from_bytes(bytes(old)[-8:], "little")
    first = int.from_bytes(new[:8], "little")
    if first <= last:
        raise ValueError(f"posting {table}/{key}: doc id {first} does not follow {last}")


def _group_bytes(keys: np.ndarray, doc_ids: np.ndarray) -> tuple[list[bytes], list[bytes]]:
    """``group_postings`` as LMDB records: big-endian keys and little-endian id lists, in key order."""
    keys = np.asarray(keys, dtype=np.uint64)
    doc_ids = np.asarray(doc_ids, dtype=np.uint64)
    if keys.size == 0:
        return [], []
    order = np.lexsort((doc_ids, keys))
    k, d = keys[order], doc_ids[order]
    keep = np.ones(k.size, dtype=bool)
    keep[1:] = (k[1:] != k[:-1]) | (d[1:] != d[:-1])
    k, d = k[keep], d[keep]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], k.size] * 8
    kb = k[starts].astype(_KEY_DTYPE).tobytes()
    vb = d.astype(_ID_DTYPE).tobytes()
    return [kb[i : i + 8] for i in range(0, len(kb), 8)], [vb[a:b] for a, b in zip((starts * 8).tolist(), ends.tolist())]


def _append(old: np.ndarray, new: np.ndarray, table: str, key: int) -> np.ndarray:
    if int(new[0]) <= int(old[-1]):
        raise ValueError(f"posting {table}/{key}: doc id {int(new[0])} does not follow {int(old[-1])}")
    return np.concatenate([old, new])
