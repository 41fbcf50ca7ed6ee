"""Clusters of k-similar documents: the maximal sets of documents whose sketches share >= k elements.

Seeds 000 and 001 (Kuznetsov, Ignatov et al.) define a cluster of duplicates
as a set of documents X whose images (bottom-k sketches, here) have at least
k elements in common, ``|I(X)| >= k`` with ``I(X)`` the intersection of their
sketches, and report it with that number (their CountCommonFingerprints).
They computed the maximal such sets with FPmax* on the transposed context
(fingerprints as transactions, documents as items). This module computes
exactly those maximal sets, locally:

* Only neighbours can share: if ``d`` is in a valid set, every other member
  ``e`` has ``|S(d) ∩ S(e)| >= k``, so every set containing ``d`` lies inside
  ``N[d] = {d} ∪ {e : |S(d) ∩ S(e)| >= k}``.
* Per **anchor** ``q``, each neighbour becomes a bit mask over the positions of
  ``S(q)`` (which of q's elements it holds); ``I(X)`` for ``X ∋ q`` is the AND
  of the masks and ``|I(X)|`` its popcount. Neighbours with equal masks are
  interchangeable within ``N[q]`` and are collapsed into one weighted object.
* A depth-first search over the objects (closure, an excluded object that
  contains the current intersection prunes the branch, look-ahead when all
  remaining candidates fit together) lists the sets containing q that no
  object of ``N(q)`` can extend: since any extension of such a set is a
  neighbour of q, these are exactly the globally maximal sets containing q.
* Each set is reported once, from its smallest member among the "new"
  documents (all documents when mining from scratch): objects holding a
  smaller new document are excluded from the set but still checked for
  maximality.

A work budget per anchor (100,000 search nodes, 1,000 reported sets) bounds
the exponential worst case; when it runs out the anchor reports one
**truncated** cluster, its whole neighbourhood, instead (``Concept.truncated``).

``mine_anchor`` and ``mine_anchors`` (many anchors in one call) run the
compiled search of ``neardup.concept_kernels``: masks of ``ceil(|S(q)| / 64)``
words, the nodes visited and counted against the budget in the same order.
``mine_anchor_reference`` (Python ints as bitsets, ``masks`` and a recursive
``_dfs``) is the definition they follow; ``tests/test_concept_kernels.py``
compares the two set for set, truncation included.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

#: search nodes an anchor may visit; each visited node costs a few bit operations per neighbour
#: (with 300 neighbours, about 0.8 µs compiled, 18 µs in the Python reference). On the real two-release site one anchor needed 28,196 nodes
#: for its 578 maximal sets: at 20,000 it was truncated, and the clusters then depended on the
#: batch split (docs/clusters.md, "Bounded")
DEFAULT_BUDGET = 100_000
#: maximal sets one anchor may report before it falls back to its neighbourhood
MAX_SETS = 1_000


@dataclass(frozen=True, slots=True)
class Concept:
    """A maximal set of documents with at least k common sketch elements."""

    members: tuple[int, ...]  # ascending doc ids
    common: tuple[int, ...]  # the common elements I(X), ascending
    truncated: bool = False

    @property
    def support(self) -> int:
        return len(self.common)


class _OutOfBudget(Exception):
    pass


def masks(sq: np.ndarray, others: Iterable[np.ndarray]) -> list[int]:
    """For each other sketch, the bit mask of the positions of ``sq`` it holds (bit i: ``sq[i]``)."""
    others = [np.asarray(o) for o in others]
    if not others:
        return []
    order = np.argsort(sq, kind="stable")
    ssorted = sq[order]
    owner = np.repeat(np.arange(len(others)), [o.size for o in others])
    vals = np.concatenate(others)
    pos = np.minimum(np.searchsorted(ssorted, vals), ssorted.size - 1)
    hit = ssorted[pos] == vals
    bits = np.zeros((len(others), sq.size), dtype=bool)
    bits[owner[hit], order[pos[hit]]] = True
    packed = np.packbits(bits, axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def mine_anchor(q: int, sq: np.ndarray, neighbours: Mapping[int, np.ndarray], k: int,
                is_new=lambda d: True, budget: int = DEFAULT_BUDGET) -> list[Concept]:
    """The maximal sets containing ``q`` whose smallest new member is ``q``, in the order the
    search reports them (compiled; ``mine_anchor_reference`` defines the result).

    ``sq``: q's sketch (distinct values, any order); ``neighbours``: ``{doc: sketch}`` of every
    document sharing at least ``k`` elements with q (q itself excluded); ``is_new(doc)``: whether
    a document is new (sets are reported from their smallest new member).
    """
    sq = np.asarray(sq)
    if sq.size < k:
        return []
    docs = sorted(neighbours)
    parts = [sq]
    parts += map(neighbours.__getitem__, docs)
    new = np.zeros(len(parts), dtype=np.bool_)
    for i in range(bisect_left(docs, q)):  # only a smaller new neighbour matters
        if is_new(docs[i]):
            new[i + 1] = True
    vals, lens = _values(parts)
    from . import concept_kernels  # numba: imported where first used, not on the CLI's start-up path

    found = concept_kernels.mine_anchor(vals, lens, np.array([q, *docs], dtype=np.int64), new, k, budget, MAX_SETS)
    return _concepts(found, [sq.dtype])


def mine_anchors(anchors: Iterable[int], sketches: Mapping[int, np.ndarray], neighbours: Mapping[int, Iterable[int]],
                 k: int, is_new=lambda d: True, budget: int = DEFAULT_BUDGET) -> list[Concept]:
    """``mine_anchor`` for each of ``anchors`` in turn, in one compiled call: what each reports,
    anchor after anchor. ``neighbours[q]``: the documents of ``N(q)`` (q excluded; one listed
    twice counts once); ``sketches``: every sketch involved; ``is_new`` is asked once per document."""
    pos: dict[int, int] = {}
    parts: list[np.ndarray] = []
    anchor_pos, nb, nb_off = [], [], [0]
    for q in anchors:
        ns = sorted(set(neighbours[q]))
        for d in (q, *ns):
            if d not in pos:
                pos[d] = len(parts)
                parts.append(sketches[d])
        anchor_pos.append(pos[q])
        nb += map(pos.__getitem__, ns)
        nb_off.append(len(nb))
    if not anchor_pos:
        return []
    docs = list(pos)
    new = np.fromiter(map(is_new, docs), dtype=np.bool_, count=len(docs))
    vals, lens = _values(parts)
    from . import concept_kernels

    found = concept_kernels.mine_anchors(vals, lens, np.array(docs, dtype=np.int64), new, np.array(anchor_pos, dtype=np.int64),
                                         np.array(nb_off, dtype=np.int64), np.array(nb, dtype=np.int64), k, budget, MAX_SETS)
    return _concepts(found, [np.asarray(parts[a]).dtype for a in anchor_pos])


@dataclass(frozen=True)
class ConceptArrays:
    """Mined concepts as arrays, in reporting order: concept i has members
    ``members[m_off[i]:m_off[i + 1]]`` (doc ids ascending), common elements
    ``common[c_off[i]:c_off[i + 1]]`` (ascending) and ``truncated[i]`` (what a list of
    ``Concept`` holds, without a Python object per concept or per member)."""

    members: np.ndarray  # int64
    m_off: np.ndarray  # int64, one more than the concepts
    common: np.ndarray  # uint64
    c_off: np.ndarray  # int64, one more than the concepts
    truncated: np.ndarray  # bool

    def __len__(self) -> int:
        return self.truncated.size

    def concepts(self) -> list[Concept]:
        """The same concepts as ``Concept`` objects."""
        m_off, c_off = self.m_off.tolist(), self.c_off.tolist()
        mem, com = self.members.tolist(), self.common.tolist()
        return [Concept(tuple(mem[m_off[i] : m_off[i + 1]]), tuple(com[c_off[i] : c_off[i + 1]]), t)
                for i, t in enumerate(self.truncated.tolist())]


def _concept_arrays(found: tuple) -> ConceptArrays:
    """What ``concept_kernels.mine_anchors`` returns, for uint64 sketches, as ``ConceptArrays``:
    each set's common elements are its anchor's sorted values at the set's positions (ascending)."""
    rows, values = found
    nr = int(rows[0])
    meta = rows[1 : 1 + 6 * nr].reshape(nr, 6)
    m_off = np.zeros(nr + 1, np.int64)
    p_off = np.zeros(nr + 1, np.int64)
    m_off[1:], p_off[1:] = meta[:, 2], meta[:, 3]
    end = 1 + 6 * nr
    mem = rows[end : end + m_off[-1]]
    pos = rows[end + m_off[-1] : end + m_off[-1] + p_off[-1]]
    common = values[np.repeat(meta[:, 4], np.diff(p_off)) + pos]
    return ConceptArrays(mem.astype(np.int64, copy=False), m_off, np.asarray(common, np.uint64), p_off, meta[:, 1] == 1)


