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


@pytest.mark.parametrize("permutation", ["universal", "matrix"])  # matrix: sketches stored unsorted
def test_older_sketches_read_end_to_end_are_those_read_one_by_one(tmp_path, permutation):
    """The concept search's reader of its partners' sketches (``_sketch_arrays``: the value table
    end to end, sorted by one kernel call) gives what ``_as_arrays(_sketches(...))`` gives, for
    older documents and the batch's own (read from the catalog), repeated ids too."""
    from neardup.clusters import _as_arrays, _sketch_arrays, _sketches
    from neardup.store.postings import LmdbPostings

    idx = Index(tmp_path / "i")
    recs = corpus(5, n_groups=6) + [{"url": "short", "text": "too short for a sketch"}]
    for k in range(0, len(recs), 5):
        ingest(idx, str(write_jsonl(tmp_path / f"p{k}.jsonl", recs[k : k + 5])), create_with=Settings(**SMALL, permutation=permutation))
    with idx.reader() as con:
        n = con.execute("SELECT max(doc_id) FROM documents").fetchall()[0][0]
        postings = LmdbPostings(idx.postings_path, readonly=True)
        try:
            for lo in (n // 2, n + 1):
                for want in (np.arange(1, n + 1), np.array([n, 2, 2, 1]), np.array([3])):
                    got = _sketch_arrays(con, postings, lo, want)
                    expect = _as_arrays(_sketches(con, postings, lo, want))
                    assert got[0].tolist() == expect[0].tolist() and got[0].size
                    assert got[1].tolist() == expect[1].tolist() and got[2].tolist() == expect[2].tolist()
        finally:
            postings.close()


# -- the clusterings run on request, on small graphs worked out by hand --------------------

from neardup import clusterings  # noqa: E402

#   1 - 2 - 3     a path, edge weights 0.9 and 0.8
#   4 = 5 = 6     a triangle, weights 0.95, 0.85, 0.7 (4-6)
#   6 - 7         a pendant edge, 0.6
GRAPH = [(1, 2, 0.9), (2, 3, 0.8), (4, 5, 0.95), (5, 6, 0.85), (4, 6, 0.7), (6, 7, 0.6)]


def test_components_and_cliques():
    assert clusterings.components(GRAPH) == [(1, 2, 3), (4, 5, 6, 7)]
    assert clusterings.cliques(GRAPH) == ([(1, 2), (2, 3), (4, 5, 6), (6, 7)], 0)
    assert clusterings.cliques(GRAPH, max_component=3) == ([(1, 2), (2, 3)], 1)


def test_center_and_merge_center():
    # by weight: 4-5 (4 centre, 5 joins), 1-2 (1 centre, 2 joins), 5-6 (5 is no centre: skip),
    # 2-3 (2 no centre: skip), 4-6 (4 centre, 6 joins), 6-7 (6 no centre: skip)
    assert clusterings.center(GRAPH) == [(1, 2), (4, 5, 6)]
    # merge-center: 5-6 ... no edge joins a centre to another cluster here, so the same
    assert clusterings.center(GRAPH, merge=True) == [(1, 2), (4, 5, 6)]
    # a centre meeting a member of another cluster merges the two
    g = [(1, 2, 0.9), (3, 4, 0.8), (1, 3, 0.7)]
    assert clusterings.center(g) == [(1, 2), (3, 4)]
    assert clusterings.center(g, merge=True) == [(1, 2, 3, 4)]


def test_star():
    # degrees: 6 has 3 (4, 5, 7), 2, 4, 5 have 2; 6 is the first star, then 2 (its neighbours 1, 3)
    assert clusterings.star(GRAPH) == [(1, 2, 3), (4, 5, 6, 7)]
    # with theta 0.8 the edges 4-6 and 6-7 go: 5 has degree 2, then 2
    assert clusterings.star(GRAPH, theta=0.8) == [(1, 2, 3), (4, 5, 6)]


def test_ricochet_sequential_rippling():
    # average weights: 1: 0.9, 5: 0.9, 2: 0.85, 4: 0.825, 3: 0.8, 6: 0.717, 7: 0.6; tried in that order:
    # 1 becomes a seed and takes 2; 5 takes 4 and 6; 2 becomes a seed for 3 (unassigned) and leaves 1;
    # 4 would move nothing (6 is closer to 5); 3 neither; 6 becomes a seed for 7; all are assigned.
    # Seed 1 is left alone and joins its nearest seed, 2.
    assert clusterings.ricochet(GRAPH) == [(1, 2, 3), (4, 5), (6, 7)]


def test_biconnected_components_overlap_at_articulation_points():
    assert clusterings.biconnected(GRAPH) == [(1, 2), (2, 3), (4, 5, 6), (6, 7)]


def test_report_002_grouping_and_highest_degree_first():
    ids = np.array([1, 2, 3, 4, 5], dtype=np.int64)
    lengths = np.array([500, 520, 560, 900, 505], dtype=np.int64)
    hashes = np.array([0b0000, 0b0111, 0b1111, 0b0000, 0b0001], dtype=np.uint64)
    # within +-20% of length and 2 bits: 1-5 (1 bit), 2-5 (2), 2-3 (1); 1-2 has 3 bits; 4 is too long
    edges = clusterings.window_edges(ids, lengths, hashes, 2)
    assert sorted(edges) == [(1, 5, 1 - 1 / 64), (2, 3, 1 - 1 / 64), (2, 5, 1 - 2 / 64)]
    # degrees 2 (documents 2 and 5): 2 goes first with 3 and 5; 1 is left alone
    assert clusterings.degree002(edges) == [(2, 3, 5)]
    groups = clusterings.greedy002(ids, lengths, hashes, 2, seed=0)
    assert all(len(g) > 1 for g in groups)
    members = [d for g in groups for d in g]
    assert len(members) == len(set(members))  # every document in at most one group
    for g in groups:  # each group lies within its first pick's window
        ls = [int(lengths[ids.tolist().index(d)]) for d in g]
        assert max(ls) <= 1.2 * min(ls) + 2
    assert groups == clusterings.greedy002(ids, lengths, hashes, 2, seed=0)  # fixed by the seed


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=60),
       st.lists(st.integers(0, 40), unique=True, max_size=30), st.integers(1, 5))
