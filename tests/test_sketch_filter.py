"""The bottom-k screen of ``jaccard``'s candidates (neardup.pairs.sketch_filter) against exact answers."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup import Index, exact
from neardup.ingest import ingest
from neardup.pairs import AGREEMENT_RISK, ValueCache, min_agreements, sketch_filter
from neardup.pairs.batch import _agree_at_least
from neardup.pairs.values import SIGNATURE_VALUES
from neardup.pairs.verify import sure_agreements
from neardup.settings import Settings

from .conftest import write_jsonl
from .test_pairs import corpus


def _reference(a: set[int], b: set[int], k: int, need: int, t: float) -> tuple[int, float]:
    """(state, similarity) of two sets by their sketches, the sets' ``k`` smallest values."""
    ska, skb = set(sorted(a)[:k]), set(sorted(b)[:k])
    s = sorted(ska | skb)[:k]
    both = len(set(s) & ska & skb)
    if len(s) >= k:
        return (sketch_filter.VERIFY if both >= need else sketch_filter.DROP), -1.0
    j = both / len(s) if s else 0.0
    assert j == len(a & b) / len(a | b)  # both sketches are the whole sets: the exact Jaccard
    return (sketch_filter.EXACT, j) if s and j >= t - 1e-12 else (sketch_filter.DROP, -1.0)


@given(st.lists(st.tuples(st.sets(st.integers(0, 60), min_size=1, max_size=40),
                          st.sets(st.integers(0, 60), min_size=1, max_size=40)), min_size=1, max_size=12),
       st.sampled_from([4, 8, 16, 32]), st.sampled_from([0.5, 0.8]), st.data())
def test_states_are_those_of_the_sketches_and_exact_for_whole_sets(pairs_, k, t, data):
    need = data.draw(st.integers(0, k))
    sets = [s for p in pairs_ for s in p]
    parts = [np.array(sorted(s)[:k], dtype=np.uint64) for s in sets]
    offs = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([p.size for p in parts], out=offs[1:])
    data_ = np.concatenate(parts)
    ra = np.arange(0, len(sets), 2)
    sim = np.full(ra.size, -1.0)
    state = sketch_filter.sketch_states(data_, offs, ra, ra + 1, k, need, t, sim)
    for i, (a, b) in enumerate(pairs_):
        assert (int(state[i]), float(sim[i])) == _reference(a, b, k, need, t)


def _hypergeometric_below(n: int, marked: int, k: int, m: int) -> Fraction:
    """P[X < m] for X the marked among ``k`` draws without replacement from ``n`` of which ``marked`` are."""
    return Fraction(sum(math.comb(marked, x) * math.comb(n - marked, k - x) for x in range(m)), math.comb(n, k))


def test_a_pair_at_the_threshold_fails_the_screen_with_at_most_the_agreement_risk():
    risk = Fraction(AGREEMENT_RISK)
    for t, k in [(0.8, 100), (0.9, 100), (0.5, 64)]:
        m = min_agreements(t, k)
        for n in [*range(k, 1501, 23), 5_000, 100_000]:
            marked = math.ceil(t * n - 1e-9)  # Jaccard t at least
            assert _hypergeometric_below(n, marked, k, m) <= risk, (t, k, n)
        # and the bound is not loose: one more needed would pass the risk for a large union
        assert _hypergeometric_below(100_000, math.ceil(t * 100_000), k, m + 1) > risk


def test_sure_agreements_leave_a_hundredth_of_the_pairs_at_the_threshold():
    assert sure_agreements(0.8, 100) == 70
    below = sum(math.comb(100, x) * 0.8**x * 0.2 ** (100 - x) for x in range(70))
    assert below <= 0.01 < below + math.comb(100, 70) * 0.8**70 * 0.2**30


