"""The posting store: LMDB and its in-memory twin behave the same."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.store.postings import LmdbPostings, MemoryPostings, group_postings


def test_group_postings_sorts_and_dedups():
    got = [(k, v.tolist()) for k, v in group_postings(np.array([5, 1, 5, 5]), np.array([9, 3, 7, 9]))]
    assert got == [(1, [3]), (5, [7, 9])]


def batches_strategy():
    # each batch: a list of (key, doc offset within batch); doc ids grow per batch
    return st.lists(
        st.lists(st.tuples(st.integers(0, 2**64 - 1) | st.integers(0, 20), st.integers(0, 9)), max_size=30),
        min_size=1,
        max_size=5,
    )


def _apply_all(store, batches):
    base = 1
    for b, pairs in enumerate(batches, start=1):
        keys = np.array([k for k, _ in pairs], dtype=np.uint64)
        ids = np.array([base + d for _, d in pairs], dtype=np.uint64)
        store.apply_batch(b, {"t": (keys, ids), "u": (keys[::-1].copy(), ids)})
        base += 10


@settings(max_examples=40, deadline=None)
@given(batches_strategy(), st.sampled_from([(0.1, 50_000), (0.5, 3), (0.0, 0)]), st.sampled_from([1, 2, 5, 1 << 14]))
def test_lmdb_and_memory_agree(tmp_path_factory, batches, merge, put_run):
    """Also when the recent level is folded into the main one often (or after every batch), and
    whatever the runs the records are written in."""
    import neardup.store.postings as postings_mod

    postings_mod.PUT_RUN, saved = put_run, postings_mod.PUT_RUN
    mem = MemoryPostings()
    lm = LmdbPostings(tmp_path_factory.mktemp("lmdb"))
    lm.MERGE_RATIO, lm.MERGE_MIN = merge
    try:
        _apply_all(mem, batches)
        _apply_all(lm, batches)
        assert lm.dump() == mem.dump()
        assert lm.applied_batch() == mem.applied_batch() == len(batches)
        for table in ("t", "u"):  # every key once, from both levels, read without the ids
            assert lm.keys(table).tolist() == sorted(mem.dump().get(table, {}))
        for k in list(mem.dump().get("t", {}))[:5]:
            assert lm.get("t", k).tolist() == mem.get("t", k).tolist()
        keys = np.array(list(mem.dump().get("u", {}))[:7] + [12345], dtype=np.uint64)
        assert [x.tolist() for x in lm.get_flat("u", keys)] == [x.tolist() for x in mem.get_flat("u", keys)]
    finally:
        postings_mod.PUT_RUN = saved
        lm.close()


@pytest.mark.parametrize("make", [MemoryPostings, "lmdb"])
def test_apply_is_idempotent_and_lists_stay_sorted(tmp_path, make):
    store = LmdbPostings(tmp_path / "p") if make == "lmdb" else make()
    store.apply_batch(1, {"t": (np.array([7, 7, 8], np.uint64), np.array([2, 1, 3], np.uint64))})
    store.apply_batch(1, {"t": (np.array([7], np.uint64), np.array([99], np.uint64))})  # already applied: ignored
    store.apply_batch(2, {"t": (np.array([7], np.uint64), np.array([4], np.uint64))})
    assert store.get("t", 7).tolist() == [1, 2, 4]
    assert store.get("t", 8).tolist() == [3]
    assert store.get("t", 9).tolist() == []
    assert store.get("missing", 7).tolist() == []
    assert store.applied_batch() == 2
    with pytest.raises(ValueError, match="does not follow"):
        store.apply_batch(3, {"t": (np.array([7], np.uint64), np.array([3], np.uint64))})
    store.close()


def test_a_batch_larger_than_the_map_grows_it_before_its_write(tmp_path, monkeypatch):
    """``LmdbPostings._room_for`` sizes the map for the batch, so its write is done once (a write
    that fills the map is aborted and done again)."""
    monkeypatch.setattr(LmdbPostings, "INITIAL_MAP", 64 << 10)
    writes = []
    original = LmdbPostings._write
    monkeypatch.setattr(LmdbPostings, "_write", lambda self, *a, **kw: (writes.append(1), original(self, *a, **kw))[1])
    store = LmdbPostings(tmp_path / "p")
    n = 50_000
    keys = np.arange(n, dtype=np.uint64) * 2654435761
    values = [bytes([i % 251]) * (10 + i % 9000) for i in range(300)]  # small ones and overflow pages
    store.apply_batch(1, {"t": (keys, np.arange(1, n + 1, dtype=np.uint64)),
                          "val:v": (np.arange(1, 301, dtype=np.uint64), values)})
    store.apply_batch(2, {"t": (np.concatenate([keys, keys]), np.arange(n + 1, 3 * n + 1, dtype=np.uint64))})
    assert len(writes) == 2
    assert store.get("t", int(keys[123])).tolist() == [124, n + 124, 2 * n + 124]
    assert store.get_values("v", [7, 300]) == {7: values[6], 300: values[299]}
    store.close()


def test_full_map_grows_instead_of_failing(tmp_path, monkeypatch):
    monkeypatch.setattr(LmdbPostings, "INITIAL_MAP", 64 << 10)
    monkeypatch.setattr(LmdbPostings, "_room_for", lambda self, lists, values: None)  # the write finds it full
    store = LmdbPostings(tmp_path / "p")
    n = 50_000
    keys = np.arange(n, dtype=np.uint64) * 2654435761
    store.apply_batch(1, {"t": (keys, np.arange(1, n + 1, dtype=np.uint64))})
    assert store.env.info()["map_size"] > 64 << 10
    assert store.get("t", int(keys[123])).tolist() == [124]
    assert store.stats() == {"t": n}
    # appending to existing keys can fill the map again: the retried write must not append twice
    size = store.env.info()["map_size"]
    store.apply_batch(2, {"t": (np.concatenate([keys, keys]), np.arange(n + 1, 3 * n + 1, dtype=np.uint64))})
    assert store.env.info()["map_size"] > size
    assert store.get("t", int(keys[123])).tolist() == [124, n + 124, 2 * n + 124]
    store.close()


@pytest.mark.parametrize("make", [MemoryPostings, "lmdb"])
def test_fixed_width_values_come_back_as_rows_of_the_ids_present(tmp_path, make):
    store = LmdbPostings(tmp_path / "p") if make == "lmdb" else make()
    try:
        ids = np.array([3, 7, 8, 20], dtype=np.uint64)
        vals = [bytes([i]) * 4 + bytes([255 - i]) * 4 for i in ids.tolist()]
        store.apply_batch(1, {"val:x": (ids, vals), "t": (np.array([1], np.uint64), np.array([3], np.uint64))})
        found, rows = store.get_fixed("x", np.array([20, 1, 7, 7, 3], dtype=np.uint64), 8)
        assert found.tolist() == [3, 7, 20]
        assert [bytes(r) for r in rows] == [vals[0], vals[1], vals[3]]
        found, rows = store.get_fixed("missing", np.array([3], dtype=np.uint64), 8)
        assert found.size == 0 and rows.shape == (0, 8)
    finally:
        store.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.binary(max_size=40)), max_size=40),
       st.lists(st.integers(0, 3100), max_size=60), st.sampled_from([1, 3, 256]))
def test_packed_values_are_the_values_of_the_ids_present_end_to_end(tmp_path_factory, stored, want, slice_):
    """``get_packed`` gives, for LMDB (read ``slice_`` values a transaction) and memory alike, the
    ids present ascending and each one's value at its offsets, whatever the widths, repeats and
    absent ids asked for."""
    import neardup.store.postings as P

    by_id = dict(stored)  # the last value of a repeated id
    ids = np.array(sorted(by_id), dtype=np.uint64)
    vals = [by_id[i] for i in ids.tolist()]
    want = np.array(want, dtype=np.uint64)
    expect = sorted(set(want.tolist()) & set(by_id))
    old = P.VALUE_SLICE
    P.VALUE_SLICE = slice_
    lm = LmdbPostings(tmp_path_factory.mktemp("packed") / "p")
    try:
        for store in (lm, MemoryPostings()):
            store.apply_batch(1, {"val:x": (ids, vals)} if ids.size else {})
            found, data, offs = store.get_packed("x", want)
            assert found.tolist() == expect
            assert offs.tolist()[0] == 0 and offs.size == found.size + 1
            assert [data[a:b].tobytes() for a, b in zip(offs[:-1].tolist(), offs[1:].tolist())] == [by_id[i] for i in expect]
            assert data.size == offs[-1]
    finally:
        P.VALUE_SLICE = old
        lm.close()


def test_a_reopened_writer_has_room_for_the_next_batch(tmp_path, monkeypatch):
    """LMDB maps an existing environment only as large as its file: a writer reserves room, so the
    next batch is written once, not failed full and redone."""
    monkeypatch.setattr(LmdbPostings, "INITIAL_MAP", 1 << 20)  # so that the first batch grows the map to its file
    first = LmdbPostings(tmp_path / "p")
    keys = np.arange(200_000, dtype=np.uint64) * np.uint64(2654435761)
    first.apply_batch(1, {"t": (keys, np.arange(1, keys.size + 1, dtype=np.uint64))})
    first.close()
    again = LmdbPostings(tmp_path / "p")
    writes = []
    real = again._write
    monkeypatch.setattr(again, "_write", lambda *a: (writes.append(1), real(*a)))
    again.apply_batch(2, {"t": (keys[:5000], np.arange(keys.size + 1, keys.size + 5001, dtype=np.uint64))})
    assert len(writes) == 1
    assert again.get("t", int(keys[3])).tolist() == [4, keys.size + 4]
    again.close()


def test_the_mapped_file_is_found_again_only_when_the_map_is_resized(tmp_path, monkeypatch):
    """Releasing mapped pages needs where data.mdb is mapped: read from /proc/self/maps once per
    map size (the maps file is thousands of lines long in a process with numba and DuckDB)."""
    import builtins

    if not __import__("sys").platform.startswith("linux"):
        pytest.skip("/proc/self/maps is Linux's")
    store = LmdbPostings(tmp_path / "p")
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: (opened.append(str(f)), real_open(f, *a, **k))[1])
    try:
        first = store._map_spans()
        assert first and all(hi > lo for lo, hi in first)
        assert store._map_spans() == first
        store._release()
        store._release()
        assert opened.count("/proc/self/maps") == 1
        store.env.set_mapsize(store.env.info()["map_size"] * 2)
        assert store._map_spans()
        assert opened.count("/proc/self/maps") == 2
    finally:
        monkeypatch.undo()
        store.close()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 700), st.integers(0, 3)), min_size=1, max_size=6),
       st.lists(st.integers(0, 5000), max_size=40), st.sampled_from([4, 16, 1024]))
def test_row_tables_in_blocks_read_like_any_value_table(tmp_path_factory, batches, gone, per_block):
    """``val:minhash8`` (a row table) is stored in blocks of consecutive doc ids: batches that share a
    block, rows removed by a delete, and reads across blocks give what the in-memory twin gives."""
    import neardup.store.postings as postings_mod

    saved, postings_mod.ROWS_PER_BLOCK = postings_mod.ROWS_PER_BLOCK, per_block
    mem = MemoryPostings()
    lm = LmdbPostings(tmp_path_factory.mktemp("rows"))
    try:
        base, b = 1, 0
        for b, (n, skip) in enumerate(batches, start=1):
            ids = np.arange(base, base + n, dtype=np.uint64)[skip:]  # a batch may leave ids unused
            vals = [bytes([(int(i) * 7 + j) % 256 for j in range(5)]) for i in ids.tolist()]
            for store in (mem, lm):
                store.apply_batch(b, {"val:minhash8": (ids, vals)})
            base += n
        drop = np.array(sorted(set(gone)), dtype=np.uint64)
        for store in (mem, lm):
            store.remove_batch(b + 1, {"val:minhash8": (drop, [b""] * drop.size)}, max_doc_id=base)
        assert lm.dump() == mem.dump()
        want = np.array([0, 1, 3, 700, base - 1, base + 5, *gone[:5]], dtype=np.uint64)
        assert lm.get_values("minhash8", want) == mem.get_values("minhash8", want)
        f1, r1 = lm.get_fixed("minhash8", want, 5)
        f2, r2 = mem.get_fixed("minhash8", want, 5)
        assert f1.tolist() == f2.tolist() and r1.tolist() == r2.tolist()
        left = sum(len(v) for v in mem.dump().values())
        assert lm._row_count("val:minhash8") == left
    finally:
        postings_mod.ROWS_PER_BLOCK = saved
        lm.close()


def test_a_merge_whose_largest_run_ends_in_an_early_block_keeps_the_other_runs_rest(tmp_path):
    """A run of equal keys ends the largest run inside a block cut short of the key range: the
    newer run's larger keys still go into the merged run (they were once left out)."""
    import neardup.store.runs as runs_mod

    saved, runs_mod.BLOCK = runs_mod.BLOCK, 3
    lm, mem = LmdbPostings(tmp_path / "p"), MemoryPostings()
    try:
        for b, (keys, ids) in enumerate([([0], [1]), ([0], [11]), ([0, 1], [21, 21])], start=1):
            for store in (lm, mem):
                store.apply_batch(b, {"lsh": (np.array(keys, np.uint64), np.array(ids, np.uint64))})
        assert lm.dump() == mem.dump() == {"lsh": {0: [1, 11, 21], 1: [21]}}
        assert [n for _, n in lm.runs.manifest("lsh")] == [4]
    finally:
        runs_mod.BLOCK = saved
        lm.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 2**64 - 1) | st.integers(0, 12), st.integers(0, 9)), max_size=40),
                min_size=1, max_size=7),
       st.lists(st.integers(1, 80), max_size=6),
       st.sampled_from([(2, 3, 5, 1 << 25), (4, 1 << 22, 1 << 22, 1 << 25), (1, 2, 1, 1 << 25), (2, 3, 5, 30), (4, 7, 9, 12)]))
