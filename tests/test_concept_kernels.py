"""The compiled concept miner (``neardup.concept_kernels``) against the Python reference, set for set."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import concepts


def family_context(seed: int, n_docs: int, size: int, universe: int, dtype=np.uint64) -> dict[int, np.ndarray]:
    """Sketches of ``size`` distinct values (in random order) for ``n_docs`` documents: a few
    families of near-copies of a base sketch, each copy replacing a few values, so that
    neighbourhoods are rich and overlap in many ways."""
    rng = np.random.default_rng(seed)
    bases = [rng.choice(universe, size, replace=False) for _ in range(int(rng.integers(1, 4)))]
    out = {}
    for d in range(n_docs):
        s = set(bases[int(rng.integers(len(bases)))].tolist())
        for _ in range(int(rng.integers(0, max(1, size // 4)))):
            s.discard(int(rng.choice(list(s))))
        while len(s) < size:
            s.add(int(rng.integers(universe)))
        v = np.array(sorted(s), dtype=np.int64)
        if dtype == np.int64:
            v = v - universe // 2
        out[int(rng.integers(0, 3)) + 3 * d] = rng.permutation(v).astype(dtype)  # ids with gaps
    return out


def overlaps(sk: dict[int, np.ndarray]) -> list[int]:
    """How many values each pair of documents shares."""
    sets = [set(v.tolist()) for v in sk.values()]
    return sorted(len(a & b) for i, a in enumerate(sets) for b in sets[i + 1 :])


def both(q, sk, nbs, k, is_new, budget):
    args = (q, sk[q], {e: sk[e] for e in nbs}, k, is_new, budget)
    return concepts.mine_anchor(*args), concepts.mine_anchor_reference(*args)


contexts = st.tuples(
    st.integers(0, 2**32 - 1),  # seed
    st.integers(1, 14),  # documents
    st.sampled_from([3, 8, 40, 64, 65, 100, 130, 200, 320]),  # sketch size
    st.sampled_from([2, 4, 1000]),  # universe / size
)


@settings(max_examples=300)
@given(contexts, st.data())
def test_compiled_miner_equals_the_reference(ctx, data):
    seed, n_docs, size, spread = ctx
    sk = family_context(seed, n_docs, size, max(size + 1, size * spread // 2))
    # k near the overlaps the pairs actually have, so that the search branches
    k = max(1, data.draw(st.sampled_from(overlaps(sk) or [size]), "overlap") + data.draw(st.integers(-1, 1), "shift"))
    new = data.draw(st.sets(st.sampled_from(sorted(sk))), "new")
    is_new = new.__contains__
    budget = data.draw(st.sampled_from([0, 1, 2, 3, 5, 8, 20, 100, concepts.DEFAULT_BUDGET]), "budget")
    nb = concepts.neighbours_brute(sk, k)
    for q in sorted(sk):
        got, want = both(q, sk, nb[q], k, is_new, budget)
        assert got == want, (q, k, budget)
    anchors = [q for q in sorted(sk) if nb[q]]
    want = [c for q in anchors for c in concepts.mine_anchor_reference(q, sk[q], {e: sk[e] for e in nb[q]}, k, is_new, budget)]
    assert concepts.mine_anchors(anchors, sk, nb, k, is_new, budget) == want
    assert concepts.mine_anchors(anchors, sk, {q: ns + ns[:1] for q, ns in nb.items()}, k, is_new, budget) == want


@settings(max_examples=200)
@given(contexts, st.data())
def test_the_miner_of_neighbour_arrays_equals_the_miner_of_lists(ctx, data):
    """``mine_anchor_arrays`` (documents numbered by ascending id, neighbours as arrays from the
    pairs, ``neighbours.neighbour_arrays``) reports exactly what ``mine_anchors`` does, anchors
    being the documents from ``lo`` on."""
    from neardup import neighbours

    seed, n_docs, size, spread = ctx
    sk = family_context(seed, n_docs, size, max(size + 1, size * spread // 2))
    k = max(1, data.draw(st.sampled_from(overlaps(sk) or [size]), "overlap") + data.draw(st.integers(-1, 1), "shift"))
    ids = sorted(sk)
    lo = data.draw(st.sampled_from(ids), "lo")
    new = data.draw(st.sets(st.sampled_from(ids)), "new")
    budget = data.draw(st.sampled_from([0, 3, 20, concepts.DEFAULT_BUDGET]), "budget")
    nb = concepts.neighbours_brute(sk, k)
    pairs = sorted({(min(q, e), max(q, e)) for q in ids for e in nb[q] if max(q, e) >= lo})
    pairs += pairs[: data.draw(st.integers(0, 2), "repeated")]  # a pair given twice counts once
    a = np.array([x for x, _ in pairs], np.int64)
    b = np.array([y for _, y in pairs], np.int64)
    lists = neighbours.neighbour_lists(a, b, lo)
    want = concepts.mine_anchors(sorted(lists), sk, lists, k, new.__contains__, budget)
    anchors, nb_off, nbs = neighbours.neighbour_arrays(a, b, lo)
    assert [(q, nbs[s:e].tolist()) for q, s, e in zip(anchors.tolist(), nb_off[:-1].tolist(), nb_off[1:].tolist())] \
        == [(q, sorted(set(lists[q]))) for q in sorted(lists)]
    docs = np.array(sorted(set(anchors.tolist()) | set(nbs.tolist())), np.int64)
    parts = [sk[d] for d in docs.tolist()]
    vals = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    lens = np.array([p.size for p in parts], np.int64)
    got = concepts.mine_anchor_arrays(anchors, nb_off, nbs, docs, vals, lens, np.isin(docs, sorted(new)), k, budget)
    assert got == want


@settings(max_examples=200)
@given(st.integers(0, 2**32 - 1), st.integers(2, 10), st.data())
def test_any_neighbour_lists_and_signed_values(seed, n_docs, data):
    """Beyond the contract (neighbours that share fewer than k values, signed values): still the
    reference's answer."""
    sk = family_context(seed, n_docs, data.draw(st.sampled_from([5, 70]), "size"), 150, np.int64)
    ids = sorted(sk)
    k = data.draw(st.integers(1, 8), "k")
    q = data.draw(st.sampled_from(ids), "q")
    nbs = data.draw(st.sets(st.sampled_from([d for d in ids if d != q]) if len(ids) > 1 else st.nothing()), "nbs")
    new = data.draw(st.sets(st.sampled_from(ids)), "new")
    budget = data.draw(st.sampled_from([0, 3, 30, concepts.DEFAULT_BUDGET]), "budget")
    got, want = both(q, sk, nbs, k, new.__contains__, budget)
    assert got == want


