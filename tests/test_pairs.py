"""Candidate generators, verification and incremental pairs (neardup.pairs) against exact answers."""

from __future__ import annotations

import random

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import Index, exact, kernels, pairs, row_kernels
from neardup.ingest import ingest
from neardup.rebuild import rebuild_fingerprints
from neardup.settings import Settings, parse_pairs
from neardup.sqlfiles import query

from .conftest import write_jsonl
from .snapshot import content, snapshot



def every_pair(methods: tuple[str, ...], **kw) -> Settings:
    """Settings computing every pair method these fingerprints allow."""
    return Settings(methods=methods, pairs=parse_pairs("all", methods), **kw)


def corpus(n_base: int = 12, variants: int = 4, n_words: int = 120, seed: int = 1) -> list[dict]:
    """Base texts of random words, each with variants of 0-5% words replaced (some also cut short) (so pairs
    on both sides of 0.8 Jaccard), shuffled; plus a few unrelated short texts."""
    rnd = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    recs = []
    for b in range(n_base):
        base = [rnd.choice(vocab) for _ in range(n_words + rnd.randrange(-30, 30))]
        recs.append(base)
        for _ in range(variants):
            v = list(base)
            for _ in range(int(len(v) * rnd.uniform(0, 0.05))):
                v[rnd.randrange(len(v))] = rnd.choice(vocab)
            if rnd.random() < 0.3:
                v = v[: int(len(v) * rnd.uniform(0.88, 1.0))]
            recs.append(v)
    recs += [[rnd.choice(vocab) for _ in range(15)] for _ in range(5)]
    rnd.shuffle(recs)
    out = []
    for i, ws in enumerate(recs):
        sents = [" ".join(ws[j : j + 8]) + "." for j in range(0, len(ws), 8)]
        out.append({"url": f"https://e.org/{i}", "text": " ".join(sents)})
    return out


def found(con, method: str) -> dict[tuple[int, int], float]:
    return {(a, b): s for a, b, s in con.execute("SELECT doc_a, doc_b, similarity FROM duplicates WHERE method = ?", [method]).fetchall()}


def texts_by_id(con) -> tuple[list[int], list[str]]:
    rows = con.execute("SELECT doc_id, text FROM documents ORDER BY doc_id").fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    recs = corpus()
    idx = Index(root / "idx")
    s = every_pair(("shingles", "bottomk", "minhash", "simhash", "simhash_hp", "a0", "a6_36", "a12"), bottomk=32)
    # three batches: pairs within a batch and across batches
    for k, part in enumerate((recs[:20], recs[20:45], recs[45:])):
        ingest(idx, str(write_jsonl(root / f"b{k}.jsonl", part)), create_with=s)
    return idx, s


def test_lsh_parameters_are_the_most_rows_that_keep_recall():
    assert pairs.lsh_params(0.8, 100) == (20, 5)
    for t, perms in [(0.5, 64), (0.8, 128), (0.9, 100), (0.95, 200)]:
        bands, rows = pairs.lsh_params(t, perms)
        assert bands == perms // rows
        assert 1 - (1 - t**rows) ** bands >= 0.999
        more = rows + 1
        assert 1 - (1 - t**more) ** (perms // more) < 0.999


@settings(max_examples=200)
@given(st.integers(0, 7), st.integers(0, 2**64 - 1), st.data())
def test_simhash_tables_catch_every_pair_within_the_budget(bits, x, data):
    flips = data.draw(st.sets(st.integers(0, 63), max_size=bits))
    y = x
    for f in flips:
        y ^= 1 << f
    kx, ky = pairs.simhash_keys(np.array([x, y], dtype=np.uint64), bits)
    assert (kx == ky).any()


def _near_simhashes(data, n_max: int) -> list[int]:
    """Simhashes in a few families (a base with up to 9 bits flipped), so pairs fall on both sides of any budget."""
    bases = data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=4))
    out = []
    for _ in range(data.draw(st.integers(1, n_max))):
        v = data.draw(st.sampled_from(bases))
        for f in data.draw(st.sets(st.integers(0, 63), max_size=9)):
            v ^= 1 << f
        out.append(v)
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 7), st.data())
def test_simhash_scan_finds_exactly_the_pairs_within_the_budget(bits, data):
    """The scanned tables (``pairs.simhash``) against brute force: older documents read in steps or
    held sorted on the tables (some or all of them), candidates expanded in slices as small as one,
    the scan's hits handed over in buffers as small as the batch allows, a pair agreeing on several
    tables kept once."""
    from neardup.pairs import simhash as scan

    values = _near_simhashes(data, 40)
    lo = data.draw(st.integers(1, len(values) + 1))
    con = duckdb.connect()
    con.execute("CREATE TABLE fp_simhash (doc_id BIGINT, simhash UBIGINT)")
    con.executemany("INSERT INTO fp_simhash VALUES (?, ?)", [[i + 1, v] for i, v in enumerate(values)])
    hi = len(values)
    default_hits = scan.HITS_STEP
    scan.HITS_STEP = data.draw(st.sampled_from([1, 2, default_hits]))  # the hit buffers: as small as one bucket
    # the older documents below ``upto`` sorted on the tables (kept by an ingest from an earlier
    # batch), the others read in steps; or every one read in steps
    upto = data.draw(st.none() | st.integers(1, lo))
    cache: dict | None = None
    if upto is not None:
        cache = {}
        scan.sorted_old(con, "fp_simhash", upto, bits, cache)
    try:
        a, b, sim = scan.scan_pairs(con, "simhash", lo, hi, bits, budget=data.draw(st.sampled_from([1, 5, 10**6])),
                                   step=data.draw(st.sampled_from([1, 3, scan.OLD_STEP])), cache=cache)
    finally:
        scan.HITS_STEP = default_hits
    got = {(x, y): v for x, y, v in zip(a.tolist(), b.tolist(), sim.tolist())}
    assert len(got) == a.size  # each pair once
    want = {(i, j): 1 - bin(values[i - 1] ^ values[j - 1]).count("1") / 64
            for j in range(lo, hi + 1) for i in range(1, j) if bin(values[i - 1] ^ values[j - 1]).count("1") <= bits}
    assert got == pytest.approx(want)


