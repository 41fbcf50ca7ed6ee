"""The stages of a distributed build, each a function of one partition and the settings.

No stage imports Dask: each reads its inputs from the build folder (or takes a
pandas frame of one shuffled partition) and writes or returns Arrow/pandas
tables; ``neardup.distributed.run`` decides where they run. The work they do
is the local ingest's own: ``readers.read_input``, ``prepare.extract_html`` and
``prepare.prepare`` for text and fingerprints, ``pairs.band_keys`` and
``pairs.simhash_keys`` for candidate keys, the compiled agreement filter
(``row_kernels.band_agreements``) and ``pairs.set_jaccard`` for verification.

Partition ``p`` is the ``p``-th input in sorted order; it becomes batch
``p + 1`` (what a local ingest of the same inputs, one after the other, into a
new index calls it, as long as each input is one batch).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..prepare import extract_html, prepare
from ..pairs import EMPTY, band_keys, lsh_params, set_jaccard, simhash_keys
from ..pairs.groups import _within
from ..pairs.values import _signature_rows
from ..readers import ReadOptions, Reject, read_input
from ..settings import Settings
from ..arrays import unique

#: file name of partition ``p`` in a stage's folder
PART = "part-{:05d}.parquet"
#: the build's scratch folder (removed when the build succeeds)
WORK = "_work"

DOCUMENT_COLUMNS = ("doc_id", "url", "source", "record", "batch_id", "version", "is_latest", "n_words", "n_sentences",
                    "n_bytes", "content_hash", "text", "content", "main_text")
DOCUMENT_SCHEMA = pa.schema([("doc_id", pa.int64()), ("url", pa.string()), ("source", pa.string()), ("record", pa.string()),
                             ("batch_id", pa.int32()), ("version", pa.int32()), ("is_latest", pa.bool_()), ("n_words", pa.int32()),
                             ("n_sentences", pa.int32()), ("n_bytes", pa.int32()), ("content_hash", pa.uint64()),
                             ("text", pa.large_string()), ("content", pa.string()), ("main_text", pa.large_string())])
REJECT_SCHEMA = pa.schema([("batch_id", pa.int32()), ("source", pa.string()), ("record", pa.string()), ("reason", pa.string())])


def part_path(root: str | Path, stage: str, p: int) -> Path:
    return Path(root) / stage / PART.format(p)


@dataclass
class ReadStats:
    """What reading one partition found (small: gathered to the client)."""

    part: int
    source: str
    n_records: int = 0  # prepared records (documents before the url versions are decided)
    n_rejected: int = 0
    n_skipped: int = 0
    n_bytes: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


# -- stage 1: read + prepare ---------------------------------------------------


def read_partition(p: int, path: str, root: str, settings: Settings, opts: ReadOptions | None = None) -> ReadStats:
    """Read input ``path`` and prepare its records exactly as a local ingest does (``extract_html``,
    ``prepare``), chunk by chunk: memory is one chunk's. Writes ``_work/prepared/part-p`` (the
    prepared rows, numbered by ``seq`` in input order) and ``rejects/part-p``."""
    stats = ReadStats(part=p, source=path)
    rejects: list[Reject] = []
    writer: pq.ParquetWriter | None = None
    target = part_path(root, f"{WORK}/prepared", p)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial(target)
    try:
        for chunk in read_input(path, opts or ReadOptions()):
            chunk = extract_html(chunk, settings.content)
            stats.n_skipped += chunk.n_skipped
            stats.n_bytes += chunk.n_bytes_read
            rejects.extend(chunk.rejects)
            if not chunk.batch.num_rows:
                continue
            prepared = prepare(chunk.batch, settings)
            rejects.extend(prepared.rejects)
            t = prepared.table.drop_columns(["_row"])
            if not t.num_rows:
                continue
            t = t.append_column("seq", pa.array(np.arange(stats.n_records, stats.n_records + t.num_rows), pa.int64()))
            if writer is None:
                writer = pq.ParquetWriter(partial, t.schema)
            writer.write_table(t.cast(writer.schema))
            stats.n_records += t.num_rows
    finally:
        if writer is not None:
            writer.close()
    if writer is not None:
        os.replace(partial, target)
    stats.n_rejected = len(rejects)
    if rejects:
        r = pa.table({
            "batch_id": pa.array([p + 1] * len(rejects), pa.int32()),
            "source": [x.source for x in rejects], "record": [x.record for x in rejects], "reason": [x.reason for x in rejects],
        }, schema=REJECT_SCHEMA)
        _write(r, root, "rejects", p)
    return stats


# -- stage 2: url versions -----------------------------------------------------

URL_META = pd.DataFrame({"url": pd.Series([], dtype=object), "content_hash": pd.Series([], dtype="uint64"),
                         "part": pd.Series([], dtype="int32"), "seq": pd.Series([], dtype="int64")})
VERSION_META = pd.DataFrame({"part": pd.Series([], dtype="int32"), "seq": pd.Series([], dtype="int64"),
                             "keep": pd.Series([], dtype=bool), "version": pd.Series([], dtype="int32"),
                             "is_latest": pd.Series([], dtype=bool)})


def load_urls(p: int, root: str) -> pd.DataFrame:
    """``(url, content_hash, part, seq)`` of partition ``p``'s prepared records."""
    t = pq.read_table(part_path(root, f"{WORK}/prepared", p), columns=["url", "content_hash", "seq"])
    return pd.DataFrame({
        "url": np.asarray(t.column("url").to_pylist(), dtype=object),
        "content_hash": t.column("content_hash").to_numpy(),
        "part": np.full(t.num_rows, p, dtype=np.int32),
        "seq": t.column("seq").to_numpy(),
    })


