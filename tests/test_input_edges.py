"""Input edge cases (issue 14, item 6): binary files, empty files, the suffixes a folder walk
reads, settings that contradict each other, re-ingested rejects, and the wording of messages.

Each case states its whole outcome: the rows of ``rejects`` (source, record, reason), the exit
code, the counts, and that nothing indexed before is lost.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from typer.testing import CliRunner

from neardup import Index, ReadOptions, Settings, SettingsMismatch
from neardup.cli.app import app
from neardup.ingest import ingest
from neardup.readers import COMPRESSION_SUFFIXES, SUFFIXES, detect_format, read_input
from neardup.settings import LSH_RECALL, min_lsh_perms

from .conftest import ROOT, words_text, write_jsonl
from .warcs import write_warc

runner = CliRunner()


def cli(*args: str, input: bytes | None = None):
    return runner.invoke(app, list(args), input=input)


def collect(path: str, opts: ReadOptions | None = None) -> tuple[list[dict], list[tuple[str, str, str]]]:
    rows, rejects = [], []
    for ch in read_input(path, opts or ReadOptions()):
        rows.extend(ch.batch.to_pylist())
        rejects.extend((r.source, r.record, r.reason) for r in ch.rejects)
    return rows, rejects


def from_stdin(data: bytes, opts: ReadOptions, monkeypatch) -> tuple[list[dict], list[tuple[str, str, str]]]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    return collect("-", opts)


def catalog_rejects(idx: Path) -> list[tuple[int, str, str, str]]:
    with Index(idx).reader() as con:
        return con.execute("SELECT batch_id, source, record, reason FROM rejects ORDER BY ALL").fetchall()


def documents(idx: Path) -> list[tuple]:
    with Index(idx).reader() as con:
        return con.execute("SELECT doc_id, url, content_hash FROM documents ORDER BY doc_id").fetchall()


def assert_reasons(got: list[tuple[str, str]], want: list[tuple[str, str]]) -> None:
    """``got``'s (record, reason) are ``want``'s (record, start of the reason), in order."""
    assert len(got) == len(want), got
    for (rec, why), (want_rec, start) in zip(got, want):
        assert rec == want_rec and why.startswith(start), (rec, why)


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


# -- 1. binary content: one reject for the whole file ----------------------------------

_rng = random.Random(14)
RANDOM = bytes(_rng.getrandbits(8) for _ in range(120_000))  # about 470 "lines"
UTF16_JSONL = "".join(json.dumps({"url": f"u{i}", "text": words_text(20, i)}) + "\n" for i in range(50)).encode("utf-16")

BINARY = [
    # (file name, bytes, what the reason says)
    ("random.jsonl", RANDOM, "binary content, not text"),
    ("random.ndjson", RANDOM, "binary content, not text"),
    ("random.jsonl.gz", gzip.compress(RANDOM, mtime=0), "binary content, not text"),
    ("random.jsonl.zst", zst(RANDOM), "binary content, not text"),
    ("utf16.jsonl", UTF16_JSONL, "binary content, not text"),
    ("random.warc", RANDOM, "binary content, not text"),
    ("random.warc.gz", gzip.compress(RANDOM, mtime=0), "binary content, not text"),
    ("random.txt", RANDOM, "binary content (NUL or control bytes), not text"),
    ("random.html.gz", gzip.compress(RANDOM, mtime=0), "binary content (NUL or control bytes), not text"),
]


@pytest.mark.parametrize("name,data,reason", BINARY, ids=[c[0] for c in BINARY])
def test_a_binary_file_is_one_reject_from_a_file_and_from_stdin(tmp_path, monkeypatch, name, data, reason):
    assert RANDOM.count(b"\n") > 400
    path = tmp_path / name
    path.write_bytes(data)
    rows, rejects = collect(str(path))
    assert rows == []
    assert len(rejects) == 1, rejects
    source, record, why = rejects[0]
    assert (source, record) == (str(path), "file") and why.startswith(reason), why
    # standard input holding the same bytes, with the format named: the same reject
    fmt = detect_format(name)
    assert from_stdin(data, ReadOptions(fmt=fmt), monkeypatch) == ([], [("<stdin>", "file", why)])


def test_a_binary_jsonl_through_the_cli_is_one_row_and_loses_nothing_indexed_before(tmp_path):
    idx = str(tmp_path / "idx")
    good = write_jsonl(tmp_path / "good.jsonl", [{"url": f"g{i}", "text": words_text(30, i)} for i in range(3)])
    assert cli("ingest", "-q", "--index", idx, str(good)).exit_code == 0
    before = documents(tmp_path / "idx")
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(RANDOM)
    r = cli("ingest", "--index", idx, str(binary))
    assert r.exit_code == 0, r.output
    assert "0 added (0 new versions), 0 unchanged, 0 skipped, 1 rejected" in r.output
    rows = catalog_rejects(tmp_path / "idx")
    assert [(b, s, rec) for b, s, rec, _ in rows] == [(2, str(binary), "file")]
    assert rows[0][3].endswith("JSON Lines is UTF-8 text, so nothing of the file is read")
    assert documents(tmp_path / "idx") == before and len(before) == 3


NOT_BINARY = [
    # (name, lines, records kept, rejected lines and what their reason says)
    ("latin1.jsonl",
     [json.dumps({"url": f"u{i}", "text": words_text(12, i)}).encode() for i in range(40)]
     + ['{"url": "x", "text": "caf\xe9 au lait"}'.encode("latin-1")],
     40, [("line 41", "invalid UTF-8")]),
    ("one-nul-line.jsonl",
     [json.dumps({"url": f"u{i}", "text": words_text(12, i)}).encode() for i in range(40)] + [b'{"url": "n", "text": "a\x00b"}'],
     40, [("line 41", "malformed JSON: Invalid control character at column 24")]),
    ("controls-escaped.jsonl",
     [json.dumps({"url": f"u{i}", "text": words_text(12, i)}).encode() for i in range(40)] + [json.dumps({"url": "c", "text": "a\x01\x02\x03\x04"}).encode()],
     40, [("line 41", "binary content (NUL or control characters), not text")]),
]


@pytest.mark.parametrize("name,lines,kept,bad", NOT_BINARY, ids=[c[0] for c in NOT_BINARY])
def test_a_few_bad_lines_do_not_make_a_file_binary(tmp_path, name, lines, kept, bad):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows, rejects = collect(str(path))
    assert len(rows) == kept
    assert_reasons([(rec, why) for _, rec, why in rejects], bad)


# -- 2. empty inputs ------------------------------------------------------------------

EMPTY_COMPRESSED = "empty compressed file (0 bytes, not even a gzip/zstd header): cut or never written; nothing to read"
EMPTY = [
    # (name, bytes, rejects: (record, reason prefix))
    ("e.jsonl", b"", []),
    ("e.warc", b"", []),
    ("e.txt", b"", [("file", "empty text (no words)")]),
    ("e.html", b"", [("file", "empty text (no words)")]),
    ("e.parquet", b"", [("file", "not a readable Parquet file")]),
    ("e.jsonl.gz", b"", [("file", EMPTY_COMPRESSED)]),
    ("e.jsonl.zst", b"", [("file", EMPTY_COMPRESSED)]),
    ("e.warc.gz", b"", [("file", EMPTY_COMPRESSED)]),
    ("e.txt.gz", b"", [("file", EMPTY_COMPRESSED)]),
    ("e.html.zstd", b"", [("file", EMPTY_COMPRESSED)]),
    ("e.parquet.gz", b"", [("file", EMPTY_COMPRESSED)]),
    # compressed nothing reads like the plain 0-byte file
    ("nothing.jsonl.gz", gzip.compress(b"", mtime=0), []),
    ("nothing.jsonl.zst", zst(b""), []),
    ("nothing.warc.gz", gzip.compress(b"", mtime=0), []),
    ("nothing.txt.gz", gzip.compress(b"", mtime=0), [("file", "empty text (no words)")]),
]


def test_empty_inputs(tmp_path, monkeypatch):
    idx = tmp_path / "idx"
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"url": "s", "text": words_text(30)}])
    ingest(Index(idx), str(seed))
    before = documents(idx)
    for name, data, want in EMPTY:
        path = tmp_path / name
        path.write_bytes(data)
        res = ingest(Index(idx), str(path))
        assert (res.n_docs, res.n_unchanged, res.n_rejected) == (0, 0, len(want)), name
        got = [(rec, why) for _, s, rec, why in catalog_rejects(idx) if s == str(path)]
        assert_reasons(got, want)
    assert documents(idx) == before
    # standard input: 0 bytes carry no name, so they read like a 0-byte plain file
    assert from_stdin(b"", ReadOptions(), monkeypatch) == ([], [])
    for fmt in ("jsonl", "warc"):
        assert from_stdin(b"", ReadOptions(fmt=fmt), monkeypatch) == ([], [])
    rows, rejects = from_stdin(b"", ReadOptions(fmt="text"), monkeypatch)
    assert [r["content"] for r in rows] == [""] and rejects == []  # the empty document, rejected at ingest like e.txt
    r = cli("ingest", "--index", str(idx), "--format", "text", "-", input=b"")
    assert r.exit_code == 0 and "0 added (0 new versions), 0 unchanged, 0 skipped, 1 rejected" in r.output, r.output
    assert [(s, rec, why[:21]) for _, s, rec, why in catalog_rejects(idx) if s == "<stdin>"] == [("<stdin>", "file", "empty text (no words)")]


def test_empty_files_in_a_folder_are_each_named(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.jsonl.gz").write_bytes(b"")
    (d / "b.jsonl").write_bytes(b"")
    (d / "c.txt.zst").write_bytes(b"")
    write_jsonl(d / "d.jsonl", [{"url": "d", "text": words_text(20)}])
    rows, rejects = collect(str(d))
    assert [r["url"] for r in rows] == ["d"]
    assert rejects == [(str(d / "a.jsonl.gz"), "file", EMPTY_COMPRESSED), (str(d / "c.txt.zst"), "file", EMPTY_COMPRESSED)]


# -- 3. the suffixes a folder walk reads: exactly those docs/cli.md lists --------------

def documented_suffixes() -> tuple[dict[str, list[str]], list[str]]:
    """The table of format suffixes in docs/cli.md, and the compression suffixes after it."""
    doc = (ROOT / "docs" / "cli.md").read_text()
    section = doc.split("| format | suffixes |", 1)[1]
    table, after = section.split("\n\n", 1)
    formats = {}
    for line in table.strip().splitlines()[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        formats[cells[0]] = re.findall(r"`(\.[a-z]+)`", cells[1])
    compression = re.findall(r"`(\.[a-z]+)`", after.split("\n\n", 1)[0].split("(", 1)[0])
    return formats, compression


def test_the_documented_suffixes_are_the_code_s():
    formats, compression = documented_suffixes()
    assert sorted(s for ss in formats.values() for s in ss) == sorted(s for ss in SUFFIXES.values() for s in ss)
    assert [list(v) for v in SUFFIXES.values()] == list(formats.values())
    assert compression == list(COMPRESSION_SUFFIXES)


def _content(fmt: str, tmp: Path, gzipped: bool = False) -> bytes:
    if fmt == "warc":  # a WARC is gzipped record by record
        page = [("http://x/", b"<html><body>" + words_text(20).encode() + b"</body></html>", "text/html")]
        return write_warc(tmp / "t.warc", page, gzip=gzipped).read_bytes()
    if fmt == "parquet":
        buf = io.BytesIO()
        pq.write_table(pa.table({"text": [words_text(20)]}), buf)
        return buf.getvalue()
    if fmt == "jsonl":
        return (json.dumps({"text": words_text(20)}) + "\n").encode()
    return words_text(20).encode()


def test_a_folder_walk_reads_exactly_the_documented_suffixes(tmp_path):
    formats, compression = documented_suffixes()
    root = tmp_path / "walk"
    root.mkdir()
    fmt_of = {"WARC, WET, ARC": "warc", "JSON Lines": "jsonl", "Parquet": "parquet", "one HTML document": "html",
              "one plain-text document": "text"}
    read = set()
    for label, suffixes in formats.items():
        data = _content(fmt_of[label], tmp_path)
        for s in suffixes:
            for c, pack in [("", bytes), (".gz", lambda b: gzip.compress(b, mtime=0)), (".zst", zst), (".zstd", zst)]:
                assert c == "" or c in compression
                name = f"f{s}{c}"
                (root / name).write_bytes(_content("warc", tmp_path, gzipped=True) if label.startswith("WARC") and c == ".gz" else pack(data))
                read.add(name)
    (root / "sub").mkdir()
    (root / "sub" / "UPPER.TXT").write_bytes(b"words in upper case")
    read.add("sub/UPPER.TXT")
    ignored = ["README", "notes.rst", "data.csv", "page.xml", "page.shtml", "page.xht", "t.markdown", "t.txt.bak",
               "t.txt~", "a.jsonl.bz2", "a.warc.xz", "a.tsv", "a.jsonl.gz.zst", "a.parquet.snappy", "a.tar", "html", "jsonl"]
    for name in ignored:
        (root / name).write_bytes(b"{}\n")
    rows, rejects = collect(str(root))
    sources = {Path(r["source"]).relative_to(root).as_posix() for r in rows} | {Path(s).relative_to(root).as_posix() for s, _, _ in rejects}
    assert sources == read
    # every file gives its document but compressed Parquet and zstd WARC, one reject each
    reasons = {Path(s).name: why for s, _, why in rejects}
    assert set(reasons) == {f"f.parquet{c}" for c in (".gz", ".zst", ".zstd")} | {
        f"f{s}{c}" for s in formats["WARC, WET, ARC"] for c in (".zst", ".zstd")}
    assert all("zstd-compressed WARC" in why for n, why in reasons.items() if ".parquet" not in n)
    assert all(why.startswith("not a readable Parquet file") for n, why in reasons.items() if ".parquet" in n)
    assert len(rows) == len(read) - len(reasons)


# -- 4. settings checked against each other ------------------------------------------

BAD_SETTINGS = [
    # (init options, Settings keywords, message, hint)
    (["--concept-support", "500"], {"concept_support": 500},
     "concept_support 500 is more than the bottom-k sketch size 100", "pass --concept-support 100 or less"),
    (["--sketch", "bottom-k:50", "--concept-support", "51"], {"bottomk": 50, "concept_support": 51},
     "concept_support 51 is more than the bottom-k sketch size 50", "pass --concept-support 50 or less"),
    (["--methods", "shingles,minhash", "--concept-support", "80"], {"methods": ("shingles", "minhash"), "concept_support": 80},
     "concept_support 80 needs the bottomk fingerprints", "add bottomk to --methods"),
    (["--shingle-size", "3", "--shingle-offset", "4"], {"shingle_size": 3, "shingle_offset": 4},
     "shingle_offset 4 is more than shingle_size 3", "pass --shingle-offset 3 or less"),
    (["--minhash-perms", "4"], {"minhash_perms": 4},
     "minhash_perms 4 is too few for the LSH bands of the jaccard pairs at threshold 0.8", "pass --minhash-perms 5 or more"),
    (["--threshold", "0.05", "--pairs", "minhash"], {"threshold": 0.05, "pairs": ("minhash",)},
     "minhash_perms 100 is too few for the LSH bands of the minhash pairs at threshold 0.05", "pass --minhash-perms 135 or more"),
    (["--sketch", "bottom-k:0"], {"bottomk": 0}, "bottomk must be a positive integer, got 0", "pass --sketch bottom-k:N with N 1 or more"),
]


@pytest.mark.parametrize("args,kw,message,hint", BAD_SETTINGS, ids=[" ".join(c[0]) for c in BAD_SETTINGS])
def test_settings_that_cannot_work_together_are_refused_before_the_index_exists(tmp_path, args, kw, message, hint):
    with pytest.raises(SettingsMismatch) as exc:
        Settings(**kw)
    assert message in str(exc.value) and hint in exc.value.hint
    for cmd in (["init"], ["ingest", str(write_jsonl(tmp_path / "a.jsonl", [{"text": words_text(20)}]))]):
        r = cli(*cmd, "--index", str(tmp_path / "idx"), *args)
        assert r.exit_code == 2, r.output
        flat = " ".join(r.output.split())
        assert message in flat and hint in flat and "--bottomk" not in flat, flat
        assert not (tmp_path / "idx").exists()


GOOD_SETTINGS = [
    {"concept_support": 100},
    {"bottomk": 150, "concept_support": 150},
    {"shingle_size": 3, "shingle_offset": 3},
    {"minhash_perms": 5},
    {"threshold": 0.1, "minhash_perms": 66},
    {"threshold": 0.05, "pairs": ("simhash",)},  # no LSH pairs: the permutations do not matter
    {"methods": ("shingles", "minhash", "simhash"), "minhash_perms": 1, "pairs": ("simhash",), "threshold": 0.5},
]


@pytest.mark.parametrize("kw", GOOD_SETTINGS, ids=[str(k) for k in GOOD_SETTINGS])
def test_settings_at_the_limits_are_accepted(kw):
    Settings(**kw)


def test_the_lsh_rule_is_the_pair_finder_s():
    import inspect

    from neardup.pairs import lsh_params

    assert inspect.signature(lsh_params).parameters["target"].default == LSH_RECALL
    for t in (0.05, 0.1, 0.5, 0.8, 0.95, 1.0):
        n = min_lsh_perms(t)
        assert 1 - (1 - t) ** n >= LSH_RECALL and (n == 1 or 1 - (1 - t) ** (n - 1) < LSH_RECALL)


def test_settings_stored_before_the_checks_still_open(tmp_path):
    s = Settings.from_dict({"concept_support": 500})
    assert s.concept_support == 500 and s.bottomk == 100


def test_options_given_to_an_existing_index_are_checked_against_it_not_against_the_defaults(tmp_path):
    idx = str(tmp_path / "idx")
    assert cli("init", "--index", idx, "--sketch", "bottom-k:200", "--concept-support", "150", "--threshold", "0.05",
               "--minhash-perms", "200").exit_code == 0
    src = write_jsonl(tmp_path / "a.jsonl", [{"text": words_text(20)}])
    r = cli("ingest", "-q", "--index", idx, "--concept-support", "150", "--threshold", "0.05", str(src))
    assert r.exit_code == 0, r.output
    r = cli("ingest", "-q", "--index", idx, "--concept-support", "160", str(src))
    assert r.exit_code == 2 and "concept_support=160 (index has 150)" in r.output


# -- 5. rejects of an input ingested again ---------------------------------------------

def test_rejects_of_an_input_ingested_again_are_a_no_op(tmp_path):
    idx = tmp_path / "idx"
    warc = write_warc(tmp_path / "c.warc.gz", [
        ("http://x/a", b"<html><body>" + words_text(30).encode() + b"</body></html>", "text/html"),
        ("http://x/short", b"<html><body>five words are too few</body></html>", "text/html"),
        ("http://x/bin", b"<html>\x00\x01\x02\x03 binary</html>", "text/html"),
    ])
    jsonl = tmp_path / "j.jsonl"
    jsonl.write_text('{"url": "j1", "text": "' + words_text(20, 3) + '"}\n{"url": "j2", "text": null}\nnot json\n')
    first = [ingest(Index(idx), str(p)) for p in (warc, jsonl)]
    rows = catalog_rejects(idx)
    assert [(b, Path(s).name, rec) for b, s, rec, _ in rows] == [
        (1, "c.warc.gz", rows[0][2]), (1, "c.warc.gz", rows[1][2]), (2, "j.jsonl", "line 2"), (2, "j.jsonl", "line 3")]
    assert "too short: 5 words (< 10)" in rows[0][3] + rows[1][3] and "binary content" in rows[0][3] + rows[1][3]
    docs = documents(idx)
    again = [ingest(Index(idx), str(p)) for p in (warc, jsonl)]
    assert catalog_rejects(idx) == rows  # no new rows
    assert documents(idx) == docs
    assert [(r.n_docs, r.n_unchanged, r.n_rejected) for r in again] == [(0, f.n_docs, f.n_rejected) for f in first]
    with Index(idx).reader() as con:
        assert con.execute("SELECT batch_id, n_docs, n_rejected, status FROM batches ORDER BY batch_id").fetchall() == [
            (1, 1, 2, "committed"), (2, 1, 2, "committed"), (3, 0, 2, "committed"), (4, 0, 2, "committed")]
    # a changed input under the same name: its new rejects are added, the old ones stay
    jsonl.write_text('{"url": "j1", "text": "' + words_text(20, 3) + '"}\n{"url": "j2", "text": null}\n{"url": "j3"}\n')
    res = ingest(Index(idx), str(jsonl))
    assert res.n_rejected == 2
    assert catalog_rejects(idx) == sorted(rows + [(5, str(jsonl), "line 3", "missing text field 'text' (fields: url)")])
    # from standard input: the same rule for the source <stdin>
    for _ in range(2):
        r = cli("ingest", "-q", "--index", str(idx), "-", input=b'{"text": null}\n')
        assert r.exit_code == 0
    assert [row[1:] for row in catalog_rejects(idx) if row[1] == "<stdin>"] == [("<stdin>", "line 1", "text field 'text' is null")]


def test_a_strict_failure_keeps_its_reject_unless_a_committed_batch_has_it(tmp_path):
    idx = tmp_path / "idx"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "' + words_text(20) + '"}\nnot json\n')
    r = cli("ingest", "-q", "--strict", "--index", str(idx), str(bad))
    assert r.exit_code == 5
    assert catalog_rejects(idx) == [(1, str(bad), "line 2", "malformed JSON: Expecting value at column 1")]
    assert cli("ingest", "-q", "--index", str(idx), str(bad)).exit_code == 0
    assert cli("ingest", "-q", "--strict", "--index", str(idx), str(bad)).exit_code == 5
    assert catalog_rejects(idx) == [(1, str(bad), "line 2", "malformed JSON: Expecting value at column 1"),
                                    (2, str(bad), "line 2", "malformed JSON: Expecting value at column 1")]
    with Index(idx).reader() as con:
        assert con.execute("SELECT batch_id, n_rejected, status FROM batches ORDER BY batch_id").fetchall() == [
            (1, 1, "failed"), (2, 1, "committed"), (3, 1, "failed")]


# -- 6. messages ------------------------------------------------------------------------

JSONL_MESSAGES = [
    ('{"text": "abc', "malformed JSON: Unterminated string starting at column 10"),
    ('{"text": "a\tb"}', "malformed JSON: Invalid control character at column 12"),
    ('{"text": null, "url": "x"}', "text field 'text' is null"),
    ('{"url": "y"}', "missing text field 'text' (fields: url)"),
    ('{"text": 7}', "text field 'text' is a int, not a string"),
]


@pytest.mark.parametrize("fast", [True, False], ids=["arrow-block", "line-by-line"])
def test_jsonl_reject_reasons(tmp_path, fast):
    lines = [line for line, _ in JSONL_MESSAGES]
    if fast:  # null and missing text alone in a block that Arrow reads: the fast path names them
        lines = lines[2:4]
        want = [r for _, r in JSONL_MESSAGES[2:4]]
    else:
        want = [r for _, r in JSONL_MESSAGES]
    p = tmp_path / "m.jsonl"
    p.write_text("\n".join(lines) + "\n")
    rows, rejects = collect(str(p))
    assert rows == [] and [why for _, _, why in rejects] == want
    assert all(" at at " not in why for _, _, why in rejects)


def test_parquet_null_text_is_null_and_an_absent_column_is_missing(tmp_path):
    p = tmp_path / "p.parquet"
    pq.write_table(pa.table({"text": [words_text(20), None]}), p)
    assert collect(str(p))[1] == [(str(p), "row 1", "text field 'text' is null")]
    q = tmp_path / "q.parquet"
    pq.write_table(pa.table({"body": ["x"]}), q)
    assert collect(str(q))[1] == [(str(q), "file", "missing text column 'text' (columns: body)")]


def test_hints_name_only_options_that_exist(tmp_path):
    idx = str(tmp_path / "idx")
    missing = cli("ingest", "--index", idx, str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2 and "no such file or folder" in missing.output and "--format" not in missing.output
    unknown = tmp_path / "data.bin"
    unknown.write_bytes(b"x")
    r = cli("ingest", "--index", idx, str(unknown))
    assert r.exit_code == 2 and "cannot tell the format" in r.output and "pass --format" in r.output
    ingest(Index(tmp_path / "idx"), str(write_jsonl(tmp_path / "a.jsonl", [{"url": "a", "text": words_text(20)}])))
    r = cli("evaluate", "--index", idx, "--gold", str(tmp_path / "nope.csv"))
    assert r.exit_code == 2 and "cannot read the reference file" in r.output and "--format" not in r.output
    one_column = tmp_path / "one.csv"
    one_column.write_text("a\n")
    r = cli("evaluate", "--index", idx, "--gold", str(one_column))
    flat = " ".join(r.output.split())
    assert r.exit_code == 2 and "expected two columns" in flat and "two columns" in flat.split("hint:", 1)[1] and "--format" not in flat
    r = cli("init", "--index", str(tmp_path / "other"), "--sketch", "bottom-k:0")
    assert r.exit_code == 2 and "--sketch bottom-k:N" in r.output and "--bottomk" not in r.output
