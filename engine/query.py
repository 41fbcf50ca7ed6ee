"""Read-side operations behind ``neardup sql`` and ``neardup info``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from .errors import QueryError
from .sqlfiles import query
from .store import catalog
from .store.index import Index


def run_sql(index: Index, sql: str) -> pa.Table:
    """Run one read-only SQL statement on the catalog and return its result.

    Statements that write are refused by DuckDB's read-only mode and raise
    ``QueryError`` like any other failing query.
    """
    with index.reader() as con:
        try:
            rel = con.sql(sql)
            if rel is None:
                return pa.table({})
            return rel.to_arrow_table()
        except duckdb.Error as exc:
            raise QueryError(f"query failed: {str(exc).splitlines()[0]}") from exc


@dataclass
class IndexInfo:
    path: str
    schema_version: int
    settings: dict[str, Any]
    counts: dict[str, int]
    batches: list[dict[str, Any]]
    postings_applied_batch: int
    postings_keys: dict[str, int]
    #: pairs per pair method in ``duplicates``
    pairs: dict[str, int]
    #: per clustering method: (clusters, truncated clusters)
    clusters: dict[str, tuple[int, int]]


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
    applied, keys = 0, {}
    if index.postings_path.exists():
        p = LmdbPostings(index.postings_path, readonly=True)
        try:
            applied = p.applied_batch()
            keys = p.stats()
        finally:
            p.close()
    return IndexInfo(str(index.path), version, settings, counts, batches, applied, keys, pairs, clusters)
