"""`neardup sql` only reads the catalog: hostile statements are refused and change no byte anywhere."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from neardup import Index
from neardup.cli.app import app
from neardup.ingest import ingest

from .conftest import FIXTURES, ROOT, run_cli

runner = CliRunner()


@pytest.fixture(scope="module")
def base_index(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("sqlsafety") / "idx"
    ingest(Index(base), str(FIXTURES / "text" / "docs.jsonl"))
    ingest(Index(base), str(FIXTURES / "text" / "chain.jsonl"))
    return base


@pytest.fixture
def sandbox(base_index, tmp_path, monkeypatch):
    """A copy of the index in ``tmp_path``, with the working directory and HOME there too.

    Relative paths (``COPY ... TO 'out.csv'``) and DuckDB's home folder
    (extensions, persistent secrets) then land in ``tmp_path``, so that a
    snapshot of it sees every file a statement could write.
    """
    idx = tmp_path / "idx"
    shutil.copytree(base_index, idx)
    pq.write_table(pa.table({"url": ["p"], "text": ["a parquet row"]}), tmp_path / "data.parquet")
    (tmp_path / "data.csv").write_text("url,text\nc,a csv row\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    return idx


def tree(root: Path) -> dict[str, str]:
    """Every file and folder under ``root``: relative path -> sha256 (or ``dir``)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def sql(idx: Path, query: str, *opts: str):
    return runner.invoke(app, ["sql", "--index", str(idx), *opts, "--", query])


WRITE_HINT = "changed only by `neardup ingest`, `neardup delete` and `neardup rebuild`"
OUTSIDE_HINT = "open it read-only in DuckDB"

# (statement, what the message must say); {idx} is the index folder, {tmp} the test's tmp_path
HOSTILE = [
    ("COPY (SELECT 42 AS x) TO '{idx}/catalog.duckdb.wal' (FORMAT csv)", "COPY is not a read-only query"),
    ("COPY (SELECT 42 AS x) TO '{idx}/catalog.duckdb' (FORMAT csv)", "COPY is not a read-only query"),
    ("COPY documents TO 'out.csv'", "COPY is not a read-only query"),
    ("COPY documents TO '{tmp}/out.parquet' (FORMAT parquet)", "COPY is not a read-only query"),
    ("COPY settings FROM '{tmp}/data.csv'", "COPY is not a read-only query"),
    ("EXPORT DATABASE '{tmp}/export'", "EXPORT is not a read-only query"),
    ("ATTACH '{tmp}/new.duckdb' AS n", "ATTACH is not a read-only query"),
    ("ATTACH ':memory:' AS m", "ATTACH is not a read-only query"),
    ("DETACH catalog", "DETACH is not a read-only query"),
    ("INSTALL httpfs", "INSTALL (a LOAD statement) is not a read-only query"),
    ("LOAD httpfs", "LOAD is not a read-only query"),
    ("LOAD '{tmp}/evil.duckdb_extension'", "LOAD is not a read-only query"),
    ("SET enable_external_access = true", "SET is not a read-only query"),
    ("SET lock_configuration = false", "SET is not a read-only query"),
    ("SET temp_directory = '{tmp}/spill'", "SET is not a read-only query"),
    ("SET profiling_output = '{tmp}/profile.json'", "SET is not a read-only query"),
    ("RESET enable_external_access", "RESET (a SET statement) is not a read-only query"),
    ("PRAGMA memory_limit = '1GB'", "PRAGMA (a SET statement) is not a read-only query"),
    ("PRAGMA enable_profiling", "PRAGMA is not a read-only query"),
    ("PRAGMA import_database('{tmp}/export')", "PRAGMA is not a read-only query"),
    ("SET VARIABLE x = 1", "SET is not a read-only query"),
    ("USE memory", "USE (a SET statement)"),
    ("EXECUTE p", "EXECUTE is not a read-only query"),
    ("CREATE TABLE t (a INTEGER)", "CREATE is not a read-only query"),
    ("CREATE TEMP TABLE t AS SELECT 1", "CREATE is not a read-only query"),
    ("CREATE VIEW v AS SELECT 1 AS a", "CREATE is not a read-only query"),
    ("CREATE MACRO twice(a) AS 2 * a", "CREATE is not a read-only query"),
    ("CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", "CREATE is not a read-only query"),
    ("INSERT INTO settings VALUES ('x', '1')", "INSERT is not a read-only query"),
    ("UPDATE documents SET url = 'x'", "UPDATE is not a read-only query"),
    ("DELETE FROM documents", "DELETE is not a read-only query"),
    ("DROP TABLE documents", "DROP is not a read-only query"),
    ("ALTER TABLE documents ADD COLUMN z INTEGER", "ALTER is not a read-only query"),
    ("CHECKPOINT", "CHECKPOINT (a CALL statement)"),
    ("FORCE CHECKPOINT", "(a CALL statement)"),
    ("VACUUM", "VACUUM is not a read-only query"),
    ("ANALYZE", "ANALYZE (a VACUUM statement)"),
    ("BEGIN TRANSACTION", "(a TRANSACTION statement)"),
    ("PREPARE p AS DELETE FROM documents", "PREPARE is not a read-only query"),
    ("CALL pragma_version()", "CALL is not a read-only query"),
    ("UPDATE EXTENSIONS", "(an unknown statement)"),
    ("SELECT * FROM read_csv('/etc/passwd')", "reaches outside the catalog"),
    ("SELECT * FROM read_text('/etc/passwd')", "reaches outside the catalog"),
    ("SELECT * FROM read_blob('/etc/passwd')", "reaches outside the catalog"),
    ("SELECT * FROM glob('/etc/*')", "reaches outside the catalog"),
    ("SELECT * FROM '{tmp}/data.parquet'", "reaches outside the catalog"),
    ("SELECT d.url FROM documents d JOIN read_parquet('{tmp}/data.parquet') p USING (url)", "reaches outside the catalog"),
    ("SELECT * FROM 'data.csv'", "reaches outside the catalog"),
    ("SELECT * FROM 'https://example.com/data.parquet'", "reaches outside the catalog"),
    ("SELECT 1; DROP TABLE documents", "2 statements (SELECT, DROP)"),
    ("SELECT count(*) FROM documents; SELECT 1", "2 statements (SELECT, SELECT)"),
    ("-- only a comment\n/* and another; */ DrOp TaBlE documents", "DROP is not a read-only query"),
    ("/* SELECT 1 */ delete from documents -- SELECT", "DELETE is not a read-only query"),
    ("select 1 /* ; */ ; \n\t uPdAtE settings SET value = '1'", "2 statements (SELECT, UPDATE)"),
    ("EXPLAIN COPY (SELECT 1) TO '{tmp}/x.csv'", "EXPLAIN of COPY"),
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{tmp}/x.csv'", "EXPLAIN of COPY"),
    ("EXPLAIN (ANALYZE, FORMAT json) DELETE FROM documents", "EXPLAIN of DELETE"),
]


