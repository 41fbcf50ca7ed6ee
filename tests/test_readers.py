"""Readers: every format, and every kind of bad input named by file and record."""

from __future__ import annotations

import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import InputError, ReadOptions
from neardup.readers import detect_format, read_input

from .conftest import write_jsonl
from .warcs import write_warc, write_wet

TEXT = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda."


def collect(path, opts=None):
    rows, rejects, skipped = [], [], 0
    for ch in read_input(str(path), opts or ReadOptions()):
        rows.extend(ch.batch.to_pylist())
        rejects.extend(ch.rejects)
        skipped += ch.n_skipped
    return rows, rejects, skipped


@pytest.mark.parametrize("name,fmt", [
    ("a.warc.gz", "warc"), ("a.wet", "warc"), ("x.jsonl.zst", "jsonl"), ("x.ndjson", "jsonl"),
    ("p.parquet", "parquet"), ("d.HTML", "html"), ("r.txt", "text"), ("blob.bin", None),
])
def test_detect_format(name, fmt):
    assert detect_format(name) == fmt


@pytest.mark.parametrize("compress", [None, "gz", "zst"])
def test_jsonl_plain_and_compressed(tmp_path, compress):
    p = write_jsonl(tmp_path / f"a.jsonl{'.' + compress if compress else ''}",
                    [{"url": "u1", "text": TEXT}, {"id": 7, "text": "Vec<T> stays"}, {"text": TEXT}])
    rows, rejects, _ = collect(p)
    assert rejects == []
    assert [r["url"] for r in rows] == ["u1", "7", f"{p}#line3"]
    assert [r["record"] for r in rows] == ["line 1", "line 2", "line 3"]
    assert rows[1]["content"] == "Vec<T> stays" and rows[1]["is_html"] is False


def test_jsonl_fields_and_html_flag(tmp_path):
    p = write_jsonl(tmp_path / "a.jsonl", [{"key": "k1", "body": "<p>hi</p>"}])
    rows, _, _ = collect(p, ReadOptions(text_field="body", id_field="key", html=True))
    assert rows[0]["url"] == "k1" and rows[0]["is_html"] is True


def test_jsonl_bad_lines_are_rejected_by_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(
        b'{"url": "a", "text": "fine text"}\n'
        b'{"url": "b", "text": \n'
        b'{"url": "c"}\n'
        b'{"url": "d", "text": 5}\n'
        b'{"url": "e", "text": "caf\xe9"}\n'
        b'[1, 2]\n'
        b'{"url": "f", "text": "nul \\u0000 byte"}\n'
        b'\n'
        b'{"url": "g", "text": "last"}\n'
    )
    rows, rejects, _ = collect(p)
    assert [r["url"] for r in rows] == ["a", "g"]
    got = {r.record: r.reason for r in rejects}
    assert set(got) == {"line 2", "line 3", "line 4", "line 5", "line 6", "line 7"}
    assert got["line 2"].startswith("malformed JSON")
    assert "missing text field 'text'" in got["line 3"]
    assert "is a int, not a string" in got["line 4"]
    assert got["line 5"].startswith("invalid UTF-8 at byte")
    assert "expected a JSON object" in got["line 6"]
    assert got["line 7"].startswith("binary content")
    assert all(r.source == str(p) for r in rejects)


@pytest.mark.parametrize("compress", ["gz", "zst"])
def test_truncated_compressed_jsonl_keeps_what_came_before(tmp_path, compress):
    import random

    rnd = random.Random(5)
    recs = [{"url": f"u{i}", "text": " ".join(f"w{rnd.randrange(10**6)}" for _ in range(30))} for i in range(2000)]
    full = write_jsonl(tmp_path / f"full.jsonl.{compress}", recs, compress)
    cut = tmp_path / f"cut.jsonl.{compress}"
    data = full.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    rows, rejects, _ = collect(cut)
    assert 0 < len(rows) < 2000
    assert [r["url"] for r in rows] == [f"u{i}" for i in range(len(rows))]
    assert len(rejects) == 1 and "truncated or corrupt" in rejects[0].reason
    assert rejects[0].record == f"line {len(rows) + 1}"


