"""The distributed build (``neardup.distributed``, ``neardup build``) on a LocalCluster of 2 worker
processes: the same documents, pairs and components as a local ingest of the same inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st_h

distributed = pytest.importorskip("dask.distributed")

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from neardup import Index, Settings  # noqa: E402
from neardup.cli.app import app  # noqa: E402
from neardup.distributed import build  # noqa: E402
from neardup.distributed.components import components_reference, min_label_components  # noqa: E402
from neardup.distributed.run import check_settings  # noqa: E402
from neardup.errors import MissingExtra, OutputExists, SettingsMismatch  # noqa: E402
from neardup.ingest import ingest  # noqa: E402

from .conftest import FIXTURES, ROOT, write_jsonl  # noqa: E402

FIXTURE_INPUTS = [FIXTURES / "crawl" / "sample.warc.gz", FIXTURES / "text" / "docs.jsonl", FIXTURES / "text" / "chain.jsonl"]


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        yield c


def _local(index_dir: Path, inputs: list[Path], settings: Settings) -> dict:
    """What a local ingest of ``inputs`` in sorted order holds."""
    idx = Index(index_dir)
    for p in sorted(str(Path(x).resolve()) for x in inputs):
        ingest(idx, p, create_with=settings)
    with idx.reader() as con:
        return _tables(con, {t: t for t in ("documents", "duplicates", "clusters", "cluster_members", "rejects")})


def _built(out: Path) -> dict:
    con = duckdb.connect()
    return _tables(con, {t: f"read_parquet('{out}/{t}/*.parquet')" for t in ("documents", "duplicates", "clusters", "cluster_members", "rejects")})


def _tables(con, rel: dict) -> dict:
    return {
        "documents": set(con.execute(f"SELECT doc_id, url, source, record, batch_id, version, is_latest, n_words, content_hash, text "
                                     f"FROM {rel['documents']}").fetchall()),
        "pairs": set(con.execute(f"SELECT doc_a, doc_b, method, similarity, batch_id FROM {rel['duplicates']}").fetchall()),
        "components": {(tuple(m), b, r) for m, b, r in con.execute(
            f"SELECT list(m.doc_id ORDER BY m.doc_id), c.batch_id, c.representative FROM {rel['clusters']} c "
            f"JOIN {rel['cluster_members']} m USING (cluster_id) WHERE c.method = 'components' GROUP BY ALL").fetchall()},
        "concepts": {(tuple(m), s, tuple(c), t, b) for m, s, c, t, b in con.execute(
            f"SELECT list(m.doc_id ORDER BY m.doc_id), c.support, c.common, c.truncated, c.batch_id FROM {rel['clusters']} c "
            f"JOIN {rel['cluster_members']} m USING (cluster_id) WHERE c.method = 'concept' GROUP BY ALL").fetchall()},
        "rejects": set(con.execute(f"SELECT batch_id, source, record, reason FROM {rel['rejects']}").fetchall()),
    }


def _assert_same(built: dict, local: dict) -> None:
    assert built["documents"] == local["documents"]
    for method in ("jaccard", "simhash"):
        b = {p for p in built["pairs"] if p[2] == method}
        loc = {p for p in local["pairs"] if p[2] == method}
        assert b == loc, (method, sorted(b - loc)[:5], sorted(loc - b)[:5])
    assert built["pairs"] == local["pairs"]
    assert built["components"] == local["components"]
    assert built["concepts"] == local["concepts"]
    assert built["rejects"] == local["rejects"]


def test_fixtures_give_the_local_ingest_documents_pairs_and_components(client, tmp_path):
    res = build([str(p) for p in FIXTURE_INPUTS], str(tmp_path / "out"), cluster=client)
    local = _local(tmp_path / "idx", FIXTURE_INPUTS, Settings())
    built = _built(tmp_path / "out")
    # the fixtures hold near-duplicates of both kinds, components and a reject: the comparison has content
    assert {m for _, _, m, _, _ in local["pairs"]} == {"jaccard", "simhash"}
    assert len(local["components"]) > 5 and len(local["concepts"]) > 5 and local["rejects"]
    _assert_same(built, local)
    ids = duckdb.sql(f"SELECT count(*), count(DISTINCT cluster_id) FROM read_parquet('{tmp_path}/out/clusters/*.parquet')").fetchall()[0]
    assert ids[0] == ids[1] == len(local["components"]) + len(local["concepts"])
    assert res.pairs == {"jaccard": sum(p[2] == "jaccard" for p in local["pairs"]), "simhash": sum(p[2] == "simhash" for p in local["pairs"])}
    assert res.clusters == {"components": len(local["components"]), "concept": len(local["concepts"])}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert Settings.from_dict(manifest["settings"]) == Settings()
    assert [i["batch_id"] for i in manifest["inputs"]] == [1, 2, 3]
    assert not (tmp_path / "out" / "_work").exists()
    # neardup sql reads the build folder with an index's tables and views, and nothing outside it
    for q in ("SELECT method, url_a, url_b, similarity, batch_id FROM duplicate_urls ORDER BY ALL",
              "SELECT url, version FROM latest_documents ORDER BY ALL",
              "SELECT c.method, c.size, c.representative, count(*) AS n FROM clusters c JOIN cluster_members m USING (cluster_id) "
              "GROUP BY ALL ORDER BY ALL",
              "SELECT batch_id, record, reason FROM rejects ORDER BY ALL",
              "SELECT count(*) FROM fp_minhash JOIN fp_shingles USING (doc_id)"):
        on_build = CliRunner().invoke(app, ["sql", "--index", str(tmp_path / "out"), "--format", "json", q])
        on_index = CliRunner().invoke(app, ["sql", "--index", str(tmp_path / "idx"), "--format", "json", q])
        assert on_build.exit_code == 0, on_build.output
        assert on_build.output == on_index.output and on_build.output.strip(), q
    outside = CliRunner().invoke(app, ["sql", "--index", str(tmp_path / "out"), f"SELECT * FROM read_parquet('{tmp_path}/idx/*')"])
    assert outside.exit_code == 2 and "refused" in outside.output


def _generated_inputs(folder: Path) -> list[Path]:
    """The generated corpus cut into 4 partitions, and a fifth that crawls some urls again:
    the same text (unchanged), an edited text (a new version, a near-duplicate of the old one),
    and one url twice with two texts."""
    lines = [json.loads(x) for x in (FIXTURES / "generated" / "corpus.jsonl").read_text().splitlines() if x.strip()]
    folder.mkdir()
    paths = []
    cut = np.linspace(0, len(lines), 5).astype(int)
    for i in range(4):
        paths.append(write_jsonl(folder / f"part-{i}.jsonl", lines[cut[i]:cut[i + 1]]))
    again = []
    for r in lines[::15]:
        again.append(r)  # unchanged
        words = r["text"].split()
        again.append({"url": r["url"], "text": " ".join(words[: len(words) - 3])})  # a new version
    again.append({"url": "https://generated.example/again", "text": lines[3]["text"]})
    again.append({"url": "https://generated.example/again", "text": lines[3]["text"] + " and a few more words here"})
    paths.append(write_jsonl(folder / "part-9-recrawl.jsonl", again, compress="gz"))
    return paths


def test_a_generated_corpus_in_five_partitions_gives_the_local_results_every_run(client, tmp_path):
    inputs = _generated_inputs(tmp_path / "in")
    settings = Settings(threshold=0.7, simhash_bits=5)
    build([str(p) for p in inputs], str(tmp_path / "out"), cluster=client, settings=settings)
    local = _local(tmp_path / "idx", inputs, settings)
    assert any(not d[6] for d in local["documents"]), "the recrawl makes older versions"
    assert sum(p[2] == "jaccard" for p in local["pairs"]) > 20 and len(local["components"]) > 10 and local["concepts"]
    _assert_same(_built(tmp_path / "out"), local)
    # the same inputs and settings through the CLI, on the same cluster by its address: the same files
    r = CliRunner().invoke(app, ["build", *map(str, inputs), "--out", str(tmp_path / "again"), "--dask", client.scheduler.address,
                                 "--threshold", "0.7", "--simhash-bits", "5"])
    assert r.exit_code == 0, r.output
    assert " concept " in r.output and " components" in r.output
    for table in ("documents", "fp_shingles", "fp_minhash", "fp_simhash", "duplicates", "clusters", "cluster_members", "rejects"):
        first = sorted(p.relative_to(tmp_path / "out") for p in (tmp_path / "out" / table).glob("*.parquet"))
        second = sorted(p.relative_to(tmp_path / "again") for p in (tmp_path / "again" / table).glob("*.parquet"))
        assert first and first == second, table
        for f in first:
            a = pd.read_parquet(tmp_path / "out" / f)
            b = pd.read_parquet(tmp_path / "again" / f)
            pd.testing.assert_frame_equal(a, b)
    # merged into a new index, the build is the local index, and both go on alike: a further input
    # (edited copies under new urls, edited recrawls) gives both the same new pairs and clusters
    r = CliRunner().invoke(app, ["ingest", "--from-build", str(tmp_path / "out"), "--index", str(tmp_path / "merged")])
    assert r.exit_code == 0, r.output
    with Index(tmp_path / "merged").reader() as con:
        merged = _tables(con, {t: t for t in ("documents", "duplicates", "clusters", "cluster_members", "rejects")})
    _assert_same(merged, local)
    assert CliRunner().invoke(app, ["check", "--index", str(tmp_path / "merged")]).exit_code == 0
    lines = [json.loads(x) for x in (FIXTURES / "generated" / "corpus.jsonl").read_text().splitlines() if x.strip()]
    more = []
    for rec in lines[1::7]:
        words = rec["text"].split()
        more.append({"url": rec["url"] + "?copy", "text": " ".join(words[:-2])})
        more.append({"url": rec["url"], "text": " ".join(words[2:])})
    extra = write_jsonl(tmp_path / "more.jsonl", more)
    for idx in ("idx", "merged"):
        ingest(Index(tmp_path / idx), str(extra))
    with Index(tmp_path / "idx").reader() as con:
        local_after = _tables(con, {t: t for t in ("documents", "duplicates", "clusters", "cluster_members", "rejects")})
    with Index(tmp_path / "merged").reader() as con:
        merged_after = _tables(con, {t: t for t in ("documents", "duplicates", "clusters", "cluster_members", "rejects")})
    assert len(local_after["pairs"]) > len(local["pairs"]) and local_after["concepts"] != local["concepts"]
    _assert_same(merged_after, local_after)
    refused = CliRunner().invoke(app, ["ingest", "--from-build", str(tmp_path / "out"), "--index", str(tmp_path / "merged")])
    assert refused.exit_code == 2 and "already holds batches" in refused.output


def test_the_documents_stage_streams_its_partition_in_slices_with_the_same_output(tmp_path, monkeypatch):
    """The stages are plain functions: run on one input in this process, the documents stage writes
    the same files whether it holds the whole partition or 7 records at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from neardup.distributed import stages as st

    settings = Settings()
    src = FIXTURES / "generated" / "corpus.jsonl"
    outputs = {}
    for name, size in (("whole", 1 << 20), ("sliced", 7)):
        root = tmp_path / name
        monkeypatch.setattr(st, "DOCUMENT_SLICE", size)
        read = st.read_partition(0, str(src), str(root), settings)
        st.write_versions(st.decide_versions(st.load_urls(0, str(root))), str(root))
        n = st.write_documents(0, 1, str(root), settings)
        assert n == read.n_records > 100
        outputs[name] = {d: pq.read_table(st.part_path(root, d, 0))
                         for d in ("documents", "fp_shingles", "fp_minhash", "fp_bottomk", "fp_simhash", "_work/values", "_work/sketches")}
    for d, t in outputs["whole"].items():
        assert t.equals(outputs["sliced"][d]), d
    assert outputs["whole"]["documents"].column("doc_id").to_pylist() == list(range(1, n + 1))
    assert pa.compute.all(outputs["whole"]["documents"].column("is_latest")).as_py()


