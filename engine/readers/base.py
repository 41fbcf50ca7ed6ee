"""Types shared by the readers: raw records in Arrow chunks, and rejects."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

import pyarrow as pa

#: Schema of the raw chunks every reader yields. ``content`` is decoded text;
#: ``is_html`` says whether it still holds markup.
RAW_SCHEMA = pa.schema(
    [
        ("url", pa.string()),
        ("source", pa.string()),
        ("record", pa.string()),
        ("content", pa.large_string()),
        ("is_html", pa.bool_()),
        ("n_bytes", pa.int64()),
    ]
)

CHUNK_BYTES = 8 << 20
CHUNK_RECORDS = 4096


@dataclass(frozen=True)
class Reject:
    """A record that was not indexed, and why."""

    source: str
    record: str
    reason: str

    def message(self) -> str:
        return f"{self.source}: {self.record}: {self.reason}"


@dataclass
class RawChunk:
    """Up to CHUNK_BYTES of raw records, plus the rejects met while reading them."""

    batch: pa.RecordBatch
    rejects: list[Reject] = field(default_factory=list)
    n_skipped: int = 0
    n_bytes_read: int = 0


class ChunkBuilder:
    """Accumulates records column-wise and cuts a RawChunk when it is full."""

    def __init__(self, source: str):
        self.source = source
        self._reset()

    def _reset(self) -> None:
        self.urls: list[str] = []
        self.sources: list[str] = []
        self.records: list[str] = []
        self.contents: list[str | bytes] = []
        self.html: list[bool] = []
        self.sizes: list[int] = []
        self.rejects: list[Reject] = []
        self.n_skipped = 0
        self.n_bytes_read = 0
        self._bytes = 0

    def add(self, url: str, record: str, content: str | bytes, is_html: bool, n_bytes: int, source: str | None = None) -> None:
        """One record; ``content`` is its text, or that text's UTF-8 bytes (already checked)."""
        self.urls.append(url)
        self.sources.append(source or self.source)
        self.records.append(record)
        self.contents.append(content)
        self.html.append(is_html)
        self.sizes.append(n_bytes)
        self._bytes += n_bytes

    def reject(self, record: str, reason: str, source: str | None = None) -> None:
        self.rejects.append(Reject(source or self.source, record, reason))

    def full(self) -> bool:
        return self._bytes >= CHUNK_BYTES or len(self.urls) >= CHUNK_RECORDS

    def take(self) -> RawChunk:
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.urls, pa.string()),
                pa.array(self.sources, pa.string()),
                pa.array(self.records, pa.string()),
                _text_column(self.contents),
                pa.array(self.html, pa.bool_()),
                pa.array(self.sizes, pa.int64()),
            ],
            schema=RAW_SCHEMA,
        )
        chunk = RawChunk(batch, self.rejects, self.n_skipped, self.n_bytes_read)
        self._reset()
        return chunk

    def pending(self) -> bool:
        return bool(self.urls or self.rejects or self.n_skipped or self.n_bytes_read)


def _text_column(contents: list[str | bytes]) -> pa.Array:
    """Texts given as strings or as checked UTF-8 bytes, as one large_string array (bytes are copied
    as they are; encoding a string of other than ASCII to UTF-8 costs a pass over it)."""
    if not any(isinstance(c, bytes) for c in contents):
        return pa.array(contents, pa.large_string())
    raw = [c if isinstance(c, bytes) else c.encode("utf-8") for c in contents]
    return pa.array(raw, pa.large_binary()).view(pa.large_string())


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.IGNORECASE)


def charset_from_content_type(value: str | None) -> str | None:
    if not value:
        return None
    m = _HEADER_CHARSET.search(value)
    return m.group(1) if m else None


def sniff_html_charset(data: bytes) -> str | None:
    m = _META_CHARSET.search(data[:4096])
    return m.group(1).decode("ascii") if m else None


_CONTROL_BYTES = bytes([*range(1, 9), *range(14, 32), 127])


def looks_binary(data: bytes) -> bool:
    """True for bytes that are not text: a NUL byte, or > 10% control bytes, in the first 8 KB."""
    head = data[:8192]
    if b"\x00" in head:
        return True
    if not head:
        return False
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    return controls > len(head) // 10


#: bytes at the start of a text input (after decompression) that tell whether it is binary
BINARY_CHECK_BYTES = 1 << 16
#: NUL and the control bytes that text does not hold (tab, newline, vertical tab, form feed and carriage return are text)
_NOT_TEXT_BYTES = bytes([*range(0, 9), *range(14, 32), 127])


def binary_reason(head: bytes) -> str | None:
    """Why the first bytes of a text input (after decompression) are binary, or None.

    Binary: more than 10% of the first ``BINARY_CHECK_BYTES`` are NUL or
    control bytes or bytes of invalid UTF-8 (random, compressed, image or
    UTF-16 bytes are far above that; UTF-8 text has none, and text in an
    8-bit charset with a few accented letters stays well under it). Used
    once per input by the readers of line-based text (JSON Lines), so that
    a binary file is one reject, not one per "line".
    """
    head = head[:BINARY_CHECK_BYTES]
    if not head:
        return None
    controls = len(head) - len(head.translate(None, _NOT_TEXT_BYTES))
    invalid = len(head) - len(head.decode("utf-8", "ignore").encode("utf-8"))
    if (controls + invalid) * 10 <= len(head):
        return None
    return (f"binary content, not text: {controls:,} NUL or control bytes and {invalid:,} bytes of invalid UTF-8 "
            f"in its first {len(head):,} bytes")


def decode(data: bytes, charset: str | None, forced: str | None = None) -> tuple[str | bytes | None, str | None]:
    """Decode record bytes; returns ``(text, None)`` or ``(None, reason)``.

    Policy (documented in docs/architecture.md): bytes that look binary are
    rejected; a forced or declared charset is used when Python knows it;
    otherwise the bytes must be valid UTF-8, and invalid UTF-8 is rejected
    (never guessed, never silently replaced), naming the byte offset.
    Valid UTF-8 is returned as the bytes themselves (checked by decoding, not
    kept decoded): ``ChunkBuilder`` stores them without encoding a string back.
    """
    if looks_binary(data):
        return None, "binary content (NUL or control bytes), not text"
    name = forced or charset
    if name:
        try:
            codecs.lookup(name)
        except LookupError:
            if forced:
                return None, f"unknown encoding {forced!r} given with --encoding"
            name = None
    if name and codecs.lookup(name).name != "utf-8":
        try:
            return data.decode(name), None
        except UnicodeDecodeError as exc:
            return None, f"bytes invalid in declared charset {name} at byte {exc.start}"
    try:
        data.decode("utf-8")
        return data, None
    except UnicodeDecodeError as exc:
        return None, f"invalid UTF-8 at byte {exc.start}; pass --encoding to name the charset"
