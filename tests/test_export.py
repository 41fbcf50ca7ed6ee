"""``neardup export``: keep/drop partition the latest documents, each policy on a hand-made case, every
format read back with the same rows and texts, errors that leave no file, the CLI on the fixtures."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import neardup.export as export_mod
from neardup import Index, NeardupError, StorageError
from neardup.cli.app import app
from neardup.export import ExportError, export
from neardup.ingest import ingest

from .conftest import FIXTURES, words_text, write_jsonl
from .test_faults import _fill, can_mount, mounted  # noqa: F401 (can_mount is a fixture)

runner = CliRunner()
WHATS = ("keep", "drop", "pairs", "clusters", "documents")


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def rows_of(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def catalog(idx: Path, sql: str, params=()) -> list[tuple]:
    con = duckdb.connect(str(idx / "catalog.duckdb"), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def leftovers(folder: Path) -> list[str]:
    """Files an export may leave behind: its temporary file and spill folder (hidden)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# -- a hand-made index: three groups, a singleton, a url with two versions --------------------------

A, B, C, D = (words_text(200, seed=s, prefix=p) for s, p in ((1, "a"), (2, "b"), (3, "c"), (4, "d")))


def more(text: str, n: int, seed: int) -> str:
    return text + " " + words_text(n, seed=seed, prefix="x")


@pytest.fixture(scope="module")
def hand(tmp_path_factory) -> Path:
    """Batch 1: u1 A (doc 1), u2 A+10 words (2), u3 B (3), u4 C (4), u8 D (5); batch 2: u5 A+5 (6),
    u6 C+3 (7), u3 B+1 (8, the new version of u3: doc 3 is no longer latest)."""
    tmp = tmp_path_factory.mktemp("hand")
    one = write_jsonl(tmp / "one.jsonl", [{"url": "u1", "text": A}, {"url": "u2", "text": more(A, 10, 9)},
                                          {"url": "u3", "text": B}, {"url": "u4", "text": C}, {"url": "u8", "text": D}])
    two = write_jsonl(tmp / "two.jsonl", [{"url": "u5", "text": more(A, 5, 9)}, {"url": "u6", "text": more(C, 3, 7)},
                                          {"url": "u3", "text": more(B, 1, 5)}])
    idx = tmp / "idx"
    ingest(Index(idx), str(one))
    ingest(Index(idx), str(two))
    return idx


def test_the_hand_made_index_is_what_the_cases_assume(hand):
    assert catalog(hand, "SELECT doc_id, url, batch_id, is_latest FROM documents ORDER BY doc_id") == [
        (1, "u1", 1, True), (2, "u2", 1, True), (3, "u3", 1, False), (4, "u4", 1, True), (5, "u8", 1, True),
        (6, "u5", 2, True), (7, "u6", 2, True), (8, "u3", 2, True)]
    members = catalog(hand, "SELECT list(m.doc_id ORDER BY m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id) "
                            "WHERE c.method = 'components' GROUP BY c.cluster_id ORDER BY 1")
    assert [r[0] for r in members] == [[1, 2, 6], [3, 8], [4, 7]]


