"""Ingest end to end through the engine API: incremental, versions, rejects, strict, determinism."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup import BadRecord, Index, IndexLocked, IndexNotFound, Settings, SettingsMismatch
from neardup.ingest import ingest
from neardup.keys import hash64
from neardup.store.index import WriterLock

from .conftest import FIXTURES, words_text, write_jsonl
from .snapshot import content, snapshot


def test_ingest_twice_is_a_noop_the_second_time(tmp_path, index_dir):
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": words_text(20, i)} for i in range(5)])
    idx = Index(index_dir)
    r1 = ingest(idx, str(src))
    r2 = ingest(idx, str(src))
    assert (r1.n_docs, r1.n_unchanged, r1.batch_id) == (5, 0, 1)
    assert (r2.n_docs, r2.n_unchanged, r2.batch_id) == (0, 5, 2)
    s = snapshot(index_dir)
    assert [d[0] for d in s["documents"]] == [1, 2, 3, 4, 5]
    assert s["applied_batch"] == 2
    assert s["postings"]["url"] == {int(h): [i + 1] for i, h in enumerate(hash64([f"u{i}" for i in range(5)]))}


def test_content_hash_is_xxh3_of_the_stored_text(tmp_path, index_dir):
    import xxhash

    texts = [words_text(20, i) for i in range(4)] + ["Ünïcödé — text … with ﬁ and 中文 " * 5, "tab\tand\nlines " * 6]
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": t} for i, t in enumerate(texts)])
    ingest(Index(index_dir), str(src))
    with Index(index_dir).reader() as con:
        rows = con.execute("SELECT text, content_hash FROM documents ORDER BY doc_id").fetchall()
    assert len(rows) == len(texts)
    assert [int(h) for _, h in rows] == [xxhash.xxh3_64_intdigest(t.encode("utf-8")) for t, _ in rows]


@pytest.mark.parametrize("docinfo", [True, False])
def test_changed_page_becomes_a_new_version(tmp_path, index_dir, monkeypatch, docinfo):
    """Versions come from the postings (``url`` lists and ``val:docinfo`` rows), or from the catalog for
    documents without a row: the same either way. A url whose hash another url shares is told apart."""
    import neardup.ingest as ingest_mod
    from neardup.store.postings import LmdbPostings

    if not docinfo:
        real = LmdbPostings.get_fixed
        monkeypatch.setattr(LmdbPostings, "get_fixed", lambda self, t, ids, w: (np.zeros(0, np.int64), np.zeros((0, w), np.uint8))
                            if t == "docinfo" else real(self, t, ids, w))
    import neardup.keys as keys_mod

    def colliding(urls, seed=0):  # "a" and "c" share their url key
        return np.array([7 if (seed == 0 and u in ("a", "c")) else hash64([u], seed)[0] for u in urls], dtype=np.uint64)

    monkeypatch.setattr(ingest_mod, "hash64", colliding)
    monkeypatch.setattr(keys_mod, "hash64", colliding)
    idx = Index(index_dir)
    ingest(idx, str(write_jsonl(tmp_path / "1.jsonl", [{"url": "a", "text": words_text(12, 1)}, {"url": "b", "text": words_text(12, 2)}])))
    ingest(idx, str(write_jsonl(tmp_path / "2.jsonl", [
        {"url": "a", "text": words_text(12, 3)},   # changed
        {"url": "b", "text": words_text(12, 2)},   # same
        {"url": "a", "text": words_text(12, 4)},   # changed again in the same batch
        {"url": "a", "text": words_text(12, 1)},   # back to version 1's text: already known, no-op
    ])))
    with idx.reader() as con:
        rows = con.execute("SELECT url, version, is_latest, batch_id FROM documents ORDER BY doc_id").fetchall()
        latest = con.execute("SELECT url, version FROM latest_documents ORDER BY url").fetchall()
    assert rows == [("a", 1, False, 1), ("b", 1, True, 1), ("a", 2, False, 2), ("a", 3, True, 2)]
    assert latest == [("a", 3), ("b", 1)]
    ingest(idx, str(write_jsonl(tmp_path / "3.jsonl", [{"url": "c", "text": words_text(12, 9)}, {"url": "a", "text": words_text(12, 8)}])))
    with idx.reader() as con:
        assert con.execute("SELECT url, version FROM latest_documents ORDER BY url").fetchall() == [("a", 4), ("b", 1), ("c", 1)]


def test_rejects_are_recorded_and_good_records_kept(tmp_path, index_dir):
    src = tmp_path / "mixed.jsonl"
    src.write_text(
        '{"url": "ok", "text": "%s"}\n{"url": "short", "text": "too few words here"}\n{oops\n{"url": "empty", "text": "  ...  "}\n' % words_text(15)
    )
    res = ingest(Index(index_dir), str(src))
    assert (res.n_docs, res.n_rejected) == (1, 3)
    with Index(index_dir).reader() as con:
        rej = con.execute("SELECT batch_id, source, record, reason FROM rejects ORDER BY record").fetchall()
    assert [(b, s, r) for b, s, r, _ in rej] == [(1, str(src), "line 2"), (1, str(src), "line 3"), (1, str(src), "line 4")]
    assert rej[0][3] == "too short: 4 words (< 10) (url short)"
    assert rej[2][3] == "empty text (no words) (url empty)"


def test_min_words_setting_is_stored_and_enforced(tmp_path, index_dir):
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": "one two three"}])
    res = ingest(Index(index_dir), str(src), create_with=Settings(min_words=3))
    assert res.n_docs == 1
    assert Index(index_dir).settings() == Settings(min_words=3)
    with pytest.raises(SettingsMismatch, match="min_words=10"):
        Index(index_dir).settings().check_overrides({"min_words": 10})


def test_strict_rolls_back_the_batch_and_keeps_older_batches(tmp_path, index_dir):
    idx = Index(index_dir)
    ingest(idx, str(write_jsonl(tmp_path / "good.jsonl", [{"url": "g", "text": words_text(20)}])))
    before = snapshot(index_dir)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"url": "x", "text": "%s"}\n{broken\n' % words_text(20, 5))
    with pytest.raises(BadRecord, match=r"bad.jsonl: line 2: malformed JSON"):
        ingest(idx, str(bad), strict=True)
    after = snapshot(index_dir)
    assert after["documents"] == before["documents"]
    assert after["postings"] == before["postings"]
    assert after["batches"][-1][0] == 2 and after["batches"][-1][-1] == "failed"
    assert after["rejects"] == [(2, str(bad), "line 2", "malformed JSON: Expecting property name enclosed in double quotes at column 2")]
    # the index is still writable, and the failed batch id is not reused
    r = ingest(idx, str(bad))
    assert (r.batch_id, r.n_docs, r.n_rejected) == (3, 1, 1)


def test_a_second_writer_is_refused_naming_the_holder(tmp_path, index_dir):
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(20)}])
    ingest(Index(index_dir), str(src))
    lock = WriterLock(index_dir)
    lock.acquire()
    try:
        with pytest.raises(IndexLocked, match=r"another writer holds the index: pid \d+ on "):
            ingest(Index(index_dir), str(src))
    finally:
        lock.release()
    assert ingest(Index(index_dir), str(src)).n_unchanged == 1


def test_written_rows_read_like_the_catalogs_by_doc_id():
    """``WrittenRows`` answers ``(ids ascending, values)`` of a catalog column from the chunks'
    tables, whatever order they were added in; a column it does not hold is None (read from the
    catalog then); the texts are not held."""
    import pyarrow as pa

    from neardup.store.rows import WrittenRows

    def chunk(ids):
        return pa.table({"doc_id": pa.array(ids, pa.int64()), "url": [f"u{i}" for i in ids], "text": ["t"] * len(ids),
                         "content_hash": pa.array([i * 10 for i in ids], pa.uint64()),
                         "minhash.signature": pa.array([[i, i + 1] for i in ids], pa.large_list(pa.uint64())),
                         "_row": pa.array(range(len(ids)), pa.int64())})

    w = WrittenRows()
    assert w.column("fp_minhash", "signature") is None
    w.add(chunk([5, 6]))
    w.add(chunk([2, 3, 4]))
    ids, sig = w.column("fp_minhash", "signature")
    assert ids.tolist() == [2, 3, 4, 5, 6] and sig.to_pylist() == [[i, i + 1] for i in range(2, 7)]
    ids, url = w.column("documents", "url")
    assert url.to_pylist() == [f"u{i}" for i in range(2, 7)]
    assert w.column("fp_bottomk", "sketch") is None and w.column("documents", "text") is None
    w.add(chunk([7]))  # added in order: the column stays in the chunks it came in
    ids, parts = w.chunked("fp_minhash", "signature")
    assert ids.tolist() == [2, 3, 4, 5, 6, 7] and parts.num_chunks == 2
    assert parts.to_pylist() == w.column("fp_minhash", "signature")[1].to_pylist() == [[i, i + 1] for i in range(2, 8)]
    assert w.chunked("fp_bottomk", "sketch") is None


def test_missing_index_for_readers(index_dir):
    with pytest.raises(IndexNotFound):
        with Index(index_dir).reader():
            pass


def test_same_input_gives_identical_indexes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        ingest(Index(d), str(FIXTURES / "crawl" / "sample.warc.gz"))
        ingest(Index(d), str(FIXTURES / "text" / "docs.jsonl"))
    assert content(snapshot(a)) == content(snapshot(b))


def test_formats_agree_on_the_same_records(tmp_path):
    """JSONL, gzip JSONL and Parquet of the same records give the same documents."""
    results = []
    for name in ("docs.jsonl", "docs.jsonl.gz", "docs.parquet"):
        d = tmp_path / name
        ingest(Index(d), str(FIXTURES / "text" / name))
        results.append(content(snapshot(d)))
    assert results[0] == results[1] == results[2]
    assert len(results[0]["documents"]) == 96


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), min_size=1, max_size=25),
    st.lists(st.integers(1, 24), max_size=4),
)
def test_batch_split_does_not_change_the_result(tmp_path_factory, records, cuts):
    """Ingesting a stream in one batch or cut into several gives the same documents and postings."""
    tmp = tmp_path_factory.mktemp("split")
    recs = [{"url": f"u{u}", "text": words_text(12, v)} for u, v in records]
    bounds = sorted({c for c in cuts if c < len(recs)})
    parts = [recs[i:j] for i, j in zip([0, *bounds], [*bounds, len(recs)])]
    whole = tmp / "whole"
    ingest(Index(whole), str(write_jsonl(tmp / "all.jsonl", recs)))
    split = tmp / "split"
    for k, part in enumerate(parts):
        ingest(Index(split), str(write_jsonl(tmp / f"part{k}.jsonl", part)))
    assert content(snapshot(whole)) == content(snapshot(split))
    shutil.rmtree(tmp)


def _by_url(index_dir) -> tuple[set, set]:
    """Pairs and concept clusters of an index, by url (independent of ids and batches)."""
    with Index(index_dir).reader() as con:
        pairs = set(con.execute("SELECT method, url_a, url_b, similarity FROM duplicate_urls").fetchall())
        clus = con.execute(
            "SELECT c.method, c.support, list(d.url ORDER BY d.url) FROM clusters c JOIN cluster_members m USING (cluster_id) "
            "JOIN documents d USING (doc_id) GROUP BY c.cluster_id, c.method, c.support").fetchall()
    return pairs, {(m, s, tuple(u)) for m, s, u in clus}


def test_a_big_input_is_committed_as_several_batches_with_the_same_results(tmp_path, monkeypatch):
    import neardup.readers.base as base

    src = str(FIXTURES / "crawl" / "sample.warc.gz")
    whole = tmp_path / "whole"
    r1 = ingest(Index(whole), src)
    monkeypatch.setattr(base, "CHUNK_RECORDS", 16)
    sliced = tmp_path / "sliced"
    r2 = ingest(Index(sliced), src, batch_mb=0.2)
    assert r1.batch_ids == [1] and len(r2.batch_ids) > 2
    assert r2.batch_ids == list(range(1, len(r2.batch_ids) + 1)) and r2.batch_id == r2.batch_ids[-1]
    assert (r2.n_docs, r2.n_bytes, r2.n_rejected) == (r1.n_docs, r1.n_bytes, r1.n_rejected)
    assert sum(r2.pairs.values()) == sum(r1.pairs.values())
    with Index(sliced).reader() as con:
        rows = con.execute("SELECT source, n_docs, status FROM batches ORDER BY batch_id").fetchall()
    assert {r[0] for r in rows} == {src} and {r[2] for r in rows} == {"committed"} and sum(r[1] for r in rows) == r1.n_docs
    assert _by_url(sliced) == _by_url(whole)
    # the input again: every record is already there
    r3 = ingest(Index(sliced), src, batch_mb=0.2)
    assert (r3.n_docs, r3.n_unchanged) == (0, r1.n_docs)


def test_a_second_crawl_of_a_batchs_own_urls_starts_a_new_batch_with_the_same_results(tmp_path, monkeypatch):
    """An input holding two crawls of one site (every url twice, the second text edited), read in
    small blocks: a batch that has read at least an eighth of its budget ends before the first
    chunk that would make one of its own rows not latest (``ingest._ends_before``), so that the
    new versions mark committed rows; a batch below that keeps the chunk. Either way the documents,
    versions, latest flags, fingerprints, postings and pairs are those of one batch."""
    import neardup.readers.jsonl as jsonl
    from neardup.readers import streams

    monkeypatch.setattr(jsonl, "iter_blocks", lambda stream: streams.iter_blocks(stream, 4096))
    first = [{"url": f"https://site.example/p{i}", "text": words_text(30, i)} for i in range(60)]
    second = [{"url": r["url"], "text": r["text"] + " " + words_text(6, 1000 + i, prefix="e")} for i, r in enumerate(first)]
    src = str(write_jsonl(tmp_path / "two.jsonl", first + second))
    size = Path(src).stat().st_size
    one = ingest(Index(tmp_path / "one"), src, batch_mb=10 * size / 1e6)  # an eighth of it is more than the input
    two = ingest(Index(tmp_path / "two"), src, batch_mb=2 * size / 1e6)  # an eighth is a quarter of the first crawl
    assert one.batch_ids == [1] and len(two.batch_ids) >= 2
    assert (two.n_docs, two.n_new_versions) == (one.n_docs, one.n_new_versions) == (120, 60)
    with Index(tmp_path / "two").reader() as con:
        first_batch = con.execute("SELECT first_doc_id, last_doc_id FROM batches WHERE batch_id = 1").fetchall()[0]
        latest = con.execute("SELECT version, is_latest, count(*) FROM documents GROUP BY ALL ORDER BY ALL").fetchall()
    assert first_batch[0] == 1 and first_batch[1] <= 60  # the first crawl's pages only
    assert latest == [(1, False, 60), (2, True, 60)]
    assert content(snapshot(tmp_path / "one")) == content(snapshot(tmp_path / "two"))
    assert _by_url(tmp_path / "one") == _by_url(tmp_path / "two")


@pytest.mark.parametrize("share, sizes", [(0.95, [400]), (0.8, [320, 80]), (0.47, [192, 208]), (0.3, [128, 128, 128, 16])])
def test_the_last_batch_takes_in_a_rest_of_at_most_an_eighth_of_a_batch(tmp_path, monkeypatch, share, sizes):
    """400 files of one size read in chunks of 16 (4% of the input each), batches of ``share`` of
    the input: a batch ends at the first chunk that reaches it unless the rest is at most an eighth
    of a batch. At 95% the rest after 96% (4%) joins the batch; at 80% the rest (20%) is a batch of
    its own; at 47%, 48% then 48% and the 4% left; at 30%, 32% three times, and the last 4% is more
    than an eighth of 30%."""
    import neardup.readers.base as base

    src = tmp_path / "in"
    src.mkdir()
    for i in range(400):
        (src / f"{i:03d}.txt").write_text((words_text(40, i) + " ")[:150])
    total = ingest(Index(tmp_path / "whole"), str(src)).n_bytes
    monkeypatch.setattr(base, "CHUNK_RECORDS", 16)
    res = ingest(Index(tmp_path / "sliced"), str(src), batch_mb=share * total / 1e6)
    assert len(res.batch_ids) == len(sizes)
    assert res.n_docs == 400 and res.n_bytes == total
    with Index(tmp_path / "sliced").reader() as con:
        got = [n for (n,) in con.execute("SELECT n_docs FROM batches ORDER BY batch_id").fetchall()]
    assert got == sizes
    assert _by_url(tmp_path / "sliced") == _by_url(tmp_path / "whole")


def test_peeking_ahead_loses_nothing():
    from neardup.pipeline import Peekable

    p = Peekable(iter(range(10)), size=lambda x: 10)
    assert next(p) == 0
    assert not p.ends_within(50)  # 9 items of 10 bytes left
    assert not p.exhausted()
    assert next(p) == 1
    assert p.ends_within(80) and p.ends_within(1000)  # exactly 80 left
    assert list(p) == list(range(2, 10))
    assert p.exhausted() and p.ends_within(0)


def test_an_error_met_reading_ahead_is_raised_where_its_item_is_read():
    from neardup.pipeline import Peekable

    def items():
        yield 1
        yield 2
        raise ValueError("unreadable")

    p = Peekable(items(), size=lambda x: 10)
    assert next(p) == 1
    assert not p.ends_within(100)  # 2, then the error: more than nothing is left
    assert not p.exhausted()
    assert next(p) == 2
    with pytest.raises(ValueError, match="unreadable"):
        next(p)


def test_merges_left_to_the_background_give_the_postings_a_rebuild_derives(tmp_path, monkeypatch):
    """Every run merge left to the background thread (``INLINE_MERGE`` 0), an input in many batches:
    the same pairs and clusters as one batch, postings equal to those re-derived from the catalog,
    and no run file but those the manifests name."""
    import neardup.readers.base as base
    import neardup.store.runs as runs_mod
    from neardup.store.postings import LmdbPostings

    src = str(FIXTURES / "crawl" / "sample.warc.gz")
    whole = tmp_path / "whole"
    ingest(Index(whole), src)
    monkeypatch.setattr(base, "CHUNK_RECORDS", 16)
    monkeypatch.setattr(runs_mod, "INLINE_MERGE", 0)
    sliced = tmp_path / "sliced"
    res = ingest(Index(sliced), src, batch_mb=0.2)
    assert len(res.batch_ids) > 4
    assert _by_url(sliced) == _by_url(whole)
    p = LmdbPostings(Index(sliced).postings_path, readonly=True)
    try:
        kept = p.dump()
        runs = {f"{t}.{s_}" for t in p.runs.tables() for s_, _ in p.runs.manifest(t)}
        assert len(runs) < len(res.batch_ids) * len(p.runs.tables())  # some merges were done
    finally:
        p.close()
    assert {f.name.rsplit(".", 1)[0] for f in (Index(sliced).postings_path / "runs").iterdir()} == runs
    with Index(sliced).writer(rebuild_postings=True):
        pass
    p = LmdbPostings(Index(sliced).postings_path, readonly=True)
    try:
        assert p.dump() == kept
    finally:
        p.close()


def test_each_batch_reports_its_stages_in_order(tmp_path, monkeypatch):
    import neardup.readers.base as base
    from neardup.ingest import STAGES

    monkeypatch.setattr(base, "CHUNK_RECORDS", 16)
    seen: list[tuple[int, str]] = []
    res = ingest(Index(tmp_path / "i"), str(FIXTURES / "crawl" / "sample.warc.gz"), batch_mb=0.2,
                 on_stage=lambda b, s: seen.append((b, s)))
    assert len(res.batch_ids) > 2
    assert seen == [(b, s) for b in res.batch_ids for s in STAGES]


@pytest.mark.parametrize("older", ["concept_prefix", "val:minhash32"])
def test_postings_of_an_older_release_are_re_derived_in_todays_layout(tmp_path, older):
    """An index whose postings hold a table of an older release's layout (the concept prefix keys;
    the agreement filter's 32-bit values) gets them re-derived from the catalog the first time a
    writer opens it."""
    import lmdb

    from neardup.neighbours import VALUES_TABLE
    from neardup.store.index import OLD_LAYOUT_TABLES, old_layout
    from neardup.store.postings import LmdbPostings

    assert older in OLD_LAYOUT_TABLES
    idx = Index(tmp_path / "idx")
    ingest(idx, str(FIXTURES / "text" / "docs.jsonl"))
    want = snapshot(idx.path)["postings"]
    env = lmdb.open(str(idx.postings_path), max_dbs=64)
    if older.startswith("val:"):
        db = env.open_db(b"v2val/" + older[4:].encode())
        with env.begin(write=True) as txn:
            txn.put((1).to_bytes(8, "big"), b"\x00" * 400, db=db)
    else:
        db = env.open_db(b"v2/" + older.encode(), dupsort=True, dupfixed=True)
        with env.begin(write=True) as txn:
            txn.put((7).to_bytes(8, "big"), (1).to_bytes(8, "big"), db=db)
    env.close()
    p = LmdbPostings(idx.postings_path, readonly=True)
    assert old_layout(p) == older
    p.close()
    with idx.writer():
        pass
    got = snapshot(idx.path)["postings"]
    assert older not in got and VALUES_TABLE in got
    assert got == want


def test_catalog_connections_never_draw_duckdbs_progress_bar(tmp_path, index_dir):
    """A long query would otherwise draw DuckDB's own bar on stderr, through ``-q`` and into logs."""
    ingest(Index(index_dir), str(write_jsonl(tmp_path / "a.jsonl", [{"url": "u1", "text": words_text(40, 1)}])))
    idx = Index(index_dir)
    with idx.reader() as con:
        assert con.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0] is False
    with idx.writer() as w:
        assert w.con.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0] is False


