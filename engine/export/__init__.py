"""``neardup export``: a deduplicated corpus, or one of the catalog's tables, as Parquet, JSON Lines or CSV.

What is written (docs/cli.md has the columns):

* ``keep``: the documents to keep, one per duplicate group plus every
  document in no group, with their texts and urls (``neardup.export.groups``
  says what a group is and how the ``--keep`` policy chooses);
* ``drop``: the other documents of the groups, each with the document kept
  instead and the direct pair between them;
* ``pairs``, ``clusters``, ``documents``: those tables (latest versions
  only unless ``all_versions``).

The export reads the catalog on a read-only connection, like ``neardup
sql`` readers beside it, but its own: ``neardup sql``'s connection refuses
files on purpose (``neardup.query``), and this one reads the catalog only and
hands the rows to the writers of ``neardup.export.output``, which write
exactly one file, the output, whole or not at all.

Memory does not follow the index: the rows are read range by range of their
key (doc id, or cluster id), each range about ``RANGE_BYTES`` of rows
(``ranges`` in sql/export.sql), each range ordered and written before the
next is read. (DuckDB's own COPY of an ordered query, tried first, held
rows waiting for their turn: it ran out of a 256 MB memory limit on 800,000
rows of 1.6 KB, with or without ORDER BY.) The group tables of keep and drop
hold integers only and spill beyond DuckDB's memory limit.
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .. import storage
from ..errors import NeardupError
from ..sqlfiles import query
from ..store import catalog
from ..store.index import Index
from .groups import DEFAULT_CLUSTERING, POLICIES, Decisions, clusterings, decide
from .output import FORMATS, KEEPS, STDOUT, ExportError, Target, Writer, check_target, format_of, opened, publish

WHATS = ("keep", "drop", "pairs", "clusters", "documents")
#: DuckDB's memory limit while exporting (beyond it, its temporary tables spill to disk)
EXPORT_DUCKDB_MEMORY = "128MB"
#: rows are read and written in key ranges of about this many bytes (a Parquet row group each)
RANGE_BYTES = 16 << 20


@dataclass
class ExportResult:
    what: str
    fmt: str
    #: the file written, or ``-`` for standard output
    out: str
    rows: int
    seconds: float
    #: keep and drop: what the policy decided
    decisions: Decisions | None = None
    #: standard output went away before the end (``| head``): fewer rows were written
    stopped: bool = False


def export(index: Index, out: str, what: str = "keep", fmt: str | None = None, cluster: str | None = None,
           keep: str = "first", method: str | None = None, all_versions: bool = False, force: bool = False) -> ExportResult:
    """Write ``what`` to ``out`` (a file, or ``-`` for standard output) as ``fmt`` (default: from
    ``out``'s suffix, else Parquet; JSON Lines on standard output).

    ``cluster`` names the clustering whose clusters are the duplicate groups (keep and drop, default
    ``components``) or whose clusters are written (clusters, default all); ``keep`` is the policy
    (``first``, ``longest``, ``latest``); ``method`` restricts pairs to one pair method. Anything that
    cannot be done is an ``ExportError`` (or the index's own errors) before the file exists.
    """
    t0 = time.perf_counter()
    fmt = _check_options(out, what, fmt, cluster, keep, method, all_versions)
    index.require()
    target = check_target(out, fmt, force, index.path)
    with index.reader() as con:
        con.execute(f"SET memory_limit = '{EXPORT_DUCKDB_MEMORY}'")
        settings = catalog.read_settings(con)
        if what in ("keep", "drop"):
            cluster = cluster or DEFAULT_CLUSTERING
        if cluster is not None:
            known = clusterings(con, tuple(settings.get("clusters") or ()))
            if cluster not in known:
                raise ExportError(f"no clustering {cluster!r} in the index {index.path}; it has: {', '.join(known) or 'none'}",
                                  hint="choose one of those with --cluster; `neardup rebuild --clusters NAME` computes others")
        if method is not None:
            known = sorted({r[0] for r in con.execute(query("export", "pair_methods")).fetchall()} | set(settings.get("pairs") or ()))
            if method not in known:
                raise ExportError(f"no pair method {method!r} in the index {index.path}; it has: {', '.join(known) or 'none'}",
                                  hint="choose one of those with --method")
        doing = f"writing the export to {target.path or 'standard output'}"
        select, keys, params = _queries(what, cluster, method, all_versions)
        decisions, rows = None, 0
        with opened(target) as sink:
            con.execute(f"SET temp_directory = '{target.spill.replace(chr(39), chr(39) * 2)}'")
            try:
                with storage.guard(target.path or Path(target.spill), doing, KEEPS if target.path else ""):
                    if what in ("keep", "drop"):
                        decisions = decide(con, cluster, keep, tuple(settings.get("pairs") or ()))
                    rows = _write(con, target, sink, select, keys, params)
            except BrokenPipeError:
                target.stopped = True
            except (OSError, NeardupError) as exc:
                if target.path is None and _broken_pipe(exc):
                    target.stopped = True
                else:
                    raise
            if not target.stopped:
                publish(target)
    return ExportResult(what, fmt, out, rows, time.perf_counter() - t0, decisions, stopped=target.stopped)


def _write(con: duckdb.DuckDBPyConnection, target: Target, sink, select: str, keys: str, params: list) -> int:
    """Write every range of the export to ``sink``; returns the rows written."""
    ranges_sql = query("export", "ranges").replace("{keys}", keys.strip().rstrip(";")).replace("{budget}", str(int(RANGE_BYTES)))
    ranges = con.execute(ranges_sql, params).fetchall()
    schema = con.sql(select, params=[*params, 1, 0]).to_arrow_table().schema  # an empty range: the columns even when there are no rows
    writer = Writer(target.fmt, sink, schema, con)
    try:
        for lo, hi in ranges:
            writer.write(con.sql(select, params=[*params, lo, hi]).to_arrow_table())
    except BaseException:
        writer.discard()
        raise
    writer.close()
    return writer.rows


def _broken_pipe(exc: BaseException) -> bool:
    """Whether standard output went away (``| head``), in whichever wrapper the write reported it."""
    while exc is not None:
        if isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE) \
                or "Broken pipe" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _check_options(out: str, what: str, fmt: str | None, cluster: str | None, keep: str, method: str | None,
                   all_versions: bool) -> str:
    """Options that contradict each other or name nothing are refused before anything is opened."""
    if what not in WHATS:
        raise ExportError(f"unknown --what {what!r}; choose from {', '.join(WHATS)}")
    if keep not in POLICIES:
        raise ExportError(f"unknown --keep {keep!r}; choose from {', '.join(POLICIES)}")
    if cluster is not None and what not in ("keep", "drop", "clusters"):
        raise ExportError(f"--cluster applies to --what keep, drop and clusters, not {what}")
    if method is not None and what != "pairs":
        raise ExportError(f"--method applies to --what pairs, not {what}")
    if all_versions and what in ("keep", "drop"):
        raise ExportError("--all-versions applies to pairs, clusters and documents: keep and drop choose among the "
                          "latest versions (an older version of a url is neither kept nor dropped)")
    return format_of(out, fmt)


def _queries(what: str, cluster: str | None, method: str | None, all_versions: bool) -> tuple[str, str, list]:
    """The range query of ``what``, the query of its keys and weights, and their leading parameters."""
    params: list = {"keep": [], "drop": [], "documents": [all_versions], "pairs": [method, all_versions],
                    "clusters": [cluster, all_versions]}[what]
    return query("export", what), query("export", f"{what}_keys"), params


__all__ = ["EXPORT_DUCKDB_MEMORY", "FORMATS", "POLICIES", "STDOUT", "WHATS", "ExportError", "ExportResult", "export"]