@pytest.mark.parametrize("ratio", [0, 10**9])
def test_simhash_pairs_by_postings_and_by_scan_are_the_same(tmp_path, monkeypatch, ratio):
    """A batch's simhash pairs come from the postings (tiny batches) or from scanning (the rest):
    forced one way or the other, every batch split gives the brute-force pairs."""
    from neardup.pairs import simhash as scan

    monkeypatch.setattr(scan, "SCAN_RATIO", ratio)
    recs = corpus(n_base=8, variants=3, seed=11)
    s = Settings(methods=("shingles", "minhash", "simhash", "simhash_hp"), pairs=("jaccard", "simhash", "simhash_hp"), simhash_bits=5)
    idx = Index(tmp_path / "i")
    for k in range(0, len(recs), 6):
        ingest(idx, str(write_jsonl(tmp_path / f"p{k}.jsonl", recs[k : k + 6])), create_with=s)
    with idx.reader() as con:
        for m in ("simhash", "simhash_hp"):
            h = dict(con.execute(f"SELECT doc_id, simhash FROM fp_{m}").fetchall())
            docs = sorted(h)
            want = {(a, b) for i, a in enumerate(docs) for b in docs[i + 1 :] if bin(h[a] ^ h[b]).count("1") <= 5}
            assert want and set(found(con, m)) == want


@pytest.mark.parametrize("sorted_docs", [0, 10**9])
def test_an_ingest_of_many_batches_keeps_its_sorted_older_simhashes_and_finds_the_same_pairs(tmp_path, monkeypatch, sorted_docs):
    """One input ingested as many scanned batches: the first sorts the older documents' simhashes on
    the tables and the next ones use them (``simhash.SortedOld``), the documents the ingest added
    since read as before; with none kept (``SORTED_OLD_DOCS`` 0) every batch reads them all. Both
    give the brute-force pairs."""
    import neardup.readers.base as base
    from neardup.pairs import simhash as scan

    monkeypatch.setattr(scan, "SCAN_RATIO", 10**9)
    monkeypatch.setattr(scan, "SORTED_OLD_DOCS", sorted_docs)
    monkeypatch.setattr(base, "CHUNK_RECORDS", 4)
    built = []
    real = scan.SortedOld.__init__

    def counting(self, ids, values, bits, upto):
        built.append(upto)
        real(self, ids, values, bits, upto)

    monkeypatch.setattr(scan.SortedOld, "__init__", counting)
    recs = corpus(n_base=10, variants=4, seed=5)
    s = Settings(methods=("shingles", "minhash", "simhash"), pairs=("jaccard", "simhash"), simhash_bits=6)
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "a.jsonl", recs[:7])), create_with=s)
    src = tmp_path / "b"  # a file a record, read four records a chunk: a batch of about 1 KB each
    src.mkdir()
    for i, r in enumerate(recs[7:]):
        write_jsonl(src / f"{i:03d}.jsonl", [r])
    res = ingest(idx, str(src), batch_mb=0.001)
    assert len(res.batch_ids) > 2
    # sorted by the ingest's first batch for the documents before it, then again for every document
    # before a batch once those added since reach half of those held
    if sorted_docs:
        assert built[0] == 8 and len(built) > 1
        assert all(b - a >= scan.RESORT_SHARE * (a - 1) for a, b in zip(built, built[1:]))
    else:
        assert built == []
    with idx.reader() as con:
        h = dict(con.execute("SELECT doc_id, simhash FROM fp_simhash").fetchall())
        docs = sorted(h)
        want = {(a, b) for i, a in enumerate(docs) for b in docs[i + 1 :] if bin(h[a] ^ h[b]).count("1") <= 6}
        assert want and set(found(con, "simhash")) == want


