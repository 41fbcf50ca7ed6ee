"""A new index's catalog copied from an empty catalog of the same schema (``catalog.from_template``)."""

from __future__ import annotations

import duckdb

from neardup import Index
from neardup.ingest import ingest
from neardup.store import catalog

from .conftest import words_text, write_jsonl


def _schema(path) -> dict:
    """Everything the migrations define in a catalog, and the migrations it records."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {
            "tables": con.execute("SELECT table_name, sql FROM duckdb_tables() ORDER BY 1").fetchall(),
            "columns": con.execute("SELECT table_name, column_name, data_type, is_nullable, column_default "
                                   "FROM duckdb_columns() ORDER BY table_name, column_index").fetchall(),
            "views": con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall(),
            "macros": con.execute("SELECT function_name, macro_definition FROM duckdb_functions() "
                                  "WHERE NOT internal AND function_type LIKE '%macro%' ORDER BY 1, 2").fetchall(),
            "sequences": con.execute("SELECT sequence_name, start_value FROM duckdb_sequences() ORDER BY 1").fetchall(),
            "indexes": con.execute("SELECT index_name, sql FROM duckdb_indexes() ORDER BY 1").fetchall(),
            "migrations": con.execute("SELECT version, name FROM schema_migrations ORDER BY 1").fetchall(),
        }
    finally:
        con.close()


def _new_index(tmp_path, name: str) -> Index:
    idx = Index(tmp_path / name)
    ingest(idx, str(write_jsonl(tmp_path / f"{name}.jsonl", [{"url": f"u{i}", "text": words_text(30, i)} for i in range(4)])))
    return idx


def test_a_catalog_from_the_template_is_the_one_the_migrations_make(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "TEMPLATE_DIR", tmp_path / "templates")
    copied = _new_index(tmp_path, "copied")
    assert catalog.template_path().exists()  # made by the first new index, kept for the next
    made = catalog.template_path().stat().st_mtime_ns
    again = _new_index(tmp_path, "again")
    assert catalog.template_path().stat().st_mtime_ns == made
    monkeypatch.setattr(catalog, "from_template", lambda path: False)
    migrated = _new_index(tmp_path, "migrated")
    want = _schema(migrated.catalog_path)
    assert _schema(copied.catalog_path) == want and _schema(again.catalog_path) == want
    assert want["migrations"] and want["tables"]


def test_the_template_is_named_by_the_migrations_and_duckdb(monkeypatch):
    first = catalog.template_path()
    real = catalog.migrations
    monkeypatch.setattr(catalog, "migrations", lambda: [*real(), (999, "more", "CREATE TABLE t (x INTEGER);")])
    assert catalog.template_path() != first
    monkeypatch.setattr(catalog, "migrations", real)
    monkeypatch.setattr(duckdb, "__version__", duckdb.__version__ + ".other")
    assert catalog.template_path() != first


def test_where_no_template_can_be_kept_the_migrations_make_the_catalog(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setattr(catalog, "TEMPLATE_DIR", blocker / "templates")
    assert catalog.from_template(tmp_path / "x.duckdb") is False and not (tmp_path / "x.duckdb").exists()
    idx = _new_index(tmp_path, "plain")
    with idx.reader() as con:
        assert con.execute("SELECT count(*) FROM documents").fetchall()[0][0] == 4
        stamped = con.execute("SELECT count(DISTINCT applied_at) FROM schema_migrations").fetchall()[0][0]
    assert stamped == 1
