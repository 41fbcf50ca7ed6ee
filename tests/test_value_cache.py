"""The per-batch value cache of the pair verification (``pairs.values.ValueCache``): what it keeps
within its limit, what it drops first, and that fixed-width rows stay sorted and aligned."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.pairs.values import ValueCache

E = ValueCache.ENTRY_BYTES


def test_the_least_recently_used_value_goes_first():
    c = ValueCache(limit=3 * (10 + E))
    c.add("shingles", {1: b"a" * 10, 2: b"b" * 10, 3: b"c" * 10})
    assert c.get("shingles", [1]) == {1: b"a" * 10}  # 1 is now the most recent
    c.add("shingles", {4: b"d" * 10})
    assert c.get("shingles", [1, 2, 3, 4]) == {1: b"a" * 10, 3: b"c" * 10, 4: b"d" * 10}
    assert c.size == 3 * (10 + E)


def test_tables_do_not_mix_and_a_value_larger_than_the_cache_is_not_kept():
    c = ValueCache(limit=2 * (10 + E))
    c.add("shingles", {1: b"x" * 10})
    c.add("a7", {1: b"y" * 10})
    c.add("shingles", {2: b"z" * (3 * E)})
    assert c.get("shingles", [1, 2]) == {1: b"x" * 10} and c.get("a7", [1]) == {1: b"y" * 10}


def test_fixed_rows_are_found_by_id_and_go_whole_when_variable_values_cannot_make_room():
    c = ValueCache(limit=10_000)
    c.add_fixed("minhash8", np.array([7, 3]), np.array([[7, 7], [3, 3]], np.uint8))
    c.add_fixed("minhash8", np.array([5, 9, 1, 3]), np.array([[5, 5], [9, 9], [1, 1], [0, 0]], np.uint8))  # 3 is held: kept
    ids, rows = c.fixed["minhash8"].items()
    assert ids.tolist() == [1, 3, 5, 7, 9] and rows[:, 0].tolist() == [1, 3, 5, 7, 9]
    held = c.fixed["minhash8"]
    assert held.find(np.array([9, 2, 100])).tolist()[1:] == [0, 0] and held.rows[held.find(np.array([9]))[0] - 1, :2].tolist() == [9, 9]
    # slots for ids 0..9 (4 bytes each) and 5 rows of 2 bytes, each padded with zeros to 8
    assert c.size == held.nbytes == 10 * 4 + 5 * 8
    assert held.rows[: held.n, 2:].tolist() == [[0] * 6] * 5
    c.add("shingles", {1: b"s" * (10_000 - E - 40)})  # fits only once the rows are dropped
    assert c.fixed == {} and c.size == 10_000 - 40


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2_000), st.lists(st.tuples(st.sampled_from(["get", "add", "fixed"]), st.lists(st.integers(0, 30), max_size=6)),
                                       max_size=40))
def test_the_cache_stays_within_its_limit_and_answers_only_what_was_added(limit, ops):
    c = ValueCache(limit=limit)
    value = {i: bytes([i]) * (i * 37 % 301) for i in range(31)}  # a document's value never changes
    added: set[int] = set()
    rows_added: dict[int, int] = {}
    for op, ids in ops:
        if op == "add":
            c.add("shingles", {i: value[i] for i in ids})
            added.update(ids)
        elif op == "fixed":
            if ids:  # repeated and already held ids included: a held row is never replaced
                c.add_fixed("t", np.array(ids, np.int64), np.array([[i, i % 7] for i in ids], np.uint8))
                rows_added.update({i: i % 7 for i in ids})
        else:
            for i, v in c.get("shingles", ids).items():
                assert i in added and value[i] == v
        var = sum(len(v) + E for v in c._var.values())
        fixed = sum(f.nbytes for f in c.fixed.values())
        assert c.size == var + fixed <= limit
        if "t" in c.fixed:
            f_ids, f_rows = c.fixed["t"].items()
            assert c.fixed["t"].n == f_ids.size
            assert f_rows[:, 0].tolist() == f_ids.tolist() and f_rows[:, 1].tolist() == [rows_added[i] for i in f_ids.tolist()]


def test_an_ingest_keeps_its_batches_signature_rows_for_the_batches_after_them(tmp_path, monkeypatch):
    """The value cache lasts from one batch of an input to the next: into a new index, every older
    document a batch compares with was written by an earlier batch of the same ingest, whose own
    one-byte rows the cache kept, so none is read back from the postings."""
    import neardup.pairs.batch as batch
    import neardup.readers.base as base
    from neardup import Index
    from neardup.ingest import ingest
    from neardup.pairs.values import SIGNATURE_VALUES
    from neardup.store.postings import LmdbPostings

    from .conftest import FIXTURES

    read: list[int] = []
    compared: list[int] = []
    real_get, real_old = LmdbPostings.get_fixed, batch._old_low_rows

    def get_fixed(self, table, ids, width):
        if table == SIGNATURE_VALUES:
            read.append(len(ids))
        return real_get(self, table, ids, width)

    def old_low_rows(con, postings, lo, ids, *rest):
        compared.append(int(ids.size))
        return real_old(con, postings, lo, ids, *rest)

    monkeypatch.setattr(LmdbPostings, "get_fixed", get_fixed)
    monkeypatch.setattr(batch, "_old_low_rows", old_low_rows)
    monkeypatch.setattr(base, "CHUNK_RECORDS", 16)
    res = ingest(Index(tmp_path / "i"), str(FIXTURES / "crawl" / "sample.warc.gz"), batch_mb=0.2)
    assert len(res.batch_ids) > 2
    assert sum(compared) > 0  # batches did compare with older documents' rows
    assert sum(read) == 0


def test_older_signature_rows_come_from_the_cache_or_a_copy_and_a_missing_row_is_named(tmp_path):
    """``batch._old_low_rows`` reads the rows it lacks into the cache (older documents' from the
    postings, the rest from the catalog) and answers from there; with no room in the cache it answers
    with a copy. Either way each id gets the row ``_fixed_values`` reads for it, and an id without a
    row is an error naming it (it was a reshape error of the empty catalog read)."""
    import pytest

    import neardup.pairs.batch as batch
    from neardup import Index
    from neardup.ingest import ingest
    from neardup.pairs.values import SIGNATURE_VALUES, _fixed_values, _signature_rows
    from neardup.settings import Settings
    from neardup.store import catalog
    from neardup.store.postings import LmdbPostings

    from .conftest import FIXTURES

    index = Index(tmp_path / "i")
    ingest(index, str(FIXTURES / "crawl" / "sample.warc.gz"))
    con = catalog.connect(index.catalog_path, read_only=True)
    postings = LmdbPostings(index.postings_path, readonly=True)
    try:
        docs = np.array([r[0] for r in con.sql("SELECT doc_id FROM fp_minhash ORDER BY doc_id").fetchall()], np.int64)
        assert docs.size > 10
        lo = int(docs[docs.size // 2])  # those below are read from the postings, the rest from the catalog
        ids = docs[::3]
        s = Settings()
        _, want = _fixed_values(con, postings, lo, ids, "fp_minhash", "signature", SIGNATURE_VALUES, s.minhash_perms,
                                _signature_rows, None)
        roomy, none = ValueCache(limit=1 << 20), ValueCache(limit=64)
        for cache in (roomy, none):
            rows, place = batch._old_low_rows(con, postings, lo, ids, s, cache)
            assert rows[place, : s.minhash_perms].tolist() == want.tolist()
        assert SIGNATURE_VALUES in roomy.fixed and SIGNATURE_VALUES not in none.fixed
        # again: every row now comes from the cache, none is read
        again, place = batch._old_low_rows(con, None, lo, ids, s, roomy)
        assert again is roomy.fixed[SIGNATURE_VALUES].rows and again[place, : s.minhash_perms].tolist() == want.tolist()
        with pytest.raises(ValueError, match="no signature"):
            batch._old_low_rows(con, postings, lo, np.array([int(docs[-1]) + 1000]), s, ValueCache(limit=1 << 20))
    finally:
        postings.close()
        con.close()


def test_blob_views_are_the_values_of_every_layout_without_copies():
    import pyarrow as pa

    from neardup.pairs.values import blob_views

    vals = [b"", b"abcdefgh", b"12345678" * 3, b"z"]
    for typ in (pa.binary(), pa.large_binary()):
        arr = pa.array(vals, typ)
        got = blob_views(arr)
        assert all(isinstance(v, memoryview) for v in got) and [bytes(v) for v in got] == vals
        assert [bytes(v) for v in blob_views(arr.slice(1, 2))] == vals[1:3]  # a slice starts at its offset
        chunked = pa.chunked_array([arr.slice(2), pa.array([], typ), arr.slice(0, 2)])
        assert [bytes(v) for v in blob_views(chunked)] == vals[2:] + vals[:2]
        # the views read the column's own buffer: no bytes were copied
        data = arr.buffers()[2]
        assert got[2].obj is not None and bytes(memoryview(data)[8:32]) == bytes(got[2])
    assert blob_views(pa.array([b"a", None, b"bc"])) == [b"a", None, b"bc"]  # nulls: as to_pylist gives them
    assert blob_views(pa.array([], pa.binary())) == []


def test_views_count_their_bytes_and_own_makes_them_copies():
    import pyarrow as pa

    from neardup.pairs.values import blob_views

    arr = pa.array([b"a" * 10, b"b" * 20], pa.binary())
    v = blob_views(arr)
    c = ValueCache(limit=10_000)
    c.add("shingles", {1: v[0], 2: v[1]})
    assert c.size == 30 + 2 * E  # counted as the bytes they show, like bytes values
    c.own()
    got = c.get("shingles", [1, 2])
    assert got == {1: b"a" * 10, 2: b"b" * 20} and all(type(x) is bytes for x in got.values())
    assert c.size == 30 + 2 * E