def decide_versions(df: pd.DataFrame) -> pd.DataFrame:
    """The local ingest's url rule over every record of some urls (all of each url's records,
    as a shuffle by url brings them): in input order ``(part, seq)``, a record whose url
    already has a version with the same content hash is unchanged (not kept); the others are
    versions 1, 2, ... of their url, the last one latest."""
    if df.empty:
        return VERSION_META.copy()
    df = df.sort_values(["url", "part", "seq"], kind="stable")
    keep = ~df.duplicated(["url", "content_hash"], keep="first").to_numpy()
    version = np.zeros(len(df), dtype=np.int32)
    latest = np.zeros(len(df), dtype=bool)
    kept = df[keep]
    version[keep] = kept.groupby("url", sort=False).cumcount().to_numpy() + 1
    latest[keep] = ~kept.duplicated("url", keep="last").to_numpy()
    return pd.DataFrame({"part": df["part"].to_numpy(np.int32), "seq": df["seq"].to_numpy(np.int64), "keep": keep,
                         "version": version, "is_latest": latest})


# -- stage 3: documents and fingerprints ---------------------------------------


def write_versions(df: pd.DataFrame, root: str) -> pd.DataFrame:
    """Write the url decisions of the partitions a shuffle by ``part`` brought here, one file
    per partition (``_work/versions/part-p``), for ``write_documents`` to read."""
    for p, rows in df.groupby("part", sort=True):
        _write(pa.Table.from_pandas(rows.reset_index(drop=True), preserve_index=False), root, f"{WORK}/versions", int(p))
    return pd.DataFrame({"rows": [len(df)]})


#: prepared rows a documents task holds at once (it streams its partition in slices of this many)
DOCUMENT_SLICE = 4096


def write_documents(p: int, first_id: int, root: str, settings: Settings) -> int:
    """Give partition ``p``'s kept records their doc ids (``first_id`` on, in input order) and
    write ``documents/part-p``, ``fp_<method>/part-p``, and what later stages join onto pairs:
    ``_work/values/part-p`` (each document's shingle set) and
    ``_work/sketches/part-p`` (its bottom-k sketch). Streams the prepared rows
    ``DOCUMENT_SLICE`` at a time (plus the partition's url decisions, a few bytes a record).
    Returns the documents written."""
    v = pq.read_table(part_path(root, f"{WORK}/versions", p)).to_pandas().sort_values("seq")
    keep_all = v["keep"].to_numpy(bool)
    version_all, latest_all, seq_all = v["version"].to_numpy(), v["is_latest"].to_numpy(bool), v["seq"].to_numpy()
    out = _Outputs(root, p)
    at, next_id = 0, first_id
    try:
        for batch in pq.ParquetFile(part_path(root, f"{WORK}/prepared", p)).iter_batches(batch_size=DOCUMENT_SLICE):
            t = pa.Table.from_batches([batch])
            rows = slice(at, at + t.num_rows)
            at += t.num_rows
            if not np.array_equal(seq_all[rows], t.column("seq").to_numpy()):
                raise RuntimeError(f"partition {p}: the url versions do not cover its records")
            keep = keep_all[rows]
            n = int(keep.sum())
            if n:
                _document_slice(out, t.filter(pa.array(keep)), np.arange(next_id, next_id + n), p, version_all[rows][keep],
                                latest_all[rows][keep], settings)
                next_id += n
        if at != len(v):
            raise RuntimeError(f"partition {p}: the url versions do not cover its records")
    except BaseException:
        out.abandon()
        raise
    out.close()
    return next_id - first_id