def test_a_later_ingest_does_not_rewrite_the_catalog_blocks_of_earlier_ones(tmp_path):
    """The checkpoint that ends a later ingest keeps the blocks earlier ones wrote (DuckDB's
    row-group vacuum, which merged each batch's row groups and so rewrote whole tables, is off for
    writers)."""
    import duckdb

    idx = Index(tmp_path / "idx")

    def blocks(table: str) -> set[int]:
        con = duckdb.connect(str(idx.catalog_path), read_only=True)
        try:
            return {r[0] for r in con.execute(f"SELECT DISTINCT block_id FROM pragma_storage_info('{table}') WHERE block_id >= 0").fetchall()}
        finally:
            con.close()

    for part in range(3):
        recs = [{"url": f"p{part}-{i}", "text": words_text(60, 1000 * part + i)} for i in range(3000)]
        ingest(idx, str(write_jsonl(tmp_path / f"{part}.jsonl", recs)))
        if part == 0:
            first = {t: blocks(t) for t in ("fp_minhash", "fp_bottomk", "documents")}
    for t, b in first.items():
        assert b and b <= blocks(t), t


@pytest.mark.parametrize("due", [True, False])
def test_a_log_past_the_limit_is_checkpointed_beside_the_postings_write(tmp_path, monkeypatch, due):
    """``Writer.checkpoint_beside``: with the catalog's log past ``LOG_CHECKPOINT`` it is written
    into the catalog file while the body runs, else left alone."""
    import neardup.store.index as index_module

    write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": words_text(i, 60)} for i in range(40)])
    idx = Index(tmp_path / "idx")
    ingest(idx, str(tmp_path / "a.jsonl"))
    wal = tmp_path / "idx" / "catalog.duckdb.wal"
    monkeypatch.setattr(index_module, "LOG_CHECKPOINT", -1 if due else 1 << 40)
    with idx.writer() as w:
        w.con.execute("CREATE TABLE scratch AS SELECT range AS x FROM range(1000)")
        before = wal.stat().st_size
        assert before > 0
        with w.checkpoint_beside():
            pass
        after = wal.stat().st_size if wal.exists() else 0
        assert (after < before) == due


