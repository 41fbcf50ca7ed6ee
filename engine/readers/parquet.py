"""Parquet reader: streams row groups as Arrow batches, never the whole file."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .base import ChunkBuilder, RawChunk, looks_binary
from .options import ReadOptions


#: a string value that is not valid UTF-8 (``_strings``)
_INVALID = object()


def _strings(col: pa.Array) -> list:
    """The Python values of a string column. Arrow does not check the UTF-8 of what a Parquet file
    holds, so a damaged value would fail the whole batch's conversion: it is ``_INVALID`` instead."""
    try:
        return col.to_pylist()
    except UnicodeDecodeError:
        out: list = []
        for v in pc.cast(col, pa.large_binary()).to_pylist():
            try:
                out.append(None if v is None else v.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(_INVALID)
        return out


def read_parquet(path: str | pa.NativeFile, source: str, opts: ReadOptions) -> Iterator[RawChunk]:
    """Yield chunks of records; rows with a null or non-text value become rejects naming the row.

    ``path`` is a file name, or the whole file in memory (standard input).
    """
    b = ChunkBuilder(source)
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        b.reject("file", f"not a readable Parquet file: {exc}")
        yield b.take()
        return
    names = pf.schema_arrow.names
    if opts.text_field not in names:
        b.reject("file", f"missing text column {opts.text_field!r} (columns: {', '.join(names)[:200]})")
        yield b.take()
        return
    text_type = pf.schema_arrow.field(opts.text_field).type
    if not (pa.types.is_string(text_type) or pa.types.is_large_string(text_type)):
        b.reject("file", f"text column {opts.text_field!r} has type {text_type}, not string")
        yield b.take()
        return
    id_cols = [opts.id_field] if opts.id_field else [c for c in ("url", "id") if c in names]
    if opts.id_field and opts.id_field not in names:
        b.reject("file", f"missing id column {opts.id_field!r} (columns: {', '.join(names)[:200]})")
        yield b.take()
        return
    row0 = 0
    try:
        for batch in pf.iter_batches(batch_size=2048, columns=[opts.text_field, *id_cols]):
            texts = _strings(batch.column(opts.text_field))
            ids = [[None if v is _INVALID else v for v in _strings(pc.cast(batch.column(c), pa.string()))] for c in id_cols]
            for i, text in enumerate(texts):
                rec = f"row {row0 + i}"
                if text is None:
                    b.reject(rec, f"text field {opts.text_field!r} is null")
                    continue
                if text is _INVALID:
                    b.reject(rec, f"text field {opts.text_field!r} is not valid UTF-8 (damaged data)")
                    continue
                if "\x00" in text or looks_binary(text[:8192].encode("utf-8", "surrogatepass")):
                    b.reject(rec, "binary content (NUL or control characters), not text")
                    continue
                url = next((col[i] for col in ids if col[i]), None) or f"{source}#row{row0 + i}"
                n = len(text.encode("utf-8"))
                b.n_bytes_read += n
                b.add(url, rec, text, opts.html, n)
                if b.full():
                    yield b.take()
            row0 += batch.num_rows
    except (pa.ArrowInvalid, OSError) as exc:
        b.reject(f"row {row0}", f"corrupt or truncated Parquet data after row {row0} ({exc}); the rest of the file is lost")
    if b.pending():
        yield b.take()
