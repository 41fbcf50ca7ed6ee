"""End-to-end CLI tests on the fixtures (typer's CliRunner and real subprocesses)."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neardup.cli.app import app

from .conftest import FIXTURES, run_cli, words_text, write_jsonl

runner = CliRunner()
COMMANDS = ["init", "ingest", "rebuild", "sql", "info", "evaluate", "generate", "check", "backup", "delete", "export", "query", "build"]


def invoke(*args, env=None):
    return runner.invoke(app, list(args), env=env)


def test_help_lists_every_command_with_help_text():
    r = invoke("--help")
    assert r.exit_code == 0
    by_name = {(cmd.name or cmd.callback.__name__.removesuffix("_cmd")): cmd for cmd in app.registered_commands}
    assert sorted(by_name) == sorted(COMMANDS)
    for c in COMMANDS:
        assert c in r.output
        sub = invoke(c, "--help")
        assert sub.exit_code == 0, c
        assert len(by_name[c].callback.__doc__ or "") > 20, c


def test_a_named_command_runs_in_an_app_of_that_command_alone():
    from neardup.cli.app import app_for

    for c in COMMANDS:
        one = app_for([c, "--help"])
        assert [i.callback for i in one.registered_commands] == [
            i.callback for i in app.registered_commands if (i.name or i.callback.__name__.removesuffix("_cmd")) == c]
        assert one.registered_callback is app.registered_callback  # --version and the group's options stay
        # the same help, usage line included (the command is still named: the app is a group)
        assert runner.invoke(one, [c, "--help"], env={"COLUMNS": "200"}).output == \
            runner.invoke(app, [c, "--help"], env={"COLUMNS": "200"}).output
    assert app.registered_commands and len(app.registered_commands) == len(COMMANDS)  # the whole app is untouched
    for args in ([], ["--help"], ["--version"], ["ingst", "x"], ["-q"]):
        assert app_for(args) is app
    # an unknown command is told with the whole app's suggestions
    r = run_cli("ingst")
    told = r.stderr.decode()
    assert r.returncode == 2 and "No such command 'ingst'" in told and "ingest" in told.split("Did you mean")[1]
    # and a named command runs (through main, as the console script does)
    r = run_cli("info", "--index", "/nonexistent/neardup-index")
    assert r.returncode != 0 and "no neardup index here" in r.stderr.decode()


def test_help_shows_the_defaults_written_in_brackets():
    # a help text's "[default: ...]" is text, not console markup to strip
    r = invoke("ingest", "--help", env={"COLUMNS": "200"})
    text = " ".join(r.output.split())
    assert "fewer words than this [default: 10]" in text and "[default: 4GB]" in text


def test_every_format_twice_then_sql(tmp_path):
    idx = str(tmp_path / "idx")
    inputs = [
        FIXTURES / "crawl" / "sample.warc.gz",
        FIXTURES / "crawl" / "sample.wet.gz",
        FIXTURES / "text" / "docs.jsonl",
        FIXTURES / "text" / "docs.jsonl.gz",
        FIXTURES / "text" / "docs.parquet",
        FIXTURES / "html",
    ]
    for p in inputs:
        r = invoke("ingest", "--index", idx, str(p))
        assert r.exit_code == 0, r.output
        assert "added" in r.output
    counts = invoke("sql", "--index", idx, "--format", "json", "SELECT count(*) AS n, count(DISTINCT url) AS urls FROM documents")
    first = json.loads(counts.output)
    for p in inputs:  # the second time nothing changes
        r = invoke("ingest", "-q", "--index", idx, str(p))
        assert r.exit_code == 0, r.output
    again = json.loads(invoke("sql", "--index", idx, "--format", "json", "SELECT count(*) AS n, count(DISTINCT url) AS urls FROM documents").output)
    assert again == first
    assert first["n"] > 300
    top = invoke("sql", "--index", idx, "--format", "csv", "SELECT url, n_words FROM documents ORDER BY n_words DESC, url LIMIT 5")
    lines = top.output.strip().splitlines()
    assert lines[0] == "url,n_words" and len(lines) == 6
    n_words = [int(ln.rsplit(",", 1)[1]) for ln in lines[1:]]
    assert n_words == sorted(n_words, reverse=True)
    info = invoke("info", "--index", idx)
    assert info.exit_code == 0 and "min_words=10" in info.output and "postings" in info.output


def test_index_from_environment_variable(tmp_path):
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(20)}])
    env = {"NEARDUP_INDEX": str(tmp_path / "envidx")}
    assert invoke("ingest", str(src), env=env).exit_code == 0
    assert (tmp_path / "envidx" / "catalog.duckdb").exists()
    r = invoke("sql", "--format", "tsv", "SELECT url FROM documents", env=env)
    assert r.output.splitlines() == ["url", "a"]


def test_stdin_input(tmp_path):
    data = (json.dumps({"url": "s1", "text": words_text(20)}) + "\n").encode()
    p = run_cli("ingest", "--index", str(tmp_path / "i"), "-", input=data, check=True)
    assert b"1 added" in p.stdout
    q = run_cli("sql", "--index", str(tmp_path / "i"), "--format", "csv", "SELECT url, source FROM documents", check=True)
    assert q.stdout.decode().splitlines() == ["url,source", "s1,<stdin>"]


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["ingest", "NOPE.jsonl"], 2, "no such file"),
        (["sql", "SELECT 1"], 3, "no neardup index here"),
        (["info"], 3, "no neardup index here"),
    ],
)
def test_errors_have_exit_codes_and_hints(tmp_path, args, code, message):
    args = [a if a != "NOPE.jsonl" else str(tmp_path / a) for a in args]
    r = invoke(*args, "--index", str(tmp_path / "none"))
    assert r.exit_code == code, r.output
    assert message in r.output and "hint:" in r.output


def test_strict_failure_exit_code_and_message(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"url": "x", "text": "%s"}\n{nope\n' % words_text(20))
    r = invoke("ingest", "--strict", "--index", str(tmp_path / "i"), str(bad))
    assert r.exit_code == 5
    assert "bad.jsonl: line 2: malformed JSON" in r.output and "rolled back" in r.output
    n = invoke("sql", "--index", str(tmp_path / "i"), "-f", "csv", "SELECT count(*) AS n FROM documents")
    assert n.output.splitlines() == ["n", "0"]


def test_rejects_are_reported_in_the_summary(tmp_path):
    src = tmp_path / "m.jsonl"
    src.write_text('{"url": "ok", "text": "%s"}\n{"url": "s", "text": "short"}\n' % words_text(20))
    r = invoke("ingest", "--index", str(tmp_path / "i"), str(src))
    assert r.exit_code == 0
    assert "1 added" in r.output and "1 rejected" in r.output
    assert "m.jsonl: line 2: too short: 1 words (< 10)" in r.output


def test_the_summary_says_when_the_ingest_compiled_kernels(tmp_path, monkeypatch):
    """The first run after installing compiles the kernels (up to a minute): its summary says so,
    with how many; a run that loaded them all from the cache says nothing of it."""
    import neardup.cli.app as cli_app
    from neardup import kernel_cache

    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(20)}])
    before = kernel_cache.compiled_here()
    r = invoke("ingest", "--index", str(tmp_path / "i"), str(src))
    assert r.exit_code == 0 and "1 added" in r.output
    # said exactly when this run compiled (with a fresh cache it may: each test's process starts empty)
    assert ("compiled neardup's kernels" in r.output) == (kernel_cache.compiled_here() > before)
    ingest_one = cli_app._ingest_one

    def compiling(*args, **kwargs):  # as if numba had met three signatures the cache lacks
        for _ in range(3):
            kernel_cache._missed()
        return ingest_one(*args, **kwargs)

    monkeypatch.setattr(cli_app, "_ingest_one", compiling)
    src2 = write_jsonl(tmp_path / "b.jsonl", [{"url": "b", "text": words_text(25)}])
    before = kernel_cache.compiled_here()
    r = invoke("ingest", "--index", str(tmp_path / "i"), str(src2))
    assert r.exit_code == 0 and "1 added" in r.output
    n = kernel_cache.compiled_here() - before
    assert n >= 3 and f"compiled neardup's kernels for this CPU: once after installing, cached from then on ({n} kernel signatures" in r.output
    r = invoke("ingest", "-q", "--index", str(tmp_path / "i"), str(src2))
    assert r.exit_code == 0 and r.output == ""  # quiet stays quiet


def test_init_then_settings_conflict(tmp_path):
    idx = str(tmp_path / "i")
    assert invoke("init", "--index", idx, "--min-words", "3").exit_code == 0
    assert invoke("init", "--index", idx).exit_code == 1
    src = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": "one two three"}])
    r = invoke("ingest", "--index", idx, "--min-words", "5", str(src))
    assert r.exit_code == 2 and "min_words=5" in r.output
    r = invoke("ingest", "--index", idx, str(src))
    assert r.exit_code == 0 and "1 added" in r.output


def test_list_settings_given_again_on_an_existing_index_match(tmp_path):
    """--pairs and --keep-clusters repeated as the index was made with them are accepted; another value is not."""
    idx = str(tmp_path / "i")
    same = ["--pairs", "jaccard", "--keep-clusters", "components"]
    first = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(20)}])
    second = write_jsonl(tmp_path / "b.jsonl", [{"url": "b", "text": words_text(20, 7)}])
    assert invoke("ingest", "--index", idx, *same, str(first)).exit_code == 0
    r = invoke("ingest", "--index", idx, *same, str(second))
    assert r.exit_code == 0 and "1 added" in r.output
    r = invoke("ingest", "--index", idx, "--pairs", "jaccard,simhash", str(second))
    assert r.exit_code == 2 and "pairs=" in r.output


def test_keep_clusters_both_is_concept_and_components(tmp_path):
    """``--keep-clusters both`` (the option's help names it) keeps the two clusterings, as the
    default does; a second ingest giving ``concept,components`` matches it."""
    idx = str(tmp_path / "i")
    first = write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(20)}])
    second = write_jsonl(tmp_path / "b.jsonl", [{"url": "b", "text": words_text(20, 7)}])
    assert invoke("ingest", "--index", idx, "--keep-clusters", "both", str(first)).exit_code == 0
    r = invoke("ingest", "--index", idx, "--keep-clusters", "concept,components", str(second))
    assert r.exit_code == 0 and "1 added" in r.output
    r = invoke("sql", "--index", idx, "--format", "json", "SELECT value FROM settings WHERE key = 'clusters'")
    assert r.exit_code == 0 and json.loads(json.loads(r.output.strip())["value"]) == ["concept", "components"], r.output


def test_sql_refuses_writes_and_reports_bad_queries(tmp_path):
    idx = str(tmp_path / "i")
    invoke("ingest", "--index", idx, str(write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(20)}])))
    r = invoke("sql", "--index", idx, "DELETE FROM documents")
    assert r.exit_code == 2 and "read-only" in r.output
    r = invoke("sql", "--index", idx, "SELEC 1")
    assert r.exit_code == 2 and "syntax error" in r.output
    r = invoke("sql", "--index", idx, "--format", "xml", "SELECT 1")
    assert r.exit_code == 2


def test_ingest_reports_pairs_and_clusters_and_rebuild_runs_other_clusterings(tmp_path):
    ix = str(tmp_path / "ix")
    r = invoke("ingest", "--index", ix, "--pairs", "jaccard,simhash", str(FIXTURES / "crawl" / "sample.warc.gz"), str(FIXTURES / "text" / "chain.jsonl"))
    assert r.exit_code == 0, r.output
    assert "new duplicate pairs: jaccard" in r.output and "clusters: concept +" in r.output
    r = invoke("rebuild", "--index", ix, "--clusters", "center,star,biconnected,greedy002,concept", "--bits", "5", "--support", "90")
    assert r.exit_code == 0, r.output
    for name in ("center:", "star:", "biconnected:", "greedy002_5:", "concept_90:"):
        assert name in r.output
    r = invoke("sql", "--index", ix, "--format", "csv", "SELECT method, count(*) FROM clusters GROUP BY method ORDER BY method")
    methods = dict(line.split(",") for line in r.output.splitlines()[1:])
    assert set(methods) == {"biconnected", "center", "components", "concept", "concept_90", "greedy002_5", "star"}
    # the chain is one component but splits into several concept clusters
    r = invoke("sql", "--index", ix, "--format", "csv",
               "SELECT c.method, count(DISTINCT c.cluster_id) FROM clusters c JOIN cluster_members USING (cluster_id) JOIN documents d USING (doc_id) "
               "WHERE d.url LIKE 'https://chain.%' AND c.method IN ('components', 'concept') GROUP BY 1 ORDER BY 1")
    counts = dict(line.split(",") for line in r.output.splitlines()[1:])
    assert counts["components"] == "1" and int(counts["concept"]) > 1
    r = invoke("info", "--index", ix)
    assert "clusters" in r.output and "concept=" in r.output
    r = invoke("rebuild", "--index", ix, "--clusters", "nope")
    assert r.exit_code == 2 and "unknown clustering" in r.output


def test_info_reports_missing_postings_as_missing(tmp_path):
    import shutil

    src = write_jsonl(tmp_path / "a.jsonl", [{"url": f"u{i}", "text": words_text(30, seed=i)} for i in range(3)])
    idx = str(tmp_path / "i")
    assert invoke("ingest", "-q", "--index", idx, str(src)).exit_code == 0
    assert "up to batch 1" in invoke("info", "--index", idx).output
    shutil.rmtree(tmp_path / "i" / "postings")
    r = invoke("info", "--index", idx)
    assert r.exit_code == 0 and "postings missing" in " ".join(r.output.split()) and "rebuild --postings" in r.output
    assert invoke("rebuild", "--index", idx, "--postings").exit_code == 0
    assert "up to batch 1" in invoke("info", "--index", idx).output


_CELLS = {
    "int": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    "str": st.one_of(st.none(), st.text(alphabet=st.sampled_from(list('ab ,\t"\r\n\'é')), max_size=6)),
    "float": st.one_of(st.none(), st.floats(allow_nan=False, width=64)),
    "bool": st.one_of(st.none(), st.booleans()),
}
_TYPES = {"int": pa.int64(), "str": pa.string(), "float": pa.float64(), "bool": pa.bool_()}


@settings(max_examples=200, deadline=None)
@given(table=st.lists(st.sampled_from(sorted(_CELLS)), min_size=1, max_size=4).flatmap(
    lambda kinds: st.tuples(st.just(kinds), st.lists(st.tuples(*(_CELLS[k] for k in kinds)), max_size=8))),
    delim=st.sampled_from([",", "\t"]))
def test_sql_delimited_output_is_what_the_csv_module_writes(table, delim):
    from contextlib import redirect_stdout

    from neardup.cli.app import _write_delimited

    kinds, rows = table
    names = [f"c{i}" for i in range(len(kinds))]
    t = pa.table({n: pa.array([r[i] for r in rows], _TYPES[k]) for i, (n, k) in enumerate(zip(names, kinds))})
    want = io.StringIO()
    w = csv.writer(want, delimiter=delim, lineterminator="\n")
    w.writerow(names)
    for r in t.to_pylist():
        w.writerow([r[n] for n in names])
    got = io.StringIO()  # a text stream, and a byte stream under a text layer (as sys.stdout is)
    with redirect_stdout(got):
        _write_delimited(t, delim)
    assert got.getvalue() == want.getvalue()
    raw = io.BytesIO()
    layer = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    with redirect_stdout(layer):
        _write_delimited(t, delim)
    layer.flush()
    assert raw.getvalue().decode("utf-8") == want.getvalue()
