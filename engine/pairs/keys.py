"""Candidate keys of the pair generators: LSH bands, simhash tables, bottom-k prefixes, and the
posting keys each batch's documents give every generator (``candidate_postings``)."""

from __future__ import annotations

import functools
import itertools

import numpy as np

from ..fingerprints import POSTINGS
from ..fingerprints.hashing import P1 as _M1  # the shingle combine's odd multipliers
from ..fingerprints.hashing import P2 as _M2
from ..settings import PAIR_METHODS, Settings
from ..store.postings import VALUES
from .values import SIGNATURE_VALUES, _flat, _lists, _signature_rows, blob_views

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
#: beyond this many bits, simhash pairs come from report 002's length window
MAX_TABLE_BITS = 7


def pair_methods(settings: Settings) -> list[str]:
    """The pair methods an index computes (``settings.pairs``), in a fixed order."""
    return [m for m in PAIR_METHODS if m in settings.pairs]


# -- keys --------------------------------------------------------------------


@functools.cache
def lsh_params(threshold: float, perms: int, target: float = 0.999) -> tuple[int, int]:
    """``(bands, rows)``: the most rows per band (fewest chance candidates) for which a pair
    of Jaccard ``threshold`` becomes a candidate with probability >= ``target``."""
    best = (perms, 1)
    for rows in range(1, perms + 1):
        bands = perms // rows
        if 1 - (1 - threshold**rows) ** bands >= target:
            best = (bands, rows)
    return best




def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * _M2
    return h ^ (h >> np.uint64(29))


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``(n_docs, bands)`` keys: band ``j`` hashes positions ``j*rows .. j*rows+rows-1`` with ``j``."""
    n = sig.shape[0]
    out = np.empty((n, bands), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(bands):
            h = np.full(n, np.uint64(j + 1) * _M1, dtype=np.uint64)
            for r in range(rows):
                h = _mix(h ^ sig[:, j * rows + r]) * _M1
            out[:, j] = _mix(h)
    return out


@functools.cache
def simhash_plan(bits: int) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, ...], ...]] | None:
    """``(blocks, tables)`` for pairs within ``bits`` bits, or None past ``MAX_TABLE_BITS``.

    ``blocks``: ``(shift, width)`` of ``B`` contiguous bit ranges covering 64 bits;
    ``tables``: which blocks each table keys on (``B - bits`` of them, every
    choice). With ``B = bits + 2`` each table keys on two blocks: at 3 bits, 10
    tables of about 26 bits; at 7, 36 tables of about 14 bits. (One block per
    table, ``B = bits + 1``, would need only 4 tables at 3 bits, but 16-bit keys
    collide often: simhashes are far from uniform, as report 002 observed.)
    """
    if bits > MAX_TABLE_BITS:
        return None
    n_blocks = bits + 2 if bits else 1
    edges = [round(64 * i / n_blocks) for i in range(n_blocks + 1)]
    blocks = tuple((edges[i], edges[i + 1] - edges[i]) for i in range(n_blocks))
    tables = tuple(itertools.combinations(range(n_blocks), n_blocks - bits))
    return blocks, tables


def table_masks(bits: int) -> list[np.uint64]:
    """The bits each table of ``simhash_plan(bits)`` keys on, as a 64-bit mask."""
    plan = simhash_plan(bits)
    assert plan is not None
    blocks, tables = plan
    out = []
    for chosen in tables:
        mask = 0
        for b in chosen:
            shift, width = blocks[b]
            mask |= ((1 << width) - 1) << shift
        out.append(np.uint64(mask))
    return out


def simhash_keys(values: np.ndarray, bits: int) -> np.ndarray:
    """``(n_docs, tables)`` keys of ``simhash_plan(bits)``: a table's key is the table's
    number and the bits of its blocks (everything else masked), hashed."""
    masks = table_masks(bits)
    v = np.asarray(values, dtype=np.uint64)
    out = np.empty((v.size, len(masks)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for t, mask in enumerate(masks):
            out[:, t] = _mix((v & mask) ^ (np.uint64(t + 1) * _M1)) * _M2
    return out


def prefix_lengths(sizes: np.ndarray, threshold: float, shared: int = 1) -> np.ndarray:
    """Prefix-filter lengths ``size - ceil(t * size) + shared``, at most ``size``.

    Two sorted sets that must share ``o >= ceil(t * size)`` values (for each of
    the two sizes) share at least ``min(shared, o)`` values among these
    prefixes: the j-th common value sits at most ``size - o`` places after
    position j in either set.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    need = np.ceil(threshold * sizes - 1e-9).astype(np.int64)
    return np.minimum(np.where(sizes > 0, sizes - need + shared, 0), sizes)



