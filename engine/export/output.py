"""Where an export goes, and in which format: a file written whole or not at all, or standard output.

A file is written under a hidden temporary name in its own folder
(``.NAME.export-PID.tmp``), synced, and then linked to its name when that
is free (``--force``: renamed over it), so the name never holds half an
export: a failure, an interrupt or a refused name removes the temporary
file, and only a killed process can leave it behind (hidden, and never the
named output). DuckDB spills what does not fit its memory limit into a
hidden temporary folder beside it (the system's temporary folder for
standard output), removed at the end.

The rows come as Arrow tables, one per key range (``neardup.export``), and
each format writes them as they come: Parquet (pyarrow's writer, a row
group per range, Snappy), CSV (pyarrow's writer: a header line, strings
quoted, numbers bare, NULL as an empty field), JSON Lines (DuckDB's
``to_json`` of each row, one object per line, UTF-8).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .. import storage
from ..errors import NeardupError

STDOUT = "-"
FORMATS = ("parquet", "jsonl", "csv")
SUFFIXES = {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}
KEEPS = "Nothing was written to it"


class ExportError(NeardupError):
    """An export that cannot be done as asked (an option, the output, the clustering); nothing was written."""

    hint = "see `neardup export --help` and docs/cli.md"
    exit_code = 2


def format_of(out: str, fmt: str | None) -> str:
    """The format asked for, else the one ``out``'s suffix names, else Parquet (JSON Lines on standard output)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ExportError(f"unknown --format {fmt!r}; choose from {', '.join(FORMATS)}")
        return fmt
    if out == STDOUT:
        return "jsonl"
    return SUFFIXES.get(Path(out).suffix.lower(), "parquet")


@dataclass
class Target:
    """The output of one export: ``path`` (None for standard output)."""

    path: Path | None
    fmt: str
    force: bool
    #: the file written (the temporary name), None for standard output
    tmp: str | None = None
    spill: str = ""
    #: standard output went away before the end (``| head``)
    stopped: bool = False


def check_target(out: str, fmt: str, force: bool, index: Path) -> Target:
    """The target of ``--out``, refused (``ExportError``, nothing created) when it cannot be one: Parquet on
    standard output, an existing file without ``force``, a folder, a missing folder, a path in the index."""
    if out == STDOUT:
        if fmt == "parquet":
            raise ExportError("Parquet cannot go to standard output (a reader needs its footer, written last)",
                              hint="give --out FILE, or --format jsonl or csv for standard output")
        return Target(None, fmt, force)
    path = Path(out)
    if path.is_dir():
        raise ExportError(f"{path}: is a folder; --out names the file to write", hint="give a file name, e.g. --out keep.parquet")
    if not path.parent.is_dir():
        raise ExportError(f"{path}: the folder {path.parent} does not exist", hint="create it first, or choose another --out")
    if (path.exists() or path.is_symlink()) and not force:
        raise ExportError(f"{path}: exists; not overwritten", hint="choose another --out, or give --force to replace it")
    inside = index.resolve()
    where = path.parent.resolve() / path.name
    if where == inside or inside in where.parents:
        raise ExportError(f"{path}: is inside the index folder {index}", hint="write the export outside the index folder")
    return Target(path, fmt, force)


@contextlib.contextmanager
def opened(target: Target) -> Iterator[BinaryIO]:
    """The stream to write (the temporary file, or standard output) and the spill folder; on leaving,
    both are removed (``publish`` has moved a finished file into place before)."""
    folder = target.path.parent if target.path is not None else Path(tempfile.gettempdir())
    doing = "making the export's temporary files"
    with storage.guard(folder, doing, KEEPS if target.path else ""):
        target.spill = tempfile.mkdtemp(prefix=".neardup-export-", dir=folder)
    try:
        if target.path is None:
            sys.stdout.flush()
            yield sys.stdout.buffer
            return
        target.tmp = str(folder / f".{target.path.name}.export-{os.getpid()}.tmp")
        with storage.guard(target.path, doing, KEEPS):
            fh = open(target.tmp, "xb")
        with fh:
            yield fh
    finally:
        if target.tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target.tmp)
        shutil.rmtree(target.spill, ignore_errors=True)


class Writer:
    """Writes Arrow tables of one schema to a stream in one format."""

    def __init__(self, fmt: str, sink: BinaryIO, schema: pa.Schema, con: duckdb.DuckDBPyConnection):
        self.fmt, self.sink, self.schema, self.con = fmt, sink, schema, con
        self.rows = 0
        if fmt == "parquet":
            self._pq = pq.ParquetWriter(sink, schema, compression="snappy")
        elif fmt == "csv":
            self._csv = pacsv.CSVWriter(sink, schema, write_options=pacsv.WriteOptions(quoting_style="needed"))

    def write(self, table: pa.Table) -> None:
        table = table.cast(self.schema)
        if self.fmt == "parquet":
            self._pq.write_table(table, row_group_size=max(table.num_rows, 1))
        elif self.fmt == "csv":
            self._csv.write_table(table)
        else:
            self._jsonl(table)
        self.rows += table.num_rows

    def _jsonl(self, table: pa.Table) -> None:
        """Each row as DuckDB's ``to_json``, a line each; the lines are written straight from the Arrow buffers."""
        self.con.register("export_part", table)
        try:
            lines = self.con.sql("SELECT to_json(p)::VARCHAR || chr(10) AS line FROM export_part p").to_arrow_table()
        finally:
            self.con.unregister("export_part")
        for chunk in lines.column(0).cast(pa.large_string()).chunks:
            if len(chunk):
                offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[chunk.offset : chunk.offset + len(chunk) + 1]
                self.sink.write(memoryview(chunk.buffers()[2])[int(offsets[0]) : int(offsets[-1])])

    def discard(self) -> None:
        """Let go of the format's writer after a failure (the file is removed by ``opened``)."""
        with contextlib.suppress(Exception):
            if self.fmt == "parquet":
                self._pq.close()
            elif self.fmt == "csv":
                self._csv.close()

    def close(self) -> None:
        """Finish the format (Parquet's footer) and flush."""
        if self.fmt == "parquet":
            self._pq.close()
        elif self.fmt == "csv":
            self._csv.close()
        self.sink.flush()


def publish(target: Target) -> None:
    """Sync the written file and give it its name (replacing an old one only with ``force``)."""
    if target.path is None:
        return
    tmp, path = target.tmp, target.path
    with storage.guard(path, "writing the export", KEEPS):
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if target.force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails when the name was taken meanwhile: nothing is overwritten
            except FileExistsError:
                raise ExportError(f"{path}: appeared while the export ran; not overwritten",
                                  hint="choose another --out, or give --force to replace it") from None
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                    raise
                if path.exists():  # a file system without hard links: check, then rename
                    raise ExportError(f"{path}: appeared while the export ran; not overwritten",
                                      hint="choose another --out, or give --force to replace it") from None
                os.replace(tmp, path)
            os.unlink(tmp)
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        except OSError:  # some file systems cannot sync a folder; the file itself is synced
            pass
        finally:
            os.close(dfd)