@pytest.mark.parametrize("policy, kept, dropped", [
    ("first", [1, 4, 5, 8], {2: 1, 6: 1, 7: 4}),
    ("longest", [2, 5, 7, 8], {1: 2, 6: 2, 4: 7}),  # A+10 has the most words, C+3 more than C
    ("latest", [5, 6, 7, 8], {1: 6, 2: 6, 4: 7}),  # batch 2 holds A+5 and C+3
])
def test_each_policy_on_the_hand_made_case(hand, tmp_path, policy, kept, dropped):
    export(Index(hand), str(tmp_path / "keep.parquet"), what="keep", keep=policy)
    export(Index(hand), str(tmp_path / "drop.parquet"), what="drop", keep=policy)
    keep, drop = rows_of(tmp_path / "keep.parquet"), rows_of(tmp_path / "drop.parquet")
    assert [r["doc_id"] for r in keep] == kept
    assert {r["doc_id"]: r["kept_doc_id"] for r in drop} == dropped
    texts = dict(catalog(hand, "SELECT doc_id, text FROM documents"))
    urls = dict(catalog(hand, "SELECT doc_id, url FROM documents"))
    for r in keep:
        assert r["text"] == texts[r["doc_id"]] and r["url"] == urls[r["doc_id"]]
    singles = {r["doc_id"]: (r["group_id"], r["group_size"]) for r in keep}
    assert singles[5] == (None, 1)  # D is in no cluster
    assert singles[8][1] == 1  # u3's component holds its old version, which does not count
    assert sorted(r["group_size"] for r in keep if r["doc_id"] != 5) == [1, 2, 3]
    for r in drop:  # every drop here has a direct jaccard pair with its kept document
        assert r["kept_url"] == urls[r["kept_doc_id"]]
        a, b = sorted((r["doc_id"], r["kept_doc_id"]))
        assert r["pair_method"] == "jaccard"
        assert r["similarity"] == catalog(hand, "SELECT similarity FROM duplicates WHERE doc_a = ? AND doc_b = ? AND method = 'jaccard'",
                                          [a, b])[0][0]


def test_a_component_without_a_direct_pair_gives_null_and_the_group(tmp_path):
    """The chain fixture: one component of 12 windows where the ends share nothing."""
    idx = tmp_path / "idx"
    ingest(Index(idx), str(FIXTURES / "text" / "chain.jsonl"))
    export(Index(idx), str(tmp_path / "drop.parquet"), what="drop")
    drop = rows_of(tmp_path / "drop.parquet")
    assert len(drop) == 11 and {r["kept_doc_id"] for r in drop} == {1} and len({r["group_id"] for r in drop}) == 1
    pairs = {(a, b): m for a, b, m in catalog(idx, "SELECT doc_a, doc_b, list(method ORDER BY method) FROM duplicates GROUP BY ALL")}
    nulls = [r for r in drop if r["pair_method"] is None]
    assert nulls and all(r["similarity"] is None and (1, r["doc_id"]) not in pairs for r in nulls)
    for r in drop:
        if r["pair_method"] is not None:
            assert r["pair_method"] == ("jaccard" if "jaccard" in pairs[(1, r["doc_id"])] else "simhash")


# -- the partition, on generated indexes ----------------------------------------------------------

def _preferred(clustering_pairs: str | None, index_pairs: list[str], methods: list[str]) -> str:
    order = ([clustering_pairs] if clustering_pairs else []) + [m for m in index_pairs if m != clustering_pairs]
    known = [m for m in order if m in methods]
    return known[0] if known else sorted(methods)[0]


def _union_find_groups(members: list[tuple[int, int]]) -> dict[int, frozenset]:
    """doc -> the set of documents reachable through shared clusters (an independent check of the labels)."""
    parent: dict = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for cluster, doc in members:
        parent[root(("c", cluster))] = root(("d", doc))
    groups = defaultdict(set)
    for _, doc in members:
        groups[root(("d", doc))].add(doc)
    return {d: frozenset(g) for g in groups.values() for d in g}