# -- min-label propagation against union-find --------------------------------------


def _labels(client, a: list[int], b: list[int], npartitions: int = 3) -> tuple[dict[int, int], int]:
    import dask.dataframe as dd

    edges = dd.from_pandas(pd.DataFrame({"doc_a": np.array(a, np.int64), "doc_b": np.array(b, np.int64)}), npartitions=npartitions)
    labels, rounds = min_label_components(edges)
    df = labels.compute()
    return dict(zip(df["node"].tolist(), df["label"].tolist())), rounds


def test_min_label_propagation_finds_the_union_find_components(client):
    # four graphs in one run, ids apart: a path 1 - 2 - ... - 20 listed from its far end (labels
    # must travel the whole path); a star whose centre 109 is larger than most leaves; a cycle
    # 205-207-211 and a path 202-230-208, ids interleaved; 50 random edges among 1000..1059
    chain = (list(range(19, 0, -1)), list(range(20, 1, -1)))
    star = ([101, 102, 103, 109, 109, 109], [109, 109, 109, 112, 115, 120])
    two = ([205, 207, 205, 202, 208], [207, 211, 211, 230, 230])
    rng = np.random.default_rng(7)
    ra, rb = rng.integers(1000, 1060, 50), rng.integers(1000, 1060, 50)
    rand = (ra[ra != rb].tolist(), rb[ra != rb].tolist())
    a = chain[0] + star[0] + two[0] + rand[0]
    b = chain[1] + star[1] + two[1] + rand[1]
    got, rounds = _labels(client, a, b)
    assert got == components_reference(np.array(a), np.array(b))
    assert {got[x] for x in range(1, 21)} == {1}
    assert {got[x] for x in (101, 102, 103, 109, 112, 115, 120)} == {101}
    assert {x: got[x] for x in (205, 207, 211, 202, 230, 208)} == {205: 205, 207: 205, 211: 205, 202: 202, 230: 202, 208: 202}
    assert rounds < 19  # label jumps: fewer rounds than the path is long