@pytest.mark.parametrize("fail_in", ["scan", "keyed"])
def test_a_failing_simhash_scan_or_keyed_search_beside_it_leaves_the_index_as_it_was(tmp_path, monkeypatch, fail_in):
    """An ingest's simhash scan runs in a thread beside the keyed methods (``ScanBeside``): an error
    in the thread is raised by the ingest, an error in the keyed methods waits for the thread first;
    either way the batch is rolled back and the next ingest gives the pairs of an ingest that never failed."""
    import threading

    from neardup.pairs import batch as pair_batch
    from neardup.pairs import simhash as scan

    monkeypatch.setattr(scan, "SCAN_RATIO", 10**9)  # every batch is scanned
    recs = corpus(n_base=6, variants=3, seed=5)
    s = Settings(methods=("shingles", "minhash", "simhash"), pairs=("jaccard", "simhash"), simhash_bits=5)
    idx = Index(tmp_path / "i")
    ingest(idx, str(write_jsonl(tmp_path / "a.jsonl", recs[:9])), create_with=s)
    before = snapshot(tmp_path / "i")
    second = write_jsonl(tmp_path / "b.jsonl", recs[9:])

    def boom(*args):
        raise RuntimeError("injected")

    with monkeypatch.context() as m:
        m.setattr(scan if fail_in == "scan" else pair_batch, "_scan" if fail_in == "scan" else "_keyed_pairs", boom)
        with pytest.raises(RuntimeError, match="injected"):
            ingest(idx, str(second))
    assert not [t for t in threading.enumerate() if t.name.startswith("neardup-simhash")]
    assert snapshot(tmp_path / "i") == before
    ingest(idx, str(second))
    ref = Index(tmp_path / "r")
    ingest(ref, str(write_jsonl(tmp_path / "all.jsonl", recs[:9])), create_with=s)
    ingest(ref, str(second))
    with idx.reader() as con, ref.reader() as con_ref:
        for meth in ("jaccard", "simhash"):
            assert found(con, meth) == found(con_ref, meth) and found(con, meth)


@settings(max_examples=60, deadline=None)
@given(st.integers(8, 40), st.integers(0, 40), st.data())
def test_agreement_filter_keeps_every_pair_the_full_values_keep(perms, need, data):
    """The filter compares the signatures' low bytes: never fewer agreements than the full values
    have, so every pair agreeing on ``need`` full values passes, and it passes exactly the pairs
    whose low bytes agree on ``need`` positions."""
    need = min(need, perms)
    n = data.draw(st.integers(2, 8))
    base = data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=perms, max_size=perms))
    sigs = []
    for _ in range(n):  # variants of one signature, some values changed only above their low byte
        sig = list(base)
        for j in data.draw(st.sets(st.integers(0, perms - 1))):
            sig[j] ^= data.draw(st.sampled_from([1 << 8, 1 << 40, 0xFF, 1]))
        sigs.append(sig)
    con = duckdb.connect()
    con.execute("CREATE TABLE fp_minhash (doc_id BIGINT, signature UBIGINT[])")
    con.executemany("INSERT INTO fp_minhash VALUES (?, ?)", [[i, s_] for i, s_ in enumerate(sigs)])
    a, b = (np.array(x, np.int64) for x in zip(*[(i, j) for i in range(n) for j in range(i + 1, n)]))
    got = pairs.agree_enough(con, a, b, perms, need)
    low = np.array([sum((x & 0xFF) == (y & 0xFF) for x, y in zip(sigs[i], sigs[j])) >= need for i, j in zip(a, b)])
    full = np.array([sum(x == y for x, y in zip(sigs[i], sigs[j])) >= need for i, j in zip(a, b)])
    assert (got == low).all()
    assert got[full].all()


@given(st.lists(st.sets(st.integers(0, 30), max_size=12), max_size=14), st.sampled_from([0.3, 0.5, 0.8, 1.0]))
def test_exact_all_pairs_equals_brute_force(sets, t):
    arrs = [np.array(sorted(s), dtype=np.int64) for s in sets]
    assert exact.all_pairs(arrs, t) == exact.brute_force(arrs, t)


def test_jaccard_pairs_are_exactly_the_pairs_over_the_threshold(indexed):
    idx, s = indexed
    with idx.reader() as con:
        ids, texts = texts_by_id(con)
        truth = {(ids[i], ids[j]): v for i, j, v in exact.all_pairs(exact.shingle_sets(texts, s), s.threshold)}
        got = found(con, "jaccard")
    assert len(truth) > 20  # the corpus has pairs on both sides of the threshold
    assert set(got) <= set(truth)  # precision 1: every pair verified on the full sets
    for p, v in got.items():
        assert v == pytest.approx(truth[p])
    assert len(got) / len(truth) >= 0.99


def test_a11_finds_the_over_threshold_pairs_within_its_length_window(indexed):
    idx, s = indexed
    with idx.reader() as con:
        ids, texts = texts_by_id(con)
        n_words = dict(con.execute("SELECT doc_id, n_words FROM documents").fetchall())
        truth = {(ids[i], ids[j]) for i, j, _ in exact.all_pairs(exact.shingle_sets(texts, s), s.threshold)}
        got = set(found(con, "a11"))
    assert got <= truth
    in_window = {p for p in truth if max(n_words[p[0]], n_words[p[1]]) <= pairs.CHAIN_RATIO * min(n_words[p[0]], n_words[p[1]])}
    assert len(got & in_window) / len(in_window) >= 0.95