def mine_anchor_rows(anchors: np.ndarray, nb_off: np.ndarray, nb: np.ndarray, docs: np.ndarray, vals: np.ndarray,
                     lens: np.ndarray, new: np.ndarray, k: int, budget: int = DEFAULT_BUDGET) -> ConceptArrays:
    """``mine_anchors`` of neighbours given as arrays (``neighbours.neighbour_arrays``: anchors
    ascending, each one's neighbours ascending at ``nb[nb_off[i]:nb_off[i + 1]]``), without a
    Python object per neighbour or per concept. ``docs``: every document involved, ascending, their
    uint64 sketches one after another in ``vals`` (``lens`` values each), ``new`` whether each is
    new. The same concepts as ``mine_anchors``: the documents are numbered by ascending id here
    and in order of appearance there, and the compiled miner reports doc ids, in an order the
    numbering does not change."""
    docs = np.asarray(docs, dtype=np.int64)
    if anchors.size == 0:
        e = np.zeros(0, np.int64)
        return ConceptArrays(e, np.zeros(1, np.int64), np.zeros(0, np.uint64), np.zeros(1, np.int64), np.zeros(0, bool))
    from . import concept_kernels

    found = concept_kernels.mine_anchors(np.ascontiguousarray(vals, dtype=np.uint64), np.asarray(lens, dtype=np.int64), docs,
                                         np.asarray(new, dtype=np.bool_), np.searchsorted(docs, anchors).astype(np.int64),
                                         np.asarray(nb_off, dtype=np.int64), np.searchsorted(docs, nb).astype(np.int64),
                                         k, budget, MAX_SETS)
    return _concept_arrays(found)