def candidate_postings(con, lo: int, hi: int, settings: Settings, written=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{table: (keys, doc_ids)}`` of the pair generators for documents ``lo..hi``,
    from their catalog rows (so crash recovery derives them the same way); ``written``: those rows
    as the batch inserted them (``store.rows.WrittenRows``), read instead of the catalog's."""
    from ..fingerprints import posting_keys

    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    on = set(settings.pairs)
    if on & {"jaccard", "minhash"}:
        ids, col = _lists(con, "fp_minhash", "signature", lo, hi, written)
        if ids.size:
            bands, rows = lsh_params(settings.threshold, settings.minhash_perms)
            flat, _ = _flat(col)
            sig = flat.reshape(ids.size, settings.minhash_perms)
            keys = band_keys(sig, bands, rows)
            ok = ~(sig == EMPTY).any(axis=1)
            out["lsh"] = (keys[ok].ravel(), np.repeat(ids[ok], bands).astype(np.uint64))
            if "jaccard" in on:  # the lowest byte of each min-hash, for the agreement filter
                raw = _signature_rows(sig).tobytes()
                width = settings.minhash_perms
                out[VALUES + SIGNATURE_VALUES] = (ids.astype(np.uint64), [raw[i : i + width] for i in range(0, len(raw), width)])
    if on & {"jaccard", "a11"}:  # the full sets, read back by later batches' verification
        # as bytes, chunk by chunk: the batch's sets (72 MB of rust-1.63's pages) are not first copied
        # into one array
        held = written.chunked("fp_shingles", "hashes") if written is not None else None
        ids, col = held if held is not None else _lists(con, "fp_shingles", "hashes", lo, hi)
        out[VALUES + "shingles"] = (ids.astype(np.uint64), blob_views(col))  # views of the rows, not copies
    for m in ("simhash", "simhash_hp"):
        if m in on and simhash_plan(settings.simhash_bits) is not None:
            ids, col = _lists(con, f"fp_{m}", "simhash", lo, hi, written)
            h = col.to_numpy().astype(np.uint64)
            keys = simhash_keys(h, settings.simhash_bits)
            out[f"{m}_tables"] = (keys.ravel(), np.repeat(ids, keys.shape[1]).astype(np.uint64))
            raw = h.astype(">u8").tobytes()
            out[VALUES + m] = (ids.astype(np.uint64), [raw[i : i + 8] for i in range(0, len(raw), 8)])
    if on & {"bottomk", "a11"}:
        ids, col = _lists(con, "fp_bottomk", "sketch", lo, hi, written)
        flat, lens = _flat(col)
        if "bottomk" in on:
            pre = prefix_lengths(lens, settings.threshold, shared=2)
            starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) if lens.size else lens
            take = np.concatenate([np.arange(s, s + p) for s, p in zip(starts.tolist(), pre.tolist())]) if pre.sum() else np.zeros(0, np.int64)
            out["bottomk_prefix"] = (flat[take], np.repeat(ids, pre).astype(np.uint64))
        if "a11" in on:
            out["a11"] = (flat, np.repeat(ids, lens).astype(np.uint64))
    for m, (column, kind) in POSTINGS.items():
        if m in on:
            ids, col = _lists(con, f"fp_{m}", column, lo, hi, written)
            out[m] = posting_keys(kind, col, ids)
    if "a12" in on:
        ids, col = _lists(con, "fp_a12", "ss", lo, hi, written)
        flat, lens = _flat(col)
        out["a12_ss"] = (flat, np.repeat(ids, lens).astype(np.uint64))
    return out
