"""The docs describe what exists: every command, table and view."""

from __future__ import annotations

import re

from neardup import Index
from neardup.cli.app import app
from neardup.ingest import ingest

from .conftest import FIXTURES, ROOT


def test_every_command_is_in_the_readme_and_cli_docs():
    readme = (ROOT / "README.md").read_text()
    cli_doc = (ROOT / "docs" / "cli.md").read_text()
    for cmd in app.registered_commands:
        name = cmd.name or cmd.callback.__name__
        assert f"neardup {name}" in readme or f"neardup {name}" in cli_doc, name
        assert f"## `neardup {name}`" in cli_doc, name


def test_every_table_and_view_is_documented(tmp_path):
    ingest(Index(tmp_path / "i"), str(FIXTURES / "text" / "docs.jsonl"))
    doc = (ROOT / "docs" / "sql.md").read_text()
    with Index(tmp_path / "i").reader() as con:
        rels = con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()
        cols = con.execute("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main'").fetchall()
    for (t,) in rels:
        assert re.search(rf"^### `{t}`", doc, re.MULTILINE), f"table {t} missing from docs/sql.md"
    for t, c in cols:
        section = doc.split(f"### `{t}`", 1)[1].split("\n### ", 1)[0]
        assert f"`{c}`" in section, f"column {t}.{c} missing from docs/sql.md"


def test_readme_quickstart_has_exactly_two_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:sh|bash)?\n(.*?)```", quick, re.DOTALL)
    lines = [ln for b in blocks for ln in b.splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) == 2, lines


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    test_cmd = [ln for ln in re.findall(r"```(?:sh|bash)?\n(.*?)```", quick, re.DOTALL)[-1].splitlines() if ln.strip()][-1]
    assert "pytest" in test_cmd
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_sql_examples_in_the_docs_run(tmp_path):
    ingest(Index(tmp_path / "i"), str(FIXTURES / "crawl" / "sample.warc.gz"))
    ingest(Index(tmp_path / "i"), str(FIXTURES / "text" / "chain.jsonl"))
    doc = (ROOT / "docs" / "sql.md").read_text()
    examples = doc.split("## Examples", 1)[1]
    statements = [s.strip() for s in re.sub(r"^\s*--.*$", "", examples, flags=re.MULTILINE).split(";") if s.strip()]
    assert len(statements) == 14
    from neardup.evaluate import evaluate

    gold = tmp_path / "gold.csv"
    gold.write_text("https://docs.example.org/nodejs/api/tty.html,https://mirror.example.net/nodejs/api/tty.html\n")
    for _ in range(2):  # two runs to compare
        evaluate(Index(tmp_path / "i"), str(gold), supports=(), bits=())
    with Index(tmp_path / "i").reader() as con:
        results = [con.execute(s).fetchall() for s in statements]
    assert len(results[0]) == 5
    assert results[1], "the fixture crawl holds exact copies under other urls"
    assert [r[0] for r in results[5]] == ["jaccard", "simhash"]
    assert results[7], "the url of the example has near-duplicates in the fixture crawl"
    assert len(results[9]) == 10 and results[9][0][1] >= 3
    assert results[10], "a page of the chain fixture shares concept clusters"
    assert dict(results[11]).get("concept", 0) == 0 and dict(results[11])["components"] > 0, results[11]
    assert {(m, c) for m, c, _ in results[12]} >= {("concept", "created"), ("components", "created")}
    assert [r[0] for r in results[13]] == ["clusters:components", "clusters:concept", "jaccard", "simhash"]
    assert all(len(r) == 3 and r[1] == r[2] for r in results[13]), results[13]  # a column per run; same index, same F1


def test_every_engine_package_is_listed_in_pyproject():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"neardup" + ("." + ".".join(p.relative_to(ROOT / "engine").parts[:-1]) if p.parent != ROOT / "engine" else "")
             for p in (ROOT / "engine").rglob("__init__.py")}
    assert found <= listed, found - listed