@pytest.mark.parametrize("compress", [None, "gz", "zst"])
def test_compressed_jsonl_arrives_in_full_chunks(tmp_path, compress):
    """A decompressor's read may return one frame (zstd: ~128 KB); chunks are still CHUNK_BYTES or
    CHUNK_RECORDS, whatever the compression, and every record arrives once, in order."""
    import random

    from neardup.readers.base import CHUNK_BYTES, CHUNK_RECORDS

    rnd = random.Random(3)
    n = 3000  # ~3 KB each: about 9 MB, over one CHUNK_BYTES and under CHUNK_RECORDS
    recs = [{"url": f"u{i}", "text": " ".join(f"w{rnd.randrange(10**6)}" for _ in range(400))} for i in range(n)]
    p = write_jsonl(tmp_path / f"big.jsonl{'.' + compress if compress else ''}", recs, compress)
    sizes, urls = [], []
    for ch in read_input(str(p), ReadOptions()):
        sizes.append(ch.batch.num_rows)
        urls.extend(ch.batch.column("url").to_pylist())
    assert urls == [f"u{i}" for i in range(n)]
    assert n < CHUNK_RECORDS and sum(len(r["text"]) for r in recs) > CHUNK_BYTES
    assert len(sizes) == 2, sizes  # one full block and the rest


def test_parquet_rows_and_rejects(tmp_path):
    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"url": ["a", None, "c"], "text": [TEXT, TEXT + " 2", None], "lang": ["en"] * 3}), p)
    rows, rejects, _ = collect(p)
    assert [r["url"] for r in rows] == ["a", f"{p}#row1"]
    assert [(r.record, r.reason) for r in rejects] == [("row 2", "text field 'text' is null")]


def test_parquet_missing_column_is_one_reject(tmp_path):
    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"url": ["a"], "body": [TEXT]}), p)
    rows, rejects, _ = collect(p)
    assert rows == [] and len(rejects) == 1
    assert "missing text column 'text' (columns: url, body)" in rejects[0].reason


def test_warc_responses_html_charset_and_skips(tmp_path):
    ru = "Привет, это страница на русском языке.".encode("cp1251")
    p = write_warc(tmp_path / "c.warc.gz", [
        ("http://a/", b"<html><body><p>Hello page</p></body></html>", "text/html; charset=utf-8"),
        ("http://img/", b"\x89PNG\r\n\x1a\n\x00\x00", "image/png"),
        ("http://ru/", ru, "text/html; charset=windows-1251"),
        ("http://meta/", b'<html><head><meta charset="koi8-r"></head><body>' + "Мир".encode("koi8-r") + b"</body></html>", "text/html"),
        ("http://moved/", b"", "text/html", "301 Moved Permanently"),
        ("http://u/", "<p>Grüße → ✓ 日本 \U0001F600</p>".encode(), "text/html"),
    ])
    rows, rejects, skipped = collect(p)
    assert rejects == []
    assert [r["url"] for r in rows] == ["http://a/", "http://ru/", "http://meta/", "http://u/"]
    assert rows[1]["content"] == "Привет, это страница на русском языке."
    assert "Мир" in rows[2]["content"]
    # UTF-8 is stored as read (not decoded and encoded again), beside texts of other charsets
    assert rows[3]["content"] == "<p>Grüße → ✓ 日本 \U0001F600</p>"
    assert all(r["is_html"] for r in rows)
    assert all(r["record"].startswith("offset ") for r in rows)
    assert skipped == 1 + 6 + 2  # warcinfo, 6 requests, image, redirect


def test_warc_undeclared_invalid_utf8_and_binary_are_rejected_with_offset(tmp_path):
    p = write_warc(tmp_path / "c.warc", [
        ("http://bad/", "Привет".encode("cp1251"), "text/html"),
        ("http://bin/", b"\x00\x01\x02binary", "text/html"),
        ("http://ok/", b"<p>fine</p>", "text/html"),
    ], gzip=False)
    rows, rejects, _ = collect(p)
    assert [r["url"] for r in rows] == ["http://ok/"]
    assert rejects[0].record.startswith("offset ") and "invalid UTF-8 at byte 0" in rejects[0].reason
    assert "http://bad/" in rejects[0].reason
    assert rejects[1].reason.startswith("binary content")
    rows, rejects, _ = collect(p, ReadOptions(encoding="cp1251"))
    assert rows[0]["content"] == "Привет" and len(rejects) == 1


