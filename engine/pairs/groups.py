"""Candidate pairs from equal keys: a batch's keys grouped once (``KeyGroups``), the pairs of any
range of its documents emitted against each other and against older holders from the postings."""

from __future__ import annotations

import numpy as np

from ..arrays import key_order


def _within(rep: np.ndarray) -> np.ndarray:
    """For runs of lengths ``rep`` laid end to end: each element's position in its run."""
    return np.arange(int(rep.sum())) - np.repeat(np.cumsum(rep) - rep, rep)


def dense_unique(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(x, return_inverse=True)`` for integers ``x`` in ``[0, n)``, without sorting ``x``
    (a presence array of ``n``)."""
    present = np.zeros(n, dtype=bool)
    present[x] = True
    uniq = np.flatnonzero(present)
    rank = np.cumsum(present, dtype=np.int64) - 1
    return uniq, rank[x]


def _encode(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)


def _decode(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (code >> np.uint64(32)).astype(np.int64), (code & np.uint64(0xFFFFFFFF)).astype(np.int64)


#: older holder ids ``KeyGroups`` keeps for the slices of one batch (8 bytes each), at the default
#: memory plan (``neardup.memory``: scaled with ``--memory``)
OLD_CACHE_IDS = 8_000_000
#: keys looked up at once by ``read_older_holders`` (the pair search's and the concept search's)
READ_ALL_KEYS = 1 << 16


def read_older_holders(postings, table: str, keys: np.ndarray, lo: int, cap: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The older holders (ids < ``lo``) of every one of ``keys`` (ascending, distinct) in
    ``postings[table]``, as ``(start, ids)``: key ``i``'s ascending at ``ids[start[i]:start[i + 1]]``;
    looked up ``READ_ALL_KEYS`` keys at a time, and None as soon as they pass ``cap`` ids (the
    caller then looks up slice by slice, the reads up to the cap lost).

    A batch's slices each hold keys from all over the key space: looked up slice by slice, most
    pages of every stored run are read once per slice (the growth of a batch's cost with the index
    in the million-document benchmark); in key order each page is read once for the batch."""
    counts = np.zeros(keys.size, np.int64)
    parts, total = [], 0
    for s in range(0, keys.size, READ_ALL_KEYS):
        part = keys[s : s + READ_ALL_KEYS]
        which, old = postings.get_flat(table, part)
        keep = old < np.uint64(lo)
        which, old = which[keep], old[keep]
        total += int(old.size)
        if total > cap:
            return None
        counts[s : s + part.size] = np.bincount(which, minlength=part.size)
        parts.append(old.astype(np.int64))
    start = np.zeros(keys.size + 1, np.int64)
    np.cumsum(counts, out=start[1:])
    return start, (np.concatenate(parts) if parts else np.zeros(0, np.int64))


def holders_of(start: np.ndarray, ids: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of ``read_older_holders``' ``(start, ids)``, the holders of keys ``g`` (indices, ascending) as
    ``(which, old)``: ``old[i]`` holds key ``g[which[i]]``, grouped by key in the order of ``g``."""
    cnt = start[g + 1] - start[g]
    which = np.repeat(np.arange(g.size), cnt)
    return which, ids[np.repeat(start[g] - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))]


class KeyGroups:
    """A batch's candidate keys grouped once (equal keys adjacent, ids ascending within a key), so
    the pairs of any range of its documents can be emitted without sorting the batch again."""

    def __init__(self, keys: np.ndarray, docs: np.ndarray, bands: int | None = None):
        """``bands``: the keys are ``bands`` per document, in band order, a document after another
        (LSH band keys): ``agreeing_pairs`` then emits a pair of the batch's documents from the
        first band whose keys they share only."""
        from .. import memory

        self.cap = memory.current().scaled(OLD_CACHE_IDS)  # older holder ids held at most
        if docs.size and int(docs.max()) >= 1 << 32:
            raise ValueError("doc ids beyond 2^32 are not supported by the pair encoder")
        order = key_order(keys, docs)
        self.k, self.d = keys[order], docs[order].astype(np.int64)
        #: per row its band, the keys of every band per document and document -> its row there
        self.band = self.band_keys = self.key_row = None
        if bands and keys.size and keys.size % bands == 0:
            per_doc = docs.reshape(-1, bands)
            ids = per_doc[:, 0].astype(np.int64)
            if (per_doc == per_doc[:, :1]).all() and np.unique(ids).size == ids.size:
                self.band = (order % bands).astype(np.int64)
                self.band_keys = np.ascontiguousarray(keys.reshape(-1, bands), dtype=np.uint64)
                self.key_base = int(ids.min())
                self.key_row = np.full(int(ids.max()) - self.key_base + 1, -1, np.int64)
                self.key_row[ids - self.key_base] = np.arange(ids.size)
        self.first = np.flatnonzero(np.r_[True, self.k[1:] != self.k[:-1]]) if self.k.size else np.zeros(0, np.int64)
        self.uk = self.k[self.first]
        self.size = np.diff(np.r_[self.first, self.k.size])
        self.group = np.repeat(np.arange(self.uk.size), self.size)
        self.pos = np.arange(self.k.size) - self.first[self.group]  # earlier holders in the batch
        #: older holders of keys that several of the batch's documents hold, read once for all the
        #: slices that need them (group -> ids); up to ``cap`` ids in all
        self.old_cache: dict[int, np.ndarray] = {}
        self.in_cache = np.zeros(self.uk.size, dtype=bool)  # the groups of old_cache
        self.cached = 0
        #: every key's older holders, read in one pass when they come to at most ``cap``
        #: ids (``read_older_holders``); None until tried, False when there were more
        self.all_old: tuple[np.ndarray, np.ndarray] | bool | None = None

    def _old_holders(self, lo: int, postings, table: str, sel: np.ndarray):
        """For the selected rows ``sel``: ``(g, g_at, g_cnt, which, old)``: the distinct key groups
        of the rows (ascending), where each starts in ``sel`` and how many rows it has there, and
        every older holder (id < ``lo``) of those keys as ``old[i]`` of group ``g[which[i]]``
        (grouped by key, ids ascending)."""
        g, g_at, g_cnt = np.unique(self.group[sel], return_index=True, return_counts=True)
        if postings is None:
            return g, g_at, g_cnt, np.zeros(0, np.int64), np.zeros(0, np.int64)
        if self.all_old is None:
            self.all_old = read_older_holders(postings, table, self.uk, lo, self.cap) or False
        if self.all_old is not False:
            which, old = holders_of(*self.all_old, g)
            return g, g_at, g_cnt, which, old
        hit = self.in_cache[g]
        fetch = np.flatnonzero(~hit)
        which, old = postings.get_flat(table, self.uk[g[fetch]])
        keep = old < np.uint64(lo)
        which, old = which[keep], old[keep].astype(np.int64)
        # keep the lists of keys whose other holders in the batch lie outside this slice (the slices
        # holding them read the same list again), while the cache has room
        again = np.flatnonzero(self.size[g[fetch]] > g_cnt[fetch])
        if again.size and self.cached < self.cap:
            bounds = np.searchsorted(which, np.r_[again, again + 1].reshape(2, -1))
            for j, s, e in zip(again.tolist(), bounds[0].tolist(), bounds[1].tolist()):
                if self.cached >= self.cap:
                    break
                self.old_cache[int(g[fetch[j]])] = old[s:e].copy()
                self.in_cache[g[fetch[j]]] = True
                self.cached += e - s + 1
        which = fetch[which]  # into g
        if hit.any():
            at = np.flatnonzero(hit)
            lists = [self.old_cache[int(x)] for x in g[at].tolist()]
            lens = np.fromiter((x.size for x in lists), dtype=np.int64, count=len(lists))
            which = np.concatenate([which, np.repeat(at, lens)])
            old = np.concatenate([old, *lists])
            order = np.argsort(which, kind="stable")  # grouped by key again, in the order of g
            which, old = which[order], old[order]
        return g, g_at, g_cnt, which, old

    def pairs(self, lo: int, postings, table: str, first: int, last: int,
              min_shared: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The distinct pairs ``(a, b)``, ``a < b``, with ``b`` among the new documents
        ``first..last`` and ``a`` any earlier document (new, or older from ``postings[table]``),
        sharing at least ``min_shared`` keys; how many each shares; the rows emitted."""
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
        sel = np.flatnonzero((self.d >= first) & (self.d <= last))
        if sel.size == 0:
            return none
        codes = []
        # within the batch: each element with each earlier element of its key group
        rep = self.pos[sel]
        if rep.any():
            codes.append(_encode(self.d[np.repeat(self.first[self.group[sel]], rep) + _within(rep)], np.repeat(self.d[sel], rep)))
        # against older documents: every old id of a key with every document of the range holding it
        if postings is not None:
            _, g_at, g_cnt, which, old = self._old_holders(lo, postings, table, sel)
            if old.size:
                rep = g_cnt[which]  # the range's documents per key (adjacent in sel: ids ascend in a group)
                codes.append(_encode(np.repeat(old, rep), self.d[sel[np.repeat(g_at[which], rep) + _within(rep)]]))
        if not codes:
            return none
        code = np.concatenate(codes)
        rows = int(code.size)
        code.sort()
        starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
        shared = np.diff(np.r_[starts, code.size])
        a, b = _decode(code[starts])
        keep = (a != b) & (shared >= min_shared)
        return a[keep], b[keep], shared[keep], rows

    def agreeing_pairs(self, lo: int, postings, table: str, first: int, last: int, new_ids: np.ndarray,
                       low_new: np.ndarray, old_low, need: int) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Of the pairs ``pairs`` would give (``min_shared`` 1), those whose one-byte signature rows
        agree on at least ``need`` positions, found without listing the others (``row_kernels.band_agreements``):
        ``(a, b, rows, held)``, rows being the candidate rows compared and held the rows the search
        held in memory at once (older holders' entries and the agreeing rows found; the candidates of
        a key group within the batch are compared where they lie). ``new_ids``/``low_new``: the batch's
        documents (ascending) and their rows; ``old_low(ids) -> (rows, place)`` gives older documents'
        rows as ``rows[place[i]]`` for ``ids[i]`` (so rows already held need not be copied)."""
        from .. import kernels, row_kernels

        empty = np.zeros(0, np.int64)
        sel = np.flatnonzero((self.d >= first) & (self.d <= last))
        if sel.size == 0:
            return empty, empty, 0, 0
        group_first = self.first[self.group[sel]]
        rows = int(self.pos[sel].sum())
        g, _, _, which, old = self._old_holders(lo, postings, table, sel)
        if old.size:
            o_start = np.zeros(g.size + 1, np.int64)
            np.cumsum(np.bincount(which, minlength=g.size), out=o_start[1:])
            sel_old = np.searchsorted(g, self.group[sel]).astype(np.int64)
            # the distinct older holders and each entry's row among them, without sorting the entries
            # (millions where a site's frame makes band keys common): ids are below lo
            uniq, at = dense_unique(old, lo)
            low_old, place = old_low(uniq)
            o_rows = np.asarray(place, np.int64)[at]
            del at
            rows += int(np.diff(o_start)[sel_old].sum())
        else:
            sel_old = np.full(sel.size, -1, np.int64)
            o_start, o_rows = np.zeros(1, np.int64), empty
            low_old = np.zeros((0, low_new.shape[1]), np.uint8)
        base = int(new_ids[0]) if new_ids.size else 0
        new_row = np.full(int(new_ids[-1]) - base + 1 if new_ids.size else 0, -1, np.int64)
        new_row[new_ids - base] = np.arange(new_ids.size)
        by_band = ()
        if self.band is not None:  # key rows indexed like new_row (doc - base)
            key_row = np.full(new_row.size, -1, np.int64)
            ids = np.arange(self.key_row.size) + self.key_base
            inside = (ids >= base) & (ids < base + new_row.size) & (self.key_row >= 0)
            key_row[ids[inside] - base] = self.key_row[inside]
            by_band = (self.band, self.band_keys, key_row)
        a, b = row_kernels.band_agreements(self.d, group_first, sel, sel_old, o_start, old, o_rows, new_row, base,
                                       np.ascontiguousarray(low_new, dtype=np.uint8), low_old, need, *by_band)
        held = int(old.size + a.size)
        if a.size:
            code = kernels.occurring(_encode(a, b))  # a pair agrees in every band key it shares
            a, b = _decode(code)
        return a, b, rows, held


def key_pairs(keys: np.ndarray, docs: np.ndarray, lo: int, postings, table: str,
              min_shared: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct pairs ``(a, b)``, ``a < b``, of documents sharing at least ``min_shared`` keys,
    at least one of them new, and how many keys each shares: ``keys``/``docs`` are the new
    documents' keys (ids >= ``lo``, a key at most once per document); older partners
    (ids < ``lo``) come from ``postings[table]``."""
    if keys.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    a, b, shared, _ = KeyGroups(keys, docs).pairs(lo, postings, table, int(docs.min()), int(docs.max()), min_shared)
    return a, b, shared
