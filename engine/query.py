"""Read-side operations behind ``neardup sql`` and ``neardup info``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from . import storage
from .errors import NeardupError, QueryError, QueryRefused
from .sqlfiles import query
from .store import catalog
from .store.index import Index


#: Applied, in this order, to the connection ``run_sql`` runs a query on (docs/cli.md, ``neardup sql``).
#: External access off stops every file, URL, ATTACH, INSTALL and LOAD; the
#: last one freezes every setting (SET, RESET and PRAGMA of a setting fail)
#: for the rest of the connection.
_LOCKDOWN = (
    "SET python_enable_replacements = false",  # no Python variable read as a table
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)

#: Statement types that run. MULTI is what DuckDB's parser makes of a PIVOT
#: whose columns come from the data: a temporary ENUM type (in memory) and the
#: SELECT. (The read-only connection refuses any lasting write whatever the type.)
_READ_TYPES = (duckdb.StatementType.SELECT, duckdb.StatementType.MULTI)

#: Statements that would change rows or tables: their refusal points to ``neardup delete``.
_WRITE_TYPES = tuple(getattr(duckdb.StatementType, n) for n in ("DELETE", "DROP", "UPDATE", "INSERT", "ALTER")
                     if hasattr(duckdb.StatementType, n))
_DELETE_POINTER = ("to remove documents (with their fingerprints, postings, pairs and clusters) use "
                   "`neardup delete --url URL | --batch N | --where CONDITION` (docs/cli.md)")

_OUTSIDE_HINT = (
    "`neardup sql` reads the catalog and nothing else (no files, URLs or extensions); to join "
    "other files with the catalog, open it read-only in DuckDB (see docs/cli.md, `neardup sql`)"
)


def run_sql(index: Index, sql: str) -> pa.Table:
    """Run one read-only statement on the catalog and return its result.

    Only one SELECT (or EXPLAIN of one, or a PIVOT) runs: the statement
    types come from DuckDB's own parser, and any other statement (or more
    than one) raises ``QueryRefused`` before anything runs. The connection is read-only, and
    external access is off and the configuration locked before the query, so
    it cannot reach a file, a URL or an extension either (``QueryRefused``
    too). Any other failure is a ``QueryError``.
    """
    with index.reader() as con:
        for setting in _LOCKDOWN:
            try:
                con.execute(setting)
            except duckdb.Error as exc:  # never run a query on a connection that is not locked down
                raise NeardupError(f"cannot lock the catalog connection down ({setting}): {_first_line(exc)}",
                                   hint="this DuckDB version lacks a setting neardup needs; install the one neardup requires") from exc
        statement = _read_only_statement(con, sql)
        try:
            rel = con.sql(statement)
            if rel is None:
                return pa.table({})
            return rel.to_arrow_table()
        except duckdb.PermissionException as exc:
            raise QueryRefused(f"refused: the query reaches outside the catalog ({_first_line(exc)})", hint=_OUTSIDE_HINT) from exc
        except duckdb.Error as exc:
            # a damaged block or a failing disk is not the query's fault
            fault = storage.convert(exc, index.catalog_path, "running the query", index=index.path)
            if fault is not None:
                raise fault from exc
            raise QueryError(f"query failed: {_first_line(exc)}") from exc


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _read_only_statement(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    """The one statement of ``sql`` when it only reads, else ``QueryRefused``."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {_first_line(exc)}") from exc
    if not statements:
        raise QueryError("no SQL statement given")
    if len(statements) > 1:
        kinds = ", ".join(_describe(st) for st in statements)
        raise QueryRefused(f"refused: the text holds {len(statements)} statements ({kinds}); `neardup sql` runs exactly one")
    st = statements[0]
    if _type(st) in _READ_TYPES:
        return st
    if _type(st) == duckdb.StatementType.EXPLAIN:
        inner = _explained(con, st.query)
        if inner is not None and _type(inner) == duckdb.StatementType.SELECT:
            return st
        what = _describe(inner) if inner is not None else "a statement that cannot be told"
        raise QueryRefused(f"refused: EXPLAIN of {what}; `neardup sql` explains only a SELECT")
    if _type(st) in _WRITE_TYPES:
        raise QueryRefused(f"refused: {_describe(st)} is not a read-only query; {_DELETE_POINTER}")
    raise QueryRefused(f"refused: {_describe(st)} is not a read-only query")


