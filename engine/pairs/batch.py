"""One batch's pairs: candidates and verification slice by slice (``find_batch_pairs``), and
``rebuild_pairs`` replaying every batch."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from .. import memory
from ..fingerprints import POSTINGS
from ..settings import Settings
from ..sqlfiles import query
from .chains import _a12_pairs, _chain_pairs
from .groups import KeyGroups
from .keys import candidate_postings, lsh_params, pair_methods, simhash_plan
from .simhash import ScanBeside, scan_pairs, use_scan
from .sketch_filter import VERIFY, screen, screens
from ..store.postings import VALUES
from .values import SIGNATURE_VALUES, ValueCache, _fetch, _fixed_values, _signature_rows
from .verify import (_shared_lists, _simhash_distance, agree_enough, bottomk_similarity, min_agreements,
                     minhash_similarity, shingle_jaccard, sure_agreements)
from ..arrays import pair_order, unique

#: candidate rows (key matches before deduplication) one slice of a batch's documents may hold in
#: memory; the slices' documents are chosen from the rows per document seen so far (bounds the memory
#: of a batch). The agreement filter of ``jaccard`` never lists its candidates: it counts the older
#: holders' entries it reads and the agreeing rows it keeps
CANDIDATE_BUDGET = 4_000_000
#: documents in a batch's first slice
FIRST_SLICE = 2_000
#: methods whose candidates are not keys of the new documents: found once over the whole batch
_WHOLE_BATCH = ("a11", "a12")


def _small_sketches(con, ids: np.ndarray, threshold: float) -> np.ndarray:
    """Of ``ids``, the documents whose sketch needs fewer than 2 shared values."""
    if ids.size == 0:
        return ids
    t = _fetch(con, "fp_bottomk", "len(f.sketch) AS n", ids)
    n = t.column("n").to_numpy()
    return t.column("doc_id").to_numpy()[np.ceil(threshold * n - 1e-9) < 2]


def find_batch_pairs(con, postings, lo: int, hi: int, batch_id: int, settings: Settings,
                     timings: dict[str, float] | None = None, keys: dict | None = None,
                     budget: int | None = None, beside: bool = False, values: ValueCache | None = None) -> dict[str, int]:
    """Find and insert every pair method's pairs for new documents ``lo..hi`` (the batch's
    own catalog rows must be written; ``postings`` holds the older documents' keys and
    may hold more: only ids below ``lo`` are read from it). Returns pairs per method.

    ``beside``: the older documents' catalog rows are committed and unchanged (an ingest's batch),
    so a scanned simhash method runs in a thread of its own (``ScanBeside``) while the others
    find theirs; its own seconds are ``candidates: simhash scan``, what was left to wait for
    counts in ``candidates``.

    Key-matched candidates are found and verified for slices of the batch's documents (the
    pairs whose newer member is in the slice), each emitting about ``budget`` rows
    (``CANDIDATE_BUDGET``), so memory
    does not grow with the batch or with the longest posting lists; the pairs do not depend on
    the slicing.

    ``values``: the cache of older documents' values to read through and fill (a new one when not
    given). An ingest keeps one for all the batches of an input: a document's values never change,
    and a batch's partners are largely the batch before's and its partners (pages of the same
    sites), so what a batch read and its own rows are not read again while they fit."""
    methods = pair_methods(settings)
    if not methods or hi < lo:
        return {}
    budget = budget or memory.current().scaled(CANDIDATE_BUDGET)
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
    scans: dict[str, ScanBeside] = {}
    for m in methods:  # simhash tables of a batch that is not tiny against the index: scanned (pairs.simhash)
        if m in ("simhash", "simhash_hp") and m not in whole and use_scan(hi - lo + 1, _older(con, m, lo)):
            held = values.sorted_simhashes if values is not None else None
            if beside:
                scans[m] = ScanBeside(con, m, lo, hi, settings.simhash_bits, budget, cache=held)
            else:
                found[m].append(scan_pairs(con, m, lo, hi, settings.simhash_bits, budget, timed, cache=held))
            whole.append(m)
    try:
        _keyed_pairs(con, postings, lo, hi, settings, methods, whole, keys, budget, found, timed,
                     values if values is not None else ValueCache())
    finally:
        for scan in scans.values():
            scan.abandon()  # a failing batch must not close the catalog under a running scan
    for m, scan in scans.items():
        found[m].append(timed(scan.result))
        if timings is not None:
            timings["candidates: simhash scan"] = timings.get("candidates: simhash scan", 0.0) + scan.seconds
    t_verify = time.perf_counter()
    counts = {}
    for m, parts in found.items():
        a, b, sim = (np.concatenate(c) for c in zip(*parts)) if parts else (np.zeros(0, np.int64),) * 3
        counts[m] = int(a.size)
        if a.size:
            order = pair_order(a, b)
            rows = pa.table({
                "doc_a": pa.array(a[order], pa.int64()), "doc_b": pa.array(b[order], pa.int64()),
                "similarity": pa.array(np.asarray(sim, np.float64)[order], pa.float64()),
                "batch_id": pa.array(np.full(a.size, batch_id, np.int32)),
            })
            con.register("new_pairs", rows)
            try:
                con.execute("INSERT INTO duplicates BY NAME SELECT *, ?::VARCHAR AS method FROM new_pairs", [m])
            finally:
                con.unregister("new_pairs")
    if timings is not None:
        timings["candidate keys"] = timings.get("candidate keys", 0.0) + t_keys - t0
        timings["candidates"] = timings.get("candidates", 0.0) + spent[0]
        timings["verify"] = timings.get("verify", 0.0) + t_verify - t_keys - spent[0]
        timings["store pairs"] = timings.get("store pairs", 0.0) + time.perf_counter() - t_verify
    return counts


def _keyed_pairs(con, postings, lo: int, hi: int, settings: Settings, methods: list[str], whole: list[str],
                 keys: dict, budget: int, found: dict, timed, values: ValueCache) -> None:
    """The key-matched methods' pairs (those not in ``whole``), slice by slice, into ``found``;
    ``values`` is read through and keeps the batch's own signature rows at the end."""
    keyed = [m for m in methods if m not in whole]
    groups: dict[str, KeyGroups] = {}
    # the batch's shingle sets, read from the catalog once for its postings: verification finds them here
    own = keys.get(VALUES + "shingles")
    if own is not None:
        values.add("shingles", dict(zip(own[0].tolist(), own[1])))
    batch_low: dict[str, tuple[np.ndarray, np.ndarray]] = {}
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
                groups[table] = _key_groups(keys, table, settings)
            a, b, shared, n = groups[table].pairs(lo, postings, table, first, last)
            rows[0] += n
            if table == "bottomk_prefix":  # two shared prefix values, or a sketch too small for two
                small = _small_sketches(con, unique(np.concatenate([a, b])), settings.threshold)
                ok = (shared >= 2) | np.isin(a, small) | np.isin(b, small)
                a, b = a[ok], b[ok]
            return a, b

        def agreeing(table: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
            if "agree:" + table not in cache:
                cache["agree:" + table] = timed(_agreeing, table)
            return cache["agree:" + table]

        def _agreeing(table: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
            if table not in groups:
                groups[table] = _key_groups(keys, table, settings)
            if "low" not in batch_low:
                batch_low["low"] = _batch_low_rows(keys, settings.minhash_perms)
            new_ids, low_new = batch_low["low"]
            a, b, _, held = groups[table].agreeing_pairs(lo, postings, table, first, last, new_ids, low_new,
                                                         lambda ids: _old_low_rows(con, postings, lo, ids, settings, values),
                                                         min_agreements(settings.threshold, settings.minhash_perms))
            rows[0] += held  # what the slice held (its candidates are never listed)
            if a.size and screens(settings):  # which need no screen by their sketches
                sure = _agree_at_least(con, postings, lo, settings, values, batch_low, a, b,
                                       sure_agreements(settings.threshold, settings.minhash_perms))
                return a, b, sure
            return a, b, None

        for m in keyed:
            found[m].append(_verify(con, m, cand, postings, lo, hi, settings, values, agreeing))
        step = max(1, int(budget * (last - first + 1) / max(rows[0], 1)))
        first = last + 1
    if "low" in batch_low:  # older documents' rows for the batches after this one
        values.add_fixed(SIGNATURE_VALUES, *batch_low["low"])
    values.batch_sketches = None  # (``sketch_filter.hold_batch``: this batch's alone)


def _key_groups(keys: dict, table: str, settings: Settings) -> KeyGroups:
    """The batch's keys of ``table`` grouped; the LSH band keys (``keys.candidate_postings``: each
    document's bands in order) with their band count, so a pair of the batch's documents is emitted
    from its first shared band only."""
    k, d = keys.get(table, (np.zeros(0, np.uint64), np.zeros(0, np.uint64)))
    bands = lsh_params(settings.threshold, settings.minhash_perms)[0] if table == "lsh" else None
    return KeyGroups(k, d, bands)


def _older(con, m: str, lo: int) -> int:
    return con.sql(f"SELECT count(*) FROM fp_{m} WHERE doc_id < ?", params=[lo]).fetchall()[0][0]


def _batch_low_rows(keys: dict, perms: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch's documents (ascending) and their one-byte signature rows, from its postings."""
    ids, vals = keys.get(VALUES + SIGNATURE_VALUES, (np.zeros(0, np.uint64), []))
    ids = np.asarray(ids, dtype=np.int64)
    rows = np.frombuffer(b"".join(vals), dtype=np.uint8).reshape(ids.size, perms)
    order = np.argsort(ids, kind="stable")
    return ids[order], rows[order]


def _agree_at_least(con, postings, lo: int, settings: Settings, cache: ValueCache, batch_low: dict,
                    a: np.ndarray, b: np.ndarray, need: int) -> np.ndarray:
    """Whether each pair's one-byte signature rows agree on at least ``need`` positions: the batch's
    rows ``batch_low["low"]`` (as words once a batch, ``batch_low["words"]``), older documents'
    through ``cache``."""
    from .. import row_kernels

    new_ids, low_new = batch_low["low"]
    if "words" not in batch_low:
        batch_low["words"] = row_kernels.byte_words(low_new)
    words = batch_low["words"]
    perms = low_new.shape[1]
    ab = np.concatenate([a, b])
    old = unique(ab[ab < lo])
    if old.size:
        held, place = _old_low_rows(con, postings, lo, old, settings, cache)
        words = np.concatenate([words, row_kernels.byte_words(held[place], perms)])
    if new_ids.size and int(new_ids[-1]) - int(new_ids[0]) + 1 == new_ids.size:  # a batch's ids run without gaps
        rows = ab - new_ids[0]
    else:
        rows = np.searchsorted(new_ids, ab)
    if old.size:
        at = ab < lo
        rows[at] = new_ids.size + np.searchsorted(old, ab[at])
    return row_kernels.pair_agreements(words, rows[: a.size], rows[a.size :], need + row_kernels.padded(perms) - perms)


def _old_low_rows(con, postings, lo: int, ids: np.ndarray, settings: Settings,
                  cache: ValueCache) -> tuple[np.ndarray, np.ndarray]:
    """One-byte signature rows of older documents ``ids`` (ascending, distinct) as ``(rows, place)``,
    the row of ``ids[i]`` being ``rows[place[i]]``: the cache's own rows when it holds them all once
    the missing ones are read (a slice's partners are mostly the slices' before: not copied again),
    else a copy in the order of ``ids``."""
    def read(want: np.ndarray) -> np.ndarray:
        return _fixed_values(con, postings, lo, want, "fp_minhash", "signature", SIGNATURE_VALUES,
                             settings.minhash_perms, _signature_rows, cache)[1]

    held = cache.fixed.get(SIGNATURE_VALUES)
    pos = held.find(ids) if held is not None else np.zeros(ids.size, np.int64)
    if not pos.all():
        read(ids[pos == 0])
        held = cache.fixed.get(SIGNATURE_VALUES)
        pos = held.find(ids) if held is not None else np.zeros(ids.size, np.int64)
    if held is not None and pos.all():
        return held.rows, pos - 1
    return read(ids), np.arange(ids.size)


def _verify(con, m: str, cand, postings, lo: int, hi: int, settings: Settings,
            cache: ValueCache | None = None, agreeing=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of method ``m`` among the candidates ``cand(table)`` of one slice of batch
    ``lo..hi``, with their similarity (``agreeing(table)``: the candidates of ``jaccard`` that pass
    the agreement filter)."""
    t = settings.threshold
    if m == "jaccard":
        if agreeing is not None:
            a, b, sure = agreeing("lsh")
        else:
            a, b = cand("lsh")
            # pairs whose signatures agree too rarely for the threshold are not verified
            ok = agree_enough(con, a, b, settings.minhash_perms, min_agreements(t, settings.minhash_perms), postings, lo, cache)
            a, b, sure = a[ok], b[ok], None

        def exact(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return _chunked(lambda x_, y_: shingle_jaccard(con, x_, y_, postings, lo, at_least=t, cache=cache), x, y)

        if a.size and screens(settings):
            # the others' bottom-k sketches screen them, and decide those whose sketches are whole
            # sets (``sketch_filter``); what passes is verified on the shingle sets
            state = np.full(a.size, VERIFY, np.int8)
            sim = np.full(a.size, -1.0)
            look = ~sure if sure is not None else np.ones(a.size, bool)
            state[look], sim[look] = screen(con, a[look], b[look], settings, min_agreements(t, settings.bottomk), postings, lo, hi, cache)
            more = state == VERIFY
            sim[more] = exact(a[more], b[more])
        else:
            sim = exact(a, b)
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


#: candidate pairs verified at once: the shingle sets of a chunk's documents are read and joined
#: together, so this bounds that memory when a slice holds many agreeing pairs
VERIFY_CHUNK = 100_000


def _chunked(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``fn(a, b)`` (one value per pair) computed ``VERIFY_CHUNK`` pairs at a time."""
    if a.size <= VERIFY_CHUNK:
        return fn(a, b)
    return np.concatenate([fn(a[s : s + VERIFY_CHUNK], b[s : s + VERIFY_CHUNK]) for s in range(0, a.size, VERIFY_CHUNK)])


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



def rebuild_pairs(con, settings: Settings, timings: dict[str, float] | None = None) -> dict[str, int]:
    """Recompute ``duplicates`` from the current fingerprints, batch by batch in commit order
    (each pair keeps the batch that completes it), inside the caller's transaction. Older
    documents' keys are kept in memory as the batches are replayed."""
    from ..store.postings import MemoryPostings

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