@given(st.data())
def test_agreements_from_the_batch_and_the_cache_count_every_position(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    perms, lo = 20, 50
    new_ids = np.array(sorted(data.draw(st.sets(st.integers(lo, lo + 40), min_size=2, max_size=20))), np.int64)
    old_ids = np.arange(1, lo, dtype=np.int64)
    low_new = rng.integers(0, 3, (new_ids.size, perms), dtype=np.uint8)  # few byte values: many agreements
    low_old = rng.integers(0, 3, (old_ids.size, perms), dtype=np.uint8)
    cache = ValueCache()
    cache.add_fixed(SIGNATURE_VALUES, old_ids, low_old)
    n = data.draw(st.integers(1, 30))
    b = rng.choice(new_ids, n)
    a = np.where(rng.random(n) < 0.5, rng.choice(old_ids, n), rng.choice(new_ids, n))
    need = data.draw(st.integers(0, perms))
    got = _agree_at_least(None, None, lo, Settings(minhash_perms=perms), cache, {"low": (new_ids, low_new)}, a, b, need)
    rows = {**dict(zip(old_ids.tolist(), low_old)), **dict(zip(new_ids.tolist(), low_new))}
    assert got.tolist() == [int((rows[x] == rows[y]).sum()) >= need for x, y in zip(a.tolist(), b.tolist())]


@pytest.fixture(scope="module")
def screened(tmp_path_factory):
    """An index of two batches of long and short pages (sketches cut short and whole), every
    ``jaccard`` candidate screened (``SURE_SHARE`` 1: no agreement count is sure), and the states
    the screen gave them."""
    from neardup.pairs import batch, verify

    root = tmp_path_factory.mktemp("screen")
    recs = corpus(n_base=8, variants=3, seed=5) + corpus(n_base=10, variants=3, n_words=40, seed=6)
    for i, r in enumerate(recs):
        r["url"] = f"https://e.org/{i}"
    idx = Index(root / "idx")
    s = Settings(bottomk=32)
    seen: list[np.ndarray] = []
    real = batch.screen

    def screen(*args, **kw):
        state, sim = real(*args, **kw)
        seen.append(state.copy())
        return state, sim

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verify, "SURE_SHARE", 1.0)
        mp.setattr(batch, "screen", screen)
        for k, part in enumerate((recs[::2], recs[1::2])):
            ingest(idx, str(write_jsonl(root / f"b{k}.jsonl", part)), create_with=s)
    return idx, s, np.concatenate(seen)


def test_screen_reads_older_sketches_from_the_postings_and_the_batch_ones_from_its_rows(screened):
    idx, s, _ = screened
    with idx.writer() as w:
        con = w.con
        lo = con.execute("SELECT min(doc_id) FROM documents WHERE batch_id = 2").fetchall()[0][0]
        hi = con.execute("SELECT max(doc_id) FROM documents").fetchall()[0][0]
        sk = {d: set(v) for d, v in con.execute("SELECT doc_id, sketch FROM fp_bottomk").fetchall()}
        ids = sorted(sk)
        a = np.array([x for x in ids for y in ids if x < y and y >= lo], np.int64)
        b = np.array([y for x in ids for y in ids if x < y and y >= lo], np.int64)
        need = min_agreements(s.threshold, s.bottomk)
        cache = ValueCache()
        state, sim = sketch_filter.screen(con, a, b, s, need, w.postings, lo, hi, cache)
        assert cache.batch_sketches is not None  # the batch's own, read once
        again = sketch_filter.screen(con, a, b, s, need, w.postings, lo, hi, cache)  # older ones now cached
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        # a sketch is its set's k smallest values, a whole set when shorter: the reference of two sets
        # that are those sketches gives the same answer
        assert (int(state[i]), float(sim[i])) == _reference(sk[x], sk[y], s.bottomk, need, s.threshold)
    assert np.array_equal(again[0], state) and np.array_equal(again[1], sim)
    assert {sketch_filter.DROP, sketch_filter.VERIFY, sketch_filter.EXACT} <= set(state.tolist())


def test_the_screen_keeps_the_pairs_of_the_exact_answer(screened):
    idx, s, seen = screened
    # every outcome came up among the candidates: dropped, sent on, decided on whole sets
    assert {sketch_filter.DROP, sketch_filter.VERIFY, sketch_filter.EXACT} <= set(seen.tolist())
    with idx.reader() as con:
        rows = con.execute("SELECT doc_id, text FROM documents ORDER BY doc_id").fetchall()
        ids = [r[0] for r in rows]
        truth = {(ids[i], ids[j]): v for i, j, v in exact.all_pairs(exact.shingle_sets([r[1] for r in rows], s), s.threshold)}
        got = {(x, y): v for x, y, v in con.execute("SELECT doc_a, doc_b, similarity FROM duplicates WHERE method = 'jaccard'").fetchall()}
    assert len(truth) > 10 and set(got) == set(truth)
    assert all(v == pytest.approx(truth[p], abs=1e-12) for p, v in got.items())
