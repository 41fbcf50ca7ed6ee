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