def mine_anchor_arrays(anchors: np.ndarray, nb_off: np.ndarray, nb: np.ndarray, docs: np.ndarray, vals: np.ndarray,
                       lens: np.ndarray, new: np.ndarray, k: int, budget: int = DEFAULT_BUDGET) -> list[Concept]:
    """``mine_anchor_rows`` as ``Concept`` objects."""
    return mine_anchor_rows(anchors, nb_off, nb, docs, vals, lens, new, k, budget).concepts()


def _values(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """Sketches as one uint64 array and their lengths (values are compared as uint64)."""
    vals = np.concatenate(parts)
    if vals.dtype != np.uint64:
        parts = [np.asarray(p) for p in parts]
        vals = np.concatenate([p.astype(np.uint64) for p in parts]) if vals.dtype.kind == "f" else vals.astype(np.uint64)
    return vals, np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))


def _concepts(found: tuple, dtypes: list) -> list[Concept]:
    """What ``concept_kernels.mine_anchors`` returns as Concepts, common elements in the type of
    their anchor's sketch (``dtypes[anchor position]``): ``_concept_arrays``'s, those of an anchor
    whose sketch is not uint64 cast back to its type and sorted in it."""
    out = _concept_arrays(found).concepts()
    rows = found[0]
    for i, a in enumerate(rows[1 : 1 + 6 * int(rows[0]) : 6].tolist()):  # each set's anchor position
        if dtypes[a] != np.uint64:
            c = out[i]
            common = np.array(c.common, dtype=np.uint64).astype(dtypes[a]).tolist()
            out[i] = Concept(c.members, tuple(sorted(common)), c.truncated)
    return out


def mine_anchor_reference(q: int, sq: np.ndarray, neighbours: Mapping[int, np.ndarray], k: int,
                          is_new=lambda d: True, budget: int = DEFAULT_BUDGET) -> list[Concept]:
    """``mine_anchor`` in Python, the definition: bitsets are Python ints (bit i: ``sq[i]``,
    ``masks``) and the search the recursive ``_dfs``."""
    sq = np.asarray(sq)
    if sq.size < k:
        return []
    docs = sorted(neighbours)
    ms = masks(sq, (neighbours[d] for d in docs))
    groups: dict[int, list[int]] = {}
    for d, m in zip(docs, ms):
        groups.setdefault(m, []).append(d)
    cand, excl = [], []
    for m, members in sorted(groups.items(), key=lambda g: (min(g[1]), g[0])):
        (excl if any(is_new(d) and d < q for d in members) else cand).append((m, tuple(members)))
    full = (1 << sq.size) - 1
    found: list[tuple[int, list]] = []
    left = [budget]
    try:
        _dfs(full, [], cand, excl, k, found, left)
    except _OutOfBudget:
        everyone = [q, *docs]
        inter = full
        for m in ms:
            inter &= m
        if any(is_new(d) and d < q for d in docs):
            return []  # a smaller new anchor reports this neighbourhood too
        return [Concept(tuple(sorted(everyone)), _common(sq, inter), truncated=True)]
    out = []
    for m, objs in found:
        members = sorted([q, *[d for _, mem in objs for d in mem]])
        out.append(Concept(tuple(members), _common(sq, m)))
    return out


