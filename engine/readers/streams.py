"""Opening (possibly compressed) byte streams and reading them line by line."""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import zstandard

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


#: file name suffixes of gzip/zstd compression (after the format's own suffix)
COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd")


class Truncated(Exception):
    """A compressed stream ended early or is corrupt."""


def empty_compressed(name: str, size: int) -> str | None:
    """The reject reason of a 0-byte file whose name says it is compressed, else None.

    A gzip or zstd stream holds at least a header (gzip of nothing is 20
    bytes), so such a file was cut or never written; a 0-byte plain file is
    read as what it is (no records; an HTML/text file: an empty document).
    """
    if size == 0 and name.lower().endswith(COMPRESSION_SUFFIXES):
        return "empty compressed file (0 bytes, not even a gzip/zstd header): cut or never written; nothing to read"
    return None


def decompressing(raw: BinaryIO, head: bytes) -> BinaryIO:
    """Wrap ``raw`` in a gzip or zstd decompressor when ``head`` shows one."""
    if head.startswith(GZIP_MAGIC):
        return DecompressingReader(raw, lambda: zlib.decompressobj(wbits=31), "gzip")
    if head.startswith(ZSTD_MAGIC):
        return DecompressingReader(raw, lambda: zstandard.ZstdDecompressor().decompressobj(), "zstd")
    return raw


class DecompressingReader(io.RawIOBase):
    """Reads concatenated gzip members or zstd frames.

    Every byte that decompresses is returned before ``Truncated`` is raised
    for an input that ends inside a member/frame or is corrupt. (``gzip``'s
    reader drops the tail of its last read at a cut, and ``zstandard``'s
    stream reader stops silently, which would hide that records are missing.)
    """

    def __init__(self, raw: BinaryIO, make, name: str, block: int = 1 << 16):
        self._raw = raw
        self._make = make
        self._name = name
        self._block = block
        self._dobj = make()
        self._in_frame = False
        self._buf = b""
        self._eof = False
        self._error: Truncated | None = None

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        if not self._buf and self._error is not None:
            raise self._error
        while not self._buf and not self._eof:
            data = self._raw.read(self._block)
            if not data:
                self._eof = True
                if self._in_frame:
                    self._error = Truncated(f"{self._name} stream ended inside a compressed block")
                    if not self._buf:
                        raise self._error
                return
            while data:
                self._in_frame = True
                try:
                    out = self._dobj.decompress(data)
                except (zlib.error, zstandard.ZstdError) as exc:
                    self._eof = True
                    self._error = Truncated(f"corrupt {self._name} data: {exc}")
                    if not self._buf:
                        raise self._error from exc
                    return
                self._buf += out
                if self._dobj.eof:
                    data = self._dobj.unused_data
                    self._dobj = self._make()
                    self._in_frame = False
                else:
                    data = b""

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = []
            while True:
                self._fill()
                if not self._buf:
                    return b"".join(parts)
                parts.append(self._buf)
                self._buf = b""
        self._fill()
        out, self._buf = self._buf[:size], self._buf[size:]
        return out

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def is_compressed(head: bytes) -> bool:
    return head.startswith((GZIP_MAGIC, ZSTD_MAGIC))


def decompress_all(data: bytes) -> bytes:
    """``data`` decompressed when it starts with gzip or zstd magic, else as is.

    Raises ``Truncated`` for a cut or corrupt compressed input.
    """
    if not is_compressed(data):
        return data
    return decompressing(io.BytesIO(data), data[:8]).read()


def decompressed_head(head: bytes, n: int = 4096) -> bytes:
    """Up to ``n`` bytes decompressed from the first bytes of a compressed
    input (as many as come out before a cut or damage); ``head`` itself when
    it is not compressed."""
    if not is_compressed(head):
        return head[:n]
    stream = decompressing(io.BytesIO(head), head[:8])
    out = b""
    try:
        while len(out) < n:
            data = stream.read(n - len(out))
            if not data:
                break
            out += data
    except Truncated:
        pass
    return out[:n]


def _read_into(raw: BinaryIO, n: int, parts: list[bytes]) -> None:
    """Append reads of ``raw`` to ``parts`` until they hold ``n`` bytes or the stream ends (a pipe
    may hand them over in several reads); ``parts`` keeps what was read if a read raises."""
    got = 0
    while got < n:
        data = raw.read(n - got)
        if not data:
            break
        parts.append(data)
        got += len(data)


