"""The memory plan (``neardup ingest --memory``): sizes parsed, budgets scaled, results unchanged."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from neardup import Index, memory
from neardup.cli.app import app
from neardup.ingest import DEFAULT_BATCH_MB, ingest
from neardup.neighbours import PAIR_BUDGET
from neardup.pairs import CANDIDATE_BUDGET, VALUE_CACHE_BYTES, ValueCache
from neardup.store import index as store_index

from .conftest import FIXTURES
from .test_ingest import _by_url


@pytest.mark.parametrize("text, expected", [
    ("2GB", 2_000_000_000), ("750MB", 750_000_000), ("1.5 GiB", 3 << 29), ("4gb", 4_000_000_000),
    ("123", 123), ("64KiB", 65536), ("0.5TB", 500_000_000_000),
])
def test_sizes_are_parsed(text, expected):
    assert memory.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "2 GBs", "-1GB", "1e9", "GB"])
def test_a_bad_size_is_refused_with_an_example(text):
    with pytest.raises(ValueError, match="e.g. 2GB"):
        memory.parse_size(text)


def test_the_default_plan_is_the_modules_defaults_and_others_scale():
    plan = memory.MemoryPlan()
    assert plan.total == memory.DEFAULT_MEMORY and plan.scale == 1.0
    assert plan.scaled(CANDIDATE_BUDGET) == CANDIDATE_BUDGET
    half = memory.MemoryPlan(memory.DEFAULT_MEMORY // 2)
    assert half.scaled(CANDIDATE_BUDGET) == CANDIDATE_BUDGET // 2
    assert half.scaled(PAIR_BUDGET) == PAIR_BUDGET // 2
    with pytest.raises(ValueError, match="500 MB"):
        memory.MemoryPlan(memory.MIN_MEMORY - 1)


def test_budgets_follow_the_current_plan_inside_using_only():
    assert ValueCache().limit == VALUE_CACHE_BYTES
    with memory.using(memory.MemoryPlan(1_000_000_000)):
        assert memory.current().total == 1_000_000_000
        assert ValueCache().limit == VALUE_CACHE_BYTES // 4
    assert memory.current().total == memory.DEFAULT_MEMORY


def test_the_writers_duckdb_limit_follows_the_plan(tmp_path, monkeypatch):
    seen = []
    real_open = store_index.Writer.open

    def spy(self, create_with):
        real_open(self, create_with)
        seen.append(self.con.execute("SELECT current_setting('memory_limit')").fetchone()[0])

    monkeypatch.setattr(store_index.Writer, "open", spy)
    src = str(FIXTURES / "crawl" / "sample.warc.gz")
    ingest(Index(tmp_path / "a"), src)
    ingest(Index(tmp_path / "b"), src, memory_bytes=2_000_000_000)
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 10**3, "MB": 10**6, "GB": 10**9}
    limits = [float(x.split()[0]) * units[x.split()[1]] for x in seen]
    assert limits[0] == pytest.approx(store_index.WRITER_DUCKDB_MEMORY, rel=0.01)
    assert limits[1] == pytest.approx(limits[0] / 2, rel=0.01)


def test_a_smaller_plan_cuts_batches_smaller_and_finds_the_same(tmp_path, monkeypatch):
    import neardup.ingest as ingest_mod
    import neardup.readers.base as base

    monkeypatch.setattr(base, "CHUNK_RECORDS", 16)
    monkeypatch.setattr(ingest_mod, "DEFAULT_BATCH_MB", 0.4)
    src = str(FIXTURES / "crawl" / "sample.warc.gz")
    full = ingest(Index(tmp_path / "full"), src)
    small = ingest(Index(tmp_path / "small"), src, memory_bytes=1_000_000_000)  # batches of 0.1 MB
    assert len(small.batch_ids) > len(full.batch_ids) >= 2
    assert _by_url(tmp_path / "small") == _by_url(tmp_path / "full")
    given = ingest(Index(tmp_path / "given"), src, memory_bytes=1_000_000_000, batch_mb=0.4)  # --batch-mb wins
    assert len(given.batch_ids) == len(full.batch_ids)


def test_cli_memory_option(tmp_path):
    runner = CliRunner()
    src = str(FIXTURES / "crawl" / "sample.warc.gz")
    r = runner.invoke(app, ["ingest", "-q", "--memory", "1GB", "--index", str(tmp_path / "i"), src])
    assert r.exit_code == 0, r.output
    assert Index(tmp_path / "i").exists()
    for bad in ("100MB", "plenty"):
        r = runner.invoke(app, ["ingest", "-q", "--memory", bad, "--index", str(tmp_path / "j"), src])
        assert r.exit_code == 2 and "--memory" in r.output
        assert not (tmp_path / "j").exists()


def test_default_batch_size_is_unchanged():
    assert memory.MemoryPlan().scaled(int(DEFAULT_BATCH_MB * 1e6)) == int(DEFAULT_BATCH_MB * 1e6)


def test_an_ingest_process_keeps_freed_memory_for_reuse_within_its_plan(monkeypatch):
    """``keep_freed_memory`` (called by the CLI's ingest once ``--memory`` is known): glibc's mallopt
    takes both settings, the free memory kept scales with the plan, and Arrow allocates through the
    same malloc; a second call changes nothing."""
    import ctypes
    import platform

    import pyarrow as pa

    from neardup.memory import KEEP_FREED, MemoryPlan, keep_freed_memory

    glibc = platform.libc_ver()[0] == "glibc"
    calls = []
    if glibc:
        real = ctypes.CDLL(None)

        class Spy:
            @property
            def mallopt(self):
                f = real.mallopt

                def spy(param, value):
                    calls.append((param, value))
                    return f(param, value)

                spy.argtypes = None
                return spy

        monkeypatch.setattr(ctypes, "CDLL", lambda name: Spy())
    assert keep_freed_memory(MemoryPlan(1_000_000_000)) is glibc
    assert pa.default_memory_pool().backend_name == "system"
    if glibc:
        assert (-1, KEEP_FREED // 4) in calls and (-4, 0) in calls
    assert keep_freed_memory() is glibc
    if glibc:
        assert calls[-1] == (-1, KEEP_FREED)
    a = pa.array(["x" * 1000] * 1000)  # allocations still work through it
    assert pa.compute.utf8_length(a).to_pylist() == [1000] * 1000


def _resident_pages(path) -> int:
    """Pages of ``path`` in the page cache (``mincore`` on a private mapping of the file)."""
    import ctypes
    import mmap
    import os

    size = os.path.getsize(path)
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY)
        try:
            n = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * n)()
            start = ctypes.c_char.from_buffer(mm)
            try:
                assert libc.mincore(ctypes.addressof(start), size, vec) == 0, ctypes.get_errno()
            finally:
                del start
            return sum(v & 1 for v in vec)
        finally:
            mm.close()


@pytest.mark.skipif(not hasattr(__import__("os"), "posix_fadvise"), reason="no posix_fadvise on this platform")
def test_an_ingest_leaves_the_catalog_file_out_of_the_page_cache(tmp_path):
    """A writer drops the catalog file's written pages from the page cache after its checkpoints
    (``catalog.drop_cached``): they would otherwise fill it with the texts and rows of every batch."""
    import os

    from neardup.store import catalog

    control = tmp_path / "control"  # where the file system keeps written pages anyway (tmpfs), skip
    control.write_bytes(os.urandom(1 << 20))
    with open(control, "rb+") as fh:
        os.fsync(fh.fileno())
    assert _resident_pages(control) > 0
    catalog.drop_cached(control)
    if _resident_pages(control):
        pytest.skip("this file system keeps written pages cached")

    idx = Index(tmp_path / "i")
    src = str(FIXTURES / "crawl" / "sample.warc.gz")
    res = ingest(idx, src)
    path = idx.catalog_path
    assert path.stat().st_size > 0 and _resident_pages(path) == 0
    # nothing is lost: the catalog reads back (into the cache again) what the ingest wrote
    with idx.reader() as con:
        assert con.execute("SELECT count(*) FROM documents").fetchone()[0] == res.n_docs > 0
    assert _resident_pages(path) > 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_start_writeback_starts_the_catalog_files_writeback_and_changes_nothing(tmp_path):
    """``catalog.start_writeback`` asks the kernel to start writing a file's dirty pages; the file
    reads back the same, and a file that is not there is no error (the call is advice)."""
    import os

    from neardup.store import catalog

    f = tmp_path / "catalog.duckdb"
    data = os.urandom(3 << 20)
    f.write_bytes(data)
    assert catalog.start_writeback(f) is True
    assert f.read_bytes() == data
    assert catalog.start_writeback(tmp_path / "missing") is False


def test_an_ingest_starts_the_catalogs_writeback_after_each_chunk_and_before_its_commit(tmp_path, monkeypatch):
    """Each stored chunk's row groups, then the batch's pairs and clusters, are sent to disk as
    the batch goes (``catalog.start_writeback``), so the commit's sync waits for the last ones only."""
    import neardup.ingest as ingest_mod
    import neardup.readers.base as base
    from neardup.store import catalog

    calls, stored = [], []
    real_wb, real_add = catalog.start_writeback, ingest_mod._add_documents
    monkeypatch.setattr(catalog, "start_writeback", lambda path: calls.append(path) or real_wb(path))
    monkeypatch.setattr(ingest_mod, "_add_documents", lambda *a, **k: stored.append(1) or real_add(*a, **k))
    monkeypatch.setattr(base, "CHUNK_RECORDS", 4)
    idx = Index(tmp_path / "i")
    res = ingest(idx, str(FIXTURES / "crawl" / "sample.warc.gz"))
    assert res.n_docs > 8 and len(res.batch_ids) == 1 and len(stored) > 2
    assert calls == [idx.catalog_path] * (len(stored) + 1)