def test_bottomk_pairs_equal_the_brute_force_estimate(indexed):
    idx, s = indexed
    with idx.reader() as con:
        sk = dict(con.execute("SELECT doc_id, sketch FROM fp_bottomk").fetchall())
        got = found(con, "bottomk")
    want = {}
    docs = sorted(sk)
    for i, a in enumerate(docs):
        for b in docs[i + 1 :]:
            union = sorted(set(sk[a]) | set(sk[b]))[: s.bottomk]
            est = len(set(union) & set(sk[a]) & set(sk[b])) / len(union)
            if est >= s.threshold:
                want[(a, b)] = est
    assert want and got.keys() == want.keys()
    for p in want:
        assert got[p] == pytest.approx(want[p])


@pytest.mark.parametrize("method", ["simhash", "simhash_hp"])
def test_simhash_pairs_equal_the_brute_force_hamming_pairs(indexed, method):
    idx, s = indexed
    with idx.reader() as con:
        h = dict(con.execute(f"SELECT doc_id, simhash FROM fp_{method}").fetchall())
        got = found(con, method)
    docs = sorted(h)
    want = {(a, b): 1 - bin(h[a] ^ h[b]).count("1") / 64 for i, a in enumerate(docs) for b in docs[i + 1 :] if bin(h[a] ^ h[b]).count("1") <= s.simhash_bits}
    assert want and got == pytest.approx(want)


def test_minhash_pairs_have_exact_signature_agreement(indexed):
    idx, s = indexed
    with idx.reader() as con:
        sig = {d: np.array(v, dtype=np.uint64) for d, v in con.execute("SELECT doc_id, signature FROM fp_minhash").fetchall()}
        got = found(con, "minhash")
    docs = sorted(sig)
    want = {(a, b): float((sig[a] == sig[b]).mean()) for i, a in enumerate(docs) for b in docs[i + 1 :] if (sig[a] == sig[b]).mean() >= s.threshold}
    assert want and set(got) <= set(want)
    assert len(got) / len(want) >= 0.99
    for p in got:
        assert got[p] == pytest.approx(want[p])


def test_equal_key_pairs_are_the_pairs_with_equal_signatures(indexed):
    idx, _ = indexed
    with idx.reader() as con:
        md5 = dict(con.execute("SELECT doc_id, md5 FROM fp_a0").fetchall())
        mega = {d: set(v) for d, v in con.execute("SELECT doc_id, megashingles FROM fp_a6_36").fetchall()}
        got0, got6 = found(con, "a0"), found(con, "a6_36")
    docs = sorted(md5)
    assert got0 and got6
    assert set(got0) == {(a, b) for i, a in enumerate(docs) for b in docs[i + 1 :] if md5[a] == md5[b]}
    assert set(got6) == {(a, b) for i, a in enumerate(docs) for b in docs[i + 1 :] if mega[a] & mega[b]}


