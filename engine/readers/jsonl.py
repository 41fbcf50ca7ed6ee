"""JSON Lines reader (plain, .gz or .zst): one JSON object per line.

Blocks of lines are parsed by Arrow's JSON reader straight into Arrow
columns (only the text and id fields are kept). A block Arrow refuses, or
one with anything the fast path cannot name by line (blank lines, invalid
UTF-8, a non-object line, a field of another type, a duplicate key), is
parsed again line by line with ``json``, which names every bad line; both
paths give the same records and rejects.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from .base import BINARY_CHECK_BYTES, RAW_SCHEMA, ChunkBuilder, RawChunk, binary_reason, looks_binary
from .options import ReadOptions, record_url
from .streams import Truncated, iter_blocks, read_head_safely

_CONTROL_RE2 = "[\\x{00}-\\x{08}\\x{0e}-\\x{1f}\\x{7f}]"


def read_jsonl(stream: BinaryIO, source: str, opts: ReadOptions) -> Iterator[RawChunk]:
    """Yield chunks of records; every bad line becomes a reject naming its line number.

    A binary input (``binary_reason`` of its first 64 KB, after
    decompression) is one reject, record ``file``, and is not read further.
    """
    b = ChunkBuilder(source)
    head, stream = read_head_safely(stream, BINARY_CHECK_BYTES)
    why = binary_reason(head)
    if why is not None:
        b.n_bytes_read += len(head)
        b.reject("file", f"{why}; JSON Lines is UTF-8 text, so nothing of the file is read")
        yield b.take()
        return
    lineno = 0
    try:
        for block in iter_blocks(stream):
            ends = _line_ends(block)
            fast = _fast_block(block, lineno, source, opts, ends)
            if fast is not None:
                if b.pending():
                    yield b.take()
                yield fast
                lineno += ends.size
                continue
            lines = block.split(b"\n")
            if block.endswith(b"\n"):
                lines.pop()
            for line in lines:
                lineno += 1
                b.n_bytes_read += len(line) + 1
                _one_line(b, line, lineno, source, opts)
                if b.full():
                    yield b.take()
    except Truncated as exc:
        b.reject(f"line {lineno + 1}", f"truncated or corrupt compressed input after line {lineno} ({exc}); the rest of the file is lost")
    if b.pending():
        yield b.take()


def _fields(opts: ReadOptions) -> list[str]:
    return [opts.id_field] if opts.id_field else ["url", "id"]


def _line_ends(block: bytes) -> np.ndarray:
    """Where each line of ``block`` ends: its line feed's offset, or the block's length for a last
    line without one (numpy's compare runs without the interpreter's lock; ``bytes.count`` holds it)."""
    ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    if not block.endswith(b"\n"):
        ends = np.append(ends, len(block))
    return ends


def _fast_block(block: bytes, first_line: int, source: str, opts: ReadOptions, ends: np.ndarray) -> RawChunk | None:
    """The block's records via Arrow's JSON reader, or None when the line-by-line path must decide;
    ``ends``: ``_line_ends(block)``."""
    ids = _fields(opts)
    if opts.text_field in ids:
        return None
    schema = pa.schema([(opts.text_field, pa.large_string())] + [(f, pa.string()) for f in ids])
    try:
        table = pj.read_json(
            pa.BufferReader(block),  # the block's own bytes (a BytesIO would copy a bytearray)
            read_options=pj.ReadOptions(use_threads=False, block_size=max(len(block), 1 << 20) + 1),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
        table.validate(full=True)  # Arrow's JSON reader does not check UTF-8
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    n_lines = int(ends.size)
    if table.num_rows != n_lines:  # Arrow skips blank lines: rows would not map to lines
        return None
    text = table.column(opts.text_field).combine_chunks()
    # lines whose text holds control characters: the same test as the slow path, on the lines whose
    # bytes allow one (reading rust-1.63's 78 MB took 0.25 s with the test of every text, 0.22 s so)
    maybe = _control_candidates(block, ends)
    hit = pc.fill_null(pc.match_substring_regex(text.take(pa.array(maybe)), _CONTROL_RE2), False) if maybe.size else None
    suspect = maybe[hit.to_numpy(zero_copy_only=False)] if hit is not None else maybe
    binary = [int(i) for i in suspect if _is_binary(text[int(i)].as_py())]
    missing = np.flatnonzero(text.is_null().to_numpy(zero_copy_only=False))
    line_no = np.arange(first_line + 1, first_line + 1 + n_lines)
    chunk_rejects = []
    bad = np.zeros(n_lines, dtype=bool)
    if missing.size or binary:
        names_of = None
        for i in sorted([*missing.tolist(), *binary]):
            if text[i].is_valid:
                reason = "binary content (NUL or control characters), not text"
            else:
                if names_of is None:
                    names_of = block.split(b"\n")
                reason = _no_text(json.loads(names_of[i]), opts.text_field)
            chunk_rejects.append((i, reason))
            bad[i] = True
    # the url: first non-empty id field, else SOURCE#lineN
    url = None
    for f in ids:
        col = table.column(f).combine_chunks()
        col = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)
        url = col if url is None else pc.coalesce(url, col)
    fallback = pa.array([f"{source}#line{n}" for n in line_no.tolist()], pa.string())
    url = pc.coalesce(url, fallback)
    sizes = np.diff(np.concatenate([[-1], ends]))  # line length + newline
    keep = pa.array(~bad)
    kept = (lambda col: col.filter(keep)) if bad.any() else (lambda col: col)  # no copy of a block without a reject
    batch = pa.RecordBatch.from_arrays(
        [
            kept(url),
            pa.array(np.full(int((~bad).sum()), source, dtype=object), pa.string()),
            pa.array([f"line {n}" for n in line_no[~bad].tolist()], pa.string()),
            kept(text),
            pa.array(np.full(int((~bad).sum()), opts.html)),
            pa.array(sizes[~bad] - 1, pa.int64()),
        ],
        schema=RAW_SCHEMA,
    )
    from .base import Reject

    rejects = [Reject(source, f"line {int(line_no[i])}", reason) for i, reason in chunk_rejects]
    return RawChunk(batch, rejects, 0, len(block))


def _control_candidates(block: bytes, ends: np.ndarray) -> np.ndarray:
    """The lines (ascending) of a block Arrow's JSON reader accepted whose text may hold a character
    of ``_CONTROL_RE2``. The reader refuses a raw byte below 0x20 inside a string, so such a
    character comes from an escape (``\\u0000``-``\\u001f``, ``\\u007f``, ``\\b``) or is a raw DEL
    (0x7f); a line without any of them has none. (An escaped backslash before such letters makes a
    line a candidate it need not be: the test then reads its text.)"""
    a = np.frombuffer(block, dtype=np.uint8)
    slash = np.flatnonzero(a[:-1] == 0x5C)  # backslashes with a byte after them
    after = a[slash + 1]
    u = slash[(after == 0x75) & (slash + 5 < a.size)]  # \uXXXX with its four digits in the block
    if u.size:
        d2, d3, d4, d5 = a[u + 2], a[u + 3], a[u + 4], a[u + 5]
        u = u[(d2 == 0x30) & (d3 == 0x30) & ((d4 == 0x30) | (d4 == 0x31) | ((d4 == 0x37) & ((d5 == 0x66) | (d5 == 0x46))))]
    marks = np.concatenate([slash[after == 0x62], u, np.flatnonzero(a == 0x7F)])
    if marks.size == 0:
        return marks.astype(np.int64)
    return np.unique(np.minimum(np.searchsorted(ends, marks), ends.size - 1)).astype(np.int64)


def _no_text(obj: dict, name: str) -> str:
    """The reason of a record whose text field is absent or JSON ``null``."""
    if name in obj:
        return f"text field {name!r} is null"
    return f"missing text field {name!r} (fields: {', '.join(sorted(obj))[:200]})"


def _is_binary(value: str) -> bool:
    return "\x00" in value or looks_binary(value[:8192].encode("utf-8", "surrogatepass"))


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
        # json's messages may end with "at" ("Unterminated string starting at"): one "at" before the column
        b.reject(rec, f"malformed JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}")
        return
    if not isinstance(obj, dict):
        b.reject(rec, f"expected a JSON object, got {type(obj).__name__}")
        return
    value = obj.get(opts.text_field)
    if value is None:
        b.reject(rec, _no_text(obj, opts.text_field))
        return
    if not isinstance(value, str):
        b.reject(rec, f"text field {opts.text_field!r} is a {type(value).__name__}, not a string")
        return
    if _is_binary(value):
        b.reject(rec, "binary content (NUL or control characters), not text")
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        b.reject(rec, f"text holds an unpaired surrogate escape at character {exc.start}, not valid Unicode")
        return
    b.add(record_url(obj, opts, source, rec), rec, value, opts.html, len(line))
