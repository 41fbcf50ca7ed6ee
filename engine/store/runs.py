"""The biggest posting tables as immutable sorted runs in files, merged as they accumulate.

``concept_values`` (every sketch value of every document: a hundred entries a
document), ``lsh`` (twenty band keys a document) and the simhash tables (ten)
take most of what a batch adds to the postings; ``url`` and ``content`` (one
each) are looked up a chunk of urls at a time. In LMDB each entry is a
B-tree insert that lands on a random page of a tree that grows with the
index: 1.4 µs an entry once the index held 500,000 documents, 14 s of a
100,000-document batch. Here a batch's entries of such a table, already
sorted by key and id, become one **run**: three files written sequentially
in the postings folder's ``runs/`` (``<table>.<seq>.k``: the keys, uint64;
``.i``: the doc ids, uint32; ``.f``: every ``FENCE``-th key, a small index
kept in memory). The two newest runs are merged while the older holds at
most ``MERGE_RATIO`` times the newer's entries and the two hold at most
``MAX_RUN`` entries (about log2 of the batches runs per table below that
size, each entry rewritten about that many times, sequentially, at the speed
of a copy; runs stop growing at ``MAX_RUN``, so no merge, and no batch it
runs beside, grows with the index); a cascade of such merges is done in one
pass over all the runs it joins (``merge_count``), so only its final run is
written, and a batch's entries that join a merge are never written alone. Merging
reads blocks of about ``BLOCK`` entries in all, so it holds a few blocks,
never a whole run.

**Large merges in the background.** While an ingest runs (``compact``, called as each batch
begins), a merge that would join older runs holding more than ``INLINE_MERGE`` times the batch's
entries is not done in the batch's transaction: the batch's run is written alone and the merge is
left due. The next batch to begin starts the due merges in a thread of their own, which reads the
runs (immutable files) and writes the merged run under a sequence number reserved for it; a later
batch's transaction (or the command's end, which waits for the thread) puts it in the manifest in
place of the runs it joins, which stay untouched meanwhile (the batches' own small merges only
take runs newer than them). So no batch pays for rewriting the whole table at once, and a merge
due after a command's last batch is done by the next command, beside its first batch. A crash or
an error leaves the merged files unnamed by any manifest; the next writer removes them.

**Lookups** of many keys at once (sorted, distinct) search each run's fence
keys, then its keys (compiled binary search over the memory-mapped file),
and gather the ids of the ranges found: no Python object per key or entry.
The mapped pages are released after each lookup (``madvise``), as the LMDB
reads release theirs, and within a lookup after every ``LOOKUP_SPAN`` entries
of a run it reads (a batch's keys reach most of a large run), so what a
process holds resident is its own memory and a bounded window of each file.

**Ids grow run by run.** A batch's doc ids all exceed those already stored,
so within a table every id of a run is larger than every id of the runs
before it, and merging two adjacent runs key by key (the older first on
equal keys) keeps each key's ids ascending.

**Atomic with the rest of the postings.** The list of a table's runs (its
manifest: sequence number and entries of each) lives in the LMDB
environment's meta table and changes in the same write transaction as the
other tables and ``applied_batch``. A run's files are written, synced and
renamed into place before that transaction commits; files no manifest names
(left by a write or a merge a crash interrupted) are removed by the next
writer (``collect``), and the files a merge replaced are removed once the
transaction that dropped them has committed. So a crash leaves the postings
before or after the batch, as it does with LMDB alone.

**Deletes** (``neardup delete``) remove a document's every entry: each run
holding one of the removed ids is rewritten without them.
"""

from __future__ import annotations

import mmap
import os
import threading
from pathlib import Path

import numpy as np

from . import libc
from ..arrays import unique

