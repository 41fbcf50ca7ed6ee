"""``build``: the stages of ``neardup.distributed.stages`` run on a Dask cluster, in order."""

from __future__ import annotations

import json
import logging
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from ..errors import InputError, MissingExtra, OutputExists, SettingsMismatch
from ..fingerprints.lexical import STATS_METHODS
from ..pairs import MAX_TABLE_BITS, min_agreements
from ..readers import ReadOptions
from ..settings import Settings
from . import stages as st

#: pair methods a build computes (the others need the catalog: chains, statistics, equal keys not yet shuffled)
BUILD_PAIRS = ("jaccard", "simhash", "simhash_hp")
#: the build folder's format, recorded in its manifest
FORMAT = 1


@dataclass
class BuildResult:
    """What a build wrote."""

    out: str
    n_docs: int = 0
    n_rejected: int = 0
    n_skipped: int = 0
    pairs: dict[str, int] = field(default_factory=dict)
    clusters: dict[str, int] = field(default_factory=dict)
    #: min-label propagation rounds of the components
    rounds: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    #: with ``measure``: ``{dataset: {"rows": n, "bytes": n}}`` of the rows entering each shuffle (``_Meter``)
    shuffled: dict[str, dict[str, int]] = field(default_factory=dict)


class _Meter:
    """Rows and Arrow bytes of each dataset a build shuffles (``build(measure=True)``, for
    benchmarks/dask.py and docs/scaling.md). Measuring computes each measured frame once more,
    so it is off by default."""

    def __init__(self, on: bool, into: dict[str, dict[str, int]]):
        self.on, self.sizes = on, into

    def __call__(self, name: str, frame):
        if self.on:
            got = frame.map_partitions(_arrow_size, meta=_SIZE_META).compute()
            mine = self.sizes.setdefault(name, {"rows": 0, "bytes": 0})
            mine["rows"] += int(got["rows"].sum())
            mine["bytes"] += int(got["bytes"].sum())
        return frame


_SIZE_META = pd.DataFrame({"rows": pd.Series([], dtype="int64"), "bytes": pd.Series([], dtype="int64")})


def _arrow_size(df: pd.DataFrame) -> pd.DataFrame:
    import pyarrow as pa

    return pd.DataFrame({"rows": [len(df)], "bytes": [pa.Table.from_pandas(df, preserve_index=False).nbytes if len(df) else 0]})


def check_settings(settings: Settings) -> None:
    """Raise ``SettingsMismatch`` for settings a build cannot honour."""
    other = [p for p in settings.pairs if p not in BUILD_PAIRS]
    if other:
        raise SettingsMismatch(f"a distributed build computes only the {', '.join(BUILD_PAIRS)} pairs, not {', '.join(other)}",
                               hint="pass --pairs with those, or ingest into a local index for the other methods")
    if any(p.startswith("simhash") for p in settings.pairs) and settings.simhash_bits > MAX_TABLE_BITS:
        raise SettingsMismatch(f"a distributed build finds simhash pairs within at most {MAX_TABLE_BITS} bits, not {settings.simhash_bits}",
                               hint=f"pass --simhash-bits {MAX_TABLE_BITS} or less (the length window of wider searches is not built)")
    stats = [m for m in settings.methods if m in STATS_METHODS]
    if stats:
        raise SettingsMismatch(f"the method(s) {', '.join(stats)} need corpus statistics, which a distributed build does not gather",
                               hint="leave them out of --methods")


def _dask():
    try:
        import dask.dataframe as dd
        from dask import distributed
    except ImportError as exc:
        raise MissingExtra(f"a distributed build needs Dask, which is not installed ({exc})") from exc
    return dd, distributed


