"""WARC/WET reader (warcio): HTML ``response`` records and text ``conversion`` records."""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from .base import BINARY_CHECK_BYTES, ChunkBuilder, RawChunk, binary_reason, charset_from_content_type, decode, sniff_html_charset
from . import warc_fast
from .options import ReadOptions
from .streams import ZSTD_MAGIC, Truncated, decompress_all, decompressed_head, is_compressed, peek

_HTML_TYPES = ("text/html", "application/xhtml+xml")


def read_warc(stream: BinaryIO, source: str, opts: ReadOptions) -> Iterator[RawChunk]:
    """Yield chunks of documents; other records (requests, metadata, images, redirects) are skipped.

    A record is named by its byte offset in the (compressed) file. A cut or
    corrupt file yields every record before the damage and one reject for it;
    a file that is no WARC at all (binary content, or zstd-compressed, which
    warcio cannot read) is one reject, record ``file``.
    """
    b = ChunkBuilder(source)
    stream, head = peek(stream, 4)
    if head.startswith(ZSTD_MAGIC):
        b.reject("file", "zstd-compressed WARC, which is not supported (plain and gzip WARC are); decompress it first (zstd -d)")
        yield b.take()
        return
    taken = None  # the last record the fast path took: warcio reads on from it, wanting only its end
    if warc_fast.ENABLED and isinstance(getattr(stream, "raw", None), io.FileIO) and stream.seekable():
        taken = yield from warc_fast.fast_records(stream, b, opts, _one_record)
        stream.seek(taken or 0)
    base, again = taken or 0, taken is not None
    counted = _Counting(stream)
    it = _Shifted(ArchiveIterator(counted, arc2warc=True), base)
    end = 0  # where the last complete record ends (in the part warcio reads)
    try:
        for rec in it:
            offset = (it.get_record_offset() if again else _one_record(b, rec, it, opts)) - base
            end = offset + it.get_record_length()
            again = False
            if b.full():
                yield b.take()
        counted.drain()
        if counted.total > end and counted.tail_has_data(end):
            b.reject(f"offset {base + end}", f"truncated or corrupt WARC: {counted.total - end} bytes after the last complete record could not be read; the rest of the file is lost")
    except _TruncatedRecord as exc:
        b.reject(f"offset {exc.offset}", f"truncated WARC record ({exc.missing} bytes missing); the rest of the file is lost")
    except Exception as exc:  # noqa: BLE001 - warcio fails on damaged headers with any exception (AttributeError on a
        # status line it cannot split, ...): the damage is where reading stopped, named in the reject with its type
        first = decompressed_head(bytes(counted.head), BINARY_CHECK_BYTES) if end == 0 and taken is None else b"WARC/"
        why = None if first.startswith((b"WARC/", b"filedesc://")) else binary_reason(first)
        if why is not None:
            b.reject("file", f"{why}; not a WARC or ARC file, so nothing of it is read")
        else:
            b.reject(f"offset {base + end}", f"truncated or corrupt WARC ({type(exc).__name__}: {str(exc)[:200]}); the rest of the file is lost")
    if b.pending():
        yield b.take()


class _Shifted:
    """warcio's iterator over a file read from ``base`` on: record offsets are the file's."""

    def __init__(self, it: ArchiveIterator, base: int):
        self.it, self.base = it, base

    def __iter__(self):
        return iter(self.it)

    def get_record_offset(self) -> int:
        return self.base + self.it.get_record_offset()

    def get_record_length(self) -> int:
        return self.it.get_record_length()


class _TruncatedRecord(Exception):
    def __init__(self, offset: int, missing: int):
        self.offset, self.missing = offset, missing


class _Counting:
    """Counts the bytes read from a stream, so that unread trailing data can be detected.

    warcio ends iteration silently at a cut gzip member; comparing the end of
    the last complete record with the stream's length tells a cut file apart.
    """

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.total = 0
        self._tail = bytearray()  # the last bytes read, to tell padding from data
        self.head = bytearray()  # the first bytes read, to tell a binary file

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self._note(data)
        return data

    def readline(self, n: int = -1) -> bytes:
        data = self.raw.readline(n)
        self._note(data)
        return data

    def _note(self, data: bytes) -> None:
        self.total += len(data)
        self._tail = (self._tail + data)[-(1 << 16):]
        if len(self.head) < BINARY_CHECK_BYTES:
            self.head += data[: BINARY_CHECK_BYTES - len(self.head)]

    def drain(self) -> None:
        while self.read(1 << 16):
            pass

    def tail_has_data(self, end: int) -> bool:
        """True when bytes after ``end`` are more than white space padding."""
        n = self.total - end
        if n > len(self._tail):
            return True
        tail = bytes(self._tail[len(self._tail) - n :])
        if is_compressed(tail):  # e.g. an empty gzip member: compressed nothing is no data
            try:
                tail = decompress_all(tail)
            except Truncated:
                return True
        return bool(tail.strip())


def _one_record(b: ChunkBuilder, rec, it: ArchiveIterator, opts: ReadOptions) -> int:
    """Add one record; returns its offset (warcio knows it only once the record is read)."""
    kind = rec.rec_type
    if kind not in ("response", "conversion", "resource"):
        b.n_skipped += 1
        return it.get_record_offset()
    target = rec.rec_headers.get_header("WARC-Target-URI")
    if kind == "response" and rec.http_headers is not None:
        status = rec.http_headers.get_statuscode()
        ctype = rec.http_headers.get_header("Content-Type") or ""
        if not status or not status.startswith("2"):
            b.n_skipped += 1
            return it.get_record_offset()
    else:
        ctype = rec.rec_headers.get_header("Content-Type") or ""
    mime = ctype.split(";")[0].strip().lower()
    is_html = mime in _HTML_TYPES
    if not (is_html or mime.startswith("text/")):
        b.n_skipped += 1
        return it.get_record_offset()
    data = rec.content_stream().read()
    missing = getattr(rec.raw_stream, "limit", 0)
    offset = it.get_record_offset()
    if missing:
        raise _TruncatedRecord(offset, missing)
    where = f"offset {offset}"
    url = target or f"{b.source}#offset{offset}"
    b.n_bytes_read += len(data)
    charset = charset_from_content_type(ctype) or (sniff_html_charset(data) if is_html else None)
    text, why = decode(data, charset, opts.encoding)
    if text is None:
        b.reject(where, f"{why} (url {url})")
        return offset
    b.add(url, where, text, is_html, len(data))
    return offset
