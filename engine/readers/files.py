"""Single .html/.txt documents (files, folders of them, or standard input)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .base import ChunkBuilder, RawChunk, decode, sniff_html_charset
from .options import ReadOptions
from .streams import Truncated, decompress_all, empty_compressed

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
TEXT_SUFFIXES = (".txt", ".text", ".md")


def file_url(path: Path) -> str:
    return path.resolve().as_uri()


def add_document(b: ChunkBuilder, data: bytes, url: str, is_html: bool, opts: ReadOptions, source: str | None = None) -> None:
    """Add the bytes of one whole document (gzip/zstd are decompressed) as record ``file``, or a reject naming it."""
    try:
        data = decompress_all(data)
    except Truncated as exc:
        b.reject("file", f"truncated or corrupt compressed input ({exc}); the document is lost", source=source)
        return
    b.n_bytes_read += len(data)
    text, why = decode(data, sniff_html_charset(data) if is_html else None, opts.encoding)
    if text is None:
        b.reject("file", why or "unreadable", source=source)
        return
    b.add(url, "file", text, is_html, len(data), source=source)


def read_document_file(path: Path, is_html: bool, b: ChunkBuilder, opts: ReadOptions) -> None:
    """Add one .html/.txt file to the builder (or a reject naming it)."""
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        b.reject("file", f"cannot read: {exc.strerror}", source=source)
        return
    why = empty_compressed(path.name, len(data))
    if why is not None:
        b.reject("file", why, source=source)
        return
    add_document(b, data, file_url(path), is_html or opts.html, opts, source=source)


def read_document_files(docs: list[tuple[Path, bool]], source: str, opts: ReadOptions) -> Iterator[RawChunk]:
    """Documents from files, each given with whether it is HTML."""
    b = ChunkBuilder(source)
    for p, is_html in docs:
        read_document_file(p, is_html, b, opts)
        if b.full():
            yield b.take()
    if b.pending():
        yield b.take()


def read_document_stream(raw: BinaryIO, source: str, is_html: bool, opts: ReadOptions) -> Iterator[RawChunk]:
    """A whole stream as one document, with the url ``SOURCE#1``."""
    b = ChunkBuilder(source)
    add_document(b, raw.read(), f"{source}#1", is_html or opts.html, opts)
    yield b.take()