def test_truncated_warc_keeps_earlier_records(tmp_path):
    pages = [(f"http://p{i}/", f"<p>page {i} {TEXT}</p>".encode(), "text/html") for i in range(40)]
    full = write_warc(tmp_path / "full.warc.gz", pages)
    data = full.read_bytes()
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(data[: len(data) // 2])
    rows, rejects, _ = collect(cut)
    assert 0 < len(rows) < 40
    assert [r["url"] for r in rows] == [f"http://p{i}/" for i in range(len(rows))]
    assert len(rejects) == 1 and "truncated or corrupt WARC" in rejects[0].reason


def test_wet_conversion_records(tmp_path):
    p = write_wet(tmp_path / "x.wet.gz", [("http://a/", TEXT), ("http://b/", "Second " + TEXT)])
    rows, rejects, _ = collect(p)
    assert [(r["url"], r["is_html"]) for r in rows] == [("http://a/", False), ("http://b/", False)]


def test_folder_walk_sorted_recursive(tmp_path):
    d = tmp_path / "site"
    (d / "b").mkdir(parents=True)
    (d / "b" / "z.html").write_text("<p>zed</p>")
    (d / "a.txt").write_text(TEXT)
    (d / "b" / "c.jsonl").write_text('{"url": "j", "text": "from jsonl"}\n')
    (d / "image.png").write_bytes(b"\x89PNG")
    (d / "bad.txt").write_bytes(b"\xff\xfe\x00\x00")
    rows, rejects, _ = collect(d)
    assert [r["url"] for r in rows] == [(d / "a.txt").resolve().as_uri(), "j", (d / "b" / "z.html").resolve().as_uri()]
    assert [r.source for r in rejects] == [str(d / "bad.txt")]


def test_stdin_sniffs_jsonl_and_warc(tmp_path, monkeypatch):
    import io
    import sys

    data = gzip.compress(b'{"url": "s", "text": "from stdin"}\n')
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    rows, _, _ = collect("-")
    assert [r["url"] for r in rows] == ["s"]
    w = write_warc(tmp_path / "s.warc.gz", [("http://s/", b"<p>x</p>", "text/html")])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(w.read_bytes())))
    rows, _, _ = collect("-")
    assert [r["url"] for r in rows] == ["http://s/"]


def test_missing_input_and_unknown_format_raise_before_reading(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_input(str(tmp_path / "nope.jsonl"), ReadOptions())
    (tmp_path / "x.bin").write_bytes(b"1")
    with pytest.raises(InputError, match="cannot tell the format"):
        read_input(str(tmp_path / "x.bin"), ReadOptions())


LINE_KINDS = [
    '{"url": "u%d", "text": "plain text number %d"}',
    '{"id": "i%d", "text": "with id %d", "extra": [1, {"x": 2}]}',
    '{"text": "no id at all %d %d"}',
    '{"url": "", "id": "e%d", "text": "empty url %d"}',
    '{"url": "n%d", "text": null, "k": %d}',
    '{"url": "b%d", "text": "nul \\u0000 %d"}',
    '{"url": "s%d", "text": "lone \\ud800 surrogate %d"}',
    '{"url": %d, "text": "numeric url %d"}',
    '{"url": "x%d", "text": %d}',
    '[%d, %d]',
    '{"url": "m%d", "text": "unterminated %d',
    '{"url": "d%d", "text": "a", "text": "dup key %d"}',
    '',
    '{"url": "c%d", "text": "caf\xe9 %d"}',
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(LINE_KINDS) - 1), max_size=20), st.booleans())
def test_fast_and_line_by_line_jsonl_paths_agree(kinds, final_newline):
    from neardup.readers import jsonl
    from neardup.readers.base import ChunkBuilder

    lines = []
    for i, k in enumerate(kinds):
        t = LINE_KINDS[k]
        line = (t % (i, i) if "%d" in t else t).encode("utf-8", "surrogateescape") if k != 13 else (t % (i, i)).encode("latin-1")
        lines.append(line)
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    opts = ReadOptions()
    got_rows, got_rej = [], []
    for ch in jsonl.read_jsonl(io.BytesIO(data), "s.jsonl", opts):
        got_rows.extend(ch.batch.to_pylist())
        got_rej.extend((r.record, r.reason) for r in ch.rejects)
    b = ChunkBuilder("s.jsonl")
    n = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    for no, line in enumerate(data.split(b"\n")[:n], start=1):
        jsonl._one_line(b, line, no, "s.jsonl", opts)
    ref = b.take()
    assert got_rows == ref.batch.to_pylist()
    assert sorted(got_rej) == sorted((r.record, r.reason) for r in ref.rejects)