@pytest.mark.parametrize("n_batches", [4, 16])
def test_any_batch_split_gives_the_same_pairs(tmp_path, n_batches):
    recs = corpus(n_base=8, variants=3, seed=5)
    s = every_pair(("shingles", "bottomk", "minhash", "simhash", "simhash_hp", "a0", "a4", "a6_36", "a8", "a12"), bottomk=32)
    one = Index(tmp_path / "one")
    ingest(one, str(write_jsonl(tmp_path / "all.jsonl", recs)), create_with=s)
    many = Index(tmp_path / "many")
    step = -(-len(recs) // n_batches)
    for k in range(0, len(recs), step):
        ingest(many, str(write_jsonl(tmp_path / f"p{k}.jsonl", recs[k : k + step])), create_with=s)
    a, b = content(snapshot(one.path)), content(snapshot(many.path))
    assert len(a["duplicates"]) > 0
    assert a["duplicates"] == b["duplicates"]


@pytest.mark.parametrize("budget,first", [(1, 1), (7, 3), (40, 5)])
def test_pairs_do_not_depend_on_the_slices_a_batch_is_verified_in(tmp_path, monkeypatch, budget, first):
    """Candidates are emitted and verified for slices of a batch's documents; tiny budgets (a slice
    of one document, or a few) give the pairs of one slice per batch."""
    recs = corpus(n_base=8, variants=3, seed=7)
    s = every_pair(("shingles", "bottomk", "minhash", "simhash", "simhash_hp", "a0", "a4", "a6_36", "a8", "a12"), bottomk=32)

    def build(name: str) -> dict:
        idx = Index(tmp_path / name)
        for k in range(0, len(recs), 15):  # a batch matches itself and the older documents
            ingest(idx, str(write_jsonl(tmp_path / f"{name}{k}.jsonl", recs[k : k + 15])), create_with=s)
        return content(snapshot(idx.path))["duplicates"]

    whole = build("whole")
    monkeypatch.setattr(pairs.batch, "CANDIDATE_BUDGET", budget)
    monkeypatch.setattr(pairs.batch, "FIRST_SLICE", first)
    assert len(whole) > 0
    assert build("sliced") == whole


def test_key_groups_emit_each_pair_once_with_its_newer_member_in_the_range():
    keys = np.array([5, 5, 5, 9, 9, 7], np.uint64)
    docs = np.array([12, 10, 11, 12, 10, 11], np.uint64)

    class Old:
        def get_flat(self, table, uk):
            lists = {5: [3, 4], 7: [2], 9: [3, 10]}  # 10 is new: ids from lo on are ignored
            which = [i for i, k in enumerate(uk.tolist()) for _ in lists.get(k, [])]
            ids = [x for k in uk.tolist() for x in lists.get(k, [])]
            return np.array(which, np.int64), np.array(ids, np.uint64)

    g = pairs.KeyGroups(keys, docs)
    got = {}
    for first, last in [(10, 10), (11, 11), (12, 12)]:
        a, b, shared, _ = g.pairs(10, Old(), "t", first, last)
        assert (b >= first).all() and (b <= last).all()
        for x, y, c in zip(a.tolist(), b.tolist(), shared.tolist()):
            assert (x, y) not in got
            got[(x, y)] = c
    assert got == {(3, 10): 2, (4, 10): 1, (3, 11): 1, (4, 11): 1, (2, 11): 1, (10, 11): 1,
                   (3, 12): 2, (4, 12): 1, (10, 12): 2, (11, 12): 1}


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_key_groups_find_the_same_pairs_however_older_holders_are_read(data):
    """Every key's older holders read once for the batch (in runs of ``READ_ALL_KEYS`` keys) or,
    past ``OLD_CACHE_IDS``, slice by slice: the pairs of each range are those of brute force."""
    from neardup.pairs import groups
    from neardup.store.postings import MemoryPostings

    lo = data.draw(st.integers(1, 12))
    n_new = data.draw(st.integers(1, 12))
    n_keys = data.draw(st.integers(1, 6))
    rows = sorted(set(data.draw(st.lists(st.tuples(st.integers(lo, lo + n_new - 1), st.integers(0, n_keys - 1)), min_size=1, max_size=30))))
    old_rows = sorted(set(data.draw(st.lists(st.tuples(st.integers(0, lo - 1), st.integers(0, n_keys)), max_size=30))))
    old = MemoryPostings()
    if old_rows:
        old.apply_batch(1, {"t": (np.array([k * 7919 for _, k in old_rows], np.uint64), np.array([d for d, _ in old_rows], np.uint64))})
    holders: dict[int, set[int]] = {}
    for d, k in rows + old_rows:
        holders.setdefault(k, set()).add(d)
    cuts = sorted(set(data.draw(st.lists(st.integers(lo + 1, lo + n_new - 1), max_size=3)))) if n_new > 1 else []
    cap = data.draw(st.sampled_from([0, 1, 5, groups.OLD_CACHE_IDS]))
    per = data.draw(st.sampled_from([1, 2, groups.READ_ALL_KEYS]))
    saved = groups.OLD_CACHE_IDS, groups.READ_ALL_KEYS
    groups.OLD_CACHE_IDS, groups.READ_ALL_KEYS = cap, per
    try:
        g = pairs.KeyGroups(np.array([k * 7919 for _, k in rows], np.uint64), np.array([d for d, _ in rows], np.uint64))
        for first, end in zip([lo, *cuts], [*cuts, lo + n_new]):
            a, b, shared, _ = g.pairs(lo, old, "t", first, end - 1)
            want: dict[tuple[int, int], int] = {}
            for hs in holders.values():
                for x in hs:
                    for y in hs:
                        if x < y and first <= y < end:
                            want[(x, y)] = want.get((x, y), 0) + 1
            assert dict(zip(zip(a.tolist(), b.tolist()), shared.tolist())) == want
    finally:
        groups.OLD_CACHE_IDS, groups.READ_ALL_KEYS = saved


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_agreeing_pairs_are_the_candidates_that_pass_the_agreement_filter(data):
    """``KeyGroups.agreeing_pairs`` (candidates never listed, compiled) keeps exactly the candidate
    pairs of ``KeyGroups.pairs`` whose one-byte rows agree on ``need`` positions, for any range."""
    from neardup.store.postings import MemoryPostings

    perms = data.draw(st.integers(1, 6))
    lo = data.draw(st.integers(1, 12))
    n_new = data.draw(st.integers(1, 15))
    new = np.arange(lo, lo + n_new, dtype=np.int64)
    n_keys = data.draw(st.integers(1, 5))
    rows = data.draw(st.lists(st.tuples(st.sampled_from(new.tolist()), st.integers(0, n_keys - 1)), min_size=1, max_size=40))
    rows = sorted(set(rows))
    docs = np.array([d for d, _ in rows], np.uint64)
    keys = np.array([k * 1000003 for _, k in rows], np.uint64)
    old = MemoryPostings()
    old_rows = sorted(set(data.draw(st.lists(st.tuples(st.integers(0, lo - 1), st.integers(0, n_keys)), max_size=30))))
    if old_rows:
        old.apply_batch(1, {"t": (np.array([k * 1000003 for _, k in old_rows], np.uint64), np.array([d for d, _ in old_rows], np.uint64))})
    every = lo + n_new
    low = np.array(data.draw(st.lists(st.lists(st.integers(0, 2), min_size=perms, max_size=perms), min_size=every, max_size=every)), np.uint8)
    need = data.draw(st.integers(0, perms))
    cuts = sorted(set(data.draw(st.lists(st.integers(lo + 1, lo + n_new - 1), max_size=4)))) if n_new > 1 else []
    g = pairs.KeyGroups(keys, docs)  # one for all the slices, as a batch uses it (its cache of old lists)
    default_hits, default_tile = row_kernels.BAND_HITS, row_kernels.BAND_TILE
    row_kernels.BAND_HITS = data.draw(st.sampled_from([1, 3, default_hits]))  # the kernel's output handed over in small parts
    row_kernels.BAND_TILE = data.draw(st.sampled_from([1, 2, 5, default_tile]))  # older holders compared a few at a time
    try:
        for first, end in zip([lo, *cuts], [*cuts, lo + n_new]):
            a, b, _, _ = pairs.KeyGroups(keys, docs).pairs(lo, old, "t", first, end - 1)
            ok = pairs.low_byte_agreements(low, a, b, need) if a.size else np.zeros(0, bool)
            want = set(zip(a[ok].tolist(), b[ok].tolist()))
            ga, gb, n_rows, held = g.agreeing_pairs(lo, old, "t", first, end - 1, new, low[lo:], lambda ids: (low, ids), need)
            assert list(zip(ga.tolist(), gb.tolist())) == sorted(want)
            assert n_rows >= a.size
            assert held >= ga.size
    finally:
        row_kernels.BAND_HITS, row_kernels.BAND_TILE = default_hits, default_tile


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_agreeing_pairs_by_first_band_are_those_of_every_shared_key(data):
    """With LSH band keys laid out as ``candidate_postings`` gives them (each document's bands in
    order), ``agreeing_pairs`` emits a pair of the batch's documents from its first shared band only,
    and the pairs are exactly those of every shared key (brute force), for any range: also where a
    key of one band equals another band's key (few key values) and with older holders."""
    from neardup.store.postings import MemoryPostings

    perms = data.draw(st.integers(1, 5))
    bands = data.draw(st.integers(1, 5))
    lo = data.draw(st.integers(1, 8))
    n_new = data.draw(st.integers(1, 12))
    new = np.arange(lo, lo + n_new, dtype=np.int64)
    n_values = data.draw(st.integers(1, 4))  # few distinct keys: shared bands, and keys equal across bands
    mat = np.array(data.draw(st.lists(st.lists(st.integers(0, n_values - 1), min_size=bands, max_size=bands),
                                      min_size=n_new, max_size=n_new)), np.uint64) * np.uint64(1000003)
    if data.draw(st.booleans()):  # keys of distinct bands never equal (as hashed with the band number)
        mat = mat + np.arange(bands, dtype=np.uint64) * np.uint64(7)
    keys, docs = mat.ravel(), np.repeat(new, bands).astype(np.uint64)
    old = MemoryPostings()
    old_rows = sorted(set(data.draw(st.lists(st.tuples(st.integers(0, lo - 1), st.sampled_from(sorted(set(keys.tolist())))),
                                             max_size=20))))
    if old_rows:
        old.apply_batch(1, {"t": (np.array([k for _, k in old_rows], np.uint64), np.array([d for d, _ in old_rows], np.uint64))})
    every = lo + n_new
    low = np.array(data.draw(st.lists(st.lists(st.integers(0, 1), min_size=perms, max_size=perms), min_size=every, max_size=every)), np.uint8)
    need = data.draw(st.integers(0, perms))
    cuts = sorted(set(data.draw(st.lists(st.integers(lo + 1, lo + n_new - 1), max_size=3)))) if n_new > 1 else []
    by_band, plain = pairs.KeyGroups(keys, docs, bands), pairs.KeyGroups(keys, docs)
    assert by_band.band is not None
    holders: dict[int, set[int]] = {}
    for d, k in [*zip(docs.tolist(), keys.tolist()), *old_rows]:
        holders.setdefault(k, set()).add(d)
    for first, end in zip([lo, *cuts], [*cuts, lo + n_new]):
        want = {(a, b) for h in holders.values() for a in h for b in h
                if a < b and first <= b < end and (low[a] == low[b]).sum() >= need}
        for g in (by_band, plain):
            ga, gb, _, _ = g.agreeing_pairs(lo, old, "t", first, end - 1, new, low[lo:], lambda ids: (low, ids), need)
            assert list(zip(ga.tolist(), gb.tolist())) == sorted(want)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_low_byte_agreements_count_equal_bytes(data):
    """The word-wise comparison (eight bytes at a time, lanes summed) counts exactly the equal bytes
    of each pair of rows, for any width (padding, and rows longer than one lane sum holds) and any
    byte values (top bits set or not)."""
    width = data.draw(st.sampled_from([1, 7, 8, 9, 64, 128, 247, 248, 249, 300]))
    n = data.draw(st.integers(1, 8))
    alphabet = st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0x81, 0xFE, 0xFF])
    low = np.array(data.draw(st.lists(st.lists(alphabet, min_size=width, max_size=width), min_size=n, max_size=n)), np.uint8)
    a = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)), np.int64)
    b = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=a.size, max_size=a.size)), np.int64)
    same = (low[a] == low[b]).sum(axis=1)
    for need in {0, 1, int(same.min()), int(same.max()), int(same.max()) + 1, width}:
        assert pairs.low_byte_agreements(low, a, b, need).tolist() == (same >= need).tolist()


