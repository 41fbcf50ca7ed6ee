"""Input readers. Each yields ``RawChunk``s: Arrow batches of raw records plus rejects.

Formats, by file name suffix (``SUFFIXES``, any case, each optionally followed
by ``.gz``, ``.zst`` or ``.zstd``): WARC/WET/ARC, JSON Lines, Parquet, single
HTML and text documents. Folders are walked recursively in sorted order and
every file with one of those suffixes is read (docs/cli.md lists them);
``-`` is standard input (format sniffed from the first bytes, or given with
``--format``; then read like a file of that format).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import InputError
from .base import RAW_SCHEMA, ChunkBuilder, RawChunk, Reject
from .files import HTML_SUFFIXES, TEXT_SUFFIXES, read_document_files, read_document_stream
from .jsonl import read_jsonl
from .options import ReadOptions
from .streams import COMPRESSION_SUFFIXES, Prefixed, decompressed_head, decompressing, empty_compressed, peek, read_head

__all__ = ["RAW_SCHEMA", "RawChunk", "Reject", "ReadOptions", "FORMATS", "SUFFIXES", "COMPRESSION_SUFFIXES",
           "detect_format", "read_input", "sniff_format"]

FORMATS = ("warc", "jsonl", "parquet", "html", "text")

#: The file name suffixes of each format (any case), each also read with one of
#: ``COMPRESSION_SUFFIXES`` after it. A named file and a folder walk go by
#: these alone (docs/cli.md has the same table; tests/test_input_edges.py checks both).
SUFFIXES: dict[str, tuple[str, ...]] = {
    "warc": (".warc", ".wet", ".arc"),
    "jsonl": (".jsonl", ".ndjson", ".json"),
    "parquet": (".parquet",),
    "html": HTML_SUFFIXES,
    "text": TEXT_SUFFIXES,
}


def detect_format(name: str) -> str | None:
    """Format implied by a file name (``SUFFIXES``), or None."""
    n = name.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if n.endswith(suffix):
            n = n[: -len(suffix)]
            break
    for fmt, suffixes in SUFFIXES.items():
        if n.endswith(suffixes):
            return fmt
    return None


def read_input(path: str, opts: ReadOptions) -> Iterator[RawChunk]:
    """Stream the records of one input (file, folder or ``-``).

    Raises ``InputError`` before yielding anything when the input cannot be
    read at all (missing path, unknown format); damage inside a file becomes
    rejects instead. Standard input is read exactly like a file holding the
    same bytes whose name tells the format ``sniff_format`` finds (or
    ``--format`` names): the same records, rejects and counts.
    """
    if opts.fmt is not None and opts.fmt not in FORMATS:
        raise InputError(f"unknown format {opts.fmt!r}", hint=f"pass --format with one of {', '.join(FORMATS)}")
    if path == "-":
        return _read_stdin(opts)
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file or folder", hint="check the path; - reads standard input")
    if p.is_dir():
        return _read_folder(p, opts)
    fmt = opts.fmt or detect_format(p.name)
    if fmt is None:
        raise InputError(f"{path}: cannot tell the format from the file name",
                         hint=f"pass --format ({', '.join(FORMATS)}), or name the file by its format (docs/cli.md lists the suffixes)")
    return _read_file(p, fmt, opts)


#: bytes of standard input read ahead to tell its format
SNIFF_BYTES = 1 << 16

_HTML_STARTS = (b"<!doctype html", b"<html")


def sniff_format(head: bytes) -> str:
    """The format of an input from its first bytes (standard input has no name).

    After gzip/zstd decompression: Parquet (``PAR1``), WARC (``WARC/``, or
    ``filedesc://`` for ARC), JSON Lines (``{`` first, or nothing at all),
    HTML (``<`` first and ``<!doctype html`` or ``<html`` in the first
    4 KB); anything else is one plain-text document. White space and a
    UTF-8 byte order mark before the first character are skipped.
    """
    inner = decompressed_head(head)
    if inner.startswith(b"PAR1"):  # compressed, it is no more readable than a file parquet.gz
        return "parquet"
    if inner.startswith((b"WARC/", b"filedesc://")):
        return "warc"
    start = inner.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n\f\v")
    if start[:1] in (b"{", b""):
        return "jsonl"
    if start[:1] == b"<" and any(m in start.lower() for m in _HTML_STARTS):
        return "html"
    return "text"


def _read_stdin(opts: ReadOptions) -> Iterator[RawChunk]:
    raw = sys.stdin.buffer
    head = read_head(raw, SNIFF_BYTES)
    fmt = opts.fmt or sniff_format(head)
    return _read_stream(Prefixed(head, raw), "<stdin>", fmt, opts)


def _read_file(p: Path, fmt: str, opts: ReadOptions) -> Iterator[RawChunk]:
    source = str(p)
    why = empty_compressed(p.name, p.stat().st_size) if fmt not in ("html", "text") else None  # (documents: per file)
    if why is not None:
        yield _one_reject(source, why)
    elif fmt == "parquet":
        from .parquet import read_parquet  # on first use: Arrow's Parquet and file systems take 25 ms to import

        yield from read_parquet(source, source, opts)
    elif fmt in ("html", "text"):
        yield from read_document_files([(p, fmt == "html")], source, opts)
    else:
        with open(p, "rb") as fh:
            yield from _read_stream(fh, source, fmt, opts)


def _one_reject(source: str, reason: str) -> RawChunk:
    b = ChunkBuilder(source)
    b.reject("file", reason)
    return b.take()


def _read_stream(raw: BinaryIO, source: str, fmt: str, opts: ReadOptions) -> Iterator[RawChunk]:
    """An input of a known format from a stream: what ``_read_file`` does with a file."""
    raw, head = peek(raw)
    if fmt == "warc":
        from .warc import read_warc  # on first use: the WARC readers take 28 ms to import

        yield from read_warc(raw, source, opts)
    elif fmt == "jsonl":
        # the decompressor is read directly: a buffered reader around it would
        # drop what it decompressed before a cut or damage
        yield from read_jsonl(decompressing(raw, head), source, opts)
    elif fmt == "parquet":
        import pyarrow as pa

        from .parquet import read_parquet

        yield from read_parquet(pa.BufferReader(raw.read()), source, opts)
    elif fmt in ("html", "text"):
        yield from read_document_stream(raw, source, fmt == "html", opts)
    else:
        raise InputError(f"{source}: unknown format {fmt!r}", hint=f"pass --format with one of {', '.join(FORMATS)}")


def _read_folder(root: Path, opts: ReadOptions) -> Iterator[RawChunk]:
    docs: list[tuple[Path, bool]] = []
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        fmt = detect_format(p.name)
        if fmt in ("html", "text"):
            docs.append((p, fmt == "html"))
        elif fmt is not None:
            if docs:
                yield from read_document_files(docs, str(root), opts)
                docs = []
            yield from _read_file(p, fmt, opts)
    if docs:
        yield from read_document_files(docs, str(root), opts)