@pytest.mark.parametrize("statement,message", HOSTILE, ids=[s for s, _ in HOSTILE])
def test_hostile_statement_is_refused_and_nothing_changes(sandbox, statement, message):
    tmp = sandbox.parent
    before = tree(tmp)
    r = sql(sandbox, statement.format(idx=sandbox, tmp=tmp))
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    out = " ".join(r.output.split())  # rich wraps long lines
    assert "error: refused:" in out and message in out, r.output
    assert (OUTSIDE_HINT if "outside" in message else WRITE_HINT) in out
    assert tree(tmp) == before
    # and the index still answers
    ok = sql(sandbox, "SELECT count(*) AS n FROM documents", "-f", "csv")
    assert ok.exit_code == 0 and int(ok.output.splitlines()[1]) > 0


# statements that run (they only read) and must not change a byte either
HARMLESS = [
    ("SELECT * FROM checkpoint()", None),
    ("SELECT current_setting('enable_external_access') AS v", [{"v": False}]),
    ("SELECT current_setting('lock_configuration') AS v", [{"v": True}]),
    ("SELECT current_setting('python_enable_replacements') AS v", [{"v": False}]),
    ("SELECT '; DROP TABLE documents' AS v", [{"v": "; DROP TABLE documents"}]),
    ("-- DROP TABLE documents\nSELECT 1 AS v;", [{"v": 1}]),
    ("SELECT * FROM query('SELECT 2 AS v')", [{"v": 2}]),
    ("SELECT count(*) > 0 AS v FROM duckdb_settings()", [{"v": True}]),
    ("SELECT * FROM sandbox", "does not exist"),  # a Python variable is not a table
]


@pytest.mark.parametrize("statement,expected", HARMLESS, ids=[s for s, _ in HARMLESS])
def test_read_only_statements_change_nothing(sandbox, statement, expected):
    tmp = sandbox.parent
    before = tree(tmp)
    r = sql(sandbox, statement, "-f", "json")
    if isinstance(expected, str):
        assert r.exit_code == 2 and expected in r.output
    else:
        assert r.exit_code == 0, r.output
        if expected is not None:
            assert [json.loads(ln) for ln in r.output.splitlines()] == expected
    assert tree(tmp) == before


def documented_relations() -> list[str]:
    doc = (ROOT / "docs" / "sql.md").read_text()
    return re.findall(r"^### `(\w+)`", doc, re.MULTILINE)


