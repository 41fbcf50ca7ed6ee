"""Standard input is read exactly like a file holding the same bytes: same records, rejects and counts."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neardup import Index, ReadOptions
from neardup.cli.app import app
from neardup.ingest import ingest
from neardup.readers import read_input, sniff_format
from neardup.readers.files import file_url

from .conftest import FIXTURES

# (fixture, its format)
FIXTURE_FILES = [
    ("crawl/sample.warc.gz", "warc"),
    ("crawl/sample.wet.gz", "warc"),
    ("text/docs.jsonl", "jsonl"),
    ("text/docs.jsonl.gz", "jsonl"),
    ("text/chain.jsonl", "jsonl"),
    ("generated/corpus.jsonl", "jsonl"),
    ("text/docs.parquet", "parquet"),
    ("html/valgrind/index.html", "html"),
    ("html/libxslt1-dev/libxslt-attributes.html", "html"),  # ISO-8859-1, XHTML
    ("html/shared-mime-info/index.html", "html"),
    ("html/gettext/copyright.txt", "text"),
]


def variant(rel: str, compressed: bool) -> tuple[str, bytes]:
    """The fixture's bytes and a file name telling its format, gzip-compressed or not."""
    data = (FIXTURES / rel).read_bytes()
    name = Path(rel).name
    stored_gz = name.endswith(".gz")
    if stored_gz and not compressed:
        return name[:-3], gzip.decompress(data)
    if compressed and not stored_gz:
        return name + ".gz", gzip.compress(data, mtime=0)
    return name, data


def collect(path: str, opts: ReadOptions) -> dict:
    rows, rejects, skipped, n_bytes = [], [], 0, 0
    for ch in read_input(path, opts):
        rows.extend(ch.batch.to_pylist())
        rejects.extend((r.source, r.record, r.reason) for r in ch.rejects)
        skipped += ch.n_skipped
        n_bytes += ch.n_bytes_read
    return {"rows": rows, "rejects": rejects, "skipped": skipped, "bytes": n_bytes}


def as_stdin(got: dict, path: Path) -> dict:
    """A file's result with its name replaced by what standard input is called."""
    name, uri = str(path), file_url(path)

    def fix(s):
        return "<stdin>#1" if s == uri else s.replace(name, "<stdin>") if isinstance(s, str) else s

    return {
        "rows": [{k: fix(v) for k, v in r.items()} for r in got["rows"]],
        "rejects": [tuple(fix(x) for x in r) for r in got["rejects"]],
        "skipped": got["skipped"],
        "bytes": got["bytes"],
    }


def from_stdin(data: bytes, opts: ReadOptions, monkeypatch) -> dict:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    return collect("-", opts)