def test_components_of_pairs_and_old_components_match_networkx(pairs, old_members, n_old):
    from neardup.clusters import _components

    # old components: disjoint groups of members, in cluster ids given in no order
    groups = [old_members[i::n_old] for i in range(n_old)]
    rows = [(100 - g, d) for g, members in enumerate(groups) if len(members) > 1 for d in members]
    edges = [(a, b, 1.0) for a, b in pairs if a != b]
    edges += [(m[0], x, 1.0) for m in groups if len(m) > 1 for x in m[1:]]
    want = clusterings.components(edges)
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    o_cid = np.array([r[0] for r in rows], dtype=np.int64)
    o_doc = np.array([r[1] for r in rows], dtype=np.int64)
    assert _components(a, b, o_cid, o_doc) == want


extension_cases = st.tuples(
    # clusters: (representative, common values or None)
    st.lists(st.tuples(st.integers(0, 5), st.one_of(st.none(), st.sets(st.integers(0, 15), max_size=8))),
             min_size=0, max_size=8),
    # new documents' sketches
    st.lists(st.sets(st.integers(0, 15), max_size=8), min_size=1, max_size=6),
    # older document -> new documents it neighbours (indexes into the sketches)
    st.dictionaries(st.integers(0, 5), st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True), max_size=6),
    st.integers(1, 5),
)


@settings(max_examples=300)
@given(extension_cases)
def test_the_clusters_new_documents_extend_are_those_a_set_test_per_pair_finds(case):
    """``clusters._extending`` (one compiled call) against the rule it implements, tested pair by
    pair in Python: a cluster is extended when a new neighbour of its representative has at least
    ``k`` of its common values in its sketch."""
    import pyarrow as pa

    from neardup.clusters import _extending

    rows, sketches, near, k = case
    sk = {100 + i: np.array(sorted(s, reverse=i % 2 == 1), np.uint64) for i, s in enumerate(sketches)}  # some unsorted
    near_new = {old: [100 + q for q in qs if q < len(sketches)] for old, qs in near.items()}
    table = pa.table({
        "cluster_id": pa.array(range(10, 10 + len(rows)), pa.int64()),
        "common": pa.array([sorted(c) if c is not None else None for _, c in rows], pa.list_(pa.uint64())),
        "representative": pa.array([r for r, _ in rows], pa.int64()),
    })
    expected = [10 + i for i, (rep, common) in enumerate(rows)
                if any(len(set(sk[q].tolist()) & (common or set())) >= k for q in near_new.get(rep, ()))]
    assert _extending(table, near_new, sk, k) == expected