def test_run_tables_read_as_the_memory_twin(tmp_path_factory, batches, gone, sizes):
    """A table kept as sorted runs in files (``store.runs``: ``lsh``) reads as the in-memory twin after
    batches (merged as they accumulate, a cascade in one pass, in blocks as small as 3 entries, read
    back a few entries at a time, with runs capped at as few as 12 entries), a delete, and a reopen;
    the runs are those of merging two at a time below the cap; a merge leaves no file behind but
    those its manifest names."""
    import neardup.store.runs as runs_mod

    fence, block, span, cap = sizes
    saved = runs_mod.FENCE, runs_mod.BLOCK, runs_mod.LOOKUP_SPAN, runs_mod.MAX_RUN
    runs_mod.FENCE, runs_mod.BLOCK, runs_mod.LOOKUP_SPAN, runs_mod.MAX_RUN = fence, block, span, cap
    path = tmp_path_factory.mktemp("runs")
    mem, lm = MemoryPostings(), LmdbPostings(path)
    try:
        base = 1
        for b, pairs in enumerate(batches, start=1):
            keys = np.array([k for k, _ in pairs], dtype=np.uint64)
            ids = np.array([base + d for _, d in pairs], dtype=np.uint64)
            before = [n for _, n in lm.runs.manifest("lsh")]
            for store in (mem, lm):
                store.apply_batch(b, {"lsh": (keys, ids), "t": (keys, ids)})
            base += 10
            after = [n for _, n in lm.runs.manifest("lsh")]
            if sum(after) > sum(before):  # the runs are those of merging the two newest, one merge at a time
                want = before + [sum(after) - sum(before)]
                while len(want) >= 2 and want[-2] <= runs_mod.MERGE_RATIO * want[-1] and want[-2] + want[-1] <= cap:
                    want[-2:] = [want[-2] + want[-1]]
                assert after == want
                assert after[-1] <= cap or after[-1] == sum(after) - sum(before)  # a merge never writes more
        assert lm.dump() == mem.dump()
        if cap >= sum(n for _, n in lm.runs.manifest("lsh")):  # the cap never held a merge back
            assert len(lm.runs.manifest("lsh")) <= 1 + int(np.log2(len(batches) + 1)) + 1 or not mem.dump()
        drop = np.array(sorted(set(gone)), dtype=np.uint64)
        want = mem.dump().get("lsh", {})
        entries = [(k, i) for k, ids in want.items() for i in ids if i in set(drop.tolist())]
        rk = np.array([k for k, _ in entries], dtype=np.uint64)
        ri = np.array([i for _, i in entries], dtype=np.uint64)
        for store in (mem, lm):
            store.remove_batch(len(batches) + 1, {"lsh": (rk, ri)}, max_doc_id=base)
        assert lm.dump() == mem.dump()
        lm.close()
        lm = LmdbPostings(path)
        assert lm.dump() == mem.dump()
        probe = np.unique(np.array(list(mem.dump().get("lsh", {}))[:9] + [2**64 - 1, 5], dtype=np.uint64))
        assert [x.tolist() for x in lm.get_flat("lsh", probe)] == [x.tolist() for x in mem.get_flat("lsh", probe)]
        named = {f"lsh.{s}{ext}" for s, _ in lm.runs.manifest("lsh") for ext in (".k", ".i", ".f")}
        on_disk = {f.name for f in (path / "runs").iterdir()} if (path / "runs").is_dir() else set()
        assert on_disk == named
    finally:
        runs_mod.FENCE, runs_mod.BLOCK, runs_mod.LOOKUP_SPAN, runs_mod.MAX_RUN = saved
        lm.close()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=400), st.lists(st.integers(0, 70), max_size=60),
       st.sampled_from([1, 2, 3, 8, 512]), st.integers(1, 50))
