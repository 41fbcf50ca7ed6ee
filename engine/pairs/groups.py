"""Candidate pairs from equal keys: a batch's keys grouped once (``KeyGroups``), the pairs of any
range of its documents emitted against each other and against older holders from the postings."""

from __future__ import annotations

import numpy as np

def _within(rep: np.ndarray) -> np.ndarray:
    """For runs of lengths ``rep`` laid end to end: each element's position in its run."""
    return np.arange(int(rep.sum())) - np.repeat(np.cumsum(rep) - rep, rep)


def _encode(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)


def _decode(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (code >> np.uint64(32)).astype(np.int64), (code & np.uint64(0xFFFFFFFF)).astype(np.int64)


class KeyGroups:
    """A batch's candidate keys grouped once (equal keys adjacent, ids ascending within a key), so
    the pairs of any range of its documents can be emitted without sorting the batch again."""

    def __init__(self, keys: np.ndarray, docs: np.ndarray):
        if docs.size and int(docs.max()) >= 1 << 32:
            raise ValueError("doc ids beyond 2^32 are not supported by the pair encoder")
        order = np.lexsort((docs, keys))
        self.k, self.d = keys[order], docs[order].astype(np.int64)
        self.uk, self.first = np.unique(self.k, return_index=True)
        size = np.diff(np.r_[self.first, self.k.size])
        self.group = np.repeat(np.arange(self.uk.size), size)
        self.pos = np.arange(self.k.size) - self.first[self.group]  # earlier holders in the batch

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
            g, g_at, g_cnt = np.unique(self.group[sel], return_index=True, return_counts=True)
            which, old = postings.get_flat(table, self.uk[g])
            keep = old < np.uint64(lo)
            which, old = which[keep], old[keep].astype(np.int64)
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
