"""Concept clusters (maximal k-similar sets) and components, exact and incremental."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Index, concepts
from neardup.ingest import ingest
from neardup.rebuild import rebuild_fingerprints
from neardup.settings import Settings

from .conftest import write_jsonl


def as_result(found):
    return {(c.members, c.support) for c in found}


contexts = st.integers(1, 8).flatmap(
    lambda n: st.tuples(
        st.lists(st.sets(st.integers(0, 11), min_size=0, max_size=9), min_size=n, max_size=n),
        st.integers(1, 7),
    )
)


@settings(max_examples=300)
@given(contexts)
def test_miner_equals_brute_force_on_small_contexts(ctx):
    sets, k = ctx
    sketches = {d + 1: np.array(sorted(s), dtype=np.uint64) for d, s in enumerate(sets)}
    assert as_result(concepts.mine(sketches, k)) == concepts.brute_force({d: s.tolist() for d, s in sketches.items()}, k)


def test_miner_reports_common_elements_and_collapses_identical_sketches():
    sk = {1: [1, 2, 3, 4], 2: [1, 2, 3, 4], 3: [1, 2, 3, 9], 4: [5, 6, 7, 8]}
    got = concepts.mine({d: np.array(v, dtype=np.uint64) for d, v in sk.items()}, 3)
    assert [(c.members, c.common) for c in got] == [((1, 2, 3), (1, 2, 3))]
    got = concepts.mine({d: np.array(v, dtype=np.uint64) for d, v in sk.items()}, 4)
    assert [(c.members, c.common) for c in got] == [((1, 2), (1, 2, 3, 4))]


def test_miner_agrees_with_pyfim_fpgrowth_on_the_transposed_context():
    fim = pytest.importorskip("fim")
    rnd = random.Random(4)
    universe = list(range(400))
    sketches = {}
    d = 1
    for g in range(40):  # groups of near-duplicates over a shared base, plus noise documents
        base = rnd.sample(universe, 30)
        for _ in range(rnd.randrange(1, 6)):
            s = set(base)
            for _ in range(rnd.randrange(0, 6)):
                s.discard(rnd.choice(base))
                s.add(rnd.choice(universe))
            sketches[d] = np.array(sorted(s), dtype=np.uint64)
            d += 1
    for k in (20, 24, 27, 30):
        ours = as_result(concepts.mine(sketches, k))
        transactions: dict[int, list[int]] = {}
        for doc, s in sketches.items():
            for v in s.tolist():
                transactions.setdefault(v, []).append(doc)
        theirs = {(tuple(sorted(items)), supp) for items, supp in fim.fpgrowth(list(transactions.values()), target="m", supp=-k, zmin=2)}
        assert ours == theirs, k
        assert ours


def test_a_tiny_budget_falls_back_to_the_neighbourhood_and_says_so():
    sk = {1: [1, 2, 3, 4], 2: [1, 2], 3: [3, 4], 4: [1, 3], 5: [2, 4]}
    sk = {d: np.array(v, dtype=np.uint64) for d, v in sk.items()}
    assert len(concepts.mine(sk, 2)) == 4  # {1,2}, {1,3}, {1,4}, {1,5}: it takes branching
    got = concepts.mine(sk, 2, budget=1)
    assert [(c.members, c.truncated, c.common) for c in got] == [((1, 2, 3, 4, 5), True, ())]


def corpus(seed: int, n_groups: int = 8) -> list[dict]:
    rnd = random.Random(seed)
    vocab = [f"w{i}" for i in range(2000)]
    recs = []
    for g in range(n_groups):
        base = [rnd.choice(vocab) for _ in range(rnd.randrange(60, 160))]
        for _ in range(rnd.randrange(1, 5)):
            v = list(base)
            for _ in range(int(len(v) * rnd.uniform(0, 0.04))):
                v[rnd.randrange(len(v))] = rnd.choice(vocab)
            recs.append(v)
    rnd.shuffle(recs)
    return [{"url": f"https://c.org/{i}", "text": " ".join(ws)} for i, ws in enumerate(recs)]


def clusters_by_url(idx: Index, method: str) -> set[tuple[tuple[str, ...], int | None]]:
    with idx.reader() as con:
        rows = con.execute(
            "SELECT c.cluster_id, c.support, list(d.url ORDER BY d.url) FROM clusters c JOIN cluster_members m USING (cluster_id) "
            "JOIN documents d USING (doc_id) WHERE c.method = ? GROUP BY ALL", [method]).fetchall()
    return {(tuple(urls), support) for _, support, urls in rows}


SMALL = dict(bottomk=24, concept_support=20, minhash_perms=32)


@settings(max_examples=6)
@given(st.lists(st.integers(1, 20), max_size=3, unique=True), st.randoms(use_true_random=False))
def test_any_batch_split_and_order_gives_the_clusters_of_a_rebuild(tmp_path_factory, cuts, rnd):
    recs = corpus(7)
    root = tmp_path_factory.mktemp("clusters")
    s = Settings(**SMALL)
    shuffled = list(recs)
    rnd.shuffle(shuffled)
    idx = Index(root / "inc")
    bounds = [0, *sorted(c for c in cuts if c < len(shuffled)), len(shuffled)]
    for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        ingest(idx, str(write_jsonl(root / f"p{k}.jsonl", shuffled[lo:hi])), create_with=s)
    one = Index(root / "one")
    ingest(one, str(write_jsonl(root / "all.jsonl", recs)), create_with=s)
    for method in ("concept", "components"):
        assert clusters_by_url(idx, method) == clusters_by_url(one, method), method
    assert clusters_by_url(one, "concept")
    rebuild_fingerprints(idx)
    assert clusters_by_url(idx, "concept") == clusters_by_url(one, "concept")


def test_concept_clusters_after_many_batches_equal_fpgrowth_on_the_stored_sketches(tmp_path):
    idx = Index(tmp_path / "i")
    recs = corpus(3, n_groups=5)
    for k in range(0, len(recs), 4):
        ingest(idx, str(write_jsonl(tmp_path / f"p{k}.jsonl", recs[k : k + 4])), create_with=Settings(**SMALL))
    with idx.reader() as con:
        sk = dict(con.execute("SELECT doc_id, sketch FROM fp_bottomk").fetchall())
        got = {(tuple(m), s) for _, s, m in con.execute(
            "SELECT c.cluster_id, c.support, list(m.doc_id ORDER BY m.doc_id) FROM clusters c JOIN cluster_members m USING (cluster_id) "
            "WHERE c.method = 'concept' GROUP BY ALL").fetchall()}
        # every pair inside a concept cluster shares the support: the clusters are pairwise similar
        bad = con.execute(
            "SELECT count(*) FROM clusters c JOIN cluster_members a USING (cluster_id) JOIN cluster_members b USING (cluster_id) "
            "JOIN fp_bottomk x ON x.doc_id = a.doc_id JOIN fp_bottomk y ON y.doc_id = b.doc_id "
            "WHERE c.method = 'concept' AND a.doc_id < b.doc_id AND len(list_intersect(x.sketch, y.sketch)) < 20").fetchall()[0][0]
    fim = pytest.importorskip("fim")
    transactions: dict[int, list[int]] = {}
    for doc, values in sk.items():
        for v in values:
            transactions.setdefault(v, []).append(doc)
    want = {(tuple(sorted(items)), supp) for items, supp in fim.fpgrowth(list(transactions.values()), target="m", supp=-20, zmin=2)}
    assert got and got == want
    assert bad == 0