def _type(st: duckdb.Statement) -> duckdb.StatementType | None:
    """The statement's type; None for a type this DuckDB client has no name for (``UPDATE EXTENSIONS``)."""
    try:
        return st.type
    except ValueError:
        return None


def _describe(st: duckdb.Statement) -> str:
    """``DROP``, or ``CHECKPOINT (a CALL statement)`` when the first word is not the type's name."""
    word = _first_word(st.query)
    t = _type(st)
    kind = t.name if t is not None else "unknown"
    article = "an" if kind[0] in "AEIOUaeiou" else "a"
    return kind if word == kind else f"{word or '?'} ({article} {kind} statement)"


def _first_word(sql: str) -> str:
    for pos, kind in duckdb.tokenize(sql):
        if kind != duckdb.token_type.comment:
            return sql[pos:].split(None, 1)[0].split("(", 1)[0].upper()
    return ""


def _explained(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement | None:
    """The statement an EXPLAIN statement explains.

    It is the first tail of the text, starting at a token after ``EXPLAIN``,
    that DuckDB parses as exactly one statement: the tokens between
    (``ANALYZE``, or a parenthesised option list) parse as no statement, and
    a tail starting inside the option list holds an unmatched parenthesis.
    """
    tokens = [pos for pos, kind in duckdb.tokenize(sql) if kind != duckdb.token_type.comment]
    for pos in tokens[1:]:
        try:
            found = con.extract_statements(sql[pos:])
        except (duckdb.Error, ValueError):
            continue
        if len(found) == 1:
            return found[0]
    return None


@dataclass
class IndexInfo:
    path: str
    schema_version: int
    settings: dict[str, Any]
    counts: dict[str, int]
    batches: list[dict[str, Any]]
    #: the last batch the postings hold, None when the postings folder is missing or cannot be read
    postings_applied_batch: int | None
    postings_keys: dict[str, int]
    #: pairs per pair method in ``duplicates``
    pairs: dict[str, int]
    #: per clustering method: (clusters, truncated clusters)
    clusters: dict[str, tuple[int, int]]
    #: why the postings cannot be read (a PostingsDamaged), None when they can or are missing
    postings_problem: NeardupError | None = None
    #: an interrupted write this reader could not repair (``Index.unrepaired``): what is shown is the
    #: last committed state, and the postings may be behind it until a writer repairs them
    unrepaired: NeardupError | None = None


def info(index: Index, n_batches: int = 10) -> IndexInfo:
    """Settings, counts and recent batches of an index."""
    from .store.postings import LmdbPostings

    with index.reader() as con:
        version = catalog.schema_version(con)
        settings = catalog.read_settings(con)
        cur = con.execute(query("catalog", "summary"))
        names = [d[0] for d in cur.description]
        counts = dict(zip(names, cur.fetchall()[0]))
        cur = con.execute(query("catalog", "recent_batches"), [n_batches])
        names = [d[0] for d in cur.description]
        batches = [dict(zip(names, r)) for r in cur.fetchall()]
        pairs = dict(con.execute(query("catalog", "pairs_per_method")).fetchall())
        clusters = {m: (n, t) for m, n, t in con.execute(query("catalog", "clusters_per_method")).fetchall()}
    applied, keys, problem = None, {}, None
    if index.postings_path.exists():
        try:
            with storage.guard(index.postings_path, "reading the postings", index=index.path):
                p = LmdbPostings(index.postings_path, readonly=True)
                try:
                    applied = p.applied_batch()
                    keys = p.stats()
                finally:
                    p.close()
        except NeardupError as exc:  # damaged or unreadable postings do not hide the catalog's summary
            applied, keys, problem = None, {}, exc
    return IndexInfo(str(index.path), version, settings, counts, batches, applied, keys, pairs, clusters, problem,
                     index.unrepaired)