def _common(sq: np.ndarray, m: int) -> tuple[int, ...]:
    bits = np.unpackbits(np.frombuffer(m.to_bytes((sq.size + 7) // 8, "little"), dtype=np.uint8), bitorder="little")[: sq.size]
    return tuple(sorted(sq[bits.astype(bool)].tolist()))


def _dfs(m: int, chosen: list, cand: list, excl: list, k: int, found: list, left: list) -> None:
    left[0] -= 1
    if left[0] < 0 or len(found) > MAX_SETS:
        raise _OutOfBudget
    # closure: candidates holding all of the current intersection join for free
    closed = [o for o in cand if o[0] & m == m]
    if closed:
        chosen = chosen + closed
        cand = [o for o in cand if o[0] & m != m]
    # an excluded object holding the intersection extends every set below: none is maximal
    for e, _ in excl:
        if e & m == m:
            return
    if not cand:
        if all((m & e).bit_count() < k for e, _ in excl):
            found.append((m, chosen))
        return
    together = m
    for o, _ in cand:
        together &= o
    if together.bit_count() >= k:  # all remaining candidates fit: the one maximal set below
        if all((together & e).bit_count() < k for e, _ in excl):
            found.append((together, chosen + cand))
        return
    for i, obj in enumerate(cand):
        m2 = m & obj[0]
        below = [o for o in cand[i + 1 :] if (m2 & o[0]).bit_count() >= k]
        out = [o for o in excl + cand[:i] if (m2 & o[0]).bit_count() >= k]
        _dfs(m2, chosen + [obj], below, out, k, found, left)


def neighbours_brute(sketches: Mapping[int, np.ndarray], k: int) -> dict[int, list[int]]:
    """``N(d)`` for every document, by comparing all pairs (tests, small inputs)."""
    ids = sorted(sketches)
    sets = {d: set(np.asarray(sketches[d]).tolist()) for d in ids}
    out: dict[int, list[int]] = {d: [] for d in ids}
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            if len(sets[a] & sets[b]) >= k:
                out[a].append(b)
                out[b].append(a)
    return out


def mine(sketches: Mapping[int, np.ndarray], k: int, neighbours: Mapping[int, list[int]] | None = None,
         new: set[int] | None = None, budget: int = DEFAULT_BUDGET) -> list[Concept]:
    """Every maximal set of at least two documents with >= k common sketch elements
    that contains a ``new`` document (all documents when None), each once."""
    nb = neighbours if neighbours is not None else neighbours_brute(sketches, k)
    is_new = (lambda d: True) if new is None else (lambda d: d in new)
    anchors = [q for q in sorted(sketches if new is None else new) if nb.get(q)]
    return sorted(mine_anchors(anchors, sketches, nb, k, is_new, budget), key=lambda c: c.members)


def brute_force(sketches: Mapping[int, Iterable[int]], k: int) -> set[tuple[tuple[int, ...], int]]:
    """Every maximal set (at least two documents) with >= k common elements, by listing all
    subsets: ``{(members, support)}``. Exponential; for tests on a handful of documents."""
    ids = sorted(sketches)
    sets = {d: frozenset(sketches[d]) for d in ids}
    valid = {}
    for mask in range(1, 1 << len(ids)):
        members = tuple(d for i, d in enumerate(ids) if mask >> i & 1)
        inter = frozenset.intersection(*(sets[d] for d in members))
        if len(inter) >= k:
            valid[members] = len(inter)
    out = set()
    for members, support in valid.items():
        if len(members) < 2:
            continue
        if any(set(members) < set(other) for other in valid if len(other) > len(members)):
            continue
        out.add((members, support))
    return out