def check_partition(idx: Path, out: Path, clustering: str, policy: str) -> None:
    export(Index(idx), str(out / "keep.parquet"), what="keep", cluster=clustering, keep=policy, force=True)
    export(Index(idx), str(out / "drop.parquet"), what="drop", cluster=clustering, keep=policy, force=True)
    keep, drop = rows_of(out / "keep.parquet"), rows_of(out / "drop.parquet")
    docs = {r[0]: r[1:] for r in catalog(idx, "SELECT doc_id, n_words, n_bytes, batch_id FROM latest_documents")}
    kept_ids, dropped_ids = [r["doc_id"] for r in keep], [r["doc_id"] for r in drop]
    assert kept_ids == sorted(kept_ids) and dropped_ids == sorted(dropped_ids)
    assert not set(kept_ids) & set(dropped_ids)
    assert sorted(kept_ids + dropped_ids) == sorted(docs)  # keep and drop partition the latest documents
    members = catalog(idx, "SELECT m.cluster_id, m.doc_id FROM cluster_members m JOIN clusters c USING (cluster_id) "
                           "JOIN latest_documents d USING (doc_id) WHERE c.method = ?", [clustering])
    groups = _union_find_groups(members)
    kept_of_group = {}
    for r in keep:
        if r["group_id"] is None:
            assert r["doc_id"] not in groups and r["group_size"] == 1
        else:
            assert r["group_id"] not in kept_of_group  # one kept per group
            kept_of_group[r["group_id"]] = r["doc_id"]
            assert r["group_size"] == len(groups[r["doc_id"]])
            assert r["group_id"] == min(c for c, d in members if d in groups[r["doc_id"]])
    key = {"first": lambda d: d, "longest": lambda d: (-docs[d][0], -docs[d][1], d), "latest": lambda d: (-docs[d][2], -d)}[policy]
    for r in keep:
        if r["group_id"] is not None:  # the policy's choice, ties and all
            assert r["doc_id"] == min(groups[r["doc_id"]], key=key)
    assert len(kept_of_group) == len({g for g in groups.values()})
    own = catalog(idx, "SELECT min(json_extract_string(params, '$.pairs')) FROM clusters WHERE method = ?", [clustering])[0][0]
    index_pairs = json.loads(catalog(idx, "SELECT value FROM settings WHERE key = 'pairs'")[0][0])
    for r in drop:
        assert kept_of_group[r["group_id"]] == r["kept_doc_id"] and r["kept_doc_id"] in groups[r["doc_id"]]
        a, b = sorted((r["doc_id"], r["kept_doc_id"]))
        direct = dict(catalog(idx, "SELECT method, similarity FROM duplicates WHERE doc_a = ? AND doc_b = ?", [a, b]))
        if direct:
            m = _preferred(own, index_pairs, list(direct))
            assert (r["pair_method"], r["similarity"]) == (m, direct[m])
        else:
            assert r["pair_method"] is None and r["similarity"] is None


BASES = [words_text(60, seed=s, prefix=p) for s, p in enumerate("pqrst")]


@st.composite
def corpora(draw):
    """Up to three batches of documents drawn from five bases with a few words appended (near
    duplicates of each other), some under urls of an earlier batch (new versions)."""
    batches = []
    urls = 0
    for _ in range(draw(st.integers(1, 3))):
        recs = {}
        for _ in range(draw(st.integers(1, 7))):
            base = draw(st.integers(0, len(BASES) - 1))
            extra = draw(st.integers(0, 4))
            if urls and draw(st.booleans()) and draw(st.booleans()):
                url = f"u{draw(st.integers(0, urls - 1))}"
            else:
                url, urls = f"u{urls}", urls + 1
            recs[url] = BASES[base] + (" " + words_text(extra, seed=draw(st.integers(0, 3)), prefix="e") if extra else "")
        batches.append([{"url": u, "text": t} for u, t in recs.items()])
    return batches