#: posting tables kept as runs (the rest stay LMDB tables)
RUN_TABLES = frozenset({"concept_values", "lsh", "simhash_tables", "simhash_hp_tables", "url", "content"})
#: every FENCE-th key of a run is kept in memory to narrow its binary searches
FENCE = 512
#: merge the two newest runs while the older holds at most MERGE_RATIO times the newer's entries
MERGE_RATIO = 2
#: the most entries a merge writes (about 200 MB of keys and ids): merging every run into one at
#: the 33rd batch of the million-document benchmark (83 million ``concept_values`` entries and the
#: other tables') took that part 20-30% longer than the parts beside it; a lookup searches each
#: run, which costs little more than searching their union
MAX_RUN = 1 << 24
#: entries read per block while merging
BLOCK = 1 << 22
#: entries of a run a lookup reads before it releases the pages read (about 48 MB of keys and ids
#: mapped at most, beyond one key's entries): a lookup of a batch's keys otherwise maps most of
#: the largest run (a gigabyte of ``concept_values`` at 900,000 documents) until it ends
LOOKUP_SPAN = 1 << 22
#: with background compaction on, a batch merges in its own transaction only runs holding at most
#: this many times its entries; a larger merge is left to the background (``RunStore.compact``)
INLINE_MERGE = 4
_KEY = np.dtype("<u8")
_ID = np.dtype("<u4")
_MANIFEST = b"runs/"
_SEQ = b"runs_seq"


def _start_writeback(fh, offset: int, n: int) -> None:
    """Start writing ``n`` bytes of ``fh`` from ``offset`` to disk without waiting (Linux), so a
    run's blocks go out while the next ones are merged and the closing ``fsync`` (which still
    makes the run durable) waits for the last few only: a merge's 1.2 GB took 4.5 s, 3.4 s so."""
    if n == 0:
        return
    fh.flush()
    libc.start_writeback(fh.fileno(), offset, n)


def merge_count(sizes: list[int]) -> int:
    """How many of the newest runs (entries ``sizes``, oldest first; the last is a batch's new run)
    end up merged into one: the two newest are merged while the older holds at most ``MERGE_RATIO``
    times the newer's entries and the two at most ``MAX_RUN`` (1: the new run stays alone)."""
    sizes = list(sizes)
    j = 1
    while len(sizes) >= 2 and sizes[-2] <= MERGE_RATIO * sizes[-1] and sizes[-2] + sizes[-1] <= MAX_RUN:
        sizes[-2:] = [sizes[-2] + sizes[-1]]
        j += 1
    return j


def _check_ids(ids: np.ndarray, table: str) -> None:
    if ids.size and int(ids.max()) >= 1 << 32:
        raise ValueError(f"posting {table}: doc ids beyond 2^32 are not supported by the runs")


class _Stopped(Exception):
    """A background merge was told to stop."""


class _Compaction:
    """One background job: the due merge of each table (its runs, oldest first, and the sequence
    number reserved for the merged run), merged one table after the other in a thread."""

    def __init__(self, groups: dict[str, tuple[list[tuple[int, int]], int]]):
        self.groups = groups
        #: tables whose merged run is written and synced: table -> (seq, entries)
        self.done: dict[str, tuple[int, int]] = {}
        #: tables put in the manifest by the write transaction now open
        self.staged: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def finished(self) -> bool:
        return self.thread is None or not self.thread.is_alive()


