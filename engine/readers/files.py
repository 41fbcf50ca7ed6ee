"""Single .html/.txt files and folders of input files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from .base import ChunkBuilder, RawChunk, decode, sniff_html_charset
from .options import ReadOptions

HTML_SUFFIXES = (".html", ".htm", ".xhtml")
TEXT_SUFFIXES = (".txt", ".text", ".md")


def file_url(path: Path) -> str:
    return path.resolve().as_uri()


def read_document_file(path: Path, b: ChunkBuilder, opts: ReadOptions) -> None:
    """Add one .html/.txt file to the builder (or a reject naming it)."""
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        b.reject("file", f"cannot read: {exc.strerror}", source=source)
        return
    b.n_bytes_read += len(data)
    is_html = path.suffix.lower() in HTML_SUFFIXES or opts.html
    text, why = decode(data, sniff_html_charset(data) if is_html else None, opts.encoding)
    if text is None:
        b.reject("file", why or "unreadable", source=source)
        return
    b.add(file_url(path), "file", text, is_html, len(data), source=source)


def read_document_files(paths: list[Path], source: str, opts: ReadOptions) -> Iterator[RawChunk]:
    b = ChunkBuilder(source)
    for p in paths:
        read_document_file(p, b, opts)
        if b.full():
            yield b.take()
    if b.pending():
        yield b.take()
