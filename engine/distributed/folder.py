"""A build folder read like an index: ``neardup sql --index DIR`` over the Parquet datasets of ``neardup build``.

``BuildFolder`` answers what ``neardup.query.run_sql`` asks of an ``Index``: a
``reader()`` connection, here an in-memory DuckDB connection with one view
per dataset (``documents``, ``duplicates``, ``clusters``, ``cluster_members``,
``rejects``, ``fp_<method>``) and the index's views ``latest_documents`` and
``duplicate_urls`` (``sql/build.sql``). The folder is the only place the
connection may read (DuckDB's ``allowed_directories``): ``run_sql`` then
turns external access off, so a query reaches no other file, as on an index.
Needs DuckDB only, not Dask.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from ..errors import IndexNotFound
from ..sqlfiles import query

MANIFEST = "manifest.json"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class BuildFolder:
    """The output folder of ``neardup build``, opened for reading."""

    unrepaired = None  # a build has no interrupted writes to repair (``Index.unrepaired``)

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.catalog_path = self.path / MANIFEST

    @staticmethod
    def holds(path: str | os.PathLike) -> bool:
        """Whether ``path`` is a build folder (a manifest, no catalog)."""
        p = Path(path)
        return (p / MANIFEST).is_file() and not (p / "catalog.duckdb").exists()

    def datasets(self) -> list[str]:
        """The datasets of the folder (each a subfolder of Parquet files)."""
        return sorted(d.name for d in self.path.iterdir() if d.is_dir() and not d.name.startswith(("_", ".")) and any(d.glob("*.parquet")))

    @contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.holds(self.path):
            raise IndexNotFound(f"{self.path}: no build folder here (no {MANIFEST})", hint="run neardup build --out DIR first")
        root = self.path.resolve()
        con = duckdb.connect()
        try:
            con.execute(f"SET allowed_directories = [{_literal(str(root) + os.sep)}]")
            names = self.datasets()
            for name in names:
                sql = query("build", "dataset_view").replace("NAME", name).replace("GLOB", _literal(str(root / name / "*.parquet")))
                con.execute(sql)
            if "documents" in names:
                con.execute(query("build", "latest_documents"))
                if "duplicates" in names:
                    con.execute(query("build", "duplicate_urls"))
            yield con
        finally:
            con.close()