def test_lookup_slices_cover_the_keys_and_keep_within_the_span(entries, queries, fence, span):
    """A lookup's slices of its (ascending) keys follow each other without gap or overlap, and the
    entries of a slice lie within ``span + fence`` entries of the run beyond its longest key's."""
    from neardup.store.runs import lookup_slices

    k = np.array(sorted(entries), dtype=np.uint64)
    q = np.array(sorted(set(queries)), dtype=np.uint64)
    slices = lookup_slices(k[::fence].copy(), q, fence, span)
    assert [i for s, e in slices for i in range(s, e)] == list(range(q.size))
    for s, e in slices:
        assert e > s
        lo = np.searchsorted(k, q[s:e], "left")
        hi = np.searchsorted(k, q[s:e], "right")
        held = hi > lo
        if held.any():
            assert hi[held].max() - lo[held].min() <= span + fence + (hi - lo).max()


def test_a_long_lookup_releases_the_run_between_its_slices(tmp_path):
    """A lookup that reads more of a run than ``LOOKUP_SPAN`` entries releases the run's pages after
    each slice (so the pages it maps at once stay bounded), and finds what one slice would."""
    import neardup.store.runs as runs_mod

    saved, real = (runs_mod.FENCE, runs_mod.LOOKUP_SPAN), runs_mod._release
    released = []
    lm = LmdbPostings(tmp_path / "p")
    try:
        runs_mod.FENCE = 4
        keys = np.repeat(np.arange(200, dtype=np.uint64), 3)
        ids = np.arange(1, keys.size + 1, dtype=np.uint64)
        lm.apply_batch(1, {"lsh": (keys, ids)})
        probe = np.arange(0, 200, 7, dtype=np.uint64)
        want = [np.repeat(probe, 3).tolist(), (3 * np.repeat(probe, 3) + np.tile([1, 2, 3], probe.size)).tolist()]
        runs_mod._release = lambda maps: (released.append(len(maps)), real(maps))
        assert [x.tolist() for x in lm.runs.lookup("lsh", probe)] == want
        assert released == [1]  # one slice: the run is released once, with the others, at the end
        released.clear()
        runs_mod.LOOKUP_SPAN = 60
        assert [x.tolist() for x in lm.runs.lookup("lsh", probe)] == want
    finally:
        (runs_mod.FENCE, runs_mod.LOOKUP_SPAN), runs_mod._release = saved, real
        lm.close()
    # 600 entries, 60 at a time: about ten slices, each released on its own, then every run at the end
    assert released.count(1) >= 9 and released[-1] == 1