@pytest.mark.parametrize("max_sets", [0, 1, 2, 5])
def test_the_cap_on_reported_sets_truncates_the_same_anchors(monkeypatch, max_sets):
    monkeypatch.setattr(concepts, "MAX_SETS", max_sets)
    truncated = 0
    for seed in range(30):
        sk = family_context(seed, 12, 40, 60)
        nb = concepts.neighbours_brute(sk, 30)
        for q in sorted(sk):
            got, want = both(q, sk, nb[q], 30, lambda d: True, concepts.DEFAULT_BUDGET)
            assert got == want, (seed, q)
            truncated += any(c.truncated for c in want)
    assert truncated


def test_many_sets_and_a_budget_between_them():
    """An anchor with hundreds of maximal sets: every budget around the nodes it needs gives the
    reference's answer (complete above, truncated below)."""
    rng = np.random.default_rng(7)
    base = rng.choice(10**6, 100, replace=False)
    sk = {1: base.astype(np.uint64)}
    for d in range(2, 40):
        s = base.copy()
        s[rng.choice(100, 6, replace=False)] = rng.integers(10**6, 2 * 10**6, 6)
        sk[d] = s.astype(np.uint64)
    nb = concepts.neighbours_brute(sk, 88)
    full = concepts.mine_anchor_reference(1, sk[1], {e: sk[e] for e in nb[1]}, 88)
    assert len(full) > 50 and not any(c.truncated for c in full)
    for budget in (1, 10, 100, 500, 1000, 2000, 5000, concepts.DEFAULT_BUDGET):
        got, want = both(1, sk, nb[1], 88, lambda d: True, budget)
        assert got == want, budget