def check_same(tmp_path: Path, name: str, data: bytes, fmt: str, monkeypatch) -> None:
    if not data:  # a 0-byte .gz file is rejected by its name (cut); no name tells that 0 bytes of stdin were compressed
        name = name.removesuffix(".gz")
    path = tmp_path / name
    path.write_bytes(data)
    want = as_stdin(collect(str(path), ReadOptions()), path)
    # named with --format: always the very same reading
    assert from_stdin(data, ReadOptions(fmt=fmt), monkeypatch) == want
    # sniffed: the same whenever the bytes tell the format, which they do past their first few hundred
    sniffed = sniff_format(data[: 1 << 16])
    got = from_stdin(data, ReadOptions(), monkeypatch)  # never raises, whatever the bytes
    if len(data) >= 512:
        assert sniffed == fmt
    if sniffed == fmt:
        assert got == want


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("rel,fmt", FIXTURE_FILES, ids=[r for r, _ in FIXTURE_FILES])
def test_each_fixture_whole_and_cut_in_half(tmp_path, monkeypatch, rel, fmt, compressed):
    name, data = variant(rel, compressed)
    check_same(tmp_path, name, data, fmt, monkeypatch)
    check_same(tmp_path, name, data[: len(data) // 2], fmt, monkeypatch)


@st.composite
def cut_inputs(draw):
    rel, fmt = draw(st.sampled_from(FIXTURE_FILES))
    name, data = variant(rel, draw(st.booleans()))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return name, data, fmt


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut_inputs())
def test_stdin_reads_like_the_same_bytes_in_a_file(tmp_path, monkeypatch, case):
    name, data, fmt = case
    check_same(tmp_path, name, data, fmt, monkeypatch)


# -- through ingest and the command line ----------------------------------

def catalog_state(idx: Path, source: str) -> dict:
    """Documents, rejects and batch counts, with the input's name replaced by SRC."""
    with Index(idx).reader() as con:
        return {
            "documents": con.execute(
                "SELECT doc_id, replace(url, ?, 'SRC'), replace(source, ?, 'SRC'), record, n_words, content_hash, text "
                "FROM documents ORDER BY doc_id", [source, source]).fetchall(),
            "rejects": con.execute(
                "SELECT replace(source, ?, 'SRC'), record, replace(reason, ?, 'SRC') FROM rejects ORDER BY ALL",
                [source, source]).fetchall(),
            "batches": con.execute(
                "SELECT replace(source, ?, 'SRC'), n_docs, n_unchanged, n_skipped, n_rejected, n_bytes, status FROM batches ORDER BY batch_id",
                [source]).fetchall(),
        }


HALF_GZ = gzip.compress((FIXTURES / "text" / "docs.jsonl").read_bytes(), mtime=0)
CASES = {
    "first-half-of-docs.jsonl.gz": HALF_GZ[: len(HALF_GZ) // 2],
    "gzip-magic-then-noise.jsonl.gz": b"\x1f\x8b\x08\x00" + bytes((i * 7919 + 13) % 251 for i in range(5000)),
    "cut-warc.warc.gz": (FIXTURES / "crawl" / "sample.warc.gz").read_bytes()[:300_000],
}


@pytest.mark.parametrize("name", list(CASES))
def test_cli_ingest_from_stdin_keeps_what_a_file_keeps(tmp_path, name):
    data = CASES[name]
    src = tmp_path / name
    src.write_bytes(data)
    runner = CliRunner()
    by_file = runner.invoke(app, ["ingest", "--index", str(tmp_path / "f"), str(src)])
    by_stdin = runner.invoke(app, ["ingest", "--index", str(tmp_path / "s"), "-"], input=data)
    assert by_file.exit_code == 0, by_file.output
    assert by_stdin.exit_code == 0, by_stdin.output
    assert "Traceback" not in by_stdin.output
    # the same summary line, apart from the name and the timing
    def summary(out, label):
        line = next(ln for ln in out.splitlines() if ln.startswith("batch "))
        return line.replace(label, "SRC").split(";")[0]

    assert summary(by_stdin.output, "<stdin>") == summary(by_file.output, str(src))
    f = catalog_state(tmp_path / "f", str(src))
    s = catalog_state(tmp_path / "s", "<stdin>")
    assert s == f
    assert f["rejects"], "every case is damaged somewhere"


def test_engine_ingest_of_a_cut_gzip_from_stdin_keeps_the_records_before_the_cut(tmp_path, monkeypatch):
    data = CASES["first-half-of-docs.jsonl.gz"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    res = ingest(Index(tmp_path / "s"), "-")
    src = tmp_path / "half.jsonl.gz"
    src.write_bytes(data)
    ref = ingest(Index(tmp_path / "f"), str(src))
    assert res.n_docs == ref.n_docs > 0
    assert (res.n_rejected, res.n_bytes, res.n_skipped) == (ref.n_rejected, ref.n_bytes, ref.n_skipped)
    assert [r.message().replace("<stdin>", "SRC") for r in res.rejects] == [r.message().replace(str(src), "SRC") for r in ref.rejects]
    assert json.dumps(catalog_state(tmp_path / "s", "<stdin>"), default=str) == json.dumps(catalog_state(tmp_path / "f", str(src)), default=str)


@pytest.mark.parametrize("head,fmt", [
    (b"", "jsonl"),
    (b'\n  {"url": "a"', "jsonl"),
    (gzip.compress(b'{"url": "a", "text": "t"}\n'), "jsonl"),
    (b"\x1f\x8b\x08\x00", "jsonl"),  # gzip magic and nothing readable: the JSONL reader rejects it
    (b"WARC/1.0\r\n", "warc"),
    (gzip.compress(b"WARC/1.0\r\nWARC-Type: warcinfo\r\n"), "warc"),
    (b"filedesc://x.arc 0.0.0.0 20240101000000 text/plain 10\n", "warc"),
    (b"PAR1\x15\x04", "parquet"),
    (gzip.compress(b"PAR1\x15\x04"), "parquet"),
    (b"\xef\xbb\xbf<!DOCTYPE html><p>x", "html"),
    (b"  <!DOCTYPE HTML PUBLIC><html>", "html"),
    (b'<?xml version="1.0"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN"', "html"),
    (b"<p>a fragment</p>", "text"),
    (b"plain words", "text"),
])
def test_sniff_format(head, fmt):
    assert sniff_format(head) == fmt


def test_unknown_format_is_refused_before_reading(monkeypatch):
    from neardup import InputError

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"{}")))
    with pytest.raises(InputError, match="unknown format 'xml'"):
        read_input("-", ReadOptions(fmt="xml"))


def test_compressed_html_and_text_files_are_read_like_plain_ones(tmp_path):
    page = b"<html><head><meta charset='latin-1'></head><body><p>caf\xe9 au lait</p></body></html>"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.html.gz").write_bytes(gzip.compress(page))
    (tmp_path / "d" / "b.txt.gz").write_bytes(gzip.compress(b"some plain words"))
    (tmp_path / "d" / "c.html.gz").write_bytes(gzip.compress(page)[:20])
    got = collect(str(tmp_path / "d"), ReadOptions())
    assert [(r["record"], r["content"], r["is_html"]) for r in got["rows"]] == [
        ("file", page.decode("latin-1"), True), ("file", "some plain words", False)]
    assert [(Path(s).name, rec) for s, rec, _ in got["rejects"]] == [("c.html.gz", "file")]
    assert "truncated or corrupt compressed input" in got["rejects"][0][2]