def test_a_delete_rewrites_a_long_run_a_block_at_a_time(tmp_path):
    """A delete (``RunStore.remove``) reads a run and writes what it keeps ``BLOCK`` entries at a
    time, releasing the run's pages after each block (a delete against a large index maps a block
    of a run, not the run), and leaves what the in-memory twin leaves."""
    import neardup.store.runs as runs_mod

    saved, real = runs_mod.BLOCK, runs_mod._release
    released = []
    lm, mem = LmdbPostings(tmp_path / "p"), MemoryPostings()
    try:
        runs_mod.BLOCK = 50
        keys = np.repeat(np.arange(200, dtype=np.uint64), 3)
        ids = np.arange(1, keys.size + 1, dtype=np.uint64)
        for store in (lm, mem):
            store.apply_batch(1, {"lsh": (keys, ids)})
        gone = ids[::7]
        runs_mod._release = lambda maps: (released.append(len(maps)), real(maps))
        for store in (lm, mem):
            store.remove_batch(2, {"lsh": (keys[::7], gone)}, max_doc_id=int(ids[-1]))
        assert lm.dump() == mem.dump() and len(mem.dump()["lsh"]) == 200
    finally:
        runs_mod.BLOCK, runs_mod._release = saved, real
        lm.close()
    # 600 entries, 50 at a time: twelve blocks read to find the dropped entries, twelve rewritten
    assert released.count(1) >= 24


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=300), st.lists(st.integers(0, 45), max_size=40),
       st.sampled_from([1, 2, 3, 8, 512]), st.booleans())