class _Outputs:
    """One Parquet writer per stage folder of a partition, each written to a partial file that is
    renamed into place on ``close`` (``_write_file``)."""

    def __init__(self, root: str, p: int):
        self.root, self.p = root, p
        self.writers: dict[str, tuple[pq.ParquetWriter, Path, Path]] = {}

    def write(self, stage: str, t: pa.Table) -> None:
        if stage not in self.writers:
            path = part_path(self.root, stage, self.p)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.writers[stage] = (pq.ParquetWriter(_partial(path), t.schema), _partial(path), path)
        w = self.writers[stage][0]
        w.write_table(t.cast(w.schema))

    def close(self) -> None:
        for w, partial, path in self.writers.values():
            w.close()
            os.replace(partial, path)

    def abandon(self) -> None:
        for w, partial, _ in self.writers.values():
            w.close()
            partial.unlink(missing_ok=True)


def _document_slice(out: _Outputs, t: pa.Table, ids: np.ndarray, p: int, version: np.ndarray, latest: np.ndarray,
                    settings: Settings) -> None:
    n = t.num_rows
    cols = {
        "doc_id": pa.array(ids, pa.int64()),
        "batch_id": pa.array(np.full(n, p + 1), pa.int32()),
        "version": pa.array(version, pa.int32()),
        "is_latest": pa.array(latest),
    }
    out.write("documents", pa.table({c: cols[c] if c in cols else t.column(c) for c in DOCUMENT_COLUMNS}).cast(DOCUMENT_SCHEMA))
    by_method: dict[str, dict[str, pa.ChunkedArray]] = {}
    for name in t.column_names:
        if "." in name:
            method, col = name.split(".", 1)
            by_method.setdefault(method, {})[col] = t.column(name)
    for method, fp in by_method.items():
        out.write(f"fp_{method}", pa.table({"doc_id": cols["doc_id"], **fp}))
    if "jaccard" in settings.pairs:
        out.write(f"{WORK}/values", pa.table({
            "doc_id": cols["doc_id"],
            "shingles": pc.cast(t.column("shingles.hashes"), pa.binary()),
        }))
    if "concept" in settings.clusters:
        sk = t.column("bottomk.sketch").combine_chunks()
        lens = pc.list_value_length(sk).to_numpy(zero_copy_only=False).astype(np.int64)
        flat = sk.flatten().to_numpy(zero_copy_only=False).astype(np.uint64)
        bounds = np.concatenate([[0], np.cumsum(lens)]) * 8
        raw = flat.tobytes()  # stored order: the miner's bit masks follow it, as in the local ingest
        out.write(f"{WORK}/sketches", pa.table({
            "doc_id": cols["doc_id"],
            "sketch": pa.array([raw[x:y] for x, y in zip(bounds[:-1].tolist(), bounds[1:].tolist())], pa.binary()),
        }))


def _write(t: pa.Table, root: str, stage: str, p: int) -> None:
    _write_file(t, part_path(root, stage, p))