def test_pairs_do_not_depend_on_the_value_cache_room_or_verify_chunks(tmp_path, monkeypatch):
    """Older documents' one-byte rows are compared where the value cache holds them, or copied out
    when it has no room for them; candidates are verified all at once or a few at a time: the same
    pairs either way."""
    import neardup.pairs.batch as batch
    import neardup.pairs.values as values

    recs = corpus(n_base=6, variants=4, seed=4)
    s = every_pair(("shingles", "minhash"))

    def build(name: str) -> list:
        idx = Index(tmp_path / name)
        for k in range(0, len(recs), 8):
            ingest(idx, str(write_jsonl(tmp_path / f"{name}{k}.jsonl", recs[k : k + 8])), create_with=s)
        return snapshot(idx.path)["duplicates"]

    roomy = build("roomy")
    monkeypatch.setattr(batch, "VERIFY_CHUNK", 2)
    assert build("chunked") == roomy
    monkeypatch.setattr(values, "VALUE_CACHE_BYTES", 150)  # not even one row set of the older documents
    assert build("cramped") == roomy
    assert roomy  # there are pairs to compare


def test_rebuild_finds_the_same_pairs_in_the_same_batches(tmp_path):
    recs = corpus(n_base=6, variants=3, seed=9)
    s = every_pair(("shingles", "bottomk", "minhash", "simhash", "a0", "a12"), bottomk=32)
    idx = Index(tmp_path / "i")
    for k in range(0, len(recs), 10):
        ingest(idx, str(write_jsonl(tmp_path / f"p{k}.jsonl", recs[k : k + 10])), create_with=s)
    before = snapshot(idx.path)["duplicates"]
    res = rebuild_fingerprints(idx)
    assert snapshot(idx.path)["duplicates"] == before
    assert sum(res.pairs.values()) == len(before)


