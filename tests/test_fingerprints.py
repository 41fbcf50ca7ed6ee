"""Fingerprint methods: exact small cases against independent scalar code, determinism, statistics."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import fingerprints, text
from neardup.fingerprints import hashing, rcdl, sketches
from neardup.fingerprints import simhash as sim
from neardup.settings import METHODS, Settings, parse_pairs

M64 = (1 << 64) - 1


def ref_word_hash(w: str, seed: int = 0) -> int:
    return xxhash.xxh64_intdigest(w.encode("utf-8"), seed)


def ref_shingle(hashes: list[int], seed: int = 0) -> int:
    h = (seed ^ int(hashing.P2)) & M64
    for t in hashes:
        h = ((((h << 31) | (h >> 33)) & M64) ^ t) * int(hashing.P1) & M64
    h ^= h >> 37
    h = h * int(hashing.AV) & M64
    return h ^ (h >> 32)


def ref_shingles(words: list[str], length: int, offset: int, seed: int = 0) -> list[int]:
    hs = [ref_word_hash(w, seed) for w in words]
    if 0 < len(hs) < length:
        return [ref_shingle(hs, seed)]
    return [ref_shingle(hs[i : i + length], seed) for i in range(0, len(hs) - length + 1, offset)]


def chunk(*docs: str, **kw) -> fingerprints.Chunk:
    normal = text.normal_form(pa.array(list(docs), pa.large_string()))
    return fingerprints.Chunk(normal, text.analyze(normal), Settings(**kw))


@pytest.mark.parametrize("length,offset", [(3, 1), (3, 2), (5, 1), (1, 1)])
def test_word_shingles_match_the_definition(length, offset):
    docs = ["a b c d e f", "Один два", "x y z w v u t s r q p"]
    c = chunk(*docs, shingle_size=length, shingle_offset=offset)
    h, doc = hashing.shingle_hashes(c.word_hashes, c.a.word_counts, length, offset, 0)
    for d, t in enumerate(docs):
        assert h[doc == d].tolist() == ref_shingles(t.lower().split(), length, offset)


def test_shingle_sets_are_sorted_and_distinct_and_fingerprints_do_not_depend_on_the_chunk():
    docs = ["the cat sat on the mat and the cat sat on the mat again", "one two three four five six", "short text"]
    whole = fingerprints.compute(*_na(docs), Settings(methods=tuple(m for m in METHODS if m != "chars")))
    for d, t in enumerate(docs):
        alone = fingerprints.compute(*_na([t]), Settings(methods=tuple(m for m in METHODS if m != "chars")))
        for m, cols in whole.items():
            for col, arr in cols.items():
                assert arr[d].as_py() == alone[m][col][0].as_py(), (m, col)
    s = fingerprints.unpack(whole["shingles"]["hashes"][0].as_py()).tolist()
    assert s == sorted(set(ref_shingles(docs[0].split(), 5, 1)))
    assert whole["shingles"]["n"][0].as_py() == len(s)


def _na(docs):
    normal = text.normal_form(pa.array(docs, pa.large_string()))
    return normal, text.analyze(normal)


def test_bottom_k_is_the_k_smallest_and_matrix_scheme_matches_gf2():
    rng = np.random.default_rng(3)
    vals = [np.sort(np.unique(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True))) for n in (5, 40, 0, 300)]
    values, counts = np.concatenate(vals), np.array([v.size for v in vals])
    bk = sketches.bottom_k(values, counts, 16, 7, "universal")
    for d, v in enumerate(vals):
        assert [x for x in bk[d].tolist() if x != int(sketches.EMPTY)] == v[:16].tolist()
    bm = sketches.bottom_k(values, counts, 16, 7, "matrix")
    cols = _matrix_columns(1, 7, 0)
    for d, v in enumerate(vals):
        ranked = sorted(v.tolist(), key=lambda x: _gf2(cols, x))[:16]
        assert [x for x in bm[d].tolist() if x != int(sketches.EMPTY)] == ranked


def _matrix_columns(n, seed, i):
    t = sketches.matrix_tables(n, seed)[i]
    return [int(t[j // 8, 1 << (j % 8)]) for j in range(64)]


def _gf2(cols, x):
    out = 0
    for j in range(64):
        if x >> j & 1:
            out ^= cols[j]
    return out


@pytest.mark.parametrize("scheme", ["universal", "matrix"])
def test_minhash_holds_the_original_hash_of_each_permutations_minimum(scheme):
    rng = np.random.default_rng(5)
    v = np.sort(np.unique(rng.integers(0, 2**64 - 1, 50, dtype=np.uint64, endpoint=True)))
    sig = sketches.minhash(v, np.array([v.size]), 8, 11, scheme)[0].tolist()
    for i in range(8):
        perm = sketches.permute(v, i, 8, 11, scheme)
        assert sig[i] == int(v[np.argmin(perm)])
    if scheme == "matrix":
        cols = _matrix_columns(8, 11, 2)
        assert sig[2] == min(v.tolist(), key=lambda x: _gf2(cols, x))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 12), min_size=1, max_size=8),
    n_perm=st.integers(1, 20),  # eight a pass, the last one padded (sketch_kernels.minhash_universal)
    seed=st.integers(0, 3),
    scheme=st.sampled_from(["universal", "matrix"]),
    data=st.data(),
)
def test_minhash_of_many_documents_against_brute_force(sizes, n_perm, seed, scheme, data):
    """Per document and permutation, the value with the smallest permuted number (any value
    order, repeats allowed); a document without values has EMPTY in every column."""
    docs = [data.draw(st.lists(st.integers(0, M64), min_size=n, max_size=n)) for n in sizes]
    values = np.array([x for d in docs for x in d], dtype=np.uint64)
    sig = sketches.minhash(values, np.array(sizes), n_perm, seed, scheme)
    assert sig.shape == (len(docs), n_perm)
    for row, d in zip(sig.tolist(), docs):
        if not d:
            assert row == [int(sketches.EMPTY)] * n_perm
            continue
        v = np.array(d, dtype=np.uint64)
        assert row == [int(v[np.argmin(sketches.permute(v, i, n_perm, seed, scheme))]) for i in range(n_perm)]



@pytest.mark.parametrize("jaccard", [0.3, 0.6, 0.9])
def test_minhash_collision_rate_estimates_jaccard(jaccard):
    rng = np.random.default_rng(int(jaccard * 100))
    n_pairs, size, perms = 40, 200, 128
    hits = 0
    for _ in range(n_pairs):
        common = int(round(2 * size * jaccard / (1 + jaccard)))  # |A|=|B|=size, |A∩B|/|A∪B| = jaccard
        pool = rng.integers(0, 2**64 - 1, 2 * size, dtype=np.uint64, endpoint=True)
        a = np.unique(pool[:size])
        b = np.unique(np.concatenate([pool[:common], pool[size : 2 * size - common]]))
        values = np.concatenate([a, b])
        sig = sketches.minhash(values, np.array([a.size, b.size]), perms, 1)
        hits += int((sig[0] == sig[1]).sum())
    est = hits / (n_pairs * perms)
    true = np.mean([jaccard])
    sd = np.sqrt(true * (1 - true) / (n_pairs * perms))
    assert abs(est - true) < 4 * sd + 0.01


def test_charikar_simhash_against_brute_force():
    c = chunk("alpha beta gamma alpha delta", "один два три", "x")
    got = sim.charikar(c.word_hashes, c.a.word_counts).tolist()
    for d, t in enumerate(["alpha beta gamma alpha delta", "один два три", "x"]):
        hs = [ref_word_hash(w) for w in t.split()]
        bits = [sum(1 if h >> i & 1 else -1 for h in hs) >= 0 for i in range(64)]
        assert got[d] == sum(1 << i for i, b in enumerate(bits) if b)


def test_hyperplane_simhash_against_the_reports_algorithm():
    docs = ["abc abd zz abc", "привет мир", "q"]
    c = chunk(*docs)
    got = sim.hyperplanes(c.words, c.a.word_counts, 0).tolist()
    planes, bases = sim._hyperplane_params(0)
    for d, t in enumerate(docs):
        temp = [0] * 37
        for w in t.split():
            hs = []
            for b in bases.tolist():
                res, power = 0, 1
                for ch in w:
                    res = (res + ((ord(ch) - ord("a") + 1) & M64) * power) & M64
                    power = power * b & M64
                hs.append(res)
            for j in range(3):
                temp[hs[j] % 37] += hs[j + 1] % 11 - 5
        bits = [sum(temp[k] * int(planes[i, k]) for k in range(37)) > 0 for i in range(64)]
        assert got[d] == sum(1 << i for i, b in enumerate(bits) if b)


def test_a0_is_md5_of_the_preprocessed_words():
    c = chunk("The Quick brown fox, and THE lazy dogs; with that which jumps!", "Это был который день")
    words, counts = rcdl.preprocessed_words(c.words, c.a.word_counts)
    assert counts.tolist() == [5, 1]
    got = rcdl.a0(words, counts)
    assert got == [hashlib.md5(b"quick brown lazy dogs jumps").hexdigest(), hashlib.md5("день".encode()).hexdigest()]


def test_a6_megashingles_agree_exactly_when_two_supershingles_agree():
    base = " ".join(f"word{i:03d}" for i in range(120))
    edited = base.replace("word050", "changed")
    c = chunk(base, base, edited, "completely different text " * 10)
    counts, wh = c.rcdl_words[1], c.rcdl_hashes
    for n in (84, 36):
        supers, megas = rcdl.a6(wh, counts, n, 0)
        assert supers.shape == (4, 6) and megas.shape == (4, 15)
        assert (supers[0] == supers[1]).all() and (megas[0] == megas[1]).all()
        for a, b in [(0, 2), (0, 3), (2, 3)]:
            same_super = int((supers[a] == supers[b]).sum())
            shared_mega = len(set(megas[a].tolist()) & set(megas[b].tolist()))
            assert shared_mega == same_super * (same_super - 1) // 2


def test_a8_wraps_around_and_keeps_about_log2_of_the_shingles():
    words = [f"word{i}" for i in range(64)]
    c = chunk(" ".join(words) + " abcd", " ".join(words) + " abcd")
    counts, wh = c.rcdl_words[1], c.rcdl_hashes
    h, doc = hashing.shingle_hashes_wrapped(wh, counts, 5, 0)
    assert np.bincount(doc).tolist() == counts.tolist()
    L = int(counts[0])
    seq = wh[:L].tolist()
    assert h[:L].tolist() == [ref_shingle([seq[(i + j) % L] for j in range(5)]) for i in range(L)]
    values, per_doc, sig = rcdl.a8(wh, counts, 0)
    k = round(np.log2(L / np.log2(L)))
    assert values[: per_doc[0]].tolist() == sorted({x for x in h[:L].tolist() if x % (1 << k) == 0})
    assert sig[0] == sig[1]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet="ab cdé\nжз.", min_size=0, max_size=40), min_size=1, max_size=6), st.integers(1, 5))
def test_chunking_never_changes_a_documents_fingerprints(docs, cut):
    s = Settings(methods=tuple(METHODS), bottomk=8, minhash_perms=8)
    whole = fingerprints.compute(*_na(docs), s)
    parts = [docs[:cut], docs[cut:]] if cut < len(docs) else [docs]
    got = {m: {c: [] for c in cols} for m, cols in whole.items()}
    for p in parts:
        r = fingerprints.compute(*_na(p), s)
        for m, cols in r.items():
            for c, arr in cols.items():
                got[m][c].extend(arr.to_pylist())
    assert got == {m: {c: arr.to_pylist() for c, arr in cols.items()} for m, cols in whole.items()}


def test_ingest_stores_every_method_and_postings_rebuild_identically(tmp_path):
    from neardup import Index
    from neardup.ingest import ingest
    from neardup.store.postings import LmdbPostings

    from .conftest import FIXTURES

    idx = Index(tmp_path / "i")
    methods = tuple(m for m in METHODS if m != "chars")
    s = Settings(methods=methods, bottomk=16, minhash_perms=16, pairs=parse_pairs("all", methods))
    ingest(idx, str(FIXTURES / "crawl" / "sample.warc.gz"), create_with=s)
    with idx.reader() as con:
        n = con.execute("SELECT count(*) FROM documents").fetchone()[0]
        for m in methods:
            assert con.execute(f"SELECT count(*) FROM fp_{m}").fetchone()[0] == n, m
        assert con.execute("SELECT count(*) FROM fp_chars").fetchone()[0] == 0
        dup_md5 = con.execute("SELECT count(*) FROM (SELECT md5 FROM fp_a0 GROUP BY md5 HAVING count(*) > 1)").fetchone()[0]
        assert dup_md5 > 0  # the fixture crawl has exact copies
        blob, n_sh, listed = con.execute("SELECT hashes, n, unpack_hashes(hashes) FROM fp_shingles ORDER BY doc_id LIMIT 1").fetchone()
        assert listed == fingerprints.unpack(blob).tolist() and len(listed) == n_sh and listed == sorted(set(listed))
    p = LmdbPostings(idx.postings_path, readonly=True)
    before = p.dump()
    p.close()
    assert {"a0", "a6", "a6_36", "a8", "lsh", "bottomk_prefix", "simhash_tables", "url", "content", "val:shingles"} <= set(before)
    with idx.writer() as w:
        w.rebuild_postings()
    p = LmdbPostings(idx.postings_path, readonly=True)
    assert p.dump() == before
    p.close()


@settings(max_examples=30)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=8), st.integers(1, 6), st.integers(1, 3), st.integers(0, 2**63 - 1))
def test_compiled_shingles_match_the_numpy_reference(counts, length, offset, seed):
    counts = np.array(counts, dtype=np.int64)
    tok = np.random.default_rng(seed % 1000).integers(0, 2**64 - 1, int(counts.sum()), dtype=np.uint64, endpoint=True)
    a = hashing.shingle_hashes(tok, counts, length, offset, seed)
    b = hashing.shingle_hashes_reference(tok, counts, length, offset, seed)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@settings(max_examples=30)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=8), st.integers(0, 1000))
def test_compiled_charikar_matches_the_numpy_reference(counts, seed):
    counts = np.array(counts, dtype=np.int64)
    h = np.random.default_rng(seed).integers(0, 2**64 - 1, int(counts.sum()), dtype=np.uint64, endpoint=True)
    assert np.array_equal(sim.charikar(h, counts), sim.charikar_reference(h, counts))


@settings(max_examples=20)
@given(st.lists(st.sampled_from([1, 254, 255, 256, 509, 510, 511, 766, 1200]), min_size=1, max_size=6), st.integers(0, 1000),
       st.sampled_from(["random", "ones", "sparse"]))
def test_charikar_counts_past_a_byte_lane(counts, seed, kind):
    """Documents of more words than one byte lane of the compiled counters holds (255), flushed at
    and around that boundary; all-ones hashes fill every lane to the brim."""
    counts = np.array(counts, dtype=np.int64)
    rng = np.random.default_rng(seed)
    n = int(counts.sum())
    if kind == "ones":
        h = np.full(n, 2**64 - 1, dtype=np.uint64)
    elif kind == "sparse":  # few set bits: counts just below half decide the bits
        h = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True) & rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    else:
        h = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    got = sim.charikar(h, counts)
    assert np.array_equal(got, sim.charikar_reference(h, counts))
    if kind == "ones":
        assert (got == np.uint64(2**64 - 1)).all()


@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 5000), st.sampled_from([0, 8, 40, 58])), min_size=1, max_size=10),
       st.integers(0, 2**32))
def test_distinct_sorted_is_each_documents_unique_values(docs, seed):
    """The compiled bucket sort gives each document's ``np.unique``, also for runs of many
    repeats and for values that do not spread over the leading bits (all below ``2**(64-shift)``:
    one bucket holds them all, sorted by the fall-back sort)."""
    rng = np.random.default_rng(seed)
    parts = [rng.choice(rng.integers(0, 2**64 - 1, pool, dtype=np.uint64, endpoint=True) >> np.uint64(shift), size)
             for size, pool, shift in docs]
    h = np.concatenate(parts).astype(np.uint64)
    doc = np.repeat(np.arange(len(docs)), [size for size, _, _ in docs])
    v, c = hashing.distinct_sorted(h, doc, len(docs))
    want = [np.unique(p) for p in parts]
    assert c.tolist() == [w.size for w in want]
    assert v.dtype == np.uint64 and v.tolist() == [x for w in want for x in w.tolist()]


@given(st.lists(st.integers(0, 400), min_size=1, max_size=10), st.integers(1, 8), st.integers(1, 3), st.integers(0, 2**32),
       st.integers(2, 60))
def test_shingle_sets_made_a_document_at_a_time_equal_the_sorted_hashes(counts, length, offset, seed, vocabulary):
    """``hashing.shingle_sets`` (hashes sorted as each document's are made) gives what sorting
    ``shingle_hashes`` gives, for short documents, empty ones, offsets and repeated shingles (a
    small vocabulary of word hashes)."""
    rng = np.random.default_rng(seed)
    counts = np.array(counts, dtype=np.int64)
    words = rng.integers(0, 2**64 - 1, vocabulary, dtype=np.uint64, endpoint=True)
    tok = rng.choice(words, int(counts.sum())).astype(np.uint64)
    h, doc = hashing.shingle_hashes(tok, counts, length, offset, seed)
    want_v, want_c = hashing.distinct_sorted(h, doc, counts.size)
    got_v, got_c = hashing.shingle_sets(tok, counts, length, offset, seed)
    assert got_c.tolist() == want_c.tolist()
    assert got_v.dtype == np.uint64 and got_v.tolist() == want_v.tolist()
    ref_h, ref_doc = hashing.shingle_hashes_reference(tok, counts, length, offset, seed)
    assert h.tolist() == ref_h.tolist() and doc.tolist() == ref_doc.tolist()


@given(st.lists(st.integers(0, 300), min_size=1, max_size=10), st.integers(1, 120), st.integers(0, 2**32), st.booleans())
def test_bottomk_lists_are_the_sketch_rows_without_padding(sizes, k, seed, top):
    """The compiled prefixes equal ``rows(sketches.bottom_k(...))``, the matrix without its padding,
    also when a set holds the padding value itself (the largest hash)."""
    rng = np.random.default_rng(seed)
    parts = [np.unique(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)) for n in sizes]
    if top:
        parts = [np.union1d(p, [sketches.EMPTY]).astype(np.uint64) for p in parts]
    values = np.concatenate(parts).astype(np.uint64)
    counts = np.array([p.size for p in parts], dtype=np.int64)
    from neardup.fingerprints import sketch_kernels

    flat, lens = sketch_kernels.prefixes(values, counts, k)
    want = fingerprints.rows(sketches.bottom_k(values, counts, k, 0, "universal"))
    assert fingerprints.lists(flat, lens).to_pylist() == want.to_pylist()


@given(st.lists(st.tuples(st.integers(0, 700), st.integers(1, 800)), min_size=1, max_size=12), st.integers(1, 150), st.integers(0, 2**32))
def test_smallest_distinct_is_the_prefix_of_each_sorted_set(docs, k, seed):
    """The cut-and-bucket-sort selection equals the first k of every distinct_sorted run,
    also for documents with few distinct values among many (the fall-back path)."""
    rng = np.random.default_rng(seed)
    parts = [rng.choice(rng.integers(0, 2**64 - 1, pool, dtype=np.uint64, endpoint=True), size) for size, pool in docs]
    h = np.concatenate(parts).astype(np.uint64)
    doc = np.repeat(np.arange(len(docs)), [size for size, _ in docs])
    v, c = hashing.distinct_sorted(h, doc, len(docs))
    starts = np.concatenate([[0], np.cumsum(c)[:-1]])
    want = [v[s : s + min(n, k)].tolist() for s, n in zip(starts, c)]
    gv, gc = hashing.smallest_distinct(h, doc, len(docs), k)
    assert gc.tolist() == [len(w) for w in want]
    assert gv.tolist() == [x for w in want for x in w]


@settings(max_examples=30)
@given(st.lists(st.text(alphabet=st.sampled_from("ab cd ef gh\n"), max_size=300), min_size=1, max_size=5), st.sampled_from([1, 3, 8]))
def test_sketches_do_not_depend_on_which_other_methods_are_on(docs, k):
    """bottomk and minhash read the sorted sets when ``shingles`` made them and the raw hashes
    (cut-selected, or with repeats) otherwise; the two routes give the same bytes."""
    normal = text.normal_form(pa.array(docs, pa.large_string()))
    for a in (text.analyze(normal), text.analyze(normal, spans=False)):
        alone = {m: fingerprints.compute(normal, a, Settings(methods=(m,), bottomk=k, minhash_perms=k))[m] for m in ("bottomk", "minhash")}
        both = fingerprints.compute(normal, a, Settings(methods=("shingles", "bottomk", "minhash"), bottomk=k, minhash_perms=k, pairs=()))
        for m in alone:
            assert alone[m] == {c: v for c, v in both[m].items()}, m