def _partial(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place (unique per process)."""
    return path.with_name(f".{path.name}.{os.getpid()}.partial")


def _write_file(t: pa.Table, path: Path) -> None:
    """Write ``path`` whole or not at all: a task run again after a worker died (Dask recomputes
    lost results) replaces the file with the same content, and a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial(path)
    pq.write_table(t, partial)
    os.replace(partial, path)


def _signatures(col: pa.ChunkedArray, perms: int) -> np.ndarray:
    col = col.combine_chunks()
    return col.flatten().to_numpy(zero_copy_only=False).astype(np.uint64).reshape(len(col), perms)


# -- stage 4: candidate keys ----------------------------------------------------

KEY_META = pd.DataFrame({"key": pd.Series([], dtype="uint64"), "doc_id": pd.Series([], dtype="int64")})
SIMHASH_KEY_META = pd.DataFrame({"key": pd.Series([], dtype="uint64"), "doc_id": pd.Series([], dtype="int64"),
                                 "simhash": pd.Series([], dtype="uint64")})
PAIR_META = pd.DataFrame({"doc_a": pd.Series([], dtype="int64"), "doc_b": pd.Series([], dtype="int64")})
SIMILAR_META = pd.DataFrame({"doc_a": pd.Series([], dtype="int64"), "doc_b": pd.Series([], dtype="int64"),
                             "similarity": pd.Series([], dtype="float64")})


def lsh_keys(p: int, root: str, settings: Settings) -> pd.DataFrame:
    """``(key, doc_id, l0, l1, ...)``: the LSH band keys of partition ``p``'s documents, as the local
    ingest posts them (``pairs.candidate_postings``: a signature holding an empty value gets none),
    each row carrying its document's min-hash low bytes (one byte a permutation, packed in
    uint64 words ``l<i>``) so that the agreement filter runs where a key's documents meet."""
    t = pq.read_table(part_path(root, "fp_minhash", p))
    ids = t.column("doc_id").to_numpy()
    sig = _signatures(t.column("signature"), settings.minhash_perms)
    bands, rows = lsh_params(settings.threshold, settings.minhash_perms)
    keys = band_keys(sig, bands, rows)
    ok = ~(sig == EMPTY).any(axis=1)
    words = _low_words(sig[ok])
    cols = {"key": keys[ok].ravel(), "doc_id": np.repeat(ids[ok], bands).astype(np.int64)}
    for i in range(words.shape[1]):
        cols[f"l{i}"] = np.repeat(words[:, i], bands)
    return pd.DataFrame(cols)


def _low_words(sig: np.ndarray) -> np.ndarray:
    """The signatures' low bytes (``val:minhash8``), zero-padded to whole uint64 words."""
    n, perms = sig.shape
    low = np.zeros((n, -(-perms // 8) * 8), dtype=np.uint8)
    low[:, :perms] = _signature_rows(sig)
    return low.view(np.uint64)


def lsh_key_meta(perms: int) -> pd.DataFrame:
    return KEY_META.assign(**{f"l{i}": pd.Series([], dtype="uint64") for i in range(-(-perms // 8))})


def table_keys(p: int, root: str, method: str, bits: int) -> pd.DataFrame:
    """``(key, doc_id, simhash)``: the simhash table keys of partition ``p``'s documents
    (``pairs.simhash_keys``), each with its document's simhash, which travels with it."""
    t = pq.read_table(part_path(root, f"fp_{method}", p))
    ids = t.column("doc_id").to_numpy().astype(np.int64)
    h = t.column("simhash").to_numpy().astype(np.uint64)
    keys = simhash_keys(h, bits)
    return pd.DataFrame({"key": keys.ravel(), "doc_id": np.repeat(ids, keys.shape[1]),
                         "simhash": np.repeat(h, keys.shape[1])})


def _sorted_groups(keys: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order of the rows by ``(key, doc)``, and for each sorted row the first row of its key group."""
    order = np.lexsort((docs, keys))
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if k.size else np.zeros(0, np.int64)
    size = np.diff(np.r_[starts, k.size])
    return order, np.repeat(starts, size).astype(np.int64)


def _group_pairs(keys: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(i, j)`` into the rows sorted by ``(key, doc)`` of every two rows with equal
    keys, ``i`` before ``j``; and that order."""
    order, first = _sorted_groups(keys, docs)
    rep = np.arange(keys.size) - first  # earlier rows of each row's key group
    later = np.repeat(np.arange(keys.size), rep)
    earlier = np.repeat(first, rep) + _within(rep)
    return order[earlier], order[later]


def key_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """The candidate pairs ``(doc_a < doc_b)`` of the documents sharing a key, for a partition
    holding every row of its keys (after a shuffle by key); a pair may repeat."""
    if df.empty:
        return PAIR_META.copy()
    docs = df["doc_id"].to_numpy(np.int64)
    i, j = _group_pairs(df["key"].to_numpy(np.uint64), docs)
    a, b = docs[i], docs[j]
    ok = a != b
    return pd.DataFrame({"doc_a": a[ok], "doc_b": b[ok]})


def agreeing_key_pairs(df: pd.DataFrame, perms: int, need: int) -> pd.DataFrame:
    """The candidate pairs ``(doc_a < doc_b)`` of the documents sharing an LSH key whose min-hash
    low bytes agree on at least ``need`` positions (the local ingest's filter before the exact
    Jaccard, ``row_kernels.band_agreements``), for a partition holding every row of its keys (after a
    shuffle by key). The candidates themselves are never listed: on pages sharing a site frame a
    key's group holds thousands of documents. A pair may repeat (several keys)."""
    if df.empty:
        return PAIR_META.copy()
    from .. import row_kernels

    docs = df["doc_id"].to_numpy(np.int64)
    order, group_first = _sorted_groups(df["key"].to_numpy(np.uint64), docs)
    d = docs[order]
    words = df[[c for c in df.columns if c.startswith("l") and c[1:].isdigit()]].to_numpy(np.uint64)
    low = np.ascontiguousarray(words[order]).view(np.uint8)[:, :perms]
    base = int(d.min())
    new_row = np.zeros(int(d.max()) - base + 1, dtype=np.int64)
    new_row[d - base] = np.arange(d.size, dtype=np.int64)  # any row of a doc: its bytes are the same
    none = np.full(d.size, -1, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    a, b = row_kernels.band_agreements(d, group_first, np.arange(d.size, dtype=np.int64), none, np.zeros(1, np.int64),
                                   empty, empty, new_row, base, low, low[:0], need)
    return pd.DataFrame({"doc_a": a, "doc_b": b})


def simhash_pairs(df: pd.DataFrame, bits: int) -> pd.DataFrame:
    """The pairs within ``bits`` bits among documents sharing a table key (after a shuffle by key),
    with similarity ``1 - distance / 64``; a pair may repeat (several tables). Compiled, so the
    pairs of a key group that are not within ``bits`` are never listed."""
    if df.empty:
        return SIMILAR_META.copy()
    from .. import kernels

    docs = df["doc_id"].to_numpy(np.int64)
    order, group_first = _sorted_groups(df["key"].to_numpy(np.uint64), docs)
    a, b, dist = kernels.group_simhash_pairs(docs[order], df["simhash"].to_numpy(np.uint64)[order], group_first, bits)
    return pd.DataFrame({"doc_a": a, "doc_b": b, "similarity": 1.0 - dist / 64.0})


def distinct_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """One row per pair, sorted (a partition holding every copy of its pairs: after a shuffle by pair)."""
    return df.drop_duplicates(["doc_a", "doc_b"]).sort_values(["doc_a", "doc_b"], kind="stable").reset_index(drop=True)


SKETCH_VALUE_META = pd.DataFrame({"value": pd.Series([], dtype="uint64"), "doc_id": pd.Series([], dtype="int64"),
                                  "n": pd.Series([], dtype="int32")})
COUNTED_META = SKETCH_VALUE_META.assign(count=pd.Series([], dtype="int64"))


def sketch_values(p: int, root: str, k: int) -> pd.DataFrame:
    """``(value, doc_id, n)``: every value of the bottom-k sketches of partition ``p``'s documents
    that have ``n >= k`` values (the others can have no concept neighbour)."""
    t = pq.read_table(part_path(root, "fp_bottomk", p))
    ids = t.column("doc_id").to_numpy().astype(np.int64)
    col = t.column("sketch").combine_chunks()
    lens = pc.list_value_length(col).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = col.flatten().to_numpy(zero_copy_only=False).astype(np.uint64)
    ok = np.repeat(lens >= k, lens)
    return pd.DataFrame({"value": flat[ok], "doc_id": np.repeat(ids, lens)[ok], "n": np.repeat(lens, lens)[ok].astype(np.int32)})


def value_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Each row with how many documents hold its value (a partition holding every row of its
    values: after a shuffle by value)."""
    if df.empty:
        return COUNTED_META.copy()
    return df.assign(count=df.groupby("value")["doc_id"].transform("size").astype("int64"))


def rarest_prefix(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """``(key, doc_id)``: the concept neighbours' prefix-filter keys of the documents of a
    partition holding all of each one's sketch values (after a shuffle by document): the
    ``n - k + 1`` rarest values of each sketch of ``n`` values, rarest first by ``(count,
    value)``, one order for every document. Two sketches sharing ``k`` values share the first
    common value in that order, and it is among the first ``n - k + 1`` of each (at least
    ``k - 1`` common values follow it), so every neighbour pair shares a key. Rare first, as
    the index's neighbour search (``neardup.neighbours``) looks up: a site's frame values,
    held by all its pages, are keys only of pages that are nearly all frame."""
    if df.empty:
        return KEY_META.copy()
    doc = df["doc_id"].to_numpy(np.int64)
    value = df["value"].to_numpy(np.uint64)
    order = np.lexsort((value, df["count"].to_numpy(np.int64), doc))
    doc, value, n = doc[order], value[order], df["n"].to_numpy(np.int64)[order]
    starts = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
    rank = np.arange(doc.size) - np.repeat(starts, np.diff(np.r_[starts, doc.size]))
    keep = rank < n - k + 1
    return pd.DataFrame({"key": value[keep], "doc_id": doc[keep]})


def verify_overlap(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """The candidate pairs whose sketches share at least ``k`` values (the concept neighbours),
    from rows ``(doc_a, doc_b, sketch_a, sketch_b)`` carrying both sketches."""
    from .. import kernels

    if df.empty:
        return PAIR_META.copy()
    n = len(df)
    blobs = [*df["sketch_a"], *df["sketch_b"]]
    offs = np.zeros(2 * n + 1, dtype=np.int64)
    np.cumsum([len(x) // 8 for x in blobs], out=offs[1:])
    data = np.frombuffer(b"".join(blobs), dtype=np.uint64).copy()
    kernels.sort_segments(data, offs)
    shared = kernels.pair_overlap(data, offs, np.arange(n, dtype=np.int64), np.arange(n, 2 * n, dtype=np.int64))
    keep = shared >= k
    return pd.DataFrame({"doc_a": df["doc_a"].to_numpy(np.int64)[keep], "doc_b": df["doc_b"].to_numpy(np.int64)[keep]})


MINED_META = pd.DataFrame({"representative": pd.Series([], dtype="int64"), "members": pd.Series([], dtype=object),
                           "support": pd.Series([], dtype="int32"), "common": pd.Series([], dtype=object),
                           "truncated": pd.Series([], dtype=bool)})


def mine_components(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """The concept clusters (``concepts.mine``, as ``neardup rebuild`` mines them) of the
    components in a partition holding all of each of its components: rows ``(label, doc_a,
    doc_b, sketch)``, a document's sketch where ``doc_b`` is -1, else a neighbour pair. Every
    maximal set lies inside one component of the neighbour graph (its members are pairwise
    neighbours), so mining each component alone finds each set once."""
    from .. import concepts
    from ..neighbours import neighbour_lists

    rows = []
    for _, g in df.groupby("label", sort=True):
        is_doc = g["doc_b"].to_numpy() < 0
        docs = g[is_doc]
        sk = {int(d): np.frombuffer(b, dtype=np.uint64) for d, b in zip(docs["doc_a"], docs["sketch"])}
        edges = g[~is_doc]
        nb = neighbour_lists(edges["doc_a"].to_numpy(np.int64), edges["doc_b"].to_numpy(np.int64))
        for c in concepts.mine(sk, k, neighbours=nb):
            rows.append((c.members[0], list(c.members), c.support, list(c.common), c.truncated))
    if not rows:
        return MINED_META.copy()
    rep, members, support, common, truncated = zip(*rows)
    return pd.DataFrame({"representative": np.array(rep, np.int64), "members": pd.Series(members, dtype=object),
                         "support": np.array(support, np.int32), "common": pd.Series(common, dtype=object),
                         "truncated": np.array(truncated, bool)})


CONCEPT_META = pd.DataFrame({"cluster_id": pd.Series([], dtype="int64"), "method": pd.Series([], dtype=object),
                             "size": pd.Series([], dtype="int32"), "support": pd.Series([], dtype="int32"),
                             "params": pd.Series([], dtype=object), "representative": pd.Series([], dtype="int64"),
                             "common": pd.Series([], dtype=object), "truncated": pd.Series([], dtype=bool),
                             "batch_id": pd.Series([], dtype="int32"), "members": pd.Series([], dtype=object)})


def concept_rows(df: pd.DataFrame, bases: np.ndarray, params: str, firsts: np.ndarray, batches: np.ndarray,
                 partition_info: dict | None = None) -> pd.DataFrame:
    """``clusters`` rows (and ``members``) of the mined concepts of partition ``i``, numbered from
    ``bases[i]`` in the order of their members; the batch of a cluster is that of its newest
    member (the batch a local ingest creates it in)."""
    first_id = int(bases[partition_info["number"] if partition_info else 0])
    df = df.sort_values("members", key=lambda s: s.map(tuple), kind="stable").reset_index(drop=True) if len(df) else df
    n = len(df)
    newest = np.array([m[-1] for m in df["members"]], np.int64) if n else np.zeros(0, np.int64)
    return pd.DataFrame({
        "cluster_id": np.arange(first_id, first_id + n, dtype=np.int64), "method": pd.Series(["concept"] * n, dtype=object),
        "size": np.array([len(m) for m in df["members"]], np.int32), "support": df["support"].to_numpy(np.int32),
        "params": pd.Series([params] * n, dtype=object), "representative": df["representative"].to_numpy(np.int64),
        "common": df["common"], "truncated": df["truncated"].to_numpy(bool), "batch_id": batch_of(newest, firsts, batches),
        "members": df["members"],
    })


# -- stage 5: exact verification ------------------------------------------------


def values_partition(doc_ids: np.ndarray, first_ids: np.ndarray) -> np.ndarray:
    """The index (into ``first_ids``, the first doc id of each partition that holds documents) of
    the partition holding each doc id."""
    return (np.searchsorted(first_ids, doc_ids, side="right") - 1).astype(np.int64)


def with_side(df: pd.DataFrame, first_ids: np.ndarray) -> pd.DataFrame:
    """``df`` with column ``side``: the partition (``values_partition``) of each pair's ``doc_a``."""
    return df.assign(side=values_partition(df["doc_a"].to_numpy(np.int64), first_ids))


def verify_by_partition(df: pd.DataFrame, root: str, parts: list[int], first_ids: np.ndarray, threshold: float) -> pd.DataFrame:
    """The pairs ``(doc_a, doc_b)`` whose shingle sets have exact Jaccard >= ``threshold``
    (``pairs.set_jaccard``). The sets are read here from the partitions' values files, not
    carried with the pairs: for each partition of ``doc_a`` in ``df`` (after a shuffle by it),
    its documents' sets, then for each partition of their partners, the partners' sets, so that a
    task holds two partitions' worth of sets at most."""
    if df.empty:
        return SIMILAR_META.copy()
    a_all = df["doc_a"].to_numpy(np.int64)
    b_all = df["doc_b"].to_numpy(np.int64)
    pa_all = values_partition(a_all, first_ids)
    pb_all = values_partition(b_all, first_ids)
    out = []
    for x in unique(pa_all):
        in_x = pa_all == x
        # partition x's own sets: its pairs' doc_a, and the doc_b of its pairs within x
        sets_x = _shingle_sets(root, parts[x], unique(np.r_[a_all[in_x], b_all[in_x & (pb_all == x)]]))
        for y in unique(pb_all[in_x]):
            m = in_x & (pb_all == y)
            a, b = a_all[m], b_all[m]
            sets_y = sets_x if y == x else _shingle_sets(root, parts[y], unique(b))
            ids_x, blobs_x = sets_x
            ids_y, blobs_y = sets_y
            ra = np.searchsorted(ids_x, a)
            rb = np.searchsorted(ids_y, b) + len(blobs_x)
            sim = set_jaccard(blobs_x + blobs_y, ra, rb, at_least=threshold)
            keep = sim >= threshold - 1e-12
            out.append(pd.DataFrame({"doc_a": a[keep], "doc_b": b[keep], "similarity": np.asarray(sim, np.float64)[keep]}))
    return pd.concat(out, ignore_index=True) if out else SIMILAR_META.copy()


def _shingle_sets(root: str, p: int, ids: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """The stored shingle sets of documents ``ids`` (ascending) of partition ``p``: their ids, ascending, and the sets."""
    t = pq.read_table(part_path(root, f"{WORK}/values", p), columns=["doc_id", "shingles"])
    t = t.filter(pc.is_in(t.column("doc_id"), value_set=pa.array(ids, pa.int64())))
    t = t.sort_by("doc_id")
    return t.column("doc_id").to_numpy().astype(np.int64), t.column("shingles").to_pylist()


# -- outputs ----------------------------------------------------------------------


def batch_of(doc_ids: np.ndarray, firsts: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """The batch of each doc id, from the first doc id of each batch that holds documents (ascending)."""
    return batches[np.searchsorted(firsts, doc_ids, side="right") - 1].astype(np.int32)


def duplicate_rows(df: pd.DataFrame, method: str, firsts: np.ndarray, batches: np.ndarray) -> pd.DataFrame:
    """``duplicates`` rows of verified pairs: each pair belongs to the batch of its newer document."""
    b = df["doc_b"].to_numpy(np.int64)
    return pd.DataFrame({"doc_a": df["doc_a"].to_numpy(np.int64), "doc_b": b, "method": pd.Series([method] * len(df), dtype=object),
                         "similarity": df["similarity"].to_numpy(np.float64), "batch_id": batch_of(b, firsts, batches)})


def cluster_rows(df: pd.DataFrame, pair_method: str, firsts: np.ndarray, batches: np.ndarray) -> pd.DataFrame:
    """``clusters`` rows of the components in a partition of ``(doc_id, label)`` holding every
    member of its labels: the id and representative of a component are its smallest document,
    its batch that of its newest (the batch a local ingest completes it in); ``support`` and
    ``common`` are null, as in an index."""
    g = df.groupby("label", sort=True)["doc_id"].agg(["size", "max"])
    labels = g.index.to_numpy(np.int64)
    n = len(labels)
    return pd.DataFrame({
        "cluster_id": labels, "method": pd.Series(["components"] * n, dtype=object), "size": g["size"].to_numpy(np.int32),
        "params": pd.Series([json.dumps({"pairs": pair_method}, sort_keys=True)] * n, dtype=object),
        "representative": labels, "truncated": np.zeros(n, dtype=bool),
        "batch_id": batch_of(g["max"].to_numpy(np.int64), firsts, batches),
    })


DUPLICATE_SCHEMA = pa.schema([("doc_a", pa.int64()), ("doc_b", pa.int64()), ("method", pa.string()),
                              ("similarity", pa.float64()), ("batch_id", pa.int32())])
CLUSTER_SCHEMA = pa.schema([("cluster_id", pa.int64()), ("method", pa.string()), ("size", pa.int32()), ("support", pa.int32()),
                            ("params", pa.string()), ("representative", pa.int64()), ("common", pa.list_(pa.uint64())),
                            ("truncated", pa.bool_()), ("batch_id", pa.int32())])
MEMBER_SCHEMA = pa.schema([("cluster_id", pa.int64()), ("doc_id", pa.int64())])
COUNT_META = pd.DataFrame({"rows": pd.Series([], dtype="int64")})


def write_frame(df: pd.DataFrame, root: str, stage: str, schema: pa.Schema, name: str = "part",
                partition_info: dict | None = None) -> pd.DataFrame:
    """Write partition ``i`` of a Dask dataframe as ``stage/<name>-i.parquet`` under ``schema`` (sorted by its
    first columns, so the same input gives the same files); returns its row count. An empty
    partition writes nothing."""
    if df.empty:
        return pd.DataFrame({"rows": [0]})
    i = partition_info["number"] if partition_info else 0
    df = df.sort_values(list(schema.names[:2]), kind="stable")
    cols = {}
    for f in schema:
        if f.name in df.columns:
            v = df[f.name]
            cols[f.name] = pa.array(v.to_numpy(object) if v.hasnans else v.to_numpy(), f.type, from_pandas=True)
        else:
            cols[f.name] = pa.nulls(len(df), f.type)
    _write_file(pa.table(cols, schema=schema), Path(root) / stage / f"{name}-{i:05d}.parquet")
    return pd.DataFrame({"rows": [len(df)]})


#: the datasets every build folder holds, with their schemas (an empty one as one empty file)
OUTPUTS = {"documents": DOCUMENT_SCHEMA, "duplicates": DUPLICATE_SCHEMA, "clusters": CLUSTER_SCHEMA,
           "cluster_members": MEMBER_SCHEMA, "rejects": REJECT_SCHEMA}


def complete_outputs(root: str) -> None:
    """Write an empty file into each output dataset that got no rows, so that every one can be
    read (``read_parquet('DIR/rejects/*.parquet')`` fails on a folder without files)."""
    for stage, schema in OUTPUTS.items():
        folder = Path(root) / stage
        if not any(folder.glob("*.parquet")):
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(schema.empty_table(), folder / "empty.parquet")