def test_run_ranges_are_the_sorted_search_for_any_queries(keys, queries, fence, ascending):
    """A run's ranges per query key, found through the fences or (ascending queries) by galloping
    from the query before, are ``searchsorted``'s left and right ends."""
    from neardup import kernels

    k = np.array(sorted(keys), dtype=np.uint64)
    q = np.array(sorted(set(queries)) if ascending else queries, dtype=np.uint64)
    lo, hi = kernels.run_ranges(k, k[::fence].copy(), q, fence)
    assert lo.tolist() == np.searchsorted(k, q, "left").tolist()
    assert hi.tolist() == np.searchsorted(k, q, "right").tolist()


def _lsh_batch(b: int, pairs) -> dict:
    keys = np.array([k for k, _ in pairs], dtype=np.uint64)
    ids = np.array([10 * b + d for _, d in pairs], dtype=np.uint64)
    return {"lsh": (keys, ids), "url": (keys[::-1].copy(), ids)}


def test_a_run_mapped_by_one_thread_while_another_releases_the_runs(tmp_path):
    """The pair search and the concept neighbour search read runs from two threads, so one may map a
    run for the first time while the other releases every mapped run: the release goes on over the
    runs it found (it once stopped the ingest with "dictionary changed size during iteration")."""
    import neardup.store.runs as runs_mod

    lm, mem = LmdbPostings(tmp_path / "p"), MemoryPostings()
    real = runs_mod._release
    try:
        for b in (1, 2):
            for store in (lm, mem):
                store.apply_batch(b, _lsh_batch(b, [(1, 0), (2, 1), (b + 5, 2)]))
        lm.runs.lookup("lsh", np.array([1], np.uint64))  # the lsh runs are mapped
        mapped_now = []

        def release_as_url_is_mapped(maps):
            for i, m in enumerate(maps):
                if i == 0:  # the other thread maps the url runs
                    for seq, n in lm.runs.manifest("url"):
                        mapped_now.append(lm.runs._open("url", seq, n))
                real([m])

        runs_mod._release = release_as_url_is_mapped
        lm.runs.release()
        assert mapped_now
        runs_mod._release = real
        assert lm.dump() == mem.dump()
    finally:
        runs_mod._release = real
        lm.close()