@contextmanager
def _client(cluster):
    """A ``distributed.Client`` for ``cluster``: ``local:N`` (a LocalCluster of N one-thread
    worker processes), a scheduler address ``tcp://host:port``, or a Client or cluster object."""
    _, distributed = _dask()
    # the p2p shuffle logs every shuffle it starts and ends at WARNING on the scheduler
    logging.getLogger("distributed.shuffle._scheduler_plugin").setLevel(logging.ERROR)
    if isinstance(cluster, distributed.Client):
        yield cluster
        return
    if isinstance(cluster, str) and cluster.startswith("local:"):
        n = cluster.removeprefix("local:")
        if not n.isdigit() or int(n) < 1:
            raise SettingsMismatch(f"cannot read --dask {cluster!r}", hint="write local:N with N workers, e.g. local:2")
        with distributed.LocalCluster(n_workers=int(n), threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
                distributed.Client(lc) as c:
            yield c
        return
    if isinstance(cluster, str) and "://" not in cluster:
        raise SettingsMismatch(f"cannot read --dask {cluster!r}", hint="pass local:N or a scheduler address tcp://host:8786")
    with distributed.Client(cluster) as c:
        yield c


def build(inputs: list[str], out: str, cluster="local:2", settings: Settings | None = None,
          opts: ReadOptions | None = None, force: bool = False, measure: bool = False) -> BuildResult:
    """Build the Parquet outputs of ``inputs`` (files or folders, taken in sorted order, one
    partition each) in folder ``out`` on a Dask cluster (see ``_client``): ``documents/``,
    ``fp_<method>/``, ``duplicates/``, ``clusters/``, ``cluster_members/``, ``rejects/`` and
    ``manifest.json``. Workers must reach the inputs and ``out`` at the same paths (shared
    storage). The same inputs and settings give the same documents, doc ids, pairs and
    clusters as ``ingest`` of the inputs one by one, in that order, into a new index (as
    long as each input is one batch there). Raises ``MissingExtra`` without Dask,
    ``InputError`` for a missing input, ``OutputExists`` for a non-empty ``out`` unless
    ``force``, ``SettingsMismatch`` for settings a build cannot honour (``check_settings``).
    ``measure`` records the size of each shuffled dataset in ``BuildResult.shuffled`` (slower)."""
    _dask()
    settings = settings or Settings()
    check_settings(settings)
    paths = sorted(str(Path(p).resolve()) for p in inputs)
    if not paths:
        raise InputError("no inputs to build", hint="name files or folders to read")
    for p in paths:
        if not Path(p).exists():
            raise InputError(f"{p}: no such file or folder", hint="check the path (workers read it at the same path)")
    root = Path(out).resolve()
    if root.exists() and any(root.iterdir()):
        if not force:
            raise OutputExists(f"{root} is not empty")
        if not ((root / "manifest.json").exists() or (root / st.WORK).exists()):
            raise OutputExists(f"{root} is not the output of a build: --force replaces only that",
                               hint="name a new or empty folder")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    res = BuildResult(out=str(root))
    t0 = time.perf_counter()
    with _client(cluster) as client:
        _run(client, paths, str(root), settings, opts or ReadOptions(), res, _Meter(measure, res.shuffled))
    shutil.rmtree(root / st.WORK, ignore_errors=True)
    res.seconds = time.perf_counter() - t0
    return res


def _lap(res: BuildResult, stage: str, t: float) -> float:
    now = time.perf_counter()
    res.timings[stage] = res.timings.get(stage, 0.0) + now - t
    return now


def _run(client, paths: list[str], root: str, settings: Settings, opts: ReadOptions, res: BuildResult, meter: _Meter) -> None:
    dd, _ = _dask()
    t = time.perf_counter()
    # 1. read + prepare, one task per input
    futures = client.map(st.read_partition, range(len(paths)), paths, root=root, settings=settings, opts=opts, pure=False)
    read = client.gather(futures)
    del futures  # released: a worker that dies later must not make the scheduler read an input again
    res.n_rejected = sum(r.n_rejected for r in read)
    res.n_skipped = sum(r.n_skipped for r in read)
    parts = [r.part for r in read if r.n_records]
    t = _lap(res, "read", t)
    # 2. url versions: every record of a url meets its others on one worker
    kept = {p: 0 for p in parts}
    if parts:
        urls = dd.from_map(st.load_urls, parts, root=root, meta=st.URL_META, enforce_metadata=False)
        decided = meter("url versions", meter("urls", urls).shuffle("url").map_partitions(st.decide_versions, meta=st.VERSION_META))
        decided = decided.shuffle("part").persist()
        kept.update({int(p): int(n) for p, n in decided.groupby("part")["keep"].sum().compute().items()})
    t = _lap(res, "versions", t)
    # 3. documents: doc ids from the kept counts in input order (tiny), then written where they are read
    firsts, first = {}, 1
    for p in parts:
        firsts[p], first = first, first + kept[p]
    if parts:
        decided.map_partitions(st.write_versions, root, meta=st.COUNT_META)["rows"].sum().compute()
        written = client.map(st.write_documents, parts, [firsts[p] for p in parts], root=root, settings=settings, pure=False)
        res.n_docs = sum(client.gather(written))
        del written, decided
    t = _lap(res, "documents", t)
    with_docs = [p for p in parts if kept[p]]
    first_ids = np.array([firsts[p] for p in with_docs], dtype=np.int64)
    batches = np.array([p + 1 for p in with_docs], dtype=np.int32)
    pair_frames = {}
    if with_docs:
        # 4-5. candidate keys shuffled by key, pairs deduplicated by a shuffle by pair, then verified
        if "jaccard" in settings.pairs:
            pair_frames["jaccard"] = _jaccard_pairs(dd, with_docs, root, settings, first_ids, meter)
        for m in ("simhash", "simhash_hp"):
            if m in settings.pairs:
                keys = dd.from_map(st.table_keys, with_docs, root=root, method=m, bits=settings.simhash_bits,
                                   meta=st.SIMHASH_KEY_META, enforce_metadata=False)
                found = meter(f"{m} keys", keys).shuffle("key").map_partitions(st.simhash_pairs, settings.simhash_bits, meta=st.SIMILAR_META)
                pair_frames[m] = meter(f"{m} candidate pairs", found).shuffle(["doc_a", "doc_b"]).map_partitions(st.distinct_pairs, meta=st.SIMILAR_META)
    for m, frame in pair_frames.items():  # (the frames are lazy: the pairs are found here)
        frame = frame.persist()
        pair_frames[m] = frame
        rows = frame.map_partitions(st.duplicate_rows, m, first_ids, batches)
        counts = rows.map_partitions(st.write_frame, root, "duplicates", st.DUPLICATE_SCHEMA, name=m, meta=st.COUNT_META)
        res.pairs[m] = int(counts["rows"].sum().compute())
    t = _lap(res, "pairs", t)
    # 6. connected components of the component pairs, by min-label propagation
    pm = settings.component_pairs
    if "components" in settings.clusters and pm in pair_frames and res.pairs.get(pm):
        from .components import min_label_components

        meter("components edges (per round, both directions: x2)", pair_frames[pm][["doc_a", "doc_b"]])
        labels, res.rounds = min_label_components(pair_frames[pm][["doc_a", "doc_b"]])
        members = labels.rename(columns={"node": "doc_id"}).shuffle("label").persist()
        n_clusters = members.map_partitions(st.cluster_rows, pm, first_ids, batches).map_partitions(
            st.write_frame, root, "clusters", st.CLUSTER_SCHEMA, name="components", meta=st.COUNT_META)["rows"].sum().compute()
        members.rename(columns={"label": "cluster_id"})[["cluster_id", "doc_id"]].map_partitions(
            st.write_frame, root, "cluster_members", st.MEMBER_SCHEMA, name="components", meta=st.COUNT_META)["rows"].sum().compute()
        res.clusters["components"] = int(n_clusters)
    elif "components" in settings.clusters:
        res.clusters["components"] = 0
    t = _lap(res, "components", t)
    # 7. concept clusters: neighbour pairs by prefix-filter keys, their components, the miner per component
    if "concept" in settings.clusters and with_docs:
        res.clusters["concept"] = _concepts(dd, with_docs, root, settings, first_ids, batches, res.n_docs + 1, meter)
    _lap(res, "concept", t)
    st.complete_outputs(root)
    _manifest(root, paths, read, firsts, kept, settings, res)


def _jaccard_pairs(dd, parts: list[int], root: str, settings: Settings, first_ids: np.ndarray, meter: _Meter):
    # the keys carry their documents' min-hash low bytes, so the agreement filter runs where a key's
    # documents meet and the chance candidates of pages sharing a frame are never listed; the pairs
    # that pass are verified where their sets are read, one partition of each side at a time
    keys = dd.from_map(st.lsh_keys, parts, root=root, settings=settings, meta=st.lsh_key_meta(settings.minhash_perms),
                       enforce_metadata=False)
    need = min_agreements(settings.threshold, settings.minhash_perms)
    agreeing = meter("lsh keys with the low bytes", keys).shuffle("key").map_partitions(
        st.agreeing_key_pairs, settings.minhash_perms, need, meta=st.PAIR_META)
    agreeing = meter("candidates passing the agreement filter (a pair once per shared key)", agreeing).shuffle(
        ["doc_a", "doc_b"]).map_partitions(st.distinct_pairs, meta=st.PAIR_META)
    agreeing = meter("distinct candidates passing the agreement filter", agreeing)
    by_side = agreeing.map_partitions(st.with_side, first_ids, meta=st.PAIR_META.assign(side=pd.Series([], dtype="int64")))
    return meter("pairs by the partition of doc_a", by_side).shuffle("side")[["doc_a", "doc_b"]].map_partitions(
        st.verify_by_partition, root, parts, first_ids, settings.threshold, meta=st.SIMILAR_META)


def _concepts(dd, parts: list[int], root: str, settings: Settings, first_ids: np.ndarray, batches: np.ndarray, base: int,
              meter: _Meter) -> int:
    """Mine and write the concept clusters; they are numbered from ``base`` (after every doc id, so
    after every components cluster id). Returns how many."""
    from .components import min_label_components

    k = settings.support
    # each value's frequency (a shuffle by value), then each document's rarest values (a shuffle by document)
    values = dd.from_map(st.sketch_values, parts, root=root, k=k, meta=st.SKETCH_VALUE_META, enforce_metadata=False)
    counted = meter("concept sketch values", values).shuffle("value").map_partitions(st.value_counts, meta=st.COUNTED_META)
    keys = meter("concept sketch values with their frequency", counted).shuffle("doc_id").map_partitions(
        st.rarest_prefix, k, meta=st.KEY_META)
    cand = meter("concept keys", keys).shuffle("key").map_partitions(st.key_pairs, meta=st.PAIR_META)
    cand = meter("concept candidate pairs", cand).shuffle(["doc_a", "doc_b"]).map_partitions(st.distinct_pairs, meta=st.PAIR_META)
    sketches = dd.read_parquet(f"{root}/{st.WORK}/sketches", columns=["doc_id", "sketch"], dtype_backend=None)
    meter("concept sketches (joined twice, and once more per component)", sketches)
    joined = (cand.merge(sketches.rename(columns={"doc_id": "doc_a", "sketch": "sketch_a"}), on="doc_a")
              .merge(sketches.rename(columns={"doc_id": "doc_b", "sketch": "sketch_b"}), on="doc_b"))
    near = joined.map_partitions(st.verify_overlap, k, meta=st.PAIR_META).persist()
    if int(near.map_partitions(len).sum().compute()) == 0:
        return 0
    labels, _ = min_label_components(near)
    docs = labels.merge(sketches, left_on="node", right_on="doc_id")
    docs = docs[["label", "node", "sketch"]].rename(columns={"node": "doc_a"}).assign(doc_b=-1)
    edges = near.merge(labels, left_on="doc_a", right_on="node")[["label", "doc_a", "doc_b"]].assign(sketch=b"")
    groups = meter("concept component groups", dd.concat([docs[["label", "doc_a", "doc_b", "sketch"]],
                                                           edges[["label", "doc_a", "doc_b", "sketch"]]])).shuffle("label")
    mined = groups.map_partitions(st.mine_components, k, meta=st.MINED_META).persist()
    sizes = mined.map_partitions(lambda d: pd.DataFrame({"n": [len(d)]}), meta=pd.DataFrame({"n": pd.Series([], dtype="int64")})).compute()
    sizes = sizes["n"].to_numpy(np.int64)
    bases = base + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    params = json.dumps({"support": k, "sketch": "bottomk", "size": settings.bottomk}, sort_keys=True)
    rows = mined.map_partitions(st.concept_rows, bases, params, first_ids, batches, meta=st.CONCEPT_META).persist()
    rows.drop(columns=["members"]).map_partitions(st.write_frame, root, "clusters", st.CLUSTER_SCHEMA, name="concept",
                                                  meta=st.COUNT_META)["rows"].sum().compute()
    members = rows[["cluster_id", "members"]].explode("members").rename(columns={"members": "doc_id"})
    members = members.assign(doc_id=members["doc_id"].astype("int64"))
    members.map_partitions(st.write_frame, root, "cluster_members", st.MEMBER_SCHEMA, name="concept",
                           meta=st.COUNT_META)["rows"].sum().compute()
    return int(sizes.sum())


def _manifest(root: str, paths: list[str], read, firsts: dict, kept: dict, settings: Settings, res: BuildResult) -> None:
    inputs = []
    for r in read:
        n = kept.get(r.part, 0)
        inputs.append({"partition": r.part, "batch_id": r.part + 1, "source": r.source, "n_docs": n,
                       "first_doc_id": firsts[r.part] if n else None, "last_doc_id": firsts[r.part] + n - 1 if n else None,
                       "n_unchanged": r.n_records - n, "n_rejected": r.n_rejected, "n_skipped": r.n_skipped, "n_bytes": r.n_bytes})
    manifest = {
        "format": FORMAT, "neardup": __version__, "settings": settings.to_dict(), "inputs": inputs,
        "n_docs": res.n_docs, "n_rejected": res.n_rejected, "pairs": res.pairs, "clusters": res.clusters,
        "component_rounds": res.rounds,
        "tables": sorted(d.name for d in Path(root).iterdir() if d.is_dir() and not d.name.startswith("_")),
    }
    Path(root, "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


__all__ = ["build", "BuildResult", "check_settings", "BUILD_PAIRS"]