# -- refusals and the optional extra ---------------------------------------------------


def test_settings_a_build_cannot_honour_are_refused():
    with pytest.raises(SettingsMismatch, match="computes only"):
        check_settings(Settings(pairs=("jaccard", "bottomk")))
    with pytest.raises(SettingsMismatch, match="within at most 7 bits"):
        check_settings(Settings(simhash_bits=10))
    with pytest.raises(SettingsMismatch, match="corpus statistics"):
        check_settings(Settings(methods=("shingles", "minhash", "a1")))
    check_settings(Settings())


def test_a_non_empty_output_folder_is_refused_without_force(client, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    with pytest.raises(OutputExists):
        build([str(FIXTURE_INPUTS[2])], str(tmp_path / "out"), cluster=client)
    with pytest.raises(OutputExists, match="not the output of a build"):  # --force replaces a build's folder only
        build([str(FIXTURE_INPUTS[2])], str(tmp_path / "out"), cluster=client, force=True)
    assert (tmp_path / "out" / "keep.txt").exists()


def test_without_dask_the_build_says_which_extra_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    with pytest.raises(MissingExtra):
        build([str(FIXTURE_INPUTS[2])], str(tmp_path / "out"))
    r = CliRunner().invoke(app, ["build", str(FIXTURE_INPUTS[2]), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2
    assert "neardup[dask]" in r.output
    assert not (tmp_path / "out").exists()


def test_importing_neardup_and_its_build_package_does_not_import_dask():
    code = "import sys, neardup, neardup.distributed, neardup.cli.app; print(sorted(m for m in ('dask', 'distributed', 'pandas') if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


# -- a worker killed in the middle -----------------------------------------------------


def test_a_worker_killed_in_the_middle_of_a_build_changes_nothing(client, tmp_path):
    """SIGKILL one worker process once the pairs are being written (the components, the concept
    stage and some persisted results are still ahead): Dask recomputes what the worker held
    (its nanny restarts it) and the build gives the local ingest's results all the same."""
    import os
    import signal
    import threading
    import time

    out = tmp_path / "out"
    done, errors = [], []

    def run():
        try:
            done.append(build([str(p) for p in FIXTURE_INPUTS], str(out), cluster=client))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    th = threading.Thread(target=run)
    th.start()
    deadline = time.monotonic() + 120
    while th.is_alive() and not (out / "duplicates").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    killed_mid_build = th.is_alive()
    victim = min(client.run(os.getpid).values())
    os.kill(victim, signal.SIGKILL)
    th.join(timeout=300)
    assert killed_mid_build, "the build ended before the kill: nothing was tested"
    assert not errors, errors
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()
    _assert_same(_built(out), _local(tmp_path / "idx", FIXTURE_INPUTS, Settings()))


@hyp_settings(max_examples=60, deadline=None)
@given(st_h.data())
def test_key_group_stages_keep_exactly_the_listed_pairs_that_pass(data):
    """``agreeing_key_pairs`` and ``simhash_pairs`` never list a key group's pairs; they keep exactly
    the pairs that listing every pair of each group and filtering would keep."""
    from neardup.distributed import stages

    n_docs = data.draw(st_h.integers(1, 12))
    perms = data.draw(st_h.sampled_from([8, 12, 16]))
    rows = data.draw(st_h.lists(st_h.tuples(st_h.integers(0, 3), st_h.integers(0, n_docs - 1)), min_size=1, max_size=40))
    rng = np.random.default_rng(data.draw(st_h.integers(0, 2**16)))
    low = rng.integers(0, 3, size=(n_docs, perms), dtype=np.uint8)  # few byte values: many agreements
    sims = rng.integers(0, 2**8, size=n_docs, dtype=np.uint64)  # near one another: many within the bits
    need = data.draw(st_h.integers(1, perms))
    keys = np.array([k for k, _ in rows], dtype=np.uint64)
    docs = np.array([d for _, d in rows], dtype=np.int64) + 100
    words = np.zeros((n_docs, -(-perms // 8) * 8), np.uint8)
    words[:, :perms] = low
    words = words.view(np.uint64)
    df = pd.DataFrame({"key": keys, "doc_id": docs, **{f"l{i}": words[docs - 100, i] for i in range(words.shape[1])}})
    want, want_sim = set(), set()
    for i in range(len(rows)):
        for j in range(len(rows)):
            a, b = docs[i], docs[j]
            if keys[i] != keys[j] or a >= b:
                continue
            if int((low[a - 100] == low[b - 100]).sum()) >= need:
                want.add((a, b))
            d = bin(int(sims[a - 100] ^ sims[b - 100])).count("1")
            if d <= 3:
                want_sim.add((a, b, 1.0 - d / 64))
    got = stages.agreeing_key_pairs(df, perms, need)
    assert set(zip(got["doc_a"], got["doc_b"])) == want
    got_s = stages.simhash_pairs(pd.DataFrame({"key": keys, "doc_id": docs, "simhash": sims[docs - 100]}), 3)
    assert set(zip(got_s["doc_a"], got_s["doc_b"], got_s["similarity"])) == want_sim