def _files_named(lm: LmdbPostings, path) -> tuple[set, set]:
    named = {f"{t}.{s}{ext}" for t in ("lsh", "url") for s, _ in lm.runs.manifest(t) for ext in (".k", ".i", ".f")}
    on_disk = {f.name for f in (path / "runs").iterdir()} if (path / "runs").is_dir() else set()
    return named, on_disk


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 2**64 - 1) | st.integers(0, 12), st.integers(0, 9)), min_size=1, max_size=30),
                min_size=1, max_size=12),
       st.sets(st.integers(0, 11)), st.sampled_from([0, 1, 4]), st.booleans(), st.sampled_from([3, 1 << 22]))
def test_background_merges_read_as_the_memory_twin(tmp_path_factory, batches, compact_at, inline, finish, block):
    """With large merges left to the background (``RunStore.compact`` as batches begin, at any
    batches), the runs read as the in-memory twin after every batch, while a merge is under way
    and after the store is closed, waiting for it or stopping it; no file is left but those the
    manifests name."""
    import neardup.store.runs as runs_mod

    saved = runs_mod.INLINE_MERGE, runs_mod.BLOCK
    runs_mod.INLINE_MERGE, runs_mod.BLOCK = inline, block
    path = tmp_path_factory.mktemp("bg")
    mem, lm = MemoryPostings(), LmdbPostings(path)
    try:
        lm.compact()
        for b, pairs in enumerate(batches, start=1):
            if b - 1 in compact_at:
                lm.compact()
            for store in (mem, lm):
                store.apply_batch(b, _lsh_batch(b, pairs))
            assert lm.dump() == mem.dump()
        lm.close(finish=finish)
        lm = LmdbPostings(path)
        assert lm.dump() == mem.dump()
        named, on_disk = _files_named(lm, path)
        assert on_disk == named
    finally:
        runs_mod.INLINE_MERGE, runs_mod.BLOCK = saved
        lm.close()


