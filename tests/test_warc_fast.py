"""The WARC reader's fast path (fastwarc frames, warcio reads): the same chunks as warcio alone."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup import ReadOptions
from neardup.readers import read_input, warc_fast

from .test_faults import MUTATION, mutate
from .warcs import write_warc

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "crawl" / "sample.warc.gz"
TEXT = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda."


def chunks(path: Path, fast: bool) -> list:
    """Every chunk of ``path`` as plain values: rows, rejects, skipped and bytes read."""
    before = warc_fast.ENABLED
    warc_fast.ENABLED = fast
    try:
        return [(ch.batch.to_pylist(), [(r.source, r.record, r.reason) for r in ch.rejects], ch.n_skipped, ch.n_bytes_read)
                for ch in read_input(str(path), ReadOptions())]
    finally:
        warc_fast.ENABLED = before


@pytest.fixture
def taken(monkeypatch) -> list:
    """The offsets of the last record the fast path took, one per file it read."""
    seen: list = []
    real = warc_fast.fast_records

    def spy(*args):
        last = yield from real(*args)
        seen.append(last)
        return last

    monkeypatch.setattr(warc_fast, "fast_records", spy)
    return seen


def _mixed_warc(path: Path, gzipped: bool) -> Path:
    """Records that exercise warcio's reading of a record: chunked and gzip payloads, a URI in angle
    brackets, a redirect, an image, a WARC resource and a page in another charset."""
    def chunked(body: bytes) -> bytes:
        return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:10], body[10:])) + b"0\r\n\r\n"

    page = f"<html><body><p>{TEXT}</p></body></html>".encode()
    responses = [
        ("http://a/plain", page, [("Content-Type", "text/html; charset=utf-8")], "200 OK"),
        ("http://a/chunked", chunked(page), [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")], "200 OK"),
        ("http://a/gzipped", gzip.compress(page, mtime=0), [("Content-Type", "text/html"), ("Content-Encoding", "gzip")], "200 OK"),
        ("http://a/chunked-gzip", chunked(gzip.compress(page, mtime=0)),
         [("Content-Type", "text/html"), ("Content-Encoding", "GZIP"), ("Transfer-Encoding", "chunked")], "200 OK"),
        ("http://a/moved", b"", [("Location", "http://a/plain")], "301 Moved Permanently"),
        ("http://a/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(64), [("Content-Type", "image/png")], "200 OK"),
        ("http://a/cp1251", "<p>Привет, мир</p>".encode("cp1251"), [("Content-Type", "text/html; charset=windows-1251")], "200 OK"),
        ("http://a/last", page, [("Content-Type", "text/html")], "200 OK"),
    ]
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gzipped)
        n = iter(range(100))

        def write(rec) -> None:  # the same bytes on every run: fixed dates and record ids
            rec.rec_headers.replace_header("WARC-Date", "2026-01-01T00:00:00Z")
            rec.rec_headers.replace_header("WARC-Record-ID", f"<urn:uuid:00000000-0000-0000-0000-{next(n):012d}>")
            w.write_record(rec)

        write(w.create_warcinfo_record(path.name, {"software": "tests"}))
        for url, body, headers, status in responses:
            http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            rec = w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
            if url.endswith("/chunked"):
                rec.rec_headers.replace_header("WARC-Target-URI", f"<{url}>")
            write(rec)
            if url.endswith("/moved"):
                write(w.create_warc_record("http://a/file.txt", "resource", payload=io.BytesIO(TEXT.encode()),
                                           warc_content_type="text/plain"))
    return path


@pytest.mark.parametrize("gzipped", [True, False])
def test_fast_path_reads_what_warcio_reads(tmp_path, taken, gzipped):
    path = _mixed_warc(tmp_path / ("m.warc.gz" if gzipped else "m.warc"), gzipped)
    fast = chunks(path, True)
    assert fast == chunks(path, False)
    rows = [r for c in fast for r in c[0]]
    assert [r["url"] for r in rows] == ["http://a/plain", "http://a/chunked", "http://a/gzipped", "http://a/chunked-gzip",
                                        "http://a/file.txt", "http://a/cp1251", "http://a/last"]
    assert all(TEXT in r["content"] for r in rows if r["is_html"] and "cp1251" not in r["url"])
    assert "Привет" in rows[5]["content"]
    assert taken and taken[0] is not None and taken[0] > 0  # the fast path took all but the last record


def test_fast_path_on_the_fixture_crawl(taken):
    assert chunks(FIXTURE, True) == chunks(FIXTURE, False)
    assert taken[0] is not None and taken[0] > 0


def test_stdin_is_read_by_warcio_alone(tmp_path, monkeypatch, taken):
    p = write_warc(tmp_path / "s.warc.gz", [("http://s/", b"<p>x</p>", "text/html"), ("http://t/", b"<p>y</p>", "text/html")])

    class Stdin:
        buffer = io.BytesIO(p.read_bytes())

    monkeypatch.setattr("sys.stdin", Stdin)
    rows = [r for ch in read_input("-", ReadOptions()) for r in ch.batch.to_pylist()]
    assert [r["url"] for r in rows] == ["http://s/", "http://t/"] and taken == []


def _plain_and_gzipped(tmp_path_factory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("mixed")
    return {"plain": _mixed_warc(d / "m.warc", False).read_bytes(), "gzip": _mixed_warc(d / "m.warc.gz", True).read_bytes()}


def test_a_first_line_warcio_does_not_know_is_left_to_it(tmp_path_factory):
    # "WARC/1.0" with its version's first digit made a NUL byte: fastwarc framed the record,
    # warcio reads no WARC record there (found by the property test below)
    original = _plain_and_gzipped(tmp_path_factory)["plain"]
    path = tmp_path_factory.mktemp("version") / "v.warc"
    path.write_bytes(mutate(original, [("flip", 5, 0)]))
    assert chunks(path, True) == chunks(path, False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_files_read_alike(tmp_path_factory, data):
    """Any damage to an uncompressed WARC, and a cut anywhere in a gzipped one: the fast path gives the same
    chunks (documents, skips, rejects and their offsets) as warcio reading the whole file."""
    originals = _plain_and_gzipped(tmp_path_factory)
    kind = data.draw(st.sampled_from(sorted(originals)), label="kind")
    if kind == "plain":
        ops = data.draw(st.lists(MUTATION, min_size=1, max_size=4), label="mutations")
    else:
        ops = [("truncate", data.draw(st.integers(0, len(originals[kind])), label="cut"), None)]
    path = tmp_path_factory.mktemp("damaged") / ("d.warc" if kind == "plain" else "d.warc.gz")
    path.write_bytes(mutate(originals[kind], ops))
    assert chunks(path, True) == chunks(path, False)


def test_a_damaged_gzip_member_keeps_the_records_before_it(tmp_path):
    pages = [(f"http://p{i}/", f"<p>page {i} {TEXT}</p>".encode(), "text/html") for i in range(30)]
    data = bytearray(write_warc(tmp_path / "w.warc.gz", pages).read_bytes())
    starts, end = [], 0  # gzip members: a warcinfo, then a request and a response per page
    while end < len(data):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        d.decompress(bytes(data[end:]))
        starts.append(end)
        end = len(data) - len(d.unused_data)
    member = starts[2 + 2 * 20]  # page 20's response
    data[member + 30] ^= 0x55  # inside its deflate data
    bad = tmp_path / "bad.warc.gz"
    bad.write_bytes(bytes(data))
    fast = chunks(bad, True)
    rows = [r for c in fast for r in c[0]]
    rejects = [r for c in fast for r in c[1]]
    assert [r["url"] for r in rows] == [f"http://p{i}/" for i in range(20)]
    assert len(rejects) == 1 and "truncated or corrupt WARC" in rejects[0][2]
