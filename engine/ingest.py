"""Ingest: read an input, prepare documents over Arrow batches, write one atomic batch.

Per raw chunk (a few MB of records):

1. HTML records are reduced to visible text and white-space cleaned; then
   every text is measured (words, sentences, bytes), hashed and
   fingerprinted over the whole chunk, in the preparing threads
   (``neardup.prepare``).
2. Empty and too-short texts become rejects (there too).
3. Each record is matched by url against the index (LMDB ``url`` postings,
   then the catalog rows of those ids) and against earlier records of the
   same batch: same url and content hash -> unchanged (a no-op); same url,
   new content -> a new version, and the older version stops being latest.
4. The documents are appended inside the batch's DuckDB transaction.

See ``neardup.store.index`` for how the batch commits atomically.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pyarrow as pa

from . import __version__, clusters, memory, pairs, text
from .fingerprints import lexical
from .errors import BadRecord
from .faults import crashpoint
from .keys import DOCINFO, URL_CHECK_SEED, fingerprint_postings, hash64
from .pipeline import Peekable, lap, ordered_map, prefetch
from .prepare import Prepared, extract_html, prepare
from .readers import RawChunk, ReadOptions, Reject, read_input
from .readers.content import ContentPool
from .settings import Settings
from .sqlfiles import query
from .store import catalog
from .store.index import Index, Writer
from .store.rows import WrittenRows, insert_by_row, insert_fingerprints, shift_sentences
from .arrays import unique

#: the stages whose seconds are known only after the batch's commit (written to ``batch_timings`` then)
LATE_TIMINGS = ("commit", "postings")
ProgressFn = Callable[[int, int], None]  # (records seen, bytes read) since the last call
StageFn = Callable[[int, str], None]  # (batch id, stage): the stage the ingest enters, see STAGES
#: the stages of one batch, in order, as ``on_stage`` reports them
STAGES = ("reading", "pairs", "clusters", "commit", "postings")


@dataclass
class IngestResult:
    """What one batch did."""

    batch_id: int | None
    source: str
    status: str
    n_docs: int = 0
    n_new_versions: int = 0
    n_unchanged: int = 0
    n_skipped: int = 0
    n_rejected: int = 0
    n_bytes: int = 0
    seconds: float = 0.0
    rejects: list[Reject] = field(default_factory=list)  # the first 20, for display
    repaired: list[int] = field(default_factory=list)
    #: seconds per stage of the main thread: waiting for read+prepare (in threads), store, commit, postings, checkpoint
    timings: dict[str, float] = field(default_factory=dict)
    #: sentences handed to A5's batch tables so far (they are numbered batch-wide)
    sentences_seen: int = 0
    #: pairs found per pair method
    pairs: dict[str, int] = field(default_factory=dict)
    #: clusters created and removed per incremental clustering
    clusters: dict[str, dict[str, int]] = field(default_factory=dict)
    #: every batch the input was committed as (one per ``batch_mb`` of input)
    batch_ids: list[int] = field(default_factory=list)

    def tick(self, stage: str, since: float) -> float:
        return lap(self.timings, stage, since)


class _Versions:
    """Url -> versions seen so far (in the index or earlier in this batch)."""

    def __init__(self, writer: Writer, first_doc: int):
        self.w = writer
        #: the running batch's first doc id; ``marked_own``: whether a version it added is no longer
        #: the latest (marked so by ``flush``, an UPDATE of the batch's own rows: ``_ends_before``)
        self.first_doc = first_doc
        self.marked_own = False
        # url -> list of [doc_id, content_hash, version, is_latest]
        self.by_url: dict[str, list[list[int]]] = {}
        #: older versions this batch makes not latest, marked in the catalog once at the end of the
        #: batch (``flush``; an UPDATE scans the documents table, once per chunk it cost seconds a batch)
        self.superseded: list[int] = []

    def flush(self) -> None:
        """Mark the versions superseded so far as not latest."""
        if not self.superseded:
            return
        con = self.w.con
        con.register("old_ids", pa.table({"doc_id": pa.array(self.superseded, pa.int64())}))
        try:
            con.execute(query("catalog", "supersede"))
        finally:
            con.unregister("old_ids")
        self.superseded = []

    def supersedes_own(self, urls: list[str], content_hashes: list[int]) -> bool:
        """Whether adding these records (after ``load`` of their urls) would make a version the
        running batch added (from ``first_doc`` on) no longer the latest."""
        first_doc = self.first_doc
        for u, ch in zip(urls, content_hashes):
            known = self.by_url[u]
            if known and any(v[3] and v[0] >= first_doc for v in known) and all(v[1] != ch for v in known):
                return True
        return False

    def load(self, urls: list[str], url_hashes: np.ndarray) -> None:
        """The known versions of ``urls`` (those not seen yet in this batch), from the postings: the
        ``url`` lists and each document's ``val:docinfo`` row (``neardup.keys``); a document without a row
        (an index whose postings predate it) is read from the catalog."""
        by_url = self.by_url
        todo = [(u, k) for u, k in zip(urls, url_hashes.tolist()) if u not in by_url]
        if not todo:
            return
        found = self.w.postings.get_many("url", {k for _, k in todo})
        if len(found) < len(todo):  # urls no older document has (all of them in a new index): no versions
            by_url.update({u: [] for u, k in todo if k not in found})
            todo = [(u, k) for u, k in todo if k in found]
            if not todo:
                return
        ids = unique(np.concatenate(list(found.values()))).astype(np.int64) if found else np.zeros(0, np.int64)
        have, rows_ = self.w.postings.get_fixed(DOCINFO, ids, 16) if ids.size else (ids, np.zeros((0, 16), np.uint8))
        info = rows_.view(">u8").reshape(-1, 2).astype(np.uint64) if have.size else np.zeros((0, 2), np.uint64)
        known = dict(zip(have.tolist(), map(tuple, info.tolist())))
        check = hash64([u for u, _ in todo], URL_CHECK_SEED).tolist()
        rest: set[str] = set()
        for (u, k), h2 in zip(todo, check):
            mine = []
            for d in found.get(k, np.zeros(0, np.uint64)).tolist():
                if d not in known:
                    rest.add(u)
                    break
                if known[d][1] == h2:
                    mine.append(d)
            if u not in rest:
                mine.sort()
                self.by_url[u] = [[d, known[d][0], v, d == mine[-1]] for v, d in enumerate(mine, start=1)]
        if rest:
            self._load_from_catalog([(u, k) for u, k in todo if u in rest], found)

    def _load_from_catalog(self, todo: list[tuple[str, int]], found: dict) -> None:
        ids = sorted({int(i) for _, k in todo for i in found.get(k, np.zeros(0, np.uint64)).tolist()})
        rows: dict[str, list[list[int]]] = {}
        if ids:
            con = self.w.con
            con.register("ids", pa.table({"doc_id": pa.array(ids, pa.int64())}))
            try:
                for doc_id, url, ch, version, latest in con.execute(query("catalog", "docs_by_id")).fetchall():
                    rows.setdefault(url, []).append([doc_id, int(ch), version, bool(latest)])
            finally:
                con.unregister("ids")
        for u, _ in todo:
            self.by_url[u] = sorted(rows.get(u, []))


DEFAULT_BATCH_MB = memory.DEFAULT_BATCH_MB
#: an input's last batch takes in the rest of it when that is at most this part of a batch (so that an
#: input of a little over some batches is not committed with a batch of a few hundred records after
#: them, which costs most of what a whole batch costs in the searches against a large index)
TAIL_PART = 8


def read_ahead(items: Iterable) -> Peekable:
    """The ``(chunk, ...)`` items of an input as a ``Peekable`` that counts each chunk's bytes read
    (what ``batch_ends`` reads ahead by)."""
    return Peekable(items, size=lambda item: item[0].n_bytes_read)


def batch_ends(chunks: Peekable, n_bytes: int, budget: float) -> bool:
    """Whether a batch that has read ``n_bytes`` of its input ends here: once it reaches ``budget``,
    unless what is left of the input is at most ``budget / TAIL_PART`` (which it then takes in).
    ``neardup query`` cuts its parts by the same rule."""
    return n_bytes >= budget and not chunks.ends_within(int(budget) // TAIL_PART)


def ingest(
    index: Index,
    path: str,
    opts: ReadOptions | None = None,
    *,
    strict: bool = False,
    create_with: Settings | None = None,
    progress: ProgressFn | None = None,
    batch_mb: float | None = None,
    on_stage: StageFn | None = None,
    memory_bytes: int | None = None,
) -> IngestResult:
    """Ingest one input (file, folder or ``-``): one atomic batch per ``batch_mb`` MB of input read.

    An input up to ``batch_mb`` is one batch; a bigger one is committed as
    several consecutive batches of that size (each atomic, all with the input
    as their ``source``), so that memory is bounded by ``batch_mb``, not by the
    input; the last takes in a rest of at most an eighth of ``batch_mb``
    (``TAIL_PART``) instead of leaving it to a batch of its own. A batch that has read at least
    that eighth also ends before a chunk holding a new version of a url it added itself
    (``_ends_before``). A crash
    leaves the batches committed before it; ingesting the same input again
    adds the rest (what is committed is unchanged, a no-op).
    Returns the sum over the batches (``batch_id`` the last one,
    ``batch_ids`` all). Raises ``InputError`` when the input cannot be opened,
    ``IndexLocked`` when another writer is active, ``BadRecord`` under
    ``strict`` at the first reject (the batch holding it is rolled back and
    kept only as a ``failed`` row in ``batches`` with that reject; earlier
    batches of the input stay). ``progress`` is told the records and bytes
    read, ``on_stage`` each stage a batch enters (``STAGES``; reading includes
    the fingerprints, computed in threads as the input is read). ``memory_bytes``
    scales every budget the write holds (``neardup.memory``; default 4 GB), ``batch_mb``
    included unless given.
    """
    plan = memory.MemoryPlan(memory_bytes) if memory_bytes is not None else memory.current()
    if batch_mb is None:
        batch_mb = plan.scaled(int(DEFAULT_BATCH_MB * 1e6)) / 1e6
    with memory.using(plan):
        return _ingest(index, path, opts, strict, create_with, progress, batch_mb, on_stage)


def _ingest(index: Index, path: str, opts: ReadOptions | None, strict: bool, create_with: Settings | None,
            progress: ProgressFn | None, batch_mb: float, on_stage: StageFn | None) -> IngestResult:
    opts = opts or ReadOptions()
    source = "<stdin>" if path == "-" else path
    raw_chunks = read_input(path, opts)  # raises InputError before any write
    t0 = time.perf_counter()
    _warm_kernels()
    total: IngestResult | None = None
    reading = prefetch(raw_chunks)  # the first chunks are read while the index opens
    with reading, index.writer(create_with=create_with or Settings()) as w, ContentPool() as pool:
        settings = w.settings

        def prep(chunk: RawChunk) -> tuple[RawChunk, Prepared | None, float]:
            t = time.perf_counter()
            chunk = extract_html(chunk, settings.content, pool)
            t_html = time.perf_counter() - t
            return chunk, (prepare(chunk.batch, settings) if chunk.batch.num_rows else None), t_html

        chunks = read_ahead(ordered_map(prep, reading))
        values = pairs.ValueCache()  # older documents' values read by the pair search, kept from batch to batch
        while True:
            res = _ingest_batch(w, chunks, source, strict, progress, int(batch_mb * 1e6), on_stage or _no_stage, values)
            total = res if total is None else _merge(total, res)
            if chunks.exhausted():
                break
            values.own()  # the batch's own values were views of its rows (``pairs.values.blob_views``)
    total.seconds = time.perf_counter() - t0
    return total


def _warm_kernels() -> None:
    """Load the normal form's and the tokenizer's compiled code in a daemon thread while the index
    opens and the first chunk is read: numba's first load in a process (its code generator, then
    the cached kernels) takes a few tenths of a second, which the first chunks' preparing threads
    would otherwise wait for. The kernels are the same either way; this only moves when they load."""
    import threading

    def load() -> None:
        try:
            text.analyze(text.normal_form(pa.array(["Warm up ™"], pa.large_string())), 0, spans=False)
        except Exception:  # pragma: no cover - the preparing threads then load it (and report any error)
            pass

    threading.Thread(target=load, name="neardup-warm", daemon=True).start()


def _no_stage(batch_id: int, stage: str) -> None:
    pass


def _merge(a: IngestResult, b: IngestResult) -> IngestResult:
    """Two consecutive batches of one input as one result."""
    for f in ("n_docs", "n_new_versions", "n_unchanged", "n_skipped", "n_rejected", "n_bytes"):
        setattr(a, f, getattr(a, f) + getattr(b, f))
    a.batch_id = b.batch_id
    a.batch_ids += b.batch_ids
    a.rejects = (a.rejects + b.rejects)[:20]
    a.repaired += b.repaired
    for k, v in b.timings.items():
        a.timings[k] = a.timings.get(k, 0.0) + v
    for k, v in b.pairs.items():
        a.pairs[k] = a.pairs.get(k, 0) + v
    for m, d in b.clusters.items():
        mine = a.clusters.setdefault(m, {})
        for k, v in d.items():
            mine[k] = mine.get(k, 0) + v
    return a


def _ingest_batch(w: Writer, chunks: Peekable, source: str, strict: bool, progress: ProgressFn | None,
                  budget: int, stage: StageFn, values: pairs.ValueCache | None = None) -> IngestResult:
    """One atomic batch: chunks until ``budget`` bytes of input are read (or the input ends, or
    what is left of it is at most ``budget / TAIL_PART``: then that too)."""
    started = datetime.now()
    t0 = time.perf_counter()
    con = w.con
    batch_id, next_doc = con.execute(query("catalog", "next_ids")).fetchall()[0]
    res = IngestResult(batch_id=batch_id, source=source, status="committed", repaired=list(w.repaired), batch_ids=[batch_id])
    w.repaired.clear()
    w.begin_batch()
    stage(batch_id, "reading")
    crashpoint("batch-start")
    con.execute("BEGIN TRANSACTION")
    try:
        first_doc = next_doc
        if "a5" in w.settings.methods:
            con.execute(query("lexical", "create_batch_sentences"))
        written = WrittenRows()  # the batch's rows, read by its searches and postings below
        next_doc = _write_chunks(w, chunks, batch_id, next_doc, res, strict, progress, budget, written)
        n_added = next_doc - first_doc
        writing = None  # the LMDB write of the batch's postings, filled in a thread beside what follows
        if n_added and any(m in lexical.STATS_METHODS for m in w.settings.methods):
            t = time.perf_counter()
            lexical.batch_end(con, first_doc, next_doc - 1, w.settings.methods, w.settings.seed)
            res.tick("lexical", t)
        try:
            if n_added:
                crashpoint("before-pairs")
                stage(batch_id, "pairs")
                # the concept neighbours need nothing the pairs find: searched for beside them
                search = clusters.NeighbourSearch(con, w.postings, first_doc, next_doc - 1, w.settings, written) \
                    if "concept" in w.settings.clusters else None
                try:
                    # the pair generators' keys are also the batch's postings (``keys.fingerprint_postings``,
                    # from the same rows): derived once, written to LMDB after the commit
                    t = time.perf_counter()
                    keys = pairs.candidate_postings(con, first_doc, next_doc - 1, w.settings, written)
                    res.tick("candidate keys", t)
                    pairs.sketch_filter.hold_batch(values, first_doc, next_doc - 1, written, w.settings)
                    res.pairs = pairs.find_batch_pairs(con, w.postings, first_doc, next_doc - 1, batch_id, w.settings,
                                                       res.timings, keys=keys, beside=True, values=values)
                except BaseException:
                    if search is not None:
                        search.abandon()
                    raise
                # the postings, derived from the batch's rows exactly as crash recovery derives them from
                # the committed ones (the concept postings once the concept thread ends), go into an LMDB
                # write transaction in a thread of its own while the clusters are updated and the catalog
                # commits; it commits after the catalog (``PostingsWrite``)
                t = time.perf_counter()
                concept = search.result().postings if search is not None else None
                t = res.tick("clusters: wait", t)
                fingerprints = fingerprint_postings(con, first_doc, next_doc - 1, w.settings, candidates=keys, concept=concept)
                del keys, concept
                postings = w.batch_postings(batch_id, fingerprints, written)
                del fingerprints, written
                res.tick("postings", t)
                writing = w.write_postings(batch_id, postings)
                del postings
                stage(batch_id, "clusters")
                res.clusters = clusters.update(con, w.postings, first_doc, next_doc - 1, batch_id, w.settings, res.timings, search)
                catalog.start_writeback(w.index.catalog_path)  # and the pairs' and clusters' row groups
            con.execute(
                query("catalog", "insert_batch"),
                [batch_id, source, started, res.n_docs, res.n_unchanged, res.n_skipped, res.n_rejected,
                 res.n_bytes, first_doc if n_added else None, next_doc - 1 if n_added else None,
                 "committed", __version__],
            )
            known = [[batch_id, k, v] for k, v in sorted(res.timings.items()) if k not in LATE_TIMINGS]
            if known:
                con.executemany("INSERT INTO batch_timings VALUES (?, ?, ?)", known)
            crashpoint("duckdb-before-commit")
            stage(batch_id, "commit")
            t = time.perf_counter()
            if writing is None:
                writing = w.write_postings(batch_id, {})
            con.execute("COMMIT")
        except BaseException:
            if writing is not None:
                writing.abandon()
            raise
        writing.catalog_committed()
        res.tick("commit", t)
    except BadRecord as exc:
        con.execute("ROLLBACK")
        _record_failed(w, batch_id, source, started, exc)
        w.finish_batch(None, None)
        raise
    except BaseException:
        con.execute("ROLLBACK")
        w.finish_batch(None, None)
        raise
    stage(batch_id, "postings")
    # the catalog's log, written by the commit, goes to its file meanwhile (the reading ahead has
    # already told whether the input has more: a batch ends early only with more than a tail left)
    with w.checkpoint_beside(last=writing if chunks.exhausted() else None):
        w.finish_batch(batch_id, writing, timings=res.timings)
    crashpoint("after-batch")
    # the commit's and the postings' seconds, known only now: kept apart from the batch's rows (a
    # crash before this loses two timing rows, nothing else)
    con.executemany("INSERT INTO batch_timings VALUES (?, ?, ?)",
                    [[batch_id, k, res.timings.get(k, 0.0)] for k in LATE_TIMINGS])
    res.seconds = time.perf_counter() - t0
    return res


def _write_chunks(w: Writer, chunks: Peekable, batch_id: int, next_doc: int, res: IngestResult, strict: bool,
                  progress: ProgressFn | None, budget: int, written: WrittenRows) -> int:
    con = w.con
    versions = _Versions(w, next_doc)
    first = True
    t = time.perf_counter()
    for item in chunks:
        chunk, prepared, t_html = item
        t = res.tick("read+prepare", t)
        urls = prepared.table.column("url").to_pylist() if prepared is not None and prepared.table.num_rows else []
        url_hashes = hash64(urls) if urls else None
        if not first and urls and _ends_before(versions, prepared, urls, url_hashes, res.n_bytes, budget):
            chunks.put_back(item)  # the next batch's first chunk
            break
        # the preparing threads' own steps (they overlap the main thread's stages and each other)
        for stage, sec in [("html", t_html), *(prepared.timings.items() if prepared else ())]:
            res.timings[f"prepare: {stage}"] = res.timings.get(f"prepare: {stage}", 0.0) + sec
        res.n_skipped += chunk.n_skipped
        res.n_bytes += chunk.n_bytes_read
        rejects = list(chunk.rejects) + (prepared.rejects if prepared else [])
        if rejects:
            if strict:
                r = rejects[0]
                raise BadRecord(r.source, r.record, r.reason)
            _insert_rejects(con, batch_id, rejects)
            res.n_rejected += len(rejects)
            room = 20 - len(res.rejects)
            res.rejects.extend(rejects[:max(room, 0)])
        if prepared is not None and prepared.table.num_rows:
            next_doc = _add_documents(w, versions, prepared, urls, url_hashes, batch_id, next_doc, res, written)
            catalog.start_writeback(w.index.catalog_path)  # the full row groups written so far go out now, not at the commit
        t = res.tick("store", t)
        if progress:
            progress(chunk.batch.num_rows + chunk.n_skipped + len(chunk.rejects), chunk.n_bytes_read)
        if first:
            crashpoint("after-first-chunk")
            first = False
        if batch_ends(chunks, res.n_bytes, budget):
            break
    versions.flush()
    return next_doc


def _ends_before(versions: _Versions, prepared: Prepared, urls: list[str], url_hashes: np.ndarray, n_bytes: int,
                 budget: int) -> bool:
    """Whether a batch that has read ``n_bytes`` (at least ``budget / TAIL_PART``) ends before this
    chunk, because the chunk holds a new version of a url the batch itself added (an input with two
    crawls of one site): marking the batch's own row as not latest is an UPDATE of rows DuckDB holds
    for the open transaction, and one such UPDATE makes its commit write every row the transaction
    inserted into the write-ahead log, which the next checkpoint then writes again (the real site's
    two releases, 48,767 pages in one batch: 5.6 s against 3.9 s without the UPDATE). The next
    batch marks them on committed rows, which costs a few milliseconds. A smaller batch keeps the
    chunk and pays the log (which, for so few rows, costs about what a batch of their own would),
    and so does a batch that has already marked one of its own rows."""
    if n_bytes < budget // TAIL_PART or versions.marked_own:
        return False
    versions.load(urls, url_hashes)
    return versions.supersedes_own(urls, prepared.table.column("content_hash").to_numpy().tolist())


def _add_documents(w: Writer, versions: _Versions, prepared: Prepared, urls: list[str], url_hashes: np.ndarray,
                   batch_id: int, next_doc: int, res: IngestResult, written: WrittenRows) -> int:
    """Add the chunk's records (``urls``: their urls, ``url_hashes`` their ``hash64``) as new
    documents or versions; returns the next free doc id."""
    t = prepared.table
    hashes = t.column("content_hash").to_numpy()
    versions.load(urls, url_hashes)
    known_lists = [versions.by_url[u] for u in urls]
    if not any(known_lists) and len(set(urls)) == len(urls):  # every url new: each text its version 1
        return _add_new_urls(w, prepared, batch_id, next_doc, res, known_lists, hashes, written)
    keep = np.zeros(len(urls), dtype=bool)
    doc_ids = np.zeros(len(urls), dtype=np.int64)
    vers = np.zeros(len(urls), dtype=np.int32)
    superseded = versions.superseded
    first_doc, chunk_first = versions.first_doc, next_doc
    for i, (u, ch) in enumerate(zip(urls, hashes.tolist())):
        known = versions.by_url[u]
        if any(v[1] == ch for v in known):
            res.n_unchanged += 1
            continue
        for v in known:
            if v[3]:
                v[3] = False
                superseded.append(v[0])
                if first_doc <= v[0] < chunk_first:
                    versions.marked_own = True
        if known:
            res.n_new_versions += 1
        keep[i] = True
        doc_ids[i] = next_doc
        vers[i] = (max(v[2] for v in known) + 1) if known else 1
        known.append([next_doc, ch, int(vers[i]), True])
        next_doc += 1
    n = int(keep.sum())
    con = w.con
    if n:
        kept = t if n == len(urls) else t.filter(pa.array(keep))
        kept_ids = doc_ids[keep]
        latest = np.array([versions.by_url[u][-1][0] == d for u, d in zip(kept.column("url").to_pylist(), kept_ids.tolist())])
        _insert_documents(con, kept, prepared, keep, doc_ids, vers[keep], latest, batch_id, res, written)
    return next_doc


def _add_new_urls(w: Writer, prepared: Prepared, batch_id: int, next_doc: int, res: IngestResult,
                  known_lists: list[list], hashes: np.ndarray, written: WrittenRows) -> int:
    """``_add_documents`` where no url of the chunk has a version yet and none comes twice: every
    record is added as its url's version 1 (the same rows the general path gives, without its
    per-record decisions); ``known_lists``: each record's url's list of versions (empty), which
    gets the new one."""
    t = prepared.table
    n = t.num_rows
    doc_ids = np.arange(next_doc, next_doc + n, dtype=np.int64)
    for known, d, ch in zip(known_lists, doc_ids.tolist(), hashes.tolist()):
        known.append([d, ch, 1, True])
    _insert_documents(w.con, t, prepared, np.ones(n, dtype=bool), doc_ids, np.ones(n, np.int32), np.ones(n, dtype=bool),
                      batch_id, res, written)
    return next_doc + n


def _insert_documents(con, kept: pa.Table, prepared: Prepared, keep: np.ndarray, doc_ids: np.ndarray, vers: np.ndarray,
                      latest: np.ndarray, batch_id: int, res: IngestResult, written: WrittenRows) -> None:
    """Insert the records ``kept`` (the chunk's rows where ``keep``) under ``doc_ids[keep]``, with
    their versions and latest flags, and their fingerprints (and terms); ``written`` holds them."""
    n = kept.num_rows
    new_docs = kept.append_column("doc_id", pa.array(doc_ids[keep], pa.int64()))
    new_docs = new_docs.append_column("batch_id", pa.array(np.full(n, batch_id, np.int32)))
    new_docs = new_docs.append_column("version", pa.array(vers, pa.int32()))
    new_docs = new_docs.append_column("is_latest", pa.array(latest))
    con.register("new_docs", new_docs)
    try:
        con.execute(query("catalog", "insert_documents"))
        insert_fingerprints(con, new_docs, registered="new_docs")
    finally:
        con.unregister("new_docs")
    written.add(new_docs)
    if prepared.terms is not None:
        rows = prepared.table.column("_row").to_numpy()
        row_to_doc = np.full(int(rows.max()) + 1, -1, dtype=np.int64)
        row_to_doc[rows[keep]] = doc_ids[keep]
        insert_by_row(con, "doc_terms", prepared.terms, row_to_doc)
        if prepared.sent_terms is not None:
            offset = res.sentences_seen
            insert_by_row(con, "batch_sent_terms", shift_sentences(prepared.sent_terms, offset), row_to_doc)
            insert_by_row(con, "batch_sent_text", shift_sentences(prepared.sent_texts, offset), row_to_doc)
            res.sentences_seen = offset + prepared.sent_texts.num_rows
    res.n_docs += n


def _insert_rejects(con, batch_id: int, rejects: list[Reject]) -> None:
    t = pa.table(
        {
            "batch_id": pa.array([batch_id] * len(rejects), pa.int32()),
            "source": [r.source for r in rejects],
            "record": [r.record for r in rejects],
            "reason": [r.reason for r in rejects],
        }
    )
    con.register("new_rejects", t)
    try:
        con.execute(query("catalog", "insert_rejects"))
    finally:
        con.unregister("new_rejects")


def _record_failed(w: Writer, batch_id: int, source: str, started: datetime, exc: BadRecord) -> None:
    """After a --strict rollback: keep a trace of the failed batch and its first bad record."""
    con = w.con
    con.execute("BEGIN TRANSACTION")
    _insert_rejects(con, batch_id, [Reject(exc.source, exc.record, exc.reason)])
    con.execute(
        query("catalog", "insert_batch"),
        [batch_id, source, started, 0, 0, 0, 1, 0, None, None, "failed", __version__],
    )
    con.execute("COMMIT")