def _hold_background_merge(monkeypatch, nth: int):
    """Every merge left to the background (``INLINE_MERGE`` 0); the background thread's ``nth`` merge
    (1: the first table of a job) waits for the returned event before it starts."""
    import threading

    import neardup.store.runs as runs_mod

    gate, calls = threading.Event(), []
    merge = runs_mod._merge_blocks

    def held(parts, block, release):
        if threading.current_thread().name == "neardup-compact":
            calls.append(1)
            if len(calls) == nth:
                gate.wait(10)
        yield from merge(parts, block, release)

    monkeypatch.setattr(runs_mod, "_merge_blocks", held)
    monkeypatch.setattr(runs_mod, "INLINE_MERGE", 0)
    return gate


def test_a_batch_during_a_background_merge_leaves_the_runs_it_joins_alone(tmp_path, monkeypatch):
    """While a background merge is held back, batches add runs after the ones it joins (merging only
    among themselves, inline); the next batch after it finishes puts the merged run in their place."""
    import neardup.store.runs as runs_mod

    gate = _hold_background_merge(monkeypatch, 1)
    mem, lm = MemoryPostings(), LmdbPostings(tmp_path / "p")
    try:
        lm.compact()
        one = [(7, 0), (3, 1)]
        for b in (1, 2):  # the second batch's merge is due, not done
            for store in (mem, lm):
                store.apply_batch(b, _lsh_batch(b, one))
        assert [n for _, n in lm.runs.manifest("lsh")] == [2, 2]
        lm.compact()  # the due merge starts, and waits at the gate
        monkeypatch.setattr(runs_mod, "INLINE_MERGE", 100)  # from now on every merge the policy makes is inline
        group = lm.runs.manifest("lsh")
        for b in (3, 4, 5):
            for store in (mem, lm):
                store.apply_batch(b, _lsh_batch(b, one))
            runs = lm.runs.manifest("lsh")
            assert runs[:2] == group  # untouched while the merge holds them
            assert lm.dump() == mem.dump()
        assert [n for _, n in lm.runs.manifest("lsh")][2:] == [6]  # 2, then 2+2, then 4+2: not with the held runs
        gate.set()
        lm.runs._job.thread.join()
        for store in (mem, lm):
            store.apply_batch(6, _lsh_batch(6, one))
        assert [n for _, n in lm.runs.manifest("lsh")] == [4, 6, 2]
        assert lm.dump() == mem.dump()
        named, on_disk = _files_named(lm, tmp_path / "p")
        assert on_disk == named
    finally:
        gate.set()
        lm.close()


def _assert_runs_as_before(path, before, mem) -> None:
    """Reopened, the ``lsh`` runs are ``before``, read as the twin ``mem``, with no other file."""
    lm = LmdbPostings(path)
    try:
        assert lm.runs.manifest("lsh") == before
        assert lm.dump() == mem.dump()
        named, on_disk = _files_named(lm, path)
        assert on_disk == named
    finally:
        lm.close()


def test_a_stopped_background_merge_leaves_the_runs_as_they_were(tmp_path, monkeypatch):
    """Closing without waiting (an ingest that failed) stops the merge between blocks and removes
    what it wrote; the runs it was joining are all still there and read the same."""
    import neardup.store.runs as runs_mod

    monkeypatch.setattr(runs_mod, "INLINE_MERGE", 0)
    monkeypatch.setattr(runs_mod, "BLOCK", 4)
    mem, lm = MemoryPostings(), LmdbPostings(tmp_path / "p")
    batch = [(k, k % 10) for k in range(40)]
    for b in (1, 2):
        for store in (mem, lm):
            store.apply_batch(b, _lsh_batch(b, batch))
    before = lm.runs.manifest("lsh")
    lm.runs._compact = lambda job: (job.stop.set(), runs_mod.RunStore._compact(lm.runs, job))  # told to stop at once
    lm.compact()
    lm.close(finish=False)
    _assert_runs_as_before(tmp_path / "p", before, mem)