class RunStore:
    """The runs of ``RUN_TABLES`` of one postings folder; ``meta`` is the LMDB meta database."""

    def __init__(self, folder: Path, env, meta_db, readonly: bool = False):
        self.dir = Path(folder) / "runs"
        self.env = env
        self.meta = meta_db  # a callable returning the meta database (None until created)
        self.readonly = readonly
        self._maps: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        #: the pair search and the concept neighbour search read runs from two threads: one may map a
        #: run while the other releases every mapped one
        self._maps_lock = threading.Lock()
        #: files a committed write replaced: removed by ``after_commit``
        self._replaced: list[str] = []
        self._pending: list[str] = []
        #: files of this write transaction's runs not synced yet (``add`` defers it: ``sync_written``)
        self._unsynced: list[Path] = []
        #: large merges left to a background thread (on once ``compact`` has been called)
        self.background = False
        self._job: _Compaction | None = None

    # -- manifest ---------------------------------------------------------
    def manifest(self, table: str, txn=None) -> list[tuple[int, int]]:
        """``[(seq, entries)]`` of a table's runs, oldest first."""
        db = self.meta()
        if db is None:
            return []
        if txn is None:
            with self.env.begin(db=db) as t:
                raw = t.get(_MANIFEST + table.encode())
        else:
            raw = txn.get(_MANIFEST + table.encode(), db=db)
        if not raw:
            return []
        a = np.frombuffer(raw, dtype="<u8").reshape(-1, 2)
        return [(int(s), int(n)) for s, n in a.tolist()]

    def tables(self) -> list[str]:
        """The run tables holding at least one run."""
        db = self.meta()
        if db is None:
            return []
        out = []
        with self.env.begin(db=db) as t:
            for k, v in t.cursor():
                k = bytes(k)
                if k.startswith(_MANIFEST) and len(v):
                    out.append(k[len(_MANIFEST) :].decode())
        return sorted(out)

    def _set_manifest(self, txn, db, table: str, runs: list[tuple[int, int]]) -> None:
        key = _MANIFEST + table.encode()
        if runs:
            txn.put(key, np.array(runs, dtype="<u8").tobytes(), db=db)
        else:
            txn.delete(key, db=db)

    def _next_seq(self, txn, db) -> int:
        raw = txn.get(_SEQ, db=db)
        seq = int(raw) if raw else 1
        txn.put(_SEQ, str(seq + 1).encode(), db=db)
        return seq

    # -- files ------------------------------------------------------------
    def _name(self, table: str, seq: int) -> str:
        return f"{table}.{seq}"

    def _files(self, table: str, seq: int) -> list[Path]:
        base = self.dir / self._name(table, seq)
        return [base.with_name(base.name + ext) for ext in (".k", ".i", ".f")]

    def _write_files(self, table: str, seq: int, keys_parts, n: int, pending: bool = True, sync: bool = True) -> None:
        """Write a run from ``keys_parts``: an iterable of ``(keys, ids)`` blocks in order (``n`` entries
        in all), each file synced and renamed into place (and, with ``pending``, removed if the
        write transaction does not commit). Without ``sync`` the files are renamed into place
        unsynced and ``sync_written`` syncs them: what names a run (its manifest, in the write
        transaction) commits only after that, and until then no reader and no recovery goes by
        the files' names (``collect`` removes the runs no manifest names)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        kf, idf, ff = self._files(table, seq)
        tmp = [p.with_name(p.name + ".tmp") for p in (kf, idf, ff)]
        fences, written = [], 0
        with open(tmp[0], "wb") as fk, open(tmp[1], "wb") as fi:
            for k, i in keys_parts:
                first = (-written) % FENCE
                fences.append(k[first::FENCE])
                for fh, data in ((fk, np.ascontiguousarray(k, dtype=_KEY)), (fi, np.ascontiguousarray(i, dtype=_ID))):
                    at = fh.tell()
                    fh.write(data.tobytes())
                    _start_writeback(fh, at, data.nbytes)
                written += k.size
            for fh in (fk, fi):
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())
        assert written == n, (written, n)
        with open(tmp[2], "wb") as ff_:
            ff_.write(np.concatenate(fences).astype(_KEY).tobytes() if fences else b"")
            ff_.flush()
            if sync:
                os.fsync(ff_.fileno())
            else:
                _start_writeback(ff_, 0, ff_.tell())
        for t, final in zip(tmp, (kf, idf, ff)):
            os.replace(t, final)
        if pending:
            self._pending.append(self._name(table, seq))
        if not sync:
            self._unsynced += [kf, idf, ff]
            return
        self._sync_dir()

    def _sync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def sync_written(self) -> None:
        """Sync the files of the runs ``add`` wrote in this write transaction, and the folder's names
        of them: before the transaction commits. A batch's runs are written one table after another
        with their disk writes started as they go; syncing each at once made the writer wait for the
        disk table by table (about 0.14 s of a new index's first batch of 22,000 pages), where now
        the writes go on while the next tables' runs and the transaction's pages are made."""
        if not self._unsynced:
            return
        for path in self._unsynced:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._sync_dir()
        self._unsynced = []

    def _open(self, table: str, seq: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(keys, ids) memory-mapped and the fence keys in memory."""
        name = self._name(table, seq)
        got = self._maps.get(name)
        if got is None:
            got = self._map(table, seq, n)
            with self._maps_lock:
                got = self._maps.setdefault(name, got)
        return got

    def _map(self, table: str, seq: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        kf, idf, ff = self._files(table, seq)
        keys = np.memmap(kf, dtype=_KEY, mode="r", shape=(n,)) if n else np.zeros(0, _KEY)
        ids = np.memmap(idf, dtype=_ID, mode="r", shape=(n,)) if n else np.zeros(0, _ID)
        return keys, ids, np.fromfile(ff, dtype=_KEY)

    def release(self) -> None:
        """Unmap the pages of every open run from this process (they stay in the page cache)."""
        with self._maps_lock:
            maps = list(self._maps.values())
        _release(maps)

    def close(self) -> None:
        with self._maps_lock:
            self._maps.clear()

    def collect(self) -> list[str]:
        """Remove the run files no manifest names (a writer's, after a crash); returns their names."""
        if self.readonly or not self.dir.is_dir():
            return []
        keep = {self._name(t, s) for t in self.tables() for s, _ in self.manifest(t)}
        gone = []
        for f in self.dir.iterdir():
            stem = f.name[: f.name.rfind(".")] if not f.name.endswith(".tmp") else None
            if stem is None or stem not in keep:
                f.unlink(missing_ok=True)
                gone.append(f.name)
        return gone

    # -- reading ----------------------------------------------------------
    def lookup(self, table: str, keys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``(key, id)`` rows of ``keys`` (sorted, distinct; every key when None), sorted by key then id.

        A run is read ``LOOKUP_SPAN`` entries at a time (``lookup_slices``) and the pages read are
        released after each such part, so what a lookup maps at once does not grow with the run."""
        kk, vv = [], []
        for seq, n in self.manifest(table):
            if n == 0:
                continue
            rk, ri, fences = self._open(table, seq, n)
            got = _read_run(rk, ri, fences, keys)
            if got is not None:
                kk.append(got[0])
                vv.append(got[1])
        self.release()
        if not kk:
            return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
        k, v = np.concatenate(kk), np.concatenate(vv)
        if len(kk) > 1:  # older runs first: a stable sort by key keeps each key's ids ascending
            order = np.argsort(k, kind="stable")
            k, v = k[order], v[order]
        return k, v

    def count(self, table: str) -> int:
        return sum(n for _, n in self.manifest(table))

    # -- writing (inside the caller's LMDB write transaction) ---------------
    def add(self, txn, db, table: str, keys: np.ndarray, ids: np.ndarray) -> None:
        """A batch's entries of ``table`` (sorted by key then id, distinct) as a new run, merged with
        the newest runs the policy merges it with (``merge_count``) in one pass: a cascade that
        would merge two runs, then the result with the next, and so on, writes only its last run
        (the batch's own entries are merged from memory, never written alone)."""
        if keys.size == 0:
            return
        _check_ids(ids, table)
        runs = self.manifest(table, txn)
        # runs a background merge is joining are left to it: only newer ones merge here
        free = runs[self._busy_end(table, runs) :]
        j = merge_count([n for _, n in free] + [int(keys.size)])
        if self.background and sum(n for _, n in free[len(free) - (j - 1) :]) > INLINE_MERGE * keys.size:
            j = 1  # too large for the batch's transaction: due, for the next background job
        seq = self._next_seq(txn, db)
        if j == 1:
            self._write_files(table, seq, [(keys, ids)], keys.size, sync=False)
            runs.append((seq, int(keys.size)))
        else:
            merged = runs[len(runs) - (j - 1) :]
            total = sum(n for _, n in merged) + int(keys.size)
            self._write_files(table, seq, self._merged_many(table, merged, keys, ids), total, sync=False)
            self._replaced += [self._name(table, s_) for s_, _ in merged]
            runs[len(runs) - (j - 1) :] = [(seq, total)]
        self._set_manifest(txn, db, table, runs)

    def remove(self, txn, db, table: str, gone_ids: np.ndarray) -> None:
        """Rewrite every run holding one of ``gone_ids`` without those documents' entries."""
        gone = unique(np.asarray(gone_ids, dtype=np.uint64))
        if gone.size == 0:
            return
        runs = self.manifest(table, txn)
        out = []
        for s, n in runs:
            run = self._open(table, s, n)
            _, ri, _ = run
            drop = np.zeros(n, bool)
            for a in range(0, n, BLOCK):  # the run's pages released after each block, as a lookup's
                drop[a : a + BLOCK] = np.isin(np.asarray(ri[a : a + BLOCK], dtype=np.uint64), gone)
                _release([run])
            if not drop.any():
                out.append((s, n))
                continue
            left = int(n - drop.sum())
            self._replaced.append(self._name(table, s))
            if left == 0:
                continue
            seq = self._next_seq(txn, db)
            self._write_files(table, seq, _kept_blocks(run, drop), left)
            out.append((seq, left))
        self.release()
        self._set_manifest(txn, db, table, out)

    def _merged_many(self, table: str, runs: list[tuple[int, int]], keys: np.ndarray, ids: np.ndarray):
        """The entries of ``runs`` (oldest first) and then of ``keys``/``ids`` (the newest, in
        memory) in key order, in blocks of about ``BLOCK`` entries (``_merge_blocks``)."""
        parts = [self._open(table, s_, n)[:2] for s_, n in runs] + [(keys, ids)]
        return _merge_blocks(parts, BLOCK, self.release)

    # -- background compaction ----------------------------------------------
    def compact(self) -> None:
        """Turn background compaction on and start the due merges (each table's runs that the merge
        policy joins, ``merge_count``) in a thread, unless a job is still in hand. Called when a
        batch begins, outside any write transaction."""
        if self.readonly:
            return
        self.background = True
        if self._job is not None or self.meta() is None:
            return
        due = {}
        for table in self.tables():
            runs = self.manifest(table)
            j = merge_count([n for _, n in runs])
            if j > 1:
                due[table] = runs[len(runs) - j :]
        if not due:
            return
        db = self.meta()
        with self.env.begin(write=True) as txn:  # sequence numbers reserved for the merged runs
            groups = {t: (g, self._next_seq(txn, db)) for t, g in sorted(due.items())}
        job = self._job = _Compaction(groups)
        job.thread = threading.Thread(target=self._compact, args=(job,), name="neardup-compact", daemon=True)
        job.thread.start()

    def _compact(self, job: _Compaction) -> None:
        """The thread: merge each table's group from its own maps of the files, a block at a time."""
        from ..faults import crashpoint

        maps: list = []

        def release() -> None:
            _release(maps)
            crashpoint("compact-block")
            if job.stop.is_set():
                raise _Stopped

        try:
            for table, (group, seq) in list(job.groups.items()):  # a batch may install and drop one meanwhile
                maps = [self._map(table, s_, n) for s_, n in group]
                total = sum(n for _, n in group)
                self._write_files(table, seq, _merge_blocks([m[:2] for m in maps], BLOCK // 4, release), total, pending=False)
                job.done[table] = (seq, total)
                maps = []
        except _Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised by settle; the runs stay as they are meanwhile
            job.error = exc

    def _busy_end(self, table: str, runs: list[tuple[int, int]]) -> int:
        """Where the runs newer than those a background merge of ``table`` joins begin (0: none)."""
        job = self._job
        if job is None or table not in job.groups or table in job.staged:
            return 0
        last = job.groups[table][0][-1]
        return runs.index(last) + 1 if last in runs else 0

    def install(self, txn, db) -> None:
        """In the write transaction ``txn``: put each merged run the background job has finished in
        its table's manifest, in place of the runs it joins (their files go after the commit)."""
        job = self._job
        if job is None:
            return
        for table, (seq, total) in list(job.done.items()):
            if table in job.staged:
                continue
            group = job.groups[table][0]
            runs = self.manifest(table, txn)
            at = runs.index(group[0]) if group[0] in runs else -1
            if at < 0 or runs[at : at + len(group)] != group:  # not while the job holds them: dropped if so
                del job.done[table]
                for f in self._files(table, seq):
                    f.unlink(missing_ok=True)
                continue
            runs[at : at + len(group)] = [(seq, total)]
            self._set_manifest(txn, db, table, runs)
            self._replaced += [self._name(table, s_) for s_, _ in group]
            job.staged.append(table)

    def settle(self, wait: bool) -> None:
        """End the background job: with ``wait``, let it finish and put what it merged in the
        manifest (a write transaction of its own), then raise the error that stopped it if one did
        (a full disk: the runs are still those it would have merged); otherwise stop it. Files not
        put in a manifest are removed. Called outside any write transaction."""
        job = self._job
        if job is None:
            return
        if not wait:
            job.stop.set()
        if job.thread is not None:
            job.thread.join()
        if wait and job.done:
            db = self.meta()
            try:
                with self.env.begin(write=True) as txn:
                    self.install(txn, db)
            except BaseException:
                self._replaced = []
                job.staged = []
                raise
            finally:
                if job.staged:
                    self.after_commit()
        self._drop_job()
        if wait and job.error is not None:
            raise job.error

    def _drop_job(self) -> None:
        """Forget the job, removing the files of its merges that no manifest names."""
        job, self._job = self._job, None
        if job is None:
            return
        for table, (_, seq) in job.groups.items():
            if table in job.staged:
                continue
            for f in self._files(table, seq):
                for p in (f, f.with_name(f.name + ".tmp")):
                    p.unlink(missing_ok=True)

    def after_commit(self) -> None:
        """The write transaction committed: remove the files its merges and deletes replaced."""
        self._unlink(self._replaced)
        job = self._job
        if job is not None and job.staged:
            for table in job.staged:
                del job.groups[table], job.done[table]
            job.staged = []
            if not job.groups or (job.finished() and not job.done):
                self._drop_job()

    def after_abort(self) -> None:
        """The write transaction was not committed: the files it wrote are not named by any manifest."""
        self._unsynced = []
        self._unlink(self._pending)
        if self._job is not None:
            self._job.staged = []

    def _unlink(self, names: list[str]) -> None:
        for name in names:
            with self._maps_lock:
                self._maps.pop(name, None)
            for ext in (".k", ".i", ".f"):
                (self.dir / (name + ext)).unlink(missing_ok=True)
        self._replaced, self._pending = [], []


def lookup_slices(fences: np.ndarray, keys: np.ndarray, fence: int, span: int) -> list[tuple[int, int]]:
    """Consecutive slices ``[s, e)`` of ``keys`` (ascending) to look up in a run with these
    ``fences`` (every ``fence``-th key) one after the other: cut at every ``span // fence``-th fence
    key, so a slice's entries lie within ``span + fence`` entries of the run, or within that and
    one key's entries when a key holds more than ``span`` (the cut keys it spans collapse). Costs a
    search per cut, not per key."""
    if keys.size == 0:
        return []
    step = max(1, span // fence)
    if fences.size <= step:  # the whole run is within the span
        return [(0, int(keys.size))]
    cuts = np.unique(np.searchsorted(keys, fences[step::step], side="left"))
    edges = [0, *cuts[(cuts > 0) & (cuts < keys.size)].tolist(), int(keys.size)]
    return list(zip(edges[:-1], edges[1:]))


def _read_run(rk, ri, fences, keys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """``(keys, ids)`` of one run's entries of ``keys`` (every entry when None), in the run's
    order, read ``LOOKUP_SPAN`` entries at a time with the run's pages released in between when
    it takes more than one part."""
    from .. import kernels

    maps = [(rk, ri, fences)]
    if keys is None:
        steps = range(0, rk.size, LOOKUP_SPAN)
        k = np.empty(rk.size, np.uint64)
        v = np.empty(rk.size, np.uint64)
        for a in steps:
            k[a : a + LOOKUP_SPAN] = rk[a : a + LOOKUP_SPAN]
            v[a : a + LOOKUP_SPAN] = ri[a : a + LOOKUP_SPAN]
            if len(steps) > 1:
                _release(maps)
        return k, v
    slices = lookup_slices(fences, keys, FENCE, LOOKUP_SPAN)
    kk, vv = [], []
    for s, e in slices:
        q = keys[s:e]
        lo, hi = kernels.run_ranges(rk, fences, q, FENCE)
        cnt = hi - lo
        total = int(cnt.sum())
        if total:
            idx = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(total)
            kk.append(np.repeat(q, cnt).astype(np.uint64))
            vv.append(np.asarray(ri[idx], dtype=np.uint64))
        if len(slices) > 1:
            _release(maps)
    if not kk:
        return None
    return (kk[0], vv[0]) if len(kk) == 1 else (np.concatenate(kk), np.concatenate(vv))


def _kept_blocks(run, drop: np.ndarray):
    """The entries of ``run`` (``(keys, ids, fences)``) not marked in ``drop``, ``BLOCK`` entries of
    the run at a time (copies), its pages released after each block."""
    rk, ri, _ = run
    for a in range(0, rk.size, BLOCK):
        keep = ~drop[a : a + BLOCK]
        yield np.asarray(rk[a : a + BLOCK])[keep], np.asarray(ri[a : a + BLOCK])[keep]
        _release([run])


def _release(maps) -> None:
    """Unmap the pages of runs mapped as ``(keys, ids, fences)`` (they stay in the page cache)."""
    for keys, ids, _ in maps:
        for a in (keys, ids):
            mm = getattr(a, "_mmap", None)
            if mm is not None:
                try:
                    mm.madvise(mmap.MADV_DONTNEED)
                except (OSError, ValueError, AttributeError):
                    pass


def _merge_blocks(parts: list, block: int, release):
    """The entries of ``parts`` (``(keys, ids)`` runs, oldest first) in key order, the older first on
    equal keys, in blocks: each ends on a key boundary of the largest run (about ``block`` entries
    in all) and takes every other run's entries up to that key; a block's parts are laid end to
    end, oldest first, and sorted stably by key (a merge of presorted parts). ``release`` is called
    after each block."""
    big = max(range(len(parts)), key=lambda p: parts[p][0].size)
    at = [0] * len(parts)
    bk = parts[big][0]
    step = max(1, block * bk.size // sum(pk.size for pk, _ in parts))
    done = False
    while not done:
        stop = min(bk.size, at[big] + step)
        ends = [pk.size for pk, _ in parts]
        if stop < bk.size:
            last = bk[stop - 1]
            ends = [int(np.searchsorted(pk[a:], last, side="right")) + a for (pk, _), a in zip(parts, at)]
        done = ends[big] >= bk.size
        if done:  # the largest run ends in this block: every run's rest with it
            ends = [pk.size for pk, _ in parts]
        k = np.concatenate([np.asarray(pk[a:e], dtype=np.uint64) for (pk, _), a, e in zip(parts, at, ends)])
        i = np.concatenate([np.asarray(pi[a:e], dtype=_ID) for (_, pi), a, e in zip(parts, at, ends)])
        order = np.argsort(k, kind="stable")
        yield k[order], i[order]
        at = ends
        release()