_CHARS = st.sampled_from(["a", "b", "u", "0", "1", "7", "f", "F", "\\", '"', " ", "\n", "\t", "\x00", "\x01", "\x08", "\x0b",
                          "\x0c", "\x0e", "\x1f", "\x7f", "\x80", "é", "\u2028"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_CHARS, max_size=12).map("".join), min_size=1, max_size=12), st.booleans())
def test_jsonl_fast_path_rejects_the_control_lines_the_line_by_line_path_does(texts, ascii_escapes):
    """Control characters reach a text through JSON escapes (``\\u0001``, ``\\b``) or as a raw DEL;
    the fast path looks for them only on the lines whose bytes allow one, and must still reject
    exactly the lines the line-by-line path rejects, with the same reasons (escaped backslashes
    and ``u00`` look-alikes included)."""
    import json

    from neardup.readers.base import ChunkBuilder
    from neardup.readers.jsonl import _fast_block, _line_ends, _one_line

    lines = [json.dumps({"url": f"u{i}", "text": t}, ensure_ascii=ascii_escapes).encode() for i, t in enumerate(texts)]
    block = b"\n".join(lines) + b"\n"
    opts = ReadOptions()
    fast = _fast_block(block, 0, "s", opts, _line_ends(block))
    assert fast is not None  # every line is valid JSON with a string text
    slow = ChunkBuilder("s")
    for n, line in enumerate(lines, start=1):
        _one_line(slow, line, n, "s", opts)
    want = slow.take()
    assert [(r.record, r.reason) for r in fast.rejects] == [(r.record, r.reason) for r in want.rejects]
    assert fast.batch.column("content").to_pylist() == want.batch.column("content").to_pylist()


class _Trickle(io.RawIOBase):
    """A stream whose reads return at most ``step`` bytes (as a decompressor's may)."""

    def __init__(self, data: bytes, step: int, readinto: bool, hold: bool = False):
        self._data, self._pos, self._step, self._hold = data, 0, step, hold
        self.held = None
        if not readinto:
            self.readinto = None  # type: ignore[assignment]

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self._step if n is None or n < 0 else min(n, self._step)
        out = self._data[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    def readinto(self, b) -> int:  # type: ignore[override]
        out = self.read(len(b))
        b[: len(out)] = out
        if self._hold:  # keeps a view of the caller's buffer, as a frame in a reference cycle may
            self.held = b
        return len(out)


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    last_newline=st.booleans(),
    block=st.integers(1, 40),
    step=st.integers(1, 50),
    readinto=st.booleans(),
    hold=st.booleans(),
)
def test_iter_blocks_gives_the_input_back_in_runs_of_whole_lines(lines, last_newline, block, step, readinto, hold):
    """Joined, the blocks are the input; each but the last ends with a newline, and none holds
    a line the next one continues; at most a line longer than ``block`` makes one larger."""
    from neardup.readers.streams import iter_blocks

    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    blocks = [bytes(b) for b in iter_blocks(_Trickle(data, step, readinto, hold), block)]
    assert b"".join(blocks) == data
    assert all(b for b in blocks)
    assert all(b.endswith(b"\n") for b in blocks[:-1])
    longest = max((len(x) + 1 for x in data.split(b"\n")), default=0)
    assert all(len(b) <= max(block, 0) + longest for b in blocks)
