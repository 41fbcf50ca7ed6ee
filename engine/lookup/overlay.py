"""The catalog as a batch would see it, without writing it: an in-memory overlay.

A query is paired exactly as an ingest batch of its records would be
(``neardup.pairs.find_batch_pairs``, and for the statistics-based methods
``neardup.fingerprints.lexical.batch_end``), but the catalog is opened
read-only. Those functions read and write tables by their plain names, so
they run on the read-only catalog connection with an in-memory database
attached (``ATTACH ':memory:' AS ...``) and made the default:

* schema ``rows`` holds the query's own rows: ``fp_*``, ``doc_terms`` and
  ``new_documents`` (real tables, empty to start), copies of ``term_stats``
  and ``support_words`` (which a batch updates) when the statistics-based
  methods are on, and a view ``documents`` over the catalog's documents and
  the new ones. It is the default while the query's rows are written and
  their statistics-based fingerprints computed (``writing()``).
* schema ``main`` has a view of each of those tables: the catalog's rows
  followed by the query's (``documents``, the ``fp_*`` tables of the
  index's methods, ``doc_terms``), and a real, empty ``duplicates`` table
  that receives the pairs. Nothing else of the catalog is reachable by
  plain name (the pairing reads nothing else). It is the default while pairs are found
  (``pairing()``).

Nothing reaches the catalog file: the connection is read-only, and the
overlay goes with the connection (``close()`` detaches it).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator

import duckdb

#: name of the attached in-memory database (with a number per overlay: connections of one process
#: to one catalog share DuckDB's database instance, where attached names are shared too)
OVERLAY = "neardup_query"
_serial = itertools.count(1)
#: catalog tables that hold rows of the query's documents too
_OWN_ROWS = ("doc_terms",)
#: catalog tables a batch updates in place (copied into the overlay when a method needs them)
_COPIED = {"term_stats": "term VARCHAR PRIMARY KEY, df BIGINT, cf BIGINT"}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Overlay:
    """The overlay on one read-only catalog connection (see the module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, methods: tuple[str, ...], copy_stats: bool = False):
        self.con = con
        self.catalog = con.execute("SELECT current_database()").fetchall()[0][0]
        present = {r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' AND NOT temporary",
            [self.catalog]).fetchall()}
        # the tables a batch's fingerprints, statistics and pairs read or write: those of the index's methods
        own = sorted(t for t in {f"fp_{m}" for m in methods} | set(_OWN_ROWS) if t in present)
        self.name = f"{OVERLAY}_{os.getpid()}_{next(_serial)}"
        src, dst = f"{_q(self.catalog)}.main", self.name
        ddl = [f"ATTACH ':memory:' AS {dst} (READ_WRITE)", f"CREATE SCHEMA {dst}.rows"]
        ddl += [f"CREATE TABLE {dst}.rows.{_q(t)} AS SELECT * FROM {src}.{_q(t)} LIMIT 0" for t in own]
        ddl += [f"CREATE TABLE {dst}.rows.new_documents AS SELECT * FROM {src}.documents LIMIT 0",
                f"CREATE VIEW {dst}.rows.documents AS SELECT * FROM {src}.documents UNION ALL SELECT * FROM {dst}.rows.new_documents",
                f"CREATE VIEW {dst}.main.documents AS SELECT * FROM {dst}.rows.documents",
                f"CREATE TABLE {dst}.main.duplicates AS SELECT * FROM {src}.duplicates LIMIT 0"]
        ddl += [f"CREATE VIEW {dst}.main.{_q(t)} AS SELECT * FROM {src}.{_q(t)} UNION ALL SELECT * FROM {dst}.rows.{_q(t)}"
                for t in own]
        if copy_stats:
            for t, columns in _COPIED.items():
                ddl += [f"CREATE TABLE {dst}.rows.{t} ({columns})", f"INSERT INTO {dst}.rows.{t} SELECT * FROM {src}.{t}"]
            ddl += [f"CREATE TABLE {dst}.rows.support_words AS SELECT * FROM {src}.support_words"]
        for statement in ddl:
            con.execute(statement)
        # emptying the query's rows again (``reset``): its tables, and the copies taken afresh
        self._reset = [f"DELETE FROM {dst}.rows.{_q(t)}" for t in [*own, "new_documents"]]
        if copy_stats:
            for t in [*_COPIED, "support_words"]:
                self._reset += [f"DELETE FROM {dst}.rows.{t}", f"INSERT INTO {dst}.rows.{t} SELECT * FROM {src}.{t}"]
        self._use("main")

    def reset(self) -> None:
        """Drop the query's rows: the overlay is again the catalog as it is."""
        for statement in self._reset:
            self.con.execute(statement)

    def _use(self, schema: str) -> None:
        self.con.execute(f"USE {self.name}.{schema}")

    @contextlib.contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection with the query's own rows as the default tables (see the module docstring)."""
        self._use("rows")
        try:
            yield self.con
        finally:
            self._use("main")

    def pairing(self) -> duckdb.DuckDBPyConnection:
        """The connection with the catalog plus the query's rows as the default tables."""
        self._use("main")
        return self.con

    @property
    def schema(self) -> str:
        """The qualified name of the catalog's own schema (the catalog's rows only)."""
        return f"{_q(self.catalog)}.main"

    def close(self) -> None:
        self.con.execute(f"USE {_q(self.catalog)}.main")
        self.con.execute(f"DETACH {self.name}")