def test_a_background_merge_that_fails_is_reported_at_the_end_and_changes_nothing(tmp_path, monkeypatch):
    """A merge thread that fails (here: no room to write) leaves the runs it would have merged, its
    files are removed, and closing the store raises its error."""
    import neardup.store.runs as runs_mod

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runs_mod, "INLINE_MERGE", 0)
    mem, lm = MemoryPostings(), LmdbPostings(tmp_path / "p")
    lm.compact()
    for b in (1, 2):
        for store in (mem, lm):
            store.apply_batch(b, _lsh_batch(b, [(5, 0), (9, 1)]))
    before = lm.runs.manifest("lsh")
    monkeypatch.setattr(lm.runs, "_write_files", full)
    lm.compact()
    lm.runs._job.thread.join()
    with pytest.raises(OSError, match="No space"):
        lm.close()
    _assert_runs_as_before(tmp_path / "p", before, mem)


def test_a_table_merged_in_the_background_is_installed_while_the_next_one_is_merging(tmp_path, monkeypatch):
    """The thread merges ``lsh`` then ``url``; a batch puts ``lsh``'s merged run in place while ``url``'s
    merge is held back, and ``url``'s follows after (the job's tables change under the thread)."""
    import threading

    gate = _hold_background_merge(monkeypatch, 2)  # the thread's second table (url) waits
    mem, lm = MemoryPostings(), LmdbPostings(tmp_path / "p")
    try:
        lm.compact()
        one = [(7, 0), (3, 1)]
        for b in (1, 2):
            for store in (mem, lm):
                store.apply_batch(b, _lsh_batch(b, one))
        lm.compact()
        for _ in range(1000):  # until lsh's merged run is written
            if "lsh" in lm.runs._job.done:
                break
            threading.Event().wait(0.01)
        for store in (mem, lm):
            store.apply_batch(3, _lsh_batch(3, one))
        assert [n for _, n in lm.runs.manifest("lsh")] == [4, 2]  # installed
        assert [n for _, n in lm.runs.manifest("url")] == [2, 2, 2]  # still merging
        gate.set()
        lm.close()  # waits for url's merge, raising anything the thread met
        lm = LmdbPostings(tmp_path / "p")
        assert [n for _, n in lm.runs.manifest("url")] == [4, 2] == [n for _, n in lm.runs.manifest("lsh")]
        assert lm.dump() == mem.dump()
        named, on_disk = _files_named(lm, tmp_path / "p")
        assert on_disk == named
        lm.close()
    finally:
        gate.set()
        if lm.runs._job is not None:
            lm.close()


def test_a_batch_syncs_its_run_files_and_their_folder_before_it_commits(tmp_path, monkeypatch):
    # the runs' syncs are deferred to the end of the write transaction: each file a batch's runs
    # are in, and the folder naming them, is synced before ``ready`` (the catalog's commit, then
    # LMDB's); the second batch's run merges the first's and is synced the same way
    import os

    from neardup.store import runs as runs_mod

    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(runs_mod.os, "fsync", fsync)
    seen: list[tuple[set, set]] = []

    def ready(store):
        folder = store.runs.dir
        files = {os.path.realpath(folder / n) for n in os.listdir(folder) if not n.endswith(".tmp")}
        seen.append((files, set(synced)))
        synced.clear()

    store = LmdbPostings(tmp_path / "p")
    try:
        for b in (1, 2):
            store.apply_batch(b, _lsh_batch(b, [(1, 0), (2, 1), (b + 5, 2)]), ready=lambda: ready(store))
        folder = os.path.realpath(store.runs.dir)
    finally:
        store.close()
    (first, synced_1), (second, synced_2) = seen
    assert first and first <= synced_1 and folder in synced_1
    new = second - first  # the second batch's runs (the first's may be merged away only after the commit)
    assert new and new <= synced_2 and folder in synced_2


def test_a_new_stores_databases_are_created_in_one_write_transaction(tmp_path):
    # LMDB syncs each write transaction that creates a database: a first batch's databases (meta,
    # a value table, two levels of each posting table) are created in one, then the batch commits
    store = LmdbPostings(tmp_path / "p")
    try:
        before = store.env.info()["last_txnid"]
        store.apply_batch(1, {"val:x": (np.array([3], np.uint64), [b"abc"]),
                              "t": (np.array([1], np.uint64), np.array([3], np.uint64)),
                              "u": (np.array([2], np.uint64), np.array([3], np.uint64))})
        assert store.env.info()["last_txnid"] - before == 2
        store.apply_batch(2, {"t": (np.array([1], np.uint64), np.array([4], np.uint64))})
        assert store.env.info()["last_txnid"] - before == 3  # nothing left to create: the batch alone
        assert store.get_many("t", {1})[1].tolist() == [3, 4]
    finally:
        store.close()