@settings(max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(corpora())
def test_keep_and_drop_partition_the_latest_documents(batches):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for i, recs in enumerate(batches):
            ingest(Index(tmp / "idx"), str(write_jsonl(tmp / f"b{i}.jsonl", recs)))
        for clustering in ("components", "concept"):  # concept clusters overlap: their groups merge them
            for policy in ("first", "longest", "latest"):
                check_partition(tmp / "idx", tmp, clustering, policy)


def test_overlapping_clusters_merge_into_one_group(tmp_path):
    """A star clustering's stars overlap; the chain's components do not."""
    idx = tmp_path / "idx"
    ingest(Index(idx), str(FIXTURES / "text" / "chain.jsonl"))
    assert cli("rebuild", "--index", idx, "--clusters", "star").exit_code == 0
    overlapping = catalog(idx, "SELECT count(*) FROM (SELECT doc_id FROM cluster_members JOIN clusters USING (cluster_id) "
                               "WHERE method = 'star' GROUP BY doc_id HAVING count(*) > 1)")[0][0]
    assert overlapping > 0
    for policy in ("first", "longest", "latest"):
        check_partition(idx, tmp_path, "star", policy)


# -- formats ---------------------------------------------------------------------------------------

TRICKY = [
    "Ünïcödé café naïve façade — 中文字符 日本語のテキスト 한국어 😀🎉 עברית العربية " + words_text(12, seed=1),
    "a line\nanother line\r\nthird \"quoted\", with commas, 'single' and back\\slash\ttab " + words_text(12, seed=2),
    "\u2028line separator\u2029 zero\u200bwidth and a NUL-free tail, ✓ " + words_text(12, seed=3),
]


@pytest.fixture(scope="module")
def fixture_index(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("fx")
    idx = tmp / "idx"
    ingest(Index(idx), str(FIXTURES / "crawl" / "sample.warc.gz"))
    ingest(Index(idx), str(FIXTURES / "text" / "chain.jsonl"))
    ingest(Index(idx), str(write_jsonl(tmp / "tricky.jsonl", [{"url": f"t{i}", "text": t} for i, t in enumerate(TRICKY)])))
    return idx


def read_back(path: Path, fmt: str) -> list[dict]:
    if fmt == "parquet":
        return rows_of(path)
    if fmt == "jsonl":
        with open(path, encoding="utf-8") as fh:  # the stock reader: one json.loads per line
            return [json.loads(line) for line in fh]
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def from_csv(text: str, like):
    """A CSV field read as the type of the Parquet value ``like`` (NULL is an empty field)."""
    if like is None:
        return None if text == "" else text
    if isinstance(like, bool):
        return {"true": True, "false": False}[text]
    return type(like)(text)


@pytest.mark.parametrize("what", WHATS)
def test_every_format_reads_back_the_same_rows(fixture_index, tmp_path, what):
    outs = {}
    for fmt in ("parquet", "jsonl", "csv"):
        r = export(Index(fixture_index), str(tmp_path / f"out.{fmt}"), what=what)
        assert r.fmt == fmt  # from the suffix
        outs[fmt] = read_back(tmp_path / f"out.{fmt}", fmt)
        assert r.rows == len(outs[fmt])
    assert outs["parquet"], what
    assert outs["jsonl"] == outs["parquet"]
    assert [{k: from_csv(row[k], v) for k, v in p.items()} for row, p in zip(outs["csv"], outs["parquet"])] == outs["parquet"]
    assert len(outs["csv"]) == len(outs["parquet"])
    assert list(outs["csv"][0]) == pq.read_schema(tmp_path / "out.parquet").names


def test_texts_round_trip_in_every_format(fixture_index, tmp_path):
    texts = dict(catalog(fixture_index, "SELECT url, text FROM latest_documents"))
    assert all(texts[f"t{i}"] == t for i, t in enumerate(TRICKY))  # the catalog holds them as written
    for fmt in ("parquet", "jsonl", "csv"):
        export(Index(fixture_index), str(tmp_path / f"docs.{fmt}"), what="documents")
        rows = read_back(tmp_path / f"docs.{fmt}", fmt)
        assert {r["url"]: r["text"] for r in rows} == texts, fmt


def test_jsonl_and_csv_on_standard_output_are_the_file_s_bytes(fixture_index, tmp_path):
    for fmt in ("jsonl", "csv"):
        export(Index(fixture_index), str(tmp_path / f"keep.{fmt}"), what="keep")
        r = runner.invoke(app, ["export", "--index", str(fixture_index), "--out", "-", "--format", fmt])
        assert r.exit_code == 0, r.output
        assert r.stdout_bytes == (tmp_path / f"keep.{fmt}").read_bytes()
        assert "rows (keep) as" in r.stderr and "rows (keep) as" not in r.stdout


def test_range_size_changes_nothing_in_the_output(fixture_index, tmp_path, monkeypatch):
    """Rows are read in key ranges; many small ranges give the same bytes as one."""
    for what in WHATS:
        for fmt in ("parquet", "jsonl", "csv"):
            export(Index(fixture_index), str(tmp_path / f"one.{fmt}"), what=what, force=True)
            monkeypatch.setattr(export_mod, "RANGE_BYTES", 3000)
            export(Index(fixture_index), str(tmp_path / f"many.{fmt}"), what=what, force=True)
            monkeypatch.undo()
            if fmt == "parquet":  # row groups differ; the rows do not
                assert pq.ParquetFile(tmp_path / "many.parquet").num_row_groups > 2
                assert rows_of(tmp_path / "many.parquet") == rows_of(tmp_path / "one.parquet")
            else:
                assert (tmp_path / f"many.{fmt}").read_bytes() == (tmp_path / f"one.{fmt}").read_bytes()


def test_the_same_index_gives_the_same_bytes(fixture_index, tmp_path):
    for what in WHATS:
        export(Index(fixture_index), str(tmp_path / "a.parquet"), what=what, force=True)
        export(Index(fixture_index), str(tmp_path / "b.parquet"), what=what, force=True)
        assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes(), what


def test_tables_and_their_filters(fixture_index, tmp_path):
    out = tmp_path / "t.parquet"
    export(Index(fixture_index), str(out), what="pairs", method="simhash", force=True)
    pairs = rows_of(out)
    assert pairs and {r["method"] for r in pairs} == {"simhash"}
    want = catalog(fixture_index, "SELECT doc_a, doc_b, similarity FROM duplicates WHERE method = 'simhash' ORDER BY doc_a, doc_b")
    assert [(r["doc_a"], r["doc_b"], r["similarity"]) for r in pairs] == want
    export(Index(fixture_index), str(out), what="clusters", cluster="concept", force=True)
    rows = rows_of(out)
    want = catalog(fixture_index, "SELECT c.cluster_id, m.doc_id FROM clusters c JOIN cluster_members m USING (cluster_id) "
                                  "WHERE method = 'concept' ORDER BY 1, 2")
    assert [(r["cluster_id"], r["doc_id"]) for r in rows] == want
    export(Index(fixture_index), str(out), what="documents", force=True)
    docs = rows_of(out)
    want = catalog(fixture_index, "SELECT doc_id, content_hash FROM latest_documents ORDER BY doc_id")
    assert [(r["doc_id"], int(r["content_hash"], 16)) for r in docs] == want
    # types every reader takes as they are (no unsigned 64-bit: Spark has none)
    assert {f.type for f in pq.read_schema(out)} <= {pa.int64(), pa.int32(), pa.string(), pa.bool_()}


def test_all_versions(hand, tmp_path):
    out = tmp_path / "d.parquet"
    export(Index(hand), str(out), what="documents")
    assert [r["doc_id"] for r in rows_of(out)] == [1, 2, 4, 5, 6, 7, 8]
    export(Index(hand), str(out), what="documents", all_versions=True, force=True)
    assert [(r["doc_id"], r["version"], r["is_latest"]) for r in rows_of(out)][2] == (3, 1, False)
    export(Index(hand), str(out), what="pairs", method="jaccard", force=True)
    assert (3, 8) not in {(r["doc_a"], r["doc_b"]) for r in rows_of(out)}
    export(Index(hand), str(out), what="pairs", method="jaccard", all_versions=True, force=True)
    assert (3, 8) in {(r["doc_a"], r["doc_b"]) for r in rows_of(out)}


# -- errors: a clear message, no file ---------------------------------------------------------------

def test_refusals_write_nothing(hand, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    cases = [
        (dict(what="keep", cluster="nope"), "no clustering 'nope'", "components, concept"),
        (dict(what="pairs", method="nope"), "no pair method 'nope'", "jaccard, simhash"),
        (dict(what="nope"), "unknown --what 'nope'", "keep, drop, pairs, clusters, documents"),
        (dict(what="keep", keep="shortest"), "unknown --keep 'shortest'", "first, longest, latest"),
        (dict(what="keep", fmt="xml"), "unknown --format 'xml'", "parquet, jsonl, csv"),
        (dict(what="keep", all_versions=True), "--all-versions applies to pairs, clusters and documents", ""),
        (dict(what="documents", cluster="components"), "--cluster applies to", ""),
        (dict(what="keep", method="jaccard"), "--method applies to --what pairs", ""),
    ]
    for kwargs, words, choices in cases:
        with pytest.raises(ExportError) as e:
            export(Index(hand), str(out / "x.parquet"), **kwargs)
        assert words in str(e.value) and choices in str(e.value) and e.value.exit_code == 2
        assert list(out.iterdir()) == []
    with pytest.raises(ExportError, match="Parquet cannot go to standard output"):
        export(Index(hand), "-", fmt="parquet")
    with pytest.raises(ExportError, match="does not exist"):
        export(Index(hand), str(out / "missing" / "x.parquet"))
    with pytest.raises(ExportError, match="is a folder"):
        export(Index(hand), str(out), force=True)
    with pytest.raises(ExportError, match="inside the index folder"):
        export(Index(hand), str(hand / "catalog.duckdb"), what="documents", force=True)
    assert list(out.iterdir()) == []
    with pytest.raises(NeardupError, match="no neardup index"):
        export(Index(tmp_path / "none"), str(out / "x.parquet"))
    assert list(out.iterdir()) == []


def test_an_existing_output_is_kept_unless_forced(hand, tmp_path):
    out = tmp_path / "keep.parquet"
    out.write_bytes(b"precious")
    r = cli("export", "--index", hand, "--out", out)
    assert r.exit_code == 2 and "exists; not overwritten" in r.output and "--force" in r.output
    assert out.read_bytes() == b"precious"
    r = cli("export", "--index", hand, "--out", out, "--force")
    assert r.exit_code == 0, r.output
    assert [x["doc_id"] for x in rows_of(out)] == [1, 4, 5, 8]
    assert leftovers(tmp_path) == []


def test_a_failure_mid_write_leaves_no_file_and_the_old_one_whole(hand, tmp_path, monkeypatch):
    out = tmp_path / "docs.jsonl"
    out.write_bytes(b"old\n")
    monkeypatch.setattr(export_mod, "RANGE_BYTES", 3000)
    real = export_mod.Writer.write
    calls = []

    def failing(self, table):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device", str(self.sink.name))
        real(self, table)

    monkeypatch.setattr(export_mod.Writer, "write", failing)
    with pytest.raises(StorageError) as e:
        export(Index(hand), str(out), what="documents", force=True)
    assert "no space left on the device while writing the export" in str(e.value) and e.value.exit_code == 8
    assert out.read_bytes() == b"old\n" and leftovers(tmp_path) == []
    calls.clear()
    with pytest.raises(StorageError):
        export(Index(hand), str(tmp_path / "new.csv"), what="documents")
    assert not (tmp_path / "new.csv").exists() and leftovers(tmp_path) == []


def test_an_unwritable_folder_leaves_nothing(hand, tmp_path):
    """A folder the process may not write: as a user without root's override (setpriv), or as root on a
    read-only path."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        code = "from neardup.cli.app import main; main()"
        cmd = [sys.executable, "-c", code, "export", "--index", str(hand), "--out", str(folder / "k.parquet")]
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None or subprocess.run([setpriv, "--bounding-set=-dac_override,-dac_read_search", "true"],
                                                 capture_output=True).returncode != 0:
                pytest.skip("root without setpriv: the folder's mode does not bind")
            cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]
        p = subprocess.run(cmd, capture_output=True, timeout=300)
        assert p.returncode == 8, p.stderr.decode()
        assert "permission denied while making the export's temporary files" in p.stderr.decode()
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


def test_a_real_full_disk_leaves_no_file(fixture_index, tmp_path, can_mount):
    if not can_mount:
        pytest.skip("needs root and permission to mount a tmpfs")
    with mounted("-t", "tmpfs", "-o", "size=2m", "tmpfs", at=tmp_path / "disk") as disk:
        filler = _fill(disk, leave=256 * 1024)  # the documents' JSON Lines take 1.5 MB
        r = cli("export", "--index", fixture_index, "--what", "documents", "--out", disk / "docs.jsonl")
        assert r.exit_code == 8, r.output
        assert "no space left on the device while writing the export" in " ".join(r.output.split())
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
        filler.unlink()
        r = cli("export", "--index", fixture_index, "--what", "documents", "--out", disk / "docs.jsonl")
        assert r.exit_code == 0, r.output
        assert sorted(p.name for p in disk.iterdir()) == ["docs.jsonl"]


# -- the command line, end to end on the fixtures --------------------------------------------------

def test_cli_end_to_end_on_the_fixtures(fixture_index, tmp_path):
    summary = {}
    for what in WHATS:
        for fmt in ("parquet", "jsonl", "csv"):
            out = tmp_path / f"{what}.{fmt}"
            r = cli("export", "--index", fixture_index, "--what", what, "--out", out)
            assert r.exit_code == 0, r.output
            assert f"wrote {len(read_back(out, fmt))} rows ({what}) as {fmt} to {out}" in r.output
            summary[what] = r.output
    n_latest = catalog(fixture_index, "SELECT count(*) FROM latest_documents")[0][0]
    assert len(rows_of(tmp_path / "keep.parquet")) + len(rows_of(tmp_path / "drop.parquet")) == n_latest
    assert "duplicate groups of clustering components (--keep first)" in summary["keep"]
    r = cli("export", "--index", fixture_index, "--what", "keep", "--cluster", "concept", "--keep", "longest", "-o", "-", "-q")
    assert r.exit_code == 0 and r.stderr == ""
    kept = [json.loads(line) for line in io.StringIO(r.stdout)]
    assert kept and all(set(k) == {"doc_id", "url", "text", "batch_id", "n_words", "n_bytes", "group_id", "group_size"} for k in kept)
    r = cli("export", "--index", fixture_index, "--cluster", "nope", "-o", tmp_path / "x.parquet")
    assert r.exit_code == 2 and "no clustering 'nope'" in r.output and "components, concept" in r.output
    assert not (tmp_path / "x.parquet").exists()


def test_a_writer_holding_the_catalog_is_exit_4_and_no_file(hand, tmp_path):
    """Another process holds the catalog read-write, as a writer does."""
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('ready', flush=True); time.sleep(60)", str(hand / "catalog.duckdb")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        r = cli("export", "--index", hand, "--out", tmp_path / "k.parquet")
    finally:
        holder.kill()
        holder.wait()
    assert r.exit_code == 4 and "the catalog is in use" in r.output, r.output
    assert list(tmp_path.iterdir()) == []


def test_export_reads_beside_other_readers(fixture_index, tmp_path):
    """A read-only catalog connection (a `neardup sql`, a `duckdb -readonly`) stays open meanwhile."""
    con = duckdb.connect(str(fixture_index / "catalog.duckdb"), read_only=True)
    try:
        n = con.execute("SELECT count(*) FROM latest_documents").fetchall()[0][0]
        r = export(Index(fixture_index), str(tmp_path / "docs.parquet"), what="documents")
        assert r.rows == n == con.execute("SELECT count(*) FROM latest_documents").fetchall()[0][0]
    finally:
        con.close()
