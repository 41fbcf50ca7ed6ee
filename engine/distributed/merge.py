"""``ingest --from-build``: a build folder (``neardup build``) merged into a new index, batch by batch.

Each input of the build becomes the batch it is numbered as, committed by the
index's own protocol (``neardup.store.index``): its documents, fingerprints,
pairs, rejects and the clusters it completes are inserted in one DuckDB
transaction with its ``batches`` row, then its postings are derived from
those rows (``Writer.batch_postings``), as after any ingest batch. The index
then holds what ``neardup ingest`` of the same inputs would hold, and later
ingests continue it. Needs pyarrow and DuckDB only, not Dask.

What differs from an ingested index: ``cluster_changes`` records each final
cluster as created by its batch (the clusters an ingest creates and later
removes as batches extend them are not replayed), cluster ids are the
build's, and ``batch_timings`` is empty.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from .. import __version__
from ..errors import InputError, SettingsMismatch
from ..settings import Settings
from ..sqlfiles import query
from ..store.index import Index
from ..store.rows import insert_fingerprints
from .folder import MANIFEST, BuildFolder
from .stages import PART


@dataclass
class MergeResult:
    """What merging a build did."""

    batch_ids: list[int] = field(default_factory=list)
    n_docs: int = 0
    pairs: int = 0
    clusters: int = 0


def _table(folder: Path, where=None) -> pa.Table | None:
    if not folder.is_dir() or not any(folder.glob("*.parquet")):
        return None
    d = ds.dataset(sorted(str(p) for p in folder.glob("*.parquet")), format="parquet")
    return d.to_table(filter=where)


def _insert(con, name: str, t: pa.Table | None, sql: str) -> None:
    if t is None or not t.num_rows:
        return
    con.register(name, t)
    try:
        con.execute(sql)
    finally:
        con.unregister(name)


def ingest_build(index: Index, build_dir: str) -> MergeResult:
    """Merge build folder ``build_dir`` into ``index``, which must be new or hold no batch yet
    (``InputError`` otherwise; ``SettingsMismatch`` when an existing index's settings differ
    from the build's). One atomic batch per input of the build, in its order."""
    root = Path(build_dir)
    if not BuildFolder.holds(root):
        raise InputError(f"{build_dir}: not a build folder (no {MANIFEST})", hint="name the --out folder of neardup build")
    manifest = json.loads((root / MANIFEST).read_text())
    settings = Settings.from_dict(manifest["settings"])
    res = MergeResult()
    with index.writer(create_with=settings) as w:
        if w.settings.to_dict() != settings.to_dict():
            raise SettingsMismatch(f"{index.path}: the index's settings differ from the build's",
                                   hint="merge into a new index (--index NEW_DIR): it is created with the build's settings")
        if w.con.execute("SELECT count(*) FROM batches").fetchall()[0][0]:
            raise InputError(f"{index.path}: the index already holds batches; a build is merged only into a new or empty index",
                             hint="merge into a new index (--index NEW_DIR), then ingest into it")
        fp_dirs = sorted(d for d in root.iterdir() if d.is_dir() and d.name.startswith("fp_"))
        for inp in manifest["inputs"]:
            _merge_batch(w, root, inp, fp_dirs, res)
    return res


def _merge_batch(w, root: Path, inp: dict, fp_dirs: list[Path], res: MergeResult) -> None:
    con = w.con
    batch_id, part = inp["batch_id"], inp["partition"]
    started = datetime.now()
    w.begin_batch()
    con.execute("BEGIN TRANSACTION")
    try:
        name = PART.format(part)
        if inp["n_docs"]:
            _insert(con, "new_docs", pq.read_table(root / "documents" / name), query("catalog", "insert_documents"))
            for d in fp_dirs:
                fp = pq.read_table(d / name)
                insert_fingerprints(con, fp.rename_columns([c if c == "doc_id" else f"{d.name[3:]}.{c}" for c in fp.column_names]))
        pairs = _table(root / "duplicates", where=pc.field("batch_id") == batch_id)
        _insert(con, "new_pairs", pairs, "INSERT INTO duplicates BY NAME SELECT * FROM new_pairs")
        rejects = pq.read_table(root / "rejects" / name) if (root / "rejects" / name).exists() else None
        _insert(con, "new_rejects", rejects, query("catalog", "insert_rejects"))
        clusters = _table(root / "clusters", where=pc.field("batch_id") == batch_id)
        if clusters is not None and clusters.num_rows:
            members = _table(root / "cluster_members", where=pc.field("cluster_id").isin(clusters.column("cluster_id")))
            _insert(con, "new_clusters", clusters, "INSERT INTO clusters BY NAME SELECT * FROM new_clusters")
            _insert(con, "new_members", members, "INSERT INTO cluster_members BY NAME SELECT * FROM new_members")
            _insert(con, "new_clusters", clusters,
                    "INSERT INTO cluster_changes SELECT batch_id, method, cluster_id, 'created' FROM new_clusters")
            res.clusters += clusters.num_rows
        n = inp["n_docs"]
        con.execute(query("catalog", "insert_batch"),
                    [batch_id, inp["source"], started, n, inp.get("n_unchanged", 0), inp["n_skipped"], inp["n_rejected"],
                     inp["n_bytes"], inp["first_doc_id"], inp["last_doc_id"], "committed", __version__])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        w.finish_batch(None, None)
        raise
    w.finish_batch(batch_id, w.batch_postings(batch_id) if n else {})
    res.batch_ids.append(batch_id)
    res.n_docs += n
    res.pairs += pairs.num_rows if pairs is not None else 0
