"""The per-anchor concept search of ``neardup.concepts``, compiled (numba, cached).

``mine_anchors`` runs, for many anchors in one call, what ``concepts.mine_anchor_reference``
does for one in Python: the neighbour masks over the positions of S(q), the objects (neighbours
with equal masks, ordered by their smallest member), the depth-first search with closure, pruning
by excluded objects and look-ahead, and the fallback to the whole neighbourhood when the budget
runs out. Masks are fixed-width bitsets of ``ceil(|S(q)| / 64)`` words; the recursion is an
explicit stack that visits the nodes in the Python order, counts them the same way (one unit per
node, out of budget below zero or past ``max_sets`` reported sets) and reports the sets in the
same order. Bit i is the i-th smallest value of S(q) rather than ``sq[i]``: the search only
intersects, compares and counts masks, so any fixed assignment of positions to bits gives the
same sets, and the common elements are reported sorted either way. A property test
(``tests/test_concept_kernels.py``) compares the two on random contexts, truncation included.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from .kernels import _popcount64, common_at_least

#: ``mine_anchors`` status of an anchor: mined completely / ran out of budget
DONE, OUT_OF_BUDGET = 0, 1


@njit(cache=True, inline="always")
def _and_count(a, i, b, j, w):
    """``|a[i] & b[j]|`` over the first ``w`` words of the rows."""
    c = 0
    for t in range(w):
        c += _popcount64(a[i, t] & b[j, t])
    return c


@njit(cache=True, inline="always")
def _holds(a, i, b, j, w):
    """Whether row ``a[i]`` holds every bit of row ``b[j]``."""
    for t in range(w):
        if a[i, t] & b[j, t] != b[j, t]:
            return False
    return True


@njit(cache=True, inline="always")
def _grow1(a, need):
    """``a`` with room for ``need`` elements (doubled when short)."""
    if need <= a.size:
        return a
    b = np.empty(max(need, 2 * a.size), a.dtype)
    b[: a.size] = a
    return b


@njit(cache=True, inline="always")
def _keep_sharing(pool, lo, hi, p, fm, row, gm, w, k):
    """Append to ``pool`` from position ``p`` the objects of ``pool[lo:hi]`` that share at least ``k``
    attributes with intersection ``fm[row]``; returns the next free position."""
    for t in range(lo, hi):
        o = pool[t]
        if _and_count(fm, row, gm, o, w) >= k:
            pool[p] = o
            p += 1
    return p


@njit(cache=True, inline="always")
def _maximal(fm, row, gm, pool, es, el, w, k):
    """No excluded object (``pool[es:es + el]``) shares ``k`` attributes with intersection ``fm[row]``."""
    for t in range(el):
        if _and_count(fm, row, gm, pool[es + t], w) >= k:
            return False
    return True


@njit(cache=True)
def _report(fm, row, objs, more, fmask, fobj_off, fobj, nf, nobj, w):
    """Append a maximal set: intersection ``fm[row]``, objects ``objs`` then ``more``; returns the
    grown output arrays and counts."""
    fmask = _grow_rows(fmask, nf + 1)
    fobj_off = _grow1(fobj_off, nf + 2)
    for t in range(w):
        fmask[nf, t] = fm[row, t]
    n = objs.size + more.size
    fobj = _grow1(fobj, nobj + n)
    fobj[nobj : nobj + objs.size] = objs
    fobj[nobj + objs.size : nobj + n] = more
    nobj += n
    nf += 1
    fobj_off[nf] = nobj
    return fmask, fobj_off, fobj, nf, nobj


@njit(cache=True, inline="always")
def _grow_rows(a, need):
    """``a`` with room for ``need`` rows (doubled when short)."""
    if need <= a.shape[0]:
        return a
    b = np.empty((max(need, 2 * a.shape[0]), a.shape[1]), a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=True, nogil=True)
def overlap_reaches(data, offs, ra, rb, k):
    """Whether the sorted sets ``data[offs[r]:offs[r+1]]`` of each row pair ``(ra[p], rb[p])``
    share ``k`` values (``kernels.pair_overlap`` reaching ``k``): each merge stops as soon as
    that is known, ``k`` values met or too many unmatched to meet them
    (``kernels.common_at_least``; the concept neighbour search needs no more). Returns ``k`` for
    the pairs that share ``k`` or more, -1 for the others."""
    out = np.empty(ra.size, np.int64)
    for p in range(ra.size):
        out[p] = common_at_least(data, offs[ra[p]], offs[ra[p] + 1], offs[rb[p]], offs[rb[p] + 1], k, k)
    return out


@njit(cache=True, nogil=True)
def sorted_segments(vals, offs):
    """``vals`` with each segment ``offs[i]:offs[i + 1]`` in ascending order (sorted ones copied as they are)."""
    out = vals.copy()
    for i in range(offs.size - 1):
        s, e = offs[i], offs[i + 1]
        for t in range(s + 1, e):
            if out[t] < out[t - 1]:
                out[s:e] = np.sort(out[s:e])
                break
    return out


@njit(cache=True, nogil=True)
def neighbour_masks(sv, offs, a, nbs, w, out):
    """Into ``out[j]``: the mask of neighbour ``nbs[j]`` over the positions of anchor ``a``'s sorted
    sketch (bit i: its i-th smallest value). ``sv``: every sketch sorted (``sorted_segments``);
    ``a`` and ``nbs`` index its segments. A value equal to several positions sets the first, as
    ``np.searchsorted`` does in the reference.

    One merge of the two sorted sketches per neighbour, without a branch on the values: each step
    sets bit i when the two heads are equal and moves past the smaller head, past both when
    equal; near-copies share most values, so a loop that branched on each comparison mispredicted
    at every change between runs of equal and unequal heads. An anchor sketch holding a value
    twice (sketches are sets; only a caller's arrays can) moves past the neighbour's head alone
    when equal, so that the value's next copy in the neighbour meets its first position again."""
    s0, e0 = offs[a], offs[a + 1]
    n = e0 - s0
    both = True  # past both heads when equal, unless the anchor holds a value twice
    for i in range(s0 + 1, e0):
        if sv[i] == sv[i - 1]:
            both = False
            break
    for j in range(nbs.size):
        for t in range(w):
            out[j, t] = uint64(0)
        d = nbs[j]
        i = 0
        p = offs[d]
        pe = offs[d + 1]
        while i < n and p < pe:
            x = sv[s0 + i]
            y = sv[p]
            eq = x == y
            out[j, i >> 6] |= uint64(eq) << uint64(i & 63)
            i += (x < y) | (eq & both)
            p += y <= x


#: neighbour masks (rows of ``w_max`` words) computed at once by ``mine_anchors``: a block of anchors
#: whose lists hold about this many neighbours (16 MB of masks at two words a row)
MASK_BLOCK = 1 << 20


@njit(cache=True, nogil=True)
def _plain(sv, offs):
    """Per segment of ``sv`` (sorted): whether no value is in it twice."""
    out = np.ones(offs.size - 1, np.bool_)
    for d in range(offs.size - 1):
        for i in range(offs[d] + 1, offs[d + 1]):
            if sv[i] == sv[i - 1]:
                out[d] = False
                break
    return out


@njit(cache=True, nogil=True)
def block_masks(sv, offs, anchors, nb_off, nb, a0, a1, w_max, apos, plain):
    """``neighbour_masks`` of anchors ``a0:a1`` (positions in ``anchors``), all their neighbours'
    rows one after another (row ``t - nb_off[a0]`` for neighbour ``nb[t]``). Where two anchors of
    the block are each other's neighbours, one merge of their sketches gives both rows: bit i of
    the one where the heads meet at its i-th value, bit p of the other at its p-th (a sketch
    without a value twice, ``plain``, and a partner's list in ascending order, where the other
    is found by bisection); any other row is ``neighbour_masks``'s."""
    base = nb_off[a0]
    rows = nb_off[a1] - base
    m = np.zeros((rows, w_max), np.uint64)
    done = np.zeros(rows, np.bool_)
    for a in range(a0, a1):
        q = anchors[a]
        s0, e0 = offs[q], offs[q + 1]
        for t in range(nb_off[a], nb_off[a + 1]):
            if done[t - base]:
                continue
            d = nb[t]
            b = apos[d]
            r = -1
            if b >= a0 and b < a1 and plain[q] and plain[d]:
                lo, hi = nb_off[b], nb_off[b + 1]
                while lo < hi:  # q among d's neighbours; a list not in order may miss it (then no pair)
                    mid = (lo + hi) >> 1
                    if nb[mid] < q:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < nb_off[b + 1] and nb[lo] == q and not done[lo - base]:
                    r = lo - base
            if r < 0:
                neighbour_masks(sv, offs, q, nb[t : t + 1], (e0 - s0 + 63) >> 6, m[t - base : t - base + 1])
            else:
                i = s0
                p = offs[d]
                d0 = p
                pe = offs[d + 1]
                while i < e0 and p < pe:
                    x = sv[i]
                    y = sv[p]
                    eq = uint64(x == y)
                    m[t - base, (i - s0) >> 6] |= eq << uint64((i - s0) & 63)
                    m[r, (p - d0) >> 6] |= eq << uint64((p - d0) & 63)
                    i += x <= y
                    p += y <= x
                done[r] = True
            done[t - base] = True
    return m


@njit(cache=True, nogil=True)
def _objects(nm, nn, w, rep, gfirst):
    """Collapse neighbours with equal masks (rows of ``nm``): ``rep[j]`` is the first neighbour
    with ``j``'s mask, ``gfirst`` lists those first ones ascending (one per object). Returns the
    number of objects."""
    h = np.empty(nn, np.uint64)
    for j in range(nn):
        x = uint64(0x9E3779B97F4A7C15)
        for t in range(w):
            x = (x ^ nm[j, t]) * uint64(0xBF58476D1CE4E5B9)
            x ^= x >> uint64(31)
        h[j] = x
    order = np.argsort(h, kind="mergesort")
    r = 0
    while r < nn:
        e = r + 1
        while e < nn and h[order[e]] == h[order[r]]:
            e += 1
        for p in range(r, e):  # ascending indices within a run (stable sort)
            j = order[p]
            rep[j] = j
            for q in range(r, p):
                o = order[q]
                if rep[o] == o:
                    same = True
                    for t in range(w):
                        if nm[o, t] != nm[j, t]:
                            same = False
                            break
                    if same:
                        rep[j] = o
                        break
        r = e
    g = 0
    for j in range(nn):
        if rep[j] == j:
            gfirst[g] = j
            g += 1
    return g


#: columns of the search's frame table
_CS, _CL, _ES, _EL, _END, _CB, _I = range(7)


@njit(cache=True, nogil=True)
def _search(gm, n_obj, w, k, cand, n_cand, excl, n_excl, budget, max_sets, fmask, fobj_off, fobj, fm, fr, chosen, pool):
    """The depth-first search of ``concepts._dfs`` from the full mask ``gm[n_obj]`` over objects
    ``cand[:n_cand]`` (in order) with ``excl[:n_excl]`` excluded; object ``o``'s mask is ``gm[o]``.

    A frame ``d`` (row of ``fr``, intersection ``fm[d]``) has its candidates at
    ``pool[fr[d, _CS]:][:fr[d, _CL]]`` and its excluded objects at ``pool[fr[d, _ES]:][:fr[d, _EL]]``
    (a child's lists follow its parent's, up to ``fr[d, _END]``), the objects chosen on the way at
    ``chosen[:fr[d, _CB]]`` and the next candidate to branch on at ``fr[d, _I]``. Each reported set
    is a row of ``fmask`` and its objects ``fobj[fobj_off[f]:fobj_off[f + 1]]``. Returns
    ``(status, number of sets, fmask, fobj_off, fobj, pool)`` (the arrays grow as needed)."""
    pool = _grow1(pool, n_cand + n_excl)
    pool[:n_cand] = cand[:n_cand]
    pool[n_cand : n_cand + n_excl] = excl[:n_excl]
    for t in range(w):
        fm[0, t] = gm[n_obj, t]
    fr[0, _CS] = 0
    fr[0, _CL] = n_cand
    fr[0, _ES] = n_cand
    fr[0, _EL] = n_excl
    fr[0, _END] = n_cand + n_excl
    fr[0, _CB] = 0
    left = budget
    nf = np.int64(0)  # np.int64, not a literal: a literal argument makes numba compile the callee once more for it
    nobj = np.int64(0)
    fobj_off[0] = 0
    d = np.int64(0)
    entering = True
    while d >= 0:
        if entering:
            entering = False
            left -= 1
            if left < 0 or nf > max_sets:
                return OUT_OF_BUDGET, nf, fmask, fobj_off, fobj, pool
            cs = fr[d, _CS]
            # closure: candidates holding all of the intersection join for free
            c = fr[d, _CB]
            kept = 0
            for t in range(fr[d, _CL]):
                o = pool[cs + t]
                if _holds(gm, o, fm, d, w):
                    chosen[c] = o
                    c += 1
                else:
                    pool[cs + kept] = o
                    kept += 1
            fr[d, _CL] = kept
            fr[d, _CB] = c
            es, el = fr[d, _ES], fr[d, _EL]
            # an excluded object holding the intersection extends every set below: none is maximal
            pruned = False
            for t in range(el):
                if _holds(gm, pool[es + t], fm, d, w):
                    pruned = True
                    break
            if pruned:
                d -= 1
                continue
            if kept == 0:
                if _maximal(fm, d, gm, pool, es, el, w, k):
                    fmask, fobj_off, fobj, nf, nobj = _report(fm, d, chosen[:c], pool[cs:cs], fmask, fobj_off, fobj, nf, nobj, w)
                d -= 1
                continue
            # look-ahead: when all remaining candidates fit together, that is the one maximal set below
            top = d + 1  # the free frame row holds the intersection of them all
            for t in range(w):
                fm[top, t] = fm[d, t]
            for p in range(kept):
                o = pool[cs + p]
                for t in range(w):
                    fm[top, t] &= gm[o, t]
            together = 0
            for t in range(w):
                together += _popcount64(fm[top, t])
            if together >= k:
                if _maximal(fm, top, gm, pool, es, el, w, k):
                    fmask, fobj_off, fobj, nf, nobj = _report(fm, top, chosen[:c], pool[cs:cs + kept], fmask, fobj_off, fobj, nf, nobj, w)
                d -= 1
                continue
            fr[d, _I] = 0
        i = fr[d, _I]
        cs, cl, es, el = fr[d, _CS], fr[d, _CL], fr[d, _ES], fr[d, _EL]
        if i >= cl:
            d -= 1
            continue
        fr[d, _I] = i + 1
        obj = pool[cs + i]
        c1 = d + 1
        for t in range(w):
            fm[c1, t] = fm[d, t] & gm[obj, t]
        # the child's candidates: the later ones still sharing k; its excluded: the excluded
        # and the earlier candidates still sharing k
        p = fr[d, _END]
        pool = _grow1(pool, p + cl + el)
        fr[c1, _CS] = p
        p = _keep_sharing(pool, cs + i + 1, cs + cl, p, fm, c1, gm, w, k)
        fr[c1, _CL] = p - fr[c1, _CS]
        fr[c1, _ES] = p
        p = _keep_sharing(pool, es, es + el, p, fm, c1, gm, w, k)
        p = _keep_sharing(pool, cs, cs + i, p, fm, c1, gm, w, k)
        fr[c1, _EL] = p - fr[c1, _ES]
        fr[c1, _END] = p
        chosen[fr[d, _CB]] = obj
        fr[c1, _CB] = fr[d, _CB] + 1
        d = c1
        entering = True
    return DONE, nf, fmask, fobj_off, fobj, pool


@njit(cache=True, nogil=True)
def mine_anchor(vals, lens, doc_ids, new, k, budget, max_sets):
    """``mine_anchors`` for one anchor, document 0, whose neighbours are all the others."""
    n = lens.size
    nb_off = np.empty(2, np.int64)
    nb_off[0] = 0
    nb_off[1] = n - 1
    return mine_anchors(vals, lens, doc_ids, new, np.zeros(1, np.int64), nb_off, np.arange(1, n), k, budget, max_sets)


@njit(cache=True, nogil=True)
def _members(mem, n_mem, qid, doc_ids, nbs, mark, size):
    """Append to ``mem`` the members of a set: anchor ``qid`` and the ``size`` marked neighbours
    (``mark[j]``, cleared), ascending (the neighbours are). Returns ``(mem, its length)``."""
    mem = _grow1(mem, n_mem + size + 1)
    placed = False
    j = 0
    while size:
        if mark[j]:
            mark[j] = False
            size -= 1
            dj = doc_ids[nbs[j]]
            if not placed and qid <= dj:
                mem[n_mem] = qid
                n_mem += 1
                placed = True
            mem[n_mem] = dj
            n_mem += 1
        j += 1
    if not placed:
        mem[n_mem] = qid
        n_mem += 1
    return mem, n_mem


@njit(cache=True, nogil=True)
def _row(rows, nr, a, truncated, mem_end, pos_end, v0, n):
    """Row ``nr`` of ``mine_anchors``'s table (grown as needed)."""
    rows = _grow1(rows, 6 * nr + 6)
    rows[6 * nr] = a
    rows[6 * nr + 1] = truncated
    rows[6 * nr + 2] = mem_end
    rows[6 * nr + 3] = pos_end
    rows[6 * nr + 4] = v0
    rows[6 * nr + 5] = n
    return rows


@njit(cache=True, nogil=True)
def _anchor_values(com, n_com, sv, s0, n):
    """The anchor's sorted sketch appended to ``com`` (once per anchor that reports something)."""
    com = _grow1(com, n_com + n)
    com[n_com : n_com + n] = sv[s0 : s0 + n]
    return com


@njit(cache=True, nogil=True)
def mine_anchors(vals, lens, doc_ids, new, anchors, nb_off, nb, k, budget, max_sets):
    """``concepts.mine_anchor`` for every anchor ``anchors[a]`` (a document index) with neighbours
    ``nb[nb_off[a]:nb_off[a + 1]]`` (document indices, ascending doc id).

    ``vals``: every sketch involved, document after document, ``lens[i]`` values each (in any
    order); ``doc_ids``: each document's id; ``new``: whether it is new (sets are reported from
    their smallest new member). Returns ``(rows, values)``, the reported sets anchor after anchor,
    each anchor's in reporting order: ``rows[0]`` is their number r, then come r rows of (anchor
    position, truncated, end of its members, end of its positions, start and length of its
    anchor's sorted sketch in ``values``), then the members (doc ids ascending) of every set,
    then its common elements as positions in its anchor's sorted sketch (ascending). Positions
    rather than values: the caller builds each set's common elements from one list of its
    anchor's values, shared by all its sets."""
    offs = np.zeros(lens.size + 1, np.int64)
    for i in range(lens.size):
        offs[i + 1] = offs[i] + lens[i]
    sv = sorted_segments(vals, offs)
    w_max = np.int64(1)
    nn_max = np.int64(1)
    for a in range(anchors.size):
        n = offs[anchors[a] + 1] - offs[anchors[a]]
        w_max = max(w_max, (n + 63) >> 6)
        nn_max = max(nn_max, nb_off[a + 1] - nb_off[a])
    # the work space of every anchor, for the largest
    nm = np.empty((0, w_max), np.uint64)  # an anchor's neighbour masks: rows of ``block_masks``'s block
    gm = np.empty((nn_max + 1, w_max), np.uint64)  # object masks, then the full mask
    ints = np.empty((9, nn_max + 1), np.int64)
    rep, gfirst, gof, g_off, g_mem = ints[0], ints[1], ints[2], ints[3], ints[4]
    fill, cand, excl, chosen = ints[5], ints[6], ints[7], ints[8]
    flags = np.zeros((2, nn_max), np.bool_)
    is_excl, mark = flags[0], flags[1]
    fm = np.empty((nn_max + 2, w_max), np.uint64)
    fr = np.empty((nn_max + 2, 7), np.int64)
    pool = np.empty(16 * nn_max, np.int64)
    fmask = np.empty((16, w_max), np.uint64)
    fobj_off = np.empty(17, np.int64)
    fobj = np.empty(1024, np.int64)
    rows = np.empty(256, np.int64)
    mem = np.empty(1024, np.int64)
    pos = np.empty(1024, np.int64)
    com = np.empty(256, vals.dtype)
    nr = np.int64(0)  # np.int64, not a literal: a literal argument makes numba compile the callee once more for it
    n_mem = np.int64(0)
    n_pos = np.int64(0)
    n_com = np.int64(0)
    apos = np.full(lens.size, -1, np.int64)  # document -> its position among the anchors
    for a in range(anchors.size):
        apos[anchors[a]] = a
    plain = _plain(sv, offs)
    b0 = b1 = np.int64(0)  # the anchors whose masks are in ``block``
    block = nm
    for a in range(anchors.size):
        if a >= b1:
            b0, b1 = a, a + 1
            while b1 < anchors.size and nb_off[b1 + 1] - nb_off[b0] <= MASK_BLOCK:
                b1 += 1
            block = block_masks(sv, offs, anchors, nb_off, nb, b0, b1, w_max, apos, plain)
        q = anchors[a]
        qid = doc_ids[q]
        s0 = offs[q]
        n = offs[q + 1] - s0
        if n < k:
            continue
        w = (n + 63) >> 6
        nbs = nb[nb_off[a] : nb_off[a + 1]]
        nn = nbs.size
        nm = block[nb_off[a] - nb_off[b0] : nb_off[a + 1] - nb_off[b0]]
        n_obj = _objects(nm, nn, w, rep, gfirst)
        # objects (and their masks) in order of their smallest member, the full mask last
        for g in range(n_obj):
            for t in range(w):
                gm[g, t] = nm[gfirst[g], t]
            gof[gfirst[g]] = g
        for t in range(w):
            gm[n_obj, t] = uint64(0)
        for i in range(n):
            gm[n_obj, i >> 6] |= uint64(1) << uint64(i & 63)
        g_off[: n_obj + 1] = 0
        for j in range(nn):
            g = gof[rep[j]]
            gof[j] = g
            g_off[g + 1] += 1
        for g in range(n_obj):
            g_off[g + 1] += g_off[g]
            fill[g] = g_off[g]
            is_excl[g] = False
        # an object holding a smaller new document is excluded: that one reports its sets
        any_excl = False
        for j in range(nn):
            g = gof[j]
            g_mem[fill[g]] = j
            fill[g] += 1
            dj = nbs[j]
            if new[dj] and doc_ids[dj] < qid:
                is_excl[g] = True
                any_excl = True
        n_cand = np.int64(0)
        n_excl = np.int64(0)
        for g in range(n_obj):
            if is_excl[g]:
                excl[n_excl] = g
                n_excl += 1
            else:
                cand[n_cand] = g
                n_cand += 1
        status, nf, fmask, fobj_off, fobj, pool = _search(gm, n_obj, w, k, cand, n_cand, excl, n_excl, budget, max_sets,
                                                          fmask, fobj_off, fobj, fm, fr, chosen, pool)
        if status == OUT_OF_BUDGET:
            if any_excl:
                continue  # a smaller new anchor reports this neighbourhood too
            # the whole neighbourhood, with what all of it has in common
            mark[:nn] = True
            mem, n_mem = _members(mem, n_mem, qid, doc_ids, nbs, mark, nn)
            pos = _grow1(pos, n_pos + n)
            for i in range(n):
                hold = True
                for j in range(nn):
                    if (nm[j, i >> 6] >> uint64(i & 63)) & uint64(1) == uint64(0):
                        hold = False
                        break
                if hold:
                    pos[n_pos] = i
                    n_pos += 1
            com = _anchor_values(com, n_com, sv, s0, n)
            rows = _row(rows, nr, a, np.int64(1), n_mem, n_pos, n_com, n)
            n_com += n
            nr += 1
            continue
        v0 = n_com
        if nf:
            com = _anchor_values(com, n_com, sv, s0, n)
            n_com += n
        for f in range(nf):
            size = np.int64(0)
            for p in range(fobj_off[f], fobj_off[f + 1]):
                g = fobj[p]
                for t in range(g_off[g], g_off[g + 1]):
                    mark[g_mem[t]] = True
                size += g_off[g + 1] - g_off[g]
            mem, n_mem = _members(mem, n_mem, qid, doc_ids, nbs, mark, size)
            pos = _grow1(pos, n_pos + n)
            for i in range(n):
                if (fmask[f, i >> 6] >> uint64(i & 63)) & uint64(1) != uint64(0):
                    pos[n_pos] = i
                    n_pos += 1
            rows = _row(rows, nr, a, np.int64(0), n_mem, n_pos, v0, n)
            nr += 1
    out = np.empty(1 + 6 * nr + n_mem + n_pos, np.int64)
    out[0] = nr
    out[1 : 1 + 6 * nr] = rows[: 6 * nr]
    out[1 + 6 * nr : 1 + 6 * nr + n_mem] = mem[:n_mem]
    out[1 + 6 * nr + n_mem :] = pos[:n_pos]
    return out, com[:n_com]