def documented_examples() -> list[str]:
    doc = (ROOT / "docs" / "sql.md").read_text()
    block = doc.split("\n## Examples\n", 1)[1]
    code = "\n".join(ln[4:] for ln in block.splitlines() if ln.startswith("    "))
    return [s.strip() for s in re.split(r";\s*\n", code + "\n") if s.strip() and not all(
        ln.strip().startswith("--") for ln in s.strip().splitlines())]


def test_every_documented_table_and_view_can_be_read(sandbox):
    names = documented_relations()
    assert {"documents", "batches", "rejects", "latest_documents", "duplicate_urls", "collection_stats"} <= set(names)
    before = tree(sandbox.parent)
    for name in names:
        r = sql(sandbox, f"SELECT count(*) AS n FROM {name}", "-f", "csv")
        assert r.exit_code == 0, (name, r.output)
        assert r.output.splitlines()[0] == "n"
    assert tree(sandbox.parent) == before


def test_documented_examples_and_other_read_forms_run(sandbox):
    examples = documented_examples()
    assert len(examples) >= 10 and any("\nPIVOT" in e for e in examples)
    others = [
        "FROM documents LIMIT 2",
        "WITH d AS (SELECT * FROM documents) SELECT count(*) FROM d",
        "VALUES (1, 'a'), (2, 'b')",
        "DESCRIBE documents",
        "SHOW TABLES",
        "SUMMARIZE batches",
        "SELECT * FROM pragma_table_info('documents')",
        "EXPLAIN SELECT count(*) FROM documents",
        "EXPLAIN ANALYZE SELECT count(*) FROM documents",
        "explain /* plan */ (FORMAT json) select 1",
        "SELECT count(*) FROM documents;",
    ]
    before = tree(sandbox.parent)
    for q in examples + others:
        r = sql(sandbox, q, "-f", "csv")
        assert r.exit_code == 0, (q, r.output)
    assert tree(sandbox.parent) == before


def test_refusal_from_the_engine_is_a_query_error(sandbox):
    from neardup import NeardupError, QueryError, QueryRefused
    from neardup.query import run_sql

    with pytest.raises(QueryRefused) as exc:
        run_sql(Index(sandbox), "DROP TABLE documents")
    assert isinstance(exc.value, QueryError) and isinstance(exc.value, NeardupError)
    assert exc.value.exit_code == 2 and "neardup rebuild" in exc.value.hint
    assert run_sql(Index(sandbox), "SELECT count(*) AS n FROM batches").to_pylist() == [{"n": 2}]


# -- a writer's batch.pending ---------------------------------------------

BATCH = str(FIXTURES / "crawl" / "sample.wet.gz")


@pytest.mark.parametrize("point,committed", [("duckdb-before-commit", False), ("duckdb-after-commit", True),
                                             ("lmdb-mid-write", None)])  # None: filled beside the commit, either
def test_sql_after_a_killed_ingest_sees_the_last_committed_state(base_index, tmp_path, point, committed):
    idx = tmp_path / "idx"
    shutil.copytree(base_index, idx)
    before = int(sql(idx, "SELECT count(*) FROM batches", "-f", "csv").output.splitlines()[1])
    p = run_cli("ingest", "-q", "--index", str(idx), BATCH, env={"NEARDUP_CRASH_AT": point})
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    assert (idx / "batch.pending").exists()
    r = sql(idx, "SELECT count(*) AS n, arg_max(source, batch_id) AS last FROM batches", "-f", "json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    if committed is None:
        committed = got["n"] == before + 1
    assert got["n"] == before + (1 if committed else 0)
    assert got["last"].endswith("sample.wet.gz") == committed
    # the reader repaired the crashed batch on its way in (the writer is gone)
    assert not (idx / "batch.pending").exists()


HOLD_WRITER = """
import sys, time
from neardup import Index
with Index(sys.argv[1]).writer() as w:
    w.begin_batch()
    print("ready", flush=True)
    time.sleep(120)
"""


def test_sql_while_a_writer_holds_the_index_is_a_clear_error(base_index, tmp_path):
    idx = tmp_path / "idx"
    shutil.copytree(base_index, idx)
    env = {k: v for k, v in os.environ.items() if k != "NEARDUP_CRASH_AT"}
    proc = subprocess.Popen([sys.executable, "-c", HOLD_WRITER, str(idx)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        assert (idx / "batch.pending").exists()
        r = sql(idx, "SELECT count(*) FROM documents")
        assert r.exit_code == 4, r.output
        assert "Traceback" not in r.output
        assert "in use by pid" in r.output and "hint:" in r.output
    finally:
        proc.kill()
        proc.wait()
    # once the writer is gone (killed mid-batch), the next reader repairs and reads
    r = sql(idx, "SELECT count(*) AS n FROM batches", "-f", "csv")
    assert r.exit_code == 0 and r.output.splitlines() == ["n", "2"]
