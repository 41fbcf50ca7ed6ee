"""How an exact prefix-filter candidate search for `jaccard` would fare on an index's shingle sets.

A simulation outside the engine (nothing of it is used by neardup), for the design note in
docs/benchmarks.md ("A million documents", eighth session). Pairs of Jaccard >= t share one of
the first ``n - ceil(t n) + 1`` shingles of each set under any one global order (the prefix
filter), so an index could post only each page's prefix and a new page probe its own. To keep
the frame's shingles out of the prefixes, the order is ``(level, hash)``: a shingle's level rises
by one whenever the entries posted under it exceed ``BASE * 2**level``, and the pages posted under
it then post their new prefix members (so every page stays posted under its prefix in the
current order, which is what makes the search exact). Documents are replayed in batches of
``B`` in doc-id order; per batch it prints the prefix entries posted, the maintenance entries,
the shingles promoted, the posting rows a batch's probes read, and the distinct older partners
they give (each one a pair to verify).

    python benchmarks/prefix_filter_sim.py --index /tmp/scale-1 --docs 150001 --batch 25000 --base 8

It also prints the rows per page an ideal order (exact document frequencies of the whole
replayed set, rarest first) would read, the bound any such order approaches.
"""
import argparse
import time

import duckdb
import numpy as np
import pyarrow as pa

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--index", required=True)
ap.add_argument("--docs", type=int, default=125_000)
ap.add_argument("--batch", type=int, default=25_000)
ap.add_argument("--base", type=int, default=8)
ap.add_argument("--threshold", type=float, default=0.8)
args = ap.parse_args()
N, B, BASE, t = args.docs, args.batch, args.base, args.threshold
c = duckdb.connect(f"{args.index}/catalog.duckdb", read_only=True)
tb = c.sql(f"SELECT doc_id, n, hashes FROM fp_shingles WHERE doc_id < {N} ORDER BY doc_id").to_arrow_table()
n = tb.column('n').to_numpy().astype(np.int64)
blob = pa.concat_arrays(tb.column('hashes').chunks)
H = np.frombuffer(blob.buffers()[2], dtype='>u8')[: n.sum()].astype(np.uint64)
off = np.r_[0, np.cumsum(n)]
p_len = n - np.ceil(t * n - 1e-9).astype(np.int64) + 1
FK = np.zeros(0, np.uint64); FL = np.zeros(0, np.int64)
def level_of(h):
    i = np.searchsorted(FK, h); i2 = np.minimum(i, max(FK.size - 1, 0))
    hit = (FK.size > 0) & (FK[i2] == h) if FK.size else np.zeros(h.size, bool)
    return np.where(hit, FL[i2] if FK.size else 0, 0)
def prefix(docs):
    docs = np.asarray(docs); cnts = n[docs]
    st = np.repeat(off[docs] - np.r_[0, np.cumsum(cnts)[:-1]], cnts)
    idx = np.arange(cnts.sum()) + st
    di = np.repeat(np.arange(docs.size), cnts)
    h = H[idx]; lv = level_of(h)
    order = np.lexsort((h, lv, di))
    starts = np.r_[0, np.cumsum(cnts)[:-1]]
    rank = np.arange(order.size) - starts[di]
    keep = rank < p_len[docs][di]
    return h[order][keep], docs[di[keep]]
post_k = []; post_d = []
tot_rows = 0
N = n.size
for b0 in range(0, N, B):
    t0 = time.time()
    docs = np.arange(b0, min(N, b0 + B))
    ok = np.concatenate(post_k) if post_k else np.zeros(0, np.uint64)
    od = np.concatenate(post_d) if post_d else np.zeros(0, np.int64)
    o = np.argsort(ok, kind='stable'); ok, od = ok[o], od[o]
    extra_k, extra_d = [], []
    rounds = 0; promoted = 0
    while True:
        k, d = prefix(docs)
        allk = np.concatenate([ok, k] + extra_k)
        u, cnt = np.unique(allk, return_counts=True)
        lv = level_of(u)
        over = u[cnt > BASE * (1 << lv)]
        if over.size == 0 or rounds > 20:
            break
        rounds += 1; promoted += over.size
        lo_ = np.searchsorted(ok, over, 'left'); hi_ = np.searchsorted(ok, over, 'right')
        olds = np.unique(np.concatenate([od[a:b] for a, b in zip(lo_, hi_)] + [np.zeros(0, np.int64)]))
        before = prefix(olds) if olds.size else (np.zeros(0,np.uint64), np.zeros(0,np.int64))
        # promote
        allF = np.concatenate([FK, over]); allL = np.concatenate([FL, level_of(over) + 1])
        o2 = np.lexsort((-allL, allF)); allF, allL = allF[o2], allL[o2]
        first = np.r_[True, allF[1:] != allF[:-1]]
        FK, FL = allF[first], allL[first]
        after = prefix(olds) if olds.size else before
        bc = np.unique((before[0] ^ (before[1].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))))
        ac = after[0] ^ (after[1].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        new = ~np.isin(ac, bc)
        if new.any():
            extra_k.append(after[0][new]); extra_d.append(after[1][new])
    ek = np.concatenate(extra_k) if extra_k else np.zeros(0, np.uint64)
    ed = np.concatenate(extra_d) if extra_d else np.zeros(0, np.int64)
    allk = np.concatenate([ok, ek]); alld = np.concatenate([od, ed]); o = np.argsort(allk, kind='stable'); allk, alld = allk[o], alld[o]
    lo_ = np.searchsorted(allk, k, 'left'); hi_ = np.searchsorted(allk, k, 'right')
    rep = hi_ - lo_
    rows_old = int(rep.sum())
    uk, cnt = np.unique(k, return_counts=True)
    rows_in = int((cnt * (cnt - 1) // 2).sum())
    a = alld[np.repeat(lo_, rep) + (np.arange(rep.sum()) - np.repeat(np.cumsum(rep) - rep, rep))] if rep.sum() else np.zeros(0, np.int64)
    codes = np.unique((a.astype(np.uint64) << 32) | np.repeat(d, rep).astype(np.uint64))
    post_k += [k, ek]; post_d += [d, ed]
    print(f"batch@{b0}: entries {k.size} (+{ek.size} maint), rounds {rounds}, promoted {promoted} "
          f"(F={FK.size}, maxlev {FL.max() if FL.size else 0}), old rows {rows_old}, within rows {rows_in}, "
          f"distinct old pairs {codes.size}, {time.time()-t0:.1f}s", flush=True)

u, inv, cnt = np.unique(H, return_inverse=True, return_counts=True)
df = cnt[inv]
di = np.repeat(np.arange(n.size), n)
order = np.lexsort((H, df, di))
rank = np.arange(H.size) - off[:-1][di]
keep = rank < p_len[di]
per = np.bincount(di[keep], weights=(df[order] - 1)[keep], minlength=n.size)
print(f"pages holding a shingle, over its occurrences: quartiles {np.percentile(df, [25, 50, 75]).tolist()}")
print(f"ideal order (exact frequencies of all {n.size} documents): rows a page's prefix reads: mean {per.mean():.1f}, median {np.median(per):.0f}")