def test_simhash_window_for_large_budgets_is_exact_inside_the_window(tmp_path):
    recs = corpus(n_base=6, variants=3, seed=3)
    s = Settings(methods=("shingles", "minhash", "simhash"), simhash_bits=12)
    idx = Index(tmp_path / "i")
    for k in range(0, len(recs), 9):
        ingest(idx, str(write_jsonl(tmp_path / f"p{k}.jsonl", recs[k : k + 9])), create_with=s)
    with idx.reader() as con:
        rows = con.execute("SELECT doc_id, simhash, n_words FROM fp_simhash JOIN documents USING (doc_id) ORDER BY doc_id").fetchall()
        got = found(con, "simhash")
    want = {}
    for i, (a, ha, na) in enumerate(rows):
        for b, hb, nb in rows[i + 1 :]:
            d = bin(ha ^ hb).count("1")
            if d <= 12 and max(na, nb) <= 1.2 * min(na, nb):
                want[(a, b)] = 1 - d / 64
    assert len(want) > 0
    assert got == pytest.approx(want)


def test_chains_split_where_neighbours_differ_by_more_than_the_ratio():
    con = duckdb.connect()
    recs = pa.table({
        "key": pa.array([7, 7, 7, 7, 9, 9], pa.uint64()),
        "doc_id": pa.array([1, 2, 3, 4, 1, 5], pa.int64()),
        "len": pa.array([100, 110, 130, 131, 100, 114], pa.int32()),
        "is_new": pa.array([False, False, True, True, True, False]),
    })
    con.register("chain_records", recs)
    con.execute(query("chains", "chain_members"), {"ratio": 1.15})
    chains = con.execute("SELECT key, doc_id, chain FROM chain_members ORDER BY key, doc_id").fetchall()
    assert chains == [(7, 1, 1), (7, 2, 1), (7, 3, 2), (7, 4, 2), (9, 1, 1), (9, 5, 1)]
    got = con.execute(query("chains", "chain_pairs"), {"ratio": 1.15}).fetchall()
    # (1,2) is old-old: already compared by an earlier batch; 110 -> 130 breaks the chain
    assert got == [(1, 5), (3, 4)]


