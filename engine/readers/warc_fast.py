"""The fast path of the WARC reader: fastwarc frames the records, warcio reads each one.

warcio's pure-Python framing (finding each record's gzip member, reading
and splitting its WARC header lines) was most of a WARC's read cost: on the
two releases of the documentation site (914 MB of HTML in 172 MB of gzip)
3.1 of warcio's 3.9 CPU-seconds, against 1.15 s for fastwarc (compiled) to
decompress and frame the same records (docs/benchmarks.md, "WARC reading").

Here fastwarc only frames: it gives each record's offset, WARC headers and
block. Everything a record becomes is still decided by warcio's own code on
those bytes, as in the plain path (``warc._one_record``): the target URI's
clean-up, the HTTP status line and headers (warcio's parser, verifying),
chunked and compressed payloads, and a payload shorter than its length.

A file is read this way only while nothing is irregular. Each record is
taken only once fastwarc has framed the record after it, and the last
record, with whatever follows it, is always left to warcio; at anything
irregular (an exception from either library, a WARC length that does not
parse or does not match the block read) reading stops before that record
and the plain path goes on from the record before it. Damage, trailing data and ARC
files are thus met by warcio exactly as when it reads the whole file, so a
file gives the same documents, skips and rejects either way (a property
test compares the two on mutated files).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

from warcio.limitreader import LimitReader
from warcio.recordloader import ArcWarcRecord, ArcWarcRecordLoader
from warcio.statusandheaders import StatusAndHeaders

from .base import ChunkBuilder, RawChunk
from .options import ReadOptions

#: whether ``read_warc`` tries this path on regular files (tests turn it off to compare)
ENABLED = True

#: as the plain path's iterator builds its loader (`ArchiveIterator(..., arc2warc=True)`, HTTP status lines not verified)
_LOADER = ArcWarcRecordLoader(verify_http=False, arc2warc=True)
#: in a header as fastwarc parsed it: a line break it did not split at (fastwarc ends lines at CRLF only,
#: warcio at LF), or bytes it could not decode (warcio falls back to Latin-1)
_IRREGULAR = ("\r", "\n", "\ufffd")
_GZIP = b"\x1f\x8b"
#: the first lines warcio reads as a WARC record's (its prefixes, upper-cased); fastwarc frames others too
_WARC_VERSIONS = tuple(ArcWarcRecordLoader.WARC_TYPES)


class _Irregular(Exception):
    """Something the plain path must read itself."""


class _At:
    """What ``warc._one_record`` asks of warcio's iterator: the record's offset."""

    def __init__(self, offset: int):
        self.offset = offset

    def get_record_offset(self) -> int:
        return self.offset


def _header_bytes(headers, fields) -> int:
    """The length of a WARC header block written the standard way (``Name: value`` lines, CRLF ends)."""
    return len(headers.status_line.encode()) + 4 + sum(len(n.encode()) + len(v.encode()) + 4 for n, v in fields)


def _record(headers, block: bytes) -> tuple[ArcWarcRecord, int]:
    """The warcio record of one framed record (its WARC headers and its whole block), and the length of the
    record as written the standard way (header block, block, CRLF CRLF)."""
    fields = list(headers.astuples())
    if any(c in x for name, value in fields for x in (name, value) for c in _IRREGULAR):
        raise _Irregular("a header line warcio would split or decode otherwise")
    line = headers.status_line
    if any(c in line for c in _IRREGULAR) or not line.rstrip().upper().startswith(_WARC_VERSIONS):
        raise _Irregular("a first line warcio does not read as a WARC record's")
    rec_headers = StatusAndHeaders(headers.status_line, fields, protocol="")
    kind = rec_headers.get_header("WARC-Type")
    uri = _LOADER._ensure_target_uri_format(rec_headers)
    declared = rec_headers.get_header("Content-Length")
    try:
        length = int(declared)
    except (TypeError, ValueError):
        raise _Irregular("no usable Content-Length") from None
    if length != len(block):
        raise _Irregular("block shorter or longer than its Content-Length")
    stream = LimitReader.wrap_stream(io.BytesIO(block), length)
    http = _LOADER.load_http_headers(kind, uri, stream, length)
    size = _header_bytes(headers, fields) + length + 4
    return ArcWarcRecord("warc", kind, rec_headers, stream, http, rec_headers.get_header("Content-Type"), length), size


def _check_frame(fd: int, gzipped: bool, start: int, size: int, following: int) -> None:
    """That the record at ``start`` (``size`` bytes written the standard way) is all there is up to the
    record framed after it, at ``following``: fastwarc skips what is not a record to find the next one,
    where warcio stops. Uncompressed: the record ends with CRLF CRLF exactly there. Gzipped, a member per
    record: a member starts at each, and the one ending at ``following`` holds ``size`` bytes (its ISIZE)."""
    if gzipped:
        ok = (os.pread(fd, 2, start) == _GZIP and os.pread(fd, 2, following) == _GZIP
              and int.from_bytes(os.pread(fd, 4, following - 4), "little") == size & 0xFFFFFFFF)
    else:
        ok = following == start + size and os.pread(fd, 4, following - 4) == b"\r\n\r\n"
    if not ok:
        raise _Irregular(f"the record at offset {start} is not followed directly by the next one")


def fast_records(fh, b: ChunkBuilder, opts: ReadOptions, one_record) -> Iterator[RawChunk]:
    """Add the records of a regular file ``fh`` (at its start) that fastwarc frames regularly, yielding full
    chunks. Returns the offset of the last record taken (the plain path reads on from it, taking it again
    only to learn where it ends, as it would have), or None when none was."""
    from fastwarc.warc import ArchiveIterator

    fd = fh.fileno()
    gzipped = os.pread(fd, 2, 0) == _GZIP
    held = None  # (offset, headers, block) of the last record framed, not yet taken
    taken = None
    try:
        for rec in ArchiveIterator(fh, parse_http=False, auto_decode="none"):
            framed = (rec.stream_pos, rec.headers, rec.reader.read())
            if held is not None:
                offset, headers, block = held
                record, size = _record(headers, block)
                _check_frame(fd, gzipped, offset, size, framed[0])
                one_record(b, record, _At(offset), opts)
                taken = offset
                if b.full():
                    yield b.take()
            held = framed
    except Exception:  # noqa: BLE001 - fastwarc's OSError, warcio's parse errors, _Irregular: the plain path reads on
        pass
    return taken