@settings(max_examples=200)
@given(st.lists(st.lists(st.integers(0, 12), min_size=0, max_size=150), min_size=2, max_size=6))
def test_neighbour_masks_mark_the_first_position_of_each_shared_value(sketches):
    """The compiled masks equal the reference's (``np.searchsorted`` of each neighbour value in the
    anchor's sorted sketch, the first position of a value met several times), values repeated on
    either side included."""
    from neardup import concept_kernels

    parts = [np.sort(np.array(s, dtype=np.uint64)) for s in sketches]
    lens = np.array([p.size for p in parts], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    sv = np.concatenate(parts)
    a, nbs = 0, np.arange(1, len(parts), dtype=np.int64)
    n = int(lens[0])
    w = max(1, (n + 63) >> 6)
    out = np.full((nbs.size, w), 7, dtype=np.uint64)  # overwritten
    concept_kernels.neighbour_masks(sv, offs, a, nbs, w, out)
    for j, d in enumerate(nbs.tolist()):
        want = np.zeros(w, dtype=np.uint64)
        anchor = parts[0]
        for v in parts[d].tolist():
            i = int(np.searchsorted(anchor, np.uint64(v)))
            if i < n and anchor[i] == v:
                want[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
        assert out[j].tolist() == want.tolist(), (j, d)


@settings(max_examples=150)
@given(st.lists(st.lists(st.integers(0, 40), min_size=0, max_size=90), min_size=2, max_size=8), st.data())
def test_block_masks_equal_each_anchors_own_masks(sketches, data):
    """``block_masks`` (one merge for two anchors that neighbour each other) gives every row that
    ``neighbour_masks`` gives anchor by anchor: any block of the anchors, neighbour lists in order
    or not, sketches with repeated values or without."""
    from neardup import concept_kernels

    parts = [np.sort(np.array(s, dtype=np.uint64)) for s in sketches]
    if data.draw(st.booleans(), "sets"):
        parts = [np.unique(p) for p in parts]
    lens = np.array([p.size for p in parts], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    sv = np.concatenate(parts)
    n_docs = len(parts)
    anchors = np.array(sorted(data.draw(st.sets(st.integers(0, n_docs - 1), min_size=1), "anchors")), dtype=np.int64)
    lists = []
    for q in anchors.tolist():
        others = [d for d in range(n_docs) if d != q]
        ns = sorted(data.draw(st.sets(st.sampled_from(others), min_size=1), f"nb{q}")) if others else []
        if data.draw(st.booleans(), f"shuffled{q}"):
            ns = ns[::-1]
        lists.append(ns)
    nb_off = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    nb = np.array([d for x in lists for d in x], dtype=np.int64)
    w_max = max(1, (int(lens.max()) + 63) >> 6)
    apos = np.full(n_docs, -1, np.int64)
    apos[anchors] = np.arange(anchors.size)
    plain = concept_kernels._plain(sv, offs)
    a0 = data.draw(st.integers(0, anchors.size - 1), "a0")
    a1 = data.draw(st.integers(a0 + 1, anchors.size), "a1")
    got = concept_kernels.block_masks(sv, offs, anchors, nb_off, nb, a0, a1, w_max, apos, plain)
    for a in range(a0, a1):
        q = int(anchors[a])
        w = max(1, (int(lens[q]) + 63) >> 6)
        want = np.zeros((nb_off[a + 1] - nb_off[a], w), dtype=np.uint64)
        concept_kernels.neighbour_masks(sv, offs, q, nb[nb_off[a] : nb_off[a + 1]], w, want)
        rows = got[nb_off[a] - nb_off[a0] : nb_off[a + 1] - nb_off[a0]]
        assert rows[:, :w].tolist() == want.tolist(), (a, q)
        assert not rows[:, w:].any()