def test_a12_rules():
    con = duckdb.connect()
    rows = pa.table({
        "doc_id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
        "ss": pa.array([[10, 11, 12], [10, 20, 21], [30, 11, 12], [40, 11, 12], [10, 11, 12], [10, 11, 12]], pa.list_(pa.uint32())),
        "ws": pa.array([[1, 2, 3, 4, 5], [1, 2, 9, 9, 9], [1, 2, 3, 8, 8], [1, 2, 3, 4, 5], [1, 7, 7, 7, 7], [1, 2, 3, 4, 5]], pa.list_(pa.uint32())),
        "num": pa.array([10, 11, 10, 3, 10, 13], pa.int32()),
    })
    con.register("a12_rows", rows)
    cand = pa.table({"doc_a": pa.array([1, 1, 1, 1, 1], pa.int64()), "doc_b": pa.array([2, 3, 4, 5, 6], pa.int64())})
    con.register("chain_pair", cand)
    got = {(a, b): s for a, b, s in con.execute(query("chains", "a12_pairs"), {"num_ratio": 1.2}).fetchall()}
    # 2: same longest sentence, 2 word signatures shared; 3: ss2 and ss3 shared, more than 5 sentences;
    # 4: fewer than 6 sentences and a different longest one (and 10/3 sentences); 5: one word signature;
    # 6: 13/10 sentences exceed the 1.20 ratio
    assert got == {(1, 2): pytest.approx(2 / 5), (1, 3): pytest.approx(3 / 5)}


@settings(max_examples=8)
@given(st.lists(st.integers(1, 28), max_size=4, unique=True))
def test_pairs_do_not_depend_on_where_batches_split(tmp_path_factory, cuts):
    """Hypothesis picks the batch boundaries; every split gives the pairs of one batch."""
    recs = corpus(n_base=6, variants=3, seed=11)[:29]
    s = every_pair(("shingles", "bottomk", "minhash", "simhash", "a0", "a6_36", "a12"), bottomk=32)
    root = tmp_path_factory.mktemp("split")
    one = Index(root / "one")
    ingest(one, str(write_jsonl(root / "all.jsonl", recs)), create_with=s)
    many = Index(root / "many")
    bounds = [0, *sorted(cuts), len(recs)]
    for k, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        ingest(many, str(write_jsonl(root / f"p{k}.jsonl", recs[lo:hi])), create_with=s)
    assert content(snapshot(one.path))["duplicates"] == content(snapshot(many.path))["duplicates"]


def test_pair_settings_are_checked_against_the_fingerprints():
    from neardup.errors import SettingsMismatch

    assert Settings().pairs == ("jaccard", "simhash")
    assert Settings(methods=("shingles", "bottomk")).pairs == ()
    assert parse_pairs("all", ("shingles", "bottomk", "a12")) == ("bottomk", "a11", "a12")
    with pytest.raises(SettingsMismatch, match="a11 needs the fingerprint method"):
        Settings(methods=("shingles", "minhash"), pairs=("a11",))
    with pytest.raises(SettingsMismatch, match="unknown pair method"):
        Settings(pairs=("nope",))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sets(st.integers(0, 40), max_size=30), st.sets(st.integers(0, 40), max_size=30)), min_size=1, max_size=20),
       st.sampled_from([0.3, 0.5, 0.8, 0.9, 1.0]))
def test_jaccard_with_early_stop_equals_the_full_merge_at_and_above_the_threshold(pairs_, t):
    """Both merges against Python's sets, on native and on stored (big-endian) values."""
    from neardup import kernels

    # values of several bytes, whose order changes when their bytes are reversed
    sets = [np.array(sorted(v * 1_000_003 for v in s), dtype=np.uint64) for p in pairs_ for s in p]
    offs = np.concatenate([[0], np.cumsum([s.size for s in sets])]).astype(np.int64)
    data = np.concatenate(sets) if sets else np.zeros(0, np.uint64)
    ra = np.arange(0, len(sets), 2, dtype=np.int64)
    rb = ra + 1
    full = kernels.pair_jaccard(data, offs, ra, rb)
    early = kernels.pair_jaccard_at_least(data, offs, ra, rb, t)
    above = full >= t - 1e-12
    assert np.array_equal(early[above], full[above])
    assert (early[~above] < t - 1e-12).all()
    want = []
    for a, b in zip(ra.tolist(), rb.tolist()):
        x, y = set(sets[a].tolist()), set(sets[b].tolist())
        want.append(len(x & y) / len(x | y) if x | y else 0.0)
    assert np.allclose(full, want)
    # the same sets stored as the index stores them (big-endian), read in place with swap
    assert np.array_equal(kernels.pair_jaccard(data.byteswap(), offs, ra, rb, True), full)
    assert np.array_equal(kernels.pair_jaccard_at_least(data.byteswap(), offs, ra, rb, t, True), early)
    from neardup.pairs import set_jaccard

    blobs = [s.astype(">u8").tobytes() for s in sets]
    assert np.array_equal(set_jaccard(blobs, ra, rb), full)
    assert np.array_equal(set_jaccard(blobs, ra, rb, at_least=t), early)


def test_the_agreement_filter_drops_a_pair_at_the_threshold_with_at_most_its_risk():
    from math import comb

    from neardup.pairs import AGREEMENT_RISK, min_agreements

    for t, n in [(0.8, 100), (0.9, 128), (0.5, 64), (1.0, 100)]:
        m = min_agreements(t, n)
        below = sum(comb(n, x) * t**x * (1 - t) ** (n - x) for x in range(m))
        nxt = below + comb(n, m) * t**m * (1 - t) ** (n - m)
        assert below <= AGREEMENT_RISK < nxt or m == n  # the largest such bound
    assert min_agreements(0.8, 100) == 62
    assert min_agreements(0.8, 100, 1e-7) == 57
