"""Input readers. Each yields ``RawChunk``s: Arrow batches of raw records plus rejects.

Formats: WARC/WET (``.warc``, ``.warc.gz``, ``.wet``, ``.wet.gz``), JSON Lines
(``.jsonl``/``.ndjson``, optionally ``.gz``/``.zst``), Parquet, single
``.html``/``.txt`` files, folders (walked recursively in sorted order, every
supported file read by its suffix), and ``-`` for standard input (format
sniffed from the first bytes, or given with ``--format``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import InputError
from .base import RAW_SCHEMA, RawChunk, Reject
from .files import HTML_SUFFIXES, TEXT_SUFFIXES, read_document_files
from .jsonl import read_jsonl
from .options import ReadOptions
from .parquet import read_parquet
from .streams import decompressing, peek
from .warc import read_warc

__all__ = ["RAW_SCHEMA", "RawChunk", "Reject", "ReadOptions", "FORMATS", "detect_format", "read_input"]

FORMATS = ("warc", "jsonl", "parquet", "html", "text")


def detect_format(name: str) -> str | None:
    """Format implied by a file name, or None."""
    n = name.lower()
    for suffix in (".gz", ".zst", ".zstd"):
        if n.endswith(suffix):
            n = n[: -len(suffix)]
    if n.endswith((".warc", ".wet", ".arc")):
        return "warc"
    if n.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if n.endswith(".parquet"):
        return "parquet"
    if n.endswith(HTML_SUFFIXES):
        return "html"
    if n.endswith(TEXT_SUFFIXES):
        return "text"
    return None


def read_input(path: str, opts: ReadOptions) -> Iterator[RawChunk]:
    """Stream the records of one input (file, folder or ``-``).

    Raises ``InputError`` before yielding anything when the input cannot be
    read at all (missing path, unknown format); damage inside a file becomes
    rejects instead.
    """
    if path == "-":
        return _read_stream(sys.stdin.buffer, "<stdin>", opts.fmt, opts)
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file or folder")
    if p.is_dir():
        return _read_folder(p, opts)
    fmt = opts.fmt or detect_format(p.name)
    if fmt is None:
        raise InputError(f"{path}: cannot tell the format from the file name")
    return _read_file(p, fmt, opts)


def _read_file(p: Path, fmt: str, opts: ReadOptions) -> Iterator[RawChunk]:
    source = str(p)
    if fmt == "parquet":
        yield from read_parquet(source, source, opts)
    elif fmt in ("html", "text"):
        yield from read_document_files([p], source, opts)
    else:
        with open(p, "rb") as fh:
            yield from _read_stream(fh, source, fmt, opts)


def _read_stream(raw: BinaryIO, source: str, fmt: str | None, opts: ReadOptions) -> Iterator[RawChunk]:
    raw, head = peek(raw)
    if fmt == "warc" or (fmt is None and _sniff_warc(raw)):
        yield from read_warc(raw, source, opts)
        return
    stream = decompressing(raw, head)
    if fmt is None:
        stream, inner = peek(stream)
        fmt = "jsonl" if inner.lstrip()[:1] in (b"{", b"") else "text"
    if fmt == "jsonl":
        yield from read_jsonl(stream, source, opts)
    elif fmt in ("text", "html"):
        from .base import ChunkBuilder, decode

        b = ChunkBuilder(source)
        data = stream.read()
        b.n_bytes_read = len(data)
        text, why = decode(data, None, opts.encoding)
        if text is None:
            b.reject("record 1", why or "unreadable")
        else:
            b.add(f"{source}#1", "record 1", text, fmt == "html" or opts.html, len(data))
        yield b.take()
    else:
        raise InputError(f"{source}: format {fmt!r} cannot be read from a stream")


def _sniff_warc(raw: BinaryIO) -> bool:
    head = raw.peek(512)[:512]  # type: ignore[attr-defined]
    if head.startswith(b"WARC/"):
        return True
    if head.startswith(b"\x1f\x8b"):
        import zlib

        try:
            return zlib.decompressobj(31).decompress(head, 5).startswith(b"WARC/")
        except zlib.error:
            return False
    return False


def _read_folder(root: Path, opts: ReadOptions) -> Iterator[RawChunk]:
    docs: list[Path] = []
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        fmt = detect_format(p.name)
        if fmt in ("html", "text"):
            docs.append(p)
        elif fmt is not None:
            if docs:
                yield from read_document_files(docs, str(root), opts)
                docs = []
            yield from _read_file(p, fmt, opts)
    if docs:
        yield from read_document_files(docs, str(root), opts)