def test_a_batch_of_a_row_group_or_more_is_written_in_row_groups_of_the_writers_size(tmp_path, index_dir, monkeypatch):
    from neardup.store import catalog

    monkeypatch.setattr(catalog, "ROW_GROUP_SIZE", 2048)  # DuckDB's smallest
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": f"page {i} " + words_text(8, i)} for i in range(5000)])
    ingest(Index(index_dir), str(src))
    with Index(index_dir).reader() as con:
        rows = con.execute(
            "SELECT row_group_id, max(count) FROM pragma_storage_info('documents') WHERE column_id = 0"
            " GROUP BY 1 ORDER BY 1").fetchall()
        assert con.execute("SELECT count(*) FROM documents").fetchall()[0][0] == 5000
    # written as they were inserted, in groups of the writer's size (not one group of 5,000 rows)
    assert [n for _, n in rows] == [2048, 2048, 904]


def test_postings_written_beside_the_commit_wait_for_it_and_are_dropped_when_it_fails(tmp_path, index_dir):
    import time

    from neardup.store.index import CatalogNotCommitted

    ingest(Index(index_dir), str(write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": words_text(20, i)} for i in range(5)])))
    entry = {"t": (np.array([7], np.uint64), np.array([1000], np.uint64))}
    with Index(index_dir).writer() as w:
        applied = w.postings.applied_batch()
        writing = w.write_postings(applied + 1, entry)
        time.sleep(0.2)  # room for the thread to commit if it did not wait
        assert w.postings.applied_batch() == applied
        writing.abandon()  # the catalog's commit failed
        with pytest.raises(CatalogNotCommitted):
            writing.result()
        assert (w.postings.applied_batch(), w.postings.get("t", 7).tolist()) == (applied, [])
        writing = w.write_postings(applied + 1, entry)
        writing.catalog_committed()
        writing.result()
        assert (w.postings.applied_batch(), w.postings.get("t", 7).tolist()) == (applied + 1, [1000])


def test_a_clusters_update_that_fails_beside_the_postings_write_leaves_the_index_as_it_was(tmp_path, index_dir, monkeypatch):
    """The batch's postings go into their LMDB transaction while the clusters are updated: when the
    update fails, that transaction is dropped with the catalog's, and ingesting again adds the batch."""
    from neardup import clusters as clusters_mod

    first = write_jsonl(tmp_path / "a.jsonl", [{"url": f"a{i}", "text": words_text(40, i)} for i in range(6)])
    second = write_jsonl(tmp_path / "b.jsonl", [{"url": f"b{i}", "text": words_text(40, i % 3)} for i in range(6)])
    ingest(Index(index_dir), str(first))
    with Index(index_dir).writer() as w:
        applied = w.postings.applied_batch()
    before = snapshot(index_dir)

    def broken(*args, **kwargs):
        raise RuntimeError("clusters update failed")

    with monkeypatch.context() as m:
        m.setattr(clusters_mod, "update", broken)
        with pytest.raises(RuntimeError, match="clusters update failed"):
            ingest(Index(index_dir), str(second))
    assert snapshot(index_dir) == before
    with Index(index_dir).writer() as w:
        assert w.postings.applied_batch() == applied
    res = ingest(Index(index_dir), str(second))
    assert res.n_docs == 6 and res.pairs["jaccard"] > 0
    with Index(index_dir).writer() as w:
        assert w.postings.applied_batch() == res.batch_id
