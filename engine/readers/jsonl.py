"""JSON Lines reader (plain, .gz or .zst): one JSON object per line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO

from .base import ChunkBuilder, RawChunk, looks_binary
from .options import ReadOptions, record_url
from .streams import Truncated, iter_lines


def read_jsonl(stream: BinaryIO, source: str, opts: ReadOptions) -> Iterator[RawChunk]:
    """Yield chunks of records; every bad line becomes a reject naming its line number."""
    b = ChunkBuilder(source)
    lineno = 0
    try:
        for line in iter_lines(stream):
            lineno += 1
            b.n_bytes_read += len(line) + 1
            _one_line(b, line, lineno, source, opts)
            if b.full():
                yield b.take()
    except Truncated as exc:
        b.reject(f"line {lineno + 1}", f"truncated or corrupt compressed input after line {lineno} ({exc}); the rest of the file is lost")
    if b.pending():
        yield b.take()


def _one_line(b: ChunkBuilder, line: bytes, lineno: int, source: str, opts: ReadOptions) -> None:
    rec = f"line {lineno}"
    if not line.strip():
        return
    try:
        text_line = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        b.reject(rec, f"invalid UTF-8 at byte {exc.start} of the line (JSON must be UTF-8)")
        return
    try:
        obj = json.loads(text_line)
    except json.JSONDecodeError as exc:
        b.reject(rec, f"malformed JSON: {exc.msg} at column {exc.colno}")
        return
    if not isinstance(obj, dict):
        b.reject(rec, f"expected a JSON object, got {type(obj).__name__}")
        return
    value = obj.get(opts.text_field)
    if value is None:
        b.reject(rec, f"missing text field {opts.text_field!r} (fields: {', '.join(sorted(obj))[:200]})")
        return
    if not isinstance(value, str):
        b.reject(rec, f"text field {opts.text_field!r} is a {type(value).__name__}, not a string")
        return
    if "\x00" in value or looks_binary(value[:8192].encode("utf-8", "surrogatepass")):
        b.reject(rec, "binary content (NUL or control characters), not text")
        return
    b.add(record_url(obj, opts, source, rec), rec, value, opts.html, len(line))