def read_head(raw: BinaryIO, n: int) -> bytes:
    """The first ``n`` bytes of a stream (fewer only at its end)."""
    parts: list[bytes] = []
    _read_into(raw, n, parts)
    return b"".join(parts)


def read_head_safely(raw: BinaryIO, n: int) -> tuple[bytes, BinaryIO]:
    """The first ``n`` bytes of a stream (fewer at its end, or before damage), and
    a stream that reads everything from the start again: those bytes, then the
    rest, or then the error that stopped the reading (a cut or corrupt
    compressed input is reported where the reader meets it, as before)."""
    parts: list[bytes] = []
    try:
        _read_into(raw, n, parts)
    except Exception as exc:  # noqa: BLE001 - re-raised by the next read, where the reader handles it
        head = b"".join(parts)
        return head, Prefixed(head, _Failing(exc))
    head = b"".join(parts)
    return head, Prefixed(head, raw)


class _Failing:
    """A stream whose next read raises ``exc`` (again at every read)."""

    def __init__(self, exc: BaseException):
        self._exc = exc

    def read(self, n: int = -1) -> bytes:
        raise self._exc


class Prefixed(io.RawIOBase):
    """``head`` (bytes already read from ``raw``) followed by the rest of ``raw``."""

    def __init__(self, head: bytes, raw: BinaryIO):
        self._head = memoryview(head)
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        readinto = getattr(self._raw, "readinto", None)
        if readinto is not None:  # straight into the caller's buffer (no copy of each block)
            n = readinto(b)
            if n is not None:
                return n
        data = self._raw.read(len(b))
        b[: len(data)] = data
        return len(data)


def peek(raw: BinaryIO, n: int = 8) -> tuple[BinaryIO, bytes]:
    """First ``n`` bytes of a stream without consuming them (buffers when needed)."""
    if not isinstance(raw, io.BufferedReader):
        raw = io.BufferedReader(raw)  # type: ignore[arg-type]
    return raw, raw.peek(n)[:n]


def _fill_from(stream: BinaryIO, buf: bytearray, start: int) -> tuple[int, Truncated | None]:
    """Read into ``buf[start:]`` until it is full or the stream ends: ``(bytes in buf, the cut if one
    was met)``.

    A single read may return less than asked before the end: zstandard's
    reader returns about one frame's output (128-256 KB) per call, which made
    a .jsonl.zst input arrive in chunks of ~60 records, each paying its own
    round trips to the catalog.
    """
    view = memoryview(buf)
    pos = start
    readinto = getattr(stream, "readinto", None)
    try:
        while pos < len(buf):
            try:
                if readinto is not None:
                    n = readinto(view[pos:])
                else:
                    data = stream.read(len(buf) - pos)
                    n = len(data)
                    view[pos : pos + n] = data
            except Truncated as exc:
                return pos, exc
            except (EOFError, zlib.error, OSError, zstandard.ZstdError) as exc:
                return pos, Truncated(str(exc) or type(exc).__name__)
            if not n:
                break
            pos += n
        return pos, None
    finally:
        view.release()


def iter_blocks(stream: BinaryIO, block: int = 8 << 20) -> Iterator[bytes | bytearray]:
    """Runs of whole lines, about ``block`` bytes each, each ending with a newline
    (but perhaps the last, at the end of the stream).

    Each run is read into a ``bytearray`` of its own, after the part line the run before left:
    its bytes are copied once from the stream, not again to join that part line and to cut the
    run at its last newline (two copies of every block, and the page faults of their memory).

    Raises ``Truncated`` when the decompressor reports a cut or corrupt
    stream, after every complete line before the cut was yielded; the partial
    line at the cut is dropped (the truncation reject covers it).
    """
    rest = b""
    while True:
        buf = bytearray(len(rest) + block)
        buf[: len(rest)] = rest
        end, cut_exc = _fill_from(stream, buf, len(rest))
        if cut_exc is not None:  # copied: the error's traceback may still hold a view of buf
            whole = bytes(buf[: buf.rfind(b"\n", 0, end) + 1])
            if whole:
                yield whole
            raise cut_exc
        if end == len(rest):  # the stream ended
            break
        cut = buf.rfind(b"\n", 0, end) + 1
        rest = bytes(buf[cut:end])
        if cut == 0:
            continue
        try:
            del buf[cut:]
        except BufferError:  # a view of buf is still alive (a stream's frame in a reference cycle): copy
            buf = bytes(buf[:cut])
        yield buf
    if rest:
        yield rest
