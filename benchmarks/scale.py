"""Scale benchmark: a >= 1,000,000-document, >= 3 GB web-crawl-like corpus of real text, ingested in batches.

build: a deterministic corpus (fixed seed) with the features of real crawls,
made only of real text: the README/changelog/copyright/NEWS/*.txt/*.md/*.html
files under /usr/share/doc (gzipped ones unpacked, HTML split into its <p>/<li>/...
blocks), optionally plus the pages of WARC files (``--warc``), split into
paragraphs, deduplicated.

* sites (``--sites``, default 700) of lognormal sizes (a few with tens of
  thousands of pages, most with hundreds to a few thousand), each with its own
  frame shared by all its pages: a header (a real title and sentence), 20-80
  navigation links (real short phrases: headings, short lines), a footer of
  1-4 real paragraphs and a real copyright line. The frame is 30-70% of a
  page's words (site mean drawn in [0.33, 0.67], per page +- 0.05 noise);
* page bodies: as many words as 2-30 random pool paragraphs (the last one cut
  to size), made of real text in runs of at most 4 words chained on shared
  tokens (see make_chain), in paragraphs of about those sizes (rarely just
  one): the pool is ~35 times too small for a million pages of whole
  paragraphs, which would make unrelated pages share 5-word shingles;
* near-duplicates: 10% recrawls (the same url again in a later part, body
  edited: 1-5 words changed/inserted/deleted, and/or a paragraph added or
  dropped), 3% copies (an original's body under a new url, half under the
  same site frame = exact copies of the whole text, half under another site's
  frame of compatible size); the rest are unique pages;
* crawl order: 10 parts of equal size, each site's pages spread over all of
  them, recrawls always in a later part than their original.

Output (OUT): ``parts/part-00.jsonl.zst`` .. ``part-09.jsonl.zst`` (one JSON
object per line: ``url``, ``text``), ``manifest.json`` (counts, text bytes,
seed, frame share distribution, per-part figures, pool checksum) and
``gold.csv`` (``url_a,url_b,kind``: ``recrawl`` rows have url_a == url_b,
meaning version 1 vs 2; ``copy-same-frame`` (identical text),
``copy-other-frame``). Parts sit in their own folder so that ingesting the
folder reads the parts only.

run: ingests the parts with neardup's default settings, one ``neardup ingest``
process per batch (``--batches 10``: one part per batch; ``--batches 1``: the
parts folder as one batch), measuring per batch the wall time, MB/s of text,
the process's peak RSS (``os.wait4``), the index size on disk, and (by
``neardup sql``) documents, duplicate pairs and clusters per method. Writes
RESULTS/scale-<batches>.csv and a plot (time and peak RSS per batch).

    python benchmarks/scale.py build                       # 1,000,000 docs -> benchmarks/data/scale (3.88 GB of text, 1.12 GB zstd; ~3.5 min)
    python benchmarks/scale.py run --corpus benchmarks/data/scale --index /tmp/scale-idx --batches 10
    python benchmarks/scale.py run --corpus benchmarks/data/scale --index /tmp/scale-idx1 --batches 1
    # small trial
    python benchmarks/scale.py build --docs 20000 --out /tmp/scale-small
    python benchmarks/scale.py run --corpus /tmp/scale-small --index /tmp/scale-small-idx --batches 10 --results /tmp/scale-small-results
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zstandard
from selectolax.lexbor import LexborHTMLParser

HERE = Path(__file__).resolve().parent
WORD = re.compile(r"[^\W_]+")  # about neardup's word: a run of letters and digits
NOT_LETTER = re.compile(r"[\W\d_]+")
WS = re.compile(r"\s+")
BLANK = re.compile(r"\n[ \t]*\n")
TITLE = re.compile(r"[A-Z][A-Za-z]+(?: [A-Za-z][A-Za-z'-]*){1,4}")
DOC_NAMES = ("readme", "changelog", "copyright", "news", "authors", "todo", "faq", "thanks", "history", "changes")
TLDS = ("org", "com", "net", "io", "dev", "info", "de", "fr", "co.uk", "eu")
PARTS, MAX_PARAS = 10, 30
BATCH = 20_000  # bodies made at once
EDGES = np.round(np.arange(0, 1.0001, 0.05), 2)  # frame share histogram


# ---------------------------------------------------------------- the real-text pool
@dataclass
class Pool:
    paras: list[str]
    words: np.ndarray  # words (WORD) per paragraph
    titles: list[str]
    copyrights: list[str]
    files: int
    sha256: str


def _add_text(text: str, paras: set, titles: set, copyrights: set) -> None:
    for block in BLANK.split(text):
        for line in block.splitlines():
            s = line.strip(" \t#*=-:")
            if s[:9].lower() == "copyright" and 4 <= s.count(" ") + 1 <= 20:
                copyrights.add(WS.sub(" ", s))
            elif len(s) < 50 and TITLE.fullmatch(s):
                titles.add(s)
        _add_para(WS.sub(" ", block).strip(), paras)


def _add_para(s: str, paras: set) -> None:
    if 8 <= s.count(" ") + 1 <= 250 and len(NOT_LETTER.sub("", s)) >= 0.6 * len(s):
        paras.add(s)


def _add_html(html: str, paras: set, titles: set) -> None:
    tree = LexborHTMLParser(html)
    for n in tree.css("p, li, dd, blockquote, td"):
        _add_para(WS.sub(" ", n.text(separator=" ")).strip(), paras)
    for n in tree.css("h1, h2, h3, h4, dt, title"):
        s = WS.sub(" ", n.text(separator=" ")).strip()
        if len(s) < 50 and TITLE.fullmatch(s):
            titles.add(s)


def load_pool(warcs: list[str]) -> Pool:
    paras: set[str] = set()
    titles: set[str] = set()
    copyrights: set[str] = set()
    files = 0
    for p in sorted(Path("/usr/share/doc").rglob("*")):
        name = p.name.lower()
        base = name[:-3] if name.endswith(".gz") else name
        if not p.is_file() or not (base.startswith(DOC_NAMES) or base.endswith((".txt", ".md", ".rst", ".html", ".htm"))):
            continue
        try:
            data = gzip.open(p).read() if name.endswith(".gz") else p.read_bytes()
        except (OSError, EOFError):
            continue
        files += 1
        text = data.decode("utf-8", "replace")
        if base.endswith((".html", ".htm")):
            _add_html(text, paras, titles)
        else:
            _add_text(text, paras, titles, copyrights)
    for w in warcs:
        from warcio.archiveiterator import ArchiveIterator

        with open(w, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response" and "html" in (rec.http_headers.get_header("Content-Type") or ""):
                    files += 1
                    _add_html(rec.content_stream().read().decode("utf-8", "replace"), paras, titles)
    plist = sorted(paras)
    sha = hashlib.sha256("\n".join(plist).encode()).hexdigest()
    words = np.array([len(WORD.findall(s)) for s in plist], dtype=np.int32)
    return Pool(plist, words, sorted(titles), sorted(copyrights), files, sha)


# ---------------------------------------------------------------- sites and the crawl plan
@dataclass
class Site:
    host: str
    top: str  # frame text before the body
    bottom: str  # frame text after it
    words: int  # frame words
    sections: list[str]


def make_site(i: int, pool: Pool, rng: np.random.Generator, short: np.ndarray) -> Site:
    pick = lambda seq, k=1: [seq[j] for j in rng.choice(len(seq), k, replace=False)]  # noqa: E731
    name = pick(pool.titles)[0]
    slug = "-".join(re.sub(r"[^a-z0-9]", "", w) for w in name.lower().split()[:2])
    host = f"www.{slug}{i}.{TLDS[i % len(TLDS)]}"
    nav = pick(pool.titles, int(rng.integers(20, 81)))
    header = f"{name}\n{pool.paras[short[rng.integers(len(short))]]}"
    footer = "\n".join(pick(pool.paras, int(rng.integers(1, 5))) + pick(pool.copyrights))
    layout = int(rng.integers(3))  # nav above the body, below it, or split
    cut = {0: len(nav), 1: 0, 2: len(nav) // 2}[layout]
    top = "\n".join([header, *nav[:cut]])
    bottom = "\n".join([*nav[cut:], footer])
    sections = [re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-") for t in nav[:8]]
    return Site(host, top, bottom, len(WORD.findall(top)) + len(WORD.findall(bottom)), sections)


def split_even(total: int, n: int) -> np.ndarray:
    return np.array([total // n + (k < total % n) for k in range(n)])


def plan_bodies(site_of: np.ndarray, frame_words: np.ndarray, center: np.ndarray, pw: np.ndarray, rng: np.random.Generator):
    """Paragraph ids of each original's body, sized so that the frame is its target share of the page."""
    n = len(site_of)
    share = np.clip(center[site_of] + rng.normal(0, 0.05, n), 0.31, 0.69)  # margin for whole-paragraph steps and edits
    target = frame_words[site_of] * (1 - share) / share
    counts, keeps, ids = np.empty(n, np.int32), np.empty(n, np.int32), []
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        idx = rng.integers(0, len(pw), (hi - lo, MAX_PARAS), dtype=np.int32)
        rows = np.arange(hi - lo)
        long = pw[idx[:, 0]] > target[lo:hi] - 5  # a first paragraph longer than the body: the shortest draw first instead
        idx[long, 0] = idx[long, pw[idx[long]].argmin(1)]
        cw = pw[idx].cumsum(1)
        k = np.clip((cw < target[lo:hi, None]).sum(1) + 1, 2, MAX_PARAS)
        before = cw[rows, k - 2]
        # words kept of the last paragraph (-1: all of it, when 30 paragraphs are not enough)
        keep = np.where((k == MAX_PARAS) & (cw[:, -1] < target[lo:hi]), -1, np.maximum(target[lo:hi] - before, 5)).astype(np.int32)
        counts[lo:hi], keeps[lo:hi] = k, keep
        ids.extend(idx[r, : k[r]] for r in rows)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    return np.concatenate(ids), ptr, keeps


# ---------------------------------------------------------------- page bodies: real text in short runs
# A million pages need ~310 M body words and the pool has ~8 M: whole paragraphs or sentences would each
# come back in ~36 unrelated pages. A body is instead a chain of runs of real text of at most RUN_WORDS
# words: a run ends on a common token (the pivot: >= PIVOT_MIN occurrences, else any repeated token) and
# the next run goes on after another occurrence of that token, anywhere in the pool; a run that reaches a
# sentence end ends the sentence and the next one starts at a random sentence start. Each run is real
# text and joins the next on a shared token, but every 5-word shingle spans a junction (except in the ~2% of
# runs with no place to stop within RUN_WORDS words: stats "longer_runs"), so unrelated pages share one only
# by chance (common phrases).
RUN_WORDS, PIVOT_MIN, NOVEL, MAX_TOKEN_WORDS = 4, 50, 0.5, 3
SENT_END = re.compile(r"[.!?][\"')\]]*$")
SENT_START = re.compile(r"[\"'(\[]?[A-Z0-9]")
BULLETS = ("*", "-", "+", "\u2022")
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (uint64, wrapping): the counter-based randomness of the bodies."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _below(r: np.ndarray, n) -> np.ndarray:
    """Uniform integers in [0, n) from random uint64s."""
    return ((r >> np.uint64(11)).astype(np.float64) * (np.asarray(n, np.float64) / 2.0**53)).astype(np.int64)


@dataclass
class Chain:
    vocab: np.ndarray  # token strings (object array)
    tok: np.ndarray  # token id per pool position
    wc: np.ndarray  # words (WORD) per token id
    end: np.ndarray  # the position ends a sentence
    nxt: np.ndarray  # last position of the run from a position (a sentence start or a pivot)
    occ: np.ndarray  # positions that do not end a sentence, grouped by token
    first: np.ndarray  # token id -> its first index in occ
    cnt: np.ndarray  # token id -> its number of positions in occ
    rank: np.ndarray  # position -> its index in occ
    starts: np.ndarray  # starts of sentences of >= 3 tokens
    cumw: np.ndarray  # words (WORD) before each position
    stats: dict


def make_chain(pool: Pool) -> Chain:
    """The pool's paragraphs as one sequence of space-separated tokens cut into sentences, without the tokens
    of more than MAX_TOKEN_WORDS words (URLs, paths, e-mail addresses: a 5-word shingle by themselves) and
    the sentences whose 5-token shingles are mostly seen before (license and changelog boilerplate)."""
    ids: dict[str, int] = {}
    tok_a, plen = array("i"), []
    for p in pool.paras:
        w = p.split(" ")
        tok_a.extend([ids.setdefault(t, len(ids)) for t in w])
        plen.append(len(w))
    vocab = np.array(list(ids), dtype=object)
    wc = np.array([len(WORD.findall(v)) for v in vocab], np.int64)
    closes = np.array([SENT_END.search(v) is not None for v in vocab])
    opens = np.array([SENT_START.match(v) is not None for v in vocab])
    bullet = np.isin(vocab, BULLETS)
    tok = np.frombuffer(tok_a, np.int32)
    pid = np.repeat(np.arange(len(plen), dtype=np.int32), plen)
    short = wc[tok] <= MAX_TOKEN_WORDS
    dropped_tokens = int((~short).sum())
    tok, pid = tok[short], pid[short]
    n = len(tok)
    end = np.ones(n, bool)
    end[:-1] = (closes[tok[:-1]] & opens[tok[1:]]) | bullet[tok[1:]] | (pid[1:] != pid[:-1])
    # drop the sentences with fewer than NOVEL of their 5-token shingles seen for the first time
    sid = np.concatenate([[0], np.cumsum(end[:-1])])
    h = np.zeros(n, np.uint64)
    t64 = tok.astype(np.uint64)
    with np.errstate(over="ignore"):
        for k in range(5):
            h[: n - 4] = _mix(h[: n - 4] * np.uint64(1_000_003) + t64[k : n - 4 + k] + np.uint64(1))
    valid = np.zeros(n, bool)
    valid[: n - 4] = sid[4:] == sid[: n - 4]
    _, fi, inv = np.unique(np.where(valid, h, np.uint64(0)), return_index=True, return_inverse=True)
    novel = valid & (fi[inv.ravel()] == np.arange(n))
    n_sent = int(sid[-1]) + 1
    total = np.bincount(sid, weights=valid, minlength=n_sent)
    keep_s = (total == 0) | (np.bincount(sid, weights=novel, minlength=n_sent) >= NOVEL * total)
    keep = keep_s[sid]
    tok, end = tok[keep], end[keep]
    n = len(tok)
    cumw = np.concatenate([[0], np.cumsum(wc[tok])])
    # a run from x (its first token, a sentence start or the pivot it shares with the run before) stops at
    # the first sentence end, else the farthest pivot, else the farthest repeated token, among x+1.. while
    # the run has <= RUN_WORDS words; failing all three, at the next pivot, repeated token or end further on
    cnt = np.bincount(tok[~end], minlength=len(vocab))
    occ = np.flatnonzero(~end)[np.argsort(tok[~end], kind="stable")].astype(np.int32)
    first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    rank = np.zeros(n, np.int32)
    rank[occ] = np.arange(len(occ), dtype=np.int32)
    pivot, repeated = (cnt[tok] >= PIVOT_MIN) & ~end, (cnt[tok] >= 2) & ~end
    span = RUN_WORDS + 2  # tokens looked at (some have no word: "*", "-")
    endp = np.concatenate([end, np.ones(span + 1, bool)])
    pivp, repp = (np.concatenate([a, np.zeros(span + 1, bool)]) for a in (pivot, repeated))
    cwp = np.concatenate([cumw, np.full(span + 1, cumw[-1] + RUN_WORDS + 1)])
    x = np.arange(n)
    fits = [cwp[x + k + 1] - cumw[:-1] <= RUN_WORDS for k in range(span + 1)]  # run x..x+k is short enough
    at_end = np.full(n, -1, np.int64)
    far_piv, far_rep = at_end.copy(), at_end.copy()
    for k in range(span, 0, -1):
        at_end = np.where(fits[k] & endp[x + k], x + k, at_end)
    for k in range(1, span + 1):
        far_piv = np.where(fits[k] & pivp[x + k], x + k, far_piv)
        far_rep = np.where(fits[k] & repp[x + k], x + k, far_rep)
    stop = np.where(at_end >= 0, at_end, np.where(far_piv >= 0, far_piv, far_rep))
    long = stop < 0
    ahead = np.where(pivot | repeated | end, x, n)
    ahead = np.concatenate([np.minimum.accumulate(ahead[::-1])[::-1], [n - 1]])
    stop[long] = ahead[x[long] + 1]
    nxt = np.where(end, x, stop).astype(np.int32)
    sfirst = np.concatenate([[0], np.flatnonzero(end[:-1]) + 1])
    starts = sfirst[np.diff(np.append(sfirst, n)) >= 3].astype(np.int32)
    stats = {"tokens": n, "vocabulary": len(vocab), "tokens_dropped_long": dropped_tokens, "sentences": int(keep_s.sum()),
             "sentences_dropped_repeated": int(n_sent - keep_s.sum()), "sentence_starts": len(starts), "max_run_words": RUN_WORDS,
             "pivot_min_count": PIVOT_MIN, "pivot_positions": round(float(pivot.mean()), 3), "longer_runs": round(float(long.mean()), 4)}
    return Chain(vocab, tok, wc, end, nxt, occ, first, cnt, rank, starts, cumw, stats)


def chain_runs(ch: Chain, keys: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs (doc, first position, length) of the bodies of a batch of documents, in lockstep; a document's
    random numbers depend only on its key, so its body does not depend on the batch."""
    act = np.arange(len(keys))
    words = np.zeros(len(keys), np.int64)
    x = ch.starts[_below(_mix(keys), len(ch.starts))]
    a = x.astype(np.int64)
    recs, t = [], 0
    while len(act):
        t += 1
        b = ch.nxt[x]
        recs.append((act, a, b - a + 1))
        words[act] += ch.cumw[b + 1] - ch.cumw[a]
        with np.errstate(over="ignore"):
            r = _mix(keys[act] + np.uint64(t) * GOLDEN)
        ends = ch.end[b]
        v = ch.tok[b]
        j = ch.first[v] + _below(r, np.maximum(ch.cnt[v] - 1, 1))
        j = np.minimum(np.where(j >= ch.rank[b], j + 1, j), len(ch.occ) - 1)  # another occurrence than b
        s = ch.starts[_below(r, len(ch.starts))]
        x = np.where(ends, s, ch.occ[j])
        a = np.where(ends, s, x + 1).astype(np.int64)
        more = words[act] < targets[act]
        act, x, a = act[more], x[more], a[more]
    d, st, ln = (np.concatenate(c) for c in zip(*recs))
    order = np.argsort(d, kind="stable")
    return d[order], st[order], ln[order]


def make_bodies(os_: np.ndarray, ch: Chain, pool: Pool, flat: np.ndarray, ptr: np.ndarray, keeps: np.ndarray,
                seed: int) -> list[tuple[list[str], int]]:
    """Bodies (paragraphs, words) of originals os_: as many words as their planned paragraphs (the last one
    cut to size), in paragraphs of about the planned sizes, each but the last ending with a sentence."""
    m = len(os_)
    if not m:
        return []
    counts = (ptr[os_ + 1] - ptr[os_]).astype(np.int64)
    pstart = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sizes = pool.words[flat[np.repeat(ptr[os_] - pstart, counts) + np.arange(counts.sum())]].astype(np.int64)
    last = pstart + counts - 1
    sizes[last] = np.where(keeps[os_] >= 0, np.minimum(keeps[os_], sizes[last]), sizes[last])
    targets = np.add.reduceat(sizes, pstart)
    with np.errstate(over="ignore"):
        keys = _mix(os_.astype(np.uint64) * GOLDEN + np.uint64(seed))
    d, st, ln = chain_runs(ch, keys, targets)
    # token positions, cut where the body has its words
    off = np.repeat(st - np.concatenate([[0], np.cumsum(ln)[:-1]]), ln) + np.arange(ln.sum())
    dd = np.repeat(d, ln)
    w = ch.wc[ch.tok[off]]
    cw = np.cumsum(w)
    first_tok = np.searchsorted(dd, np.arange(m))
    before = cw - w - (cw - w)[first_tok][dd]  # words of the doc before this token
    kept = before < targets[dd]
    off, dd, w, before = off[kept], dd[kept], w[kept], before[kept]
    words = np.bincount(dd, weights=w, minlength=m).astype(np.int64)
    lo = np.searchsorted(dd, np.arange(m + 1))
    # paragraph breaks: after the sentence end nearest to each planned paragraph end
    e = np.flatnonzero(ch.end[off])
    big = np.int64(1) << 40
    ekey = dd[e] * big + before[e] + w[e]
    para_end = np.cumsum(sizes) - np.repeat(np.concatenate([[0], np.cumsum(targets)[:-1]]), counts)
    inner = np.ones(len(sizes), bool)
    inner[last] = False
    pdoc = np.repeat(np.arange(m), counts)[inner]
    tkey = pdoc * big + para_end[inner]
    i = np.searchsorted(ekey, tkey)
    left, right = np.clip(i - 1, 0, max(len(e) - 1, 0)), np.clip(i, 0, max(len(e) - 1, 0))
    if len(e):
        dist = lambda k: np.where(dd[e[k]] == pdoc, np.abs(ekey[k] - tkey), big)  # noqa: E731
        pick = np.where(dist(left) <= dist(right), left, right)
        ok = np.minimum(dist(left), dist(right)) < big
        cuts = e[pick[ok]] + 1
        cuts = np.unique(cuts[cuts < lo[dd[cuts - 1] + 1]])  # not after a doc's last token
    else:
        cuts = np.zeros(0, np.int64)
    toks = ch.vocab[ch.tok[off]].tolist()
    # a body's last token can have up to MAX_TOKEN_WORDS words: cut to the planned words (the copies on another
    # frame were matched to it by them)
    for k in np.flatnonzero(words > targets).tolist():
        i = int(lo[k + 1]) - 1
        toks[i] = toks[i][: [mt.end() for mt in WORD.finditer(toks[i])][int(targets[k] - before[i]) - 1]]
    words = np.minimum(words, targets)
    out = []
    c = np.searchsorted(cuts, lo)
    for k in range(m):
        edges = [int(lo[k]), *cuts[c[k] : c[k + 1]].tolist(), int(lo[k + 1])]
        out.append(([" ".join(toks[p:q]) for p, q in zip(edges[:-1], edges[1:])], int(words[k])))
    return out


def recrawl_edit(paras: list[str], body_words: int, frame_words: int, pool: Pool, rnd: random.Random) -> list[str]:
    """A later crawl of the page: a paragraph added or dropped and/or 1-5 words changed, inserted or deleted."""
    # an added/dropped paragraph is at most a fifth of the body and keeps the frame share in [0.3, 0.7]
    original, paras, small = paras, list(paras), body_words // 5
    r = rnd.random()
    if r < 0.25 and len(paras) < MAX_PARAS:
        most = min(small, frame_words * 7 // 3 - body_words - 5)
        add = next((j for j in (rnd.randrange(len(pool.paras)) for _ in range(20)) if pool.words[j] <= most), None)
        if add is not None:
            paras.insert(rnd.randrange(len(paras) + 1), pool.paras[add])
    elif r < 0.4 and len(paras) > 2:
        most = min(small, body_words - frame_words * 3 // 7 - 5)
        drop = [i for i, p in enumerate(paras) if len(WORD.findall(p)) <= most]
        if drop:
            del paras[rnd.choice(drop)]
    n_ops = rnd.randint(1, 5) if r >= 0.4 else rnd.randint(0, 2)
    while n_ops > 0 or paras == original:  # never the same text again
        n_ops -= 1
        i = rnd.randrange(len(paras))
        words = paras[i].split(" ")
        plain = [j for j, w in enumerate(words) if WORD.fullmatch(w)]  # one word each: the share barely moves
        donor: list[str] = []
        while not donor:  # the new word: a word of a random paragraph
            donor = [w for w in pool.paras[rnd.randrange(len(pool.paras))].split(" ") if WORD.fullmatch(w)]
        new = rnd.choice(donor)
        op = rnd.randrange(3 if body_words - 5 >= frame_words * 3 / 7 else 2) if len(plain) > 1 else 1
        if op == 1:
            words.insert(rnd.randrange(len(words) + 1), new)
        elif op == 0:
            words[rnd.choice(plain)] = new
        else:
            del words[rnd.choice(plain)]
        paras[i] = " ".join(words)
    return paras


def build(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    out = Path(args.out)
    (out / "parts").mkdir(parents=True, exist_ok=True)
    pool = load_pool(args.warc)
    print(f"pool: {len(pool.paras):,} paragraphs, {len(pool.titles):,} titles, {len(pool.copyrights):,} copyright lines "
          f"from {pool.files:,} files ({time.perf_counter() - t0:.0f} s)", flush=True)
    chain = make_chain(pool)
    print(f"body chain: {chain.stats['tokens']:,} tokens in {chain.stats['sentences']:,} sentences ({chain.stats['sentences_dropped_repeated']:,} "
          f"mostly repeated ones and {chain.stats['tokens_dropped_long']:,} long tokens left out) ({time.perf_counter() - t0:.0f} s)", flush=True)
    rng = np.random.default_rng(args.seed)
    short = np.flatnonzero((pool.words >= 8) & (pool.words <= 25))
    sites = [make_site(i, pool, rng, short) for i in range(args.sites)]
    frame_words = np.array([s.words for s in sites])
    center = rng.uniform(0.33, 0.67, args.sites)

    n = args.docs
    n_re, n_cp = round(n * args.recrawls), round(n * args.copies)
    n_orig = n - n_re - n_cp
    w = rng.lognormal(0, 1.3, args.sites)
    sizes = np.maximum(1, np.floor(w / w.sum() * n_orig)).astype(np.int64)
    sizes[np.argsort(-w)[: max(0, n_orig - sizes.sum())]] += 1  # hand out the remainder to the biggest sites
    site_of = np.repeat(np.arange(args.sites), sizes)[:n_orig]
    part_size = split_even(n, PARTS)
    re_part = np.concatenate([[0], split_even(n_re, PARTS - 1)])
    cp_part = split_even(n_cp, PARTS)
    part_of = np.repeat(np.arange(PARTS), part_size - re_part - cp_part)
    rng.shuffle(part_of)
    flat, ptr, keeps = plan_bodies(site_of, frame_words, center, pool.words, rng)
    last = pool.words[flat[ptr[1:] - 1]]  # body words of each original
    est_words = np.add.reduceat(pool.words[flat].astype(np.int64), ptr[:-1]) - last + np.where(keeps >= 0, np.minimum(keeps, last), last)

    url = lambda num, site: f"https://{sites[site].host}/{sites[site].sections[num % len(sites[site].sections)]}/page-{num}.html"  # noqa: E731
    # docs: (part, kind, original, site, number); kind 0 original, 1 recrawl, 2 copy on same frame, 3 copy on another frame
    docs = [np.stack([part_of, np.zeros(n_orig, np.int64), np.arange(n_orig), site_of, np.arange(n_orig)], 1)]
    gold = []
    used = np.zeros(n_orig, bool)
    for q in range(1, PARTS):
        src = rng.choice(np.flatnonzero((part_of < q) & ~used), re_part[q], replace=False)
        used[src] = True
        docs.append(np.stack([np.full(len(src), q), np.ones(len(src), np.int64), src, site_of[src], src], 1))
        gold += [(url(o, site_of[o]), url(o, site_of[o]), "recrawl") for o in src]
    num = n_orig
    for q in range(PARTS):
        cand = np.flatnonzero(part_of <= q)
        src = rng.choice(cand, cp_part[q], replace=len(cand) < cp_part[q])
        rows = []
        for o in src:
            site, kind = site_of[o], 2
            if rng.random() < 0.5:  # another site whose frame keeps the share in [0.3, 0.7]
                for t in rng.integers(0, args.sites, 32):
                    if t != site and 0.3 <= frame_words[t] / (frame_words[t] + est_words[o]) <= 0.7:
                        site, kind = t, 3
                        break
            rows.append((q, kind, o, site, num))
            gold.append((url(o, site_of[o]), url(num, site), "copy-same-frame" if kind == 2 else "copy-other-frame"))
            num += 1
        docs.append(np.array(rows, np.int64).reshape(-1, 5))
    docs = np.concatenate(docs)
    docs = docs[rng.permutation(len(docs))]
    docs = docs[np.argsort(docs[:, 0], kind="stable")]  # crawl order: by part, shuffled within it
    print(f"plan: {len(docs):,} docs, {args.sites} sites ({time.perf_counter() - t0:.0f} s)", flush=True)

    shares = np.empty(len(docs))
    nparas = np.empty(len(docs), np.int32)
    part_stats = []
    cctx = zstandard.ZstdCompressor(level=args.level)
    row = 0
    for q in range(PARTS):
        path = out / "parts" / f"part-{q:02d}.jsonl.zst"
        n_bytes = n_docs = 0
        with open(path, "wb") as fh, cctx.stream_writer(fh) as zw:
            buf = []
            rows = docs[docs[:, 0] == q]
            bodies: list[tuple[list[str], int]] = []
            for i, (_, kind, o, site, number) in enumerate(rows):
                if i % BATCH == 0:  # the bodies of the next BATCH docs at once
                    bodies = make_bodies(rows[i : i + BATCH, 2], chain, pool, flat, ptr, keeps, args.seed)
                paras, bw = bodies[i % BATCH]
                if kind == 1:
                    paras = recrawl_edit(paras, bw, sites[site].words, pool, random.Random(args.seed * 1_000_003 + int(o)))
                    bw = sum(len(WORD.findall(p)) for p in paras)
                s = sites[site]
                text = f"{s.top}\n\n" + "\n\n".join(paras) + f"\n\n{s.bottom}"
                shares[row], nparas[row] = s.words / (s.words + bw), len(paras)
                row += 1
                n_bytes += len(text.encode())
                n_docs += 1
                buf.append(json.dumps({"url": url(number, site), "text": text}, ensure_ascii=False))
                if len(buf) == 2000:
                    zw.write(("\n".join(buf) + "\n").encode())
                    buf = []
            if buf:
                zw.write(("\n".join(buf) + "\n").encode())
        part_stats.append({"file": str(path.relative_to(out)), "docs": n_docs, "text_bytes": n_bytes, "file_bytes": path.stat().st_size})
        print(f"  {path.name}: {n_docs:,} docs, {n_bytes / 1e6:,.1f} MB text, {path.stat().st_size / 1e6:,.1f} MB on disk "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)

    with open(out / "gold.csv", "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["url_a", "url_b", "kind"])
        wr.writerows(gold)
    kinds = np.bincount(docs[:, 1], minlength=4)
    manifest = {
        "docs": int(len(docs)), "text_bytes": int(sum(p["text_bytes"] for p in part_stats)), "sites": args.sites,
        "originals": int(kinds[0]), "recrawls": int(kinds[1]), "copies": int(kinds[2] + kinds[3]),
        "copies_same_frame": int(kinds[2]), "copies_other_frame": int(kinds[3]), "seed": args.seed,
        "site_pages": {"min": int(sizes.min()), "median": int(np.median(sizes)), "max": int(sizes.max()), "largest": sorted(sizes.tolist())[-5:]},
        "frame_words": {"min": int(frame_words.min()), "median": int(np.median(frame_words)), "max": int(frame_words.max())},
        "frame_share": {"min": float(shares.min()), "max": float(shares.max()), "mean": float(shares.mean()),
                        "outside_0.3_0.7": int(((shares < 0.3) | (shares > 0.7)).sum()),
                        "percentiles": {str(p): round(float(np.percentile(shares, p)), 3) for p in (1, 10, 25, 50, 75, 90, 99)},
                        "histogram": {f"{b:.2f}": int(c) for b, c in zip(EDGES, np.histogram(shares, EDGES)[0]) if c}},
        "body_paragraphs": {"min": int(nparas.min()), "median": float(np.median(nparas)), "max": int(nparas.max())},
        "pool": {"files": pool.files, "paragraphs": len(pool.paras), "titles": len(pool.titles), "copyright_lines": len(pool.copyrights),
                 "sha256": pool.sha256, "sources": ["/usr/share/doc", *args.warc]},
        "body_chain": chain.stats,
        "zstd_level": args.level, "parts": part_stats, "build_seconds": round(time.perf_counter() - t0, 1),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"done: {manifest['docs']:,} docs, {manifest['text_bytes'] / 1e9:.2f} GB of text, frame share "
          f"p1/p50/p99 {manifest['frame_share']['percentiles']['1']}/{manifest['frame_share']['percentiles']['50']}/"
          f"{manifest['frame_share']['percentiles']['99']}, {manifest['build_seconds']} s -> {out}")


# ---------------------------------------------------------------- ingest and measure
def neardup_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "neardup"
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from neardup.cli.app import main; main()"]


def disk_usage(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def counts(index: Path) -> dict[str, int]:
    q = ("SELECT 'docs' AS k, count(*) AS n FROM documents UNION ALL SELECT 'rejects', count(*) FROM rejects "
         "UNION ALL SELECT 'dups_' || method, count(*) FROM duplicates GROUP BY method "
         "UNION ALL SELECT 'clusters_' || method, count(*) FROM clusters GROUP BY method")
    r = subprocess.run([*neardup_cmd(), "sql", "--index", str(index), "--format", "json", q], capture_output=True, text=True, check=True)
    return {d["k"]: int(d["n"]) for d in map(json.loads, r.stdout.splitlines()) if d}


def prepare_seconds(index: Path, after_batch: int) -> tuple[float, int]:
    """``(seconds, last batch id)``: the preparing stages' seconds (``prepare: *`` in ``batch_timings``:
    normal form, words, shingles, fingerprints) of the batches after ``after_batch``. Their work is
    the batch's own and does not depend on the index: how it changes from part to part measures the
    machine's speed, the control beside the parts' times."""
    q = ("SELECT coalesce(sum(seconds), 0) AS s, (SELECT coalesce(max(batch_id), 0) FROM batches) AS b "
         f"FROM batch_timings WHERE stage LIKE 'prepare:%' AND batch_id > {int(after_batch)}")
    r = subprocess.run([*neardup_cmd(), "sql", "--index", str(index), "--format", "json", q], capture_output=True, text=True, check=True)
    d = json.loads(r.stdout.splitlines()[0])
    return round(float(d["s"]), 1), int(d["b"])


def control_input(corpus: Path, first_part: str, docs: int, folder: Path) -> Path:
    """The control workload's input: the first ``docs`` records of the corpus's first part, as
    plain JSON lines in ``folder`` (written once per run)."""
    out = folder / f"control-{docs}.jsonl"
    with zstandard.open(corpus / first_part, "rt", encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i >= docs:
                break
            dst.write(line)
    return out


#: runs of the control workload after each batch (the fastest counts: a run is only ever slowed)
CONTROL_RUNS = 2


def control_seconds(path: Path, folder: Path, runs: int = CONTROL_RUNS) -> float:
    """Wall seconds of the fastest of ``runs`` ingests of ``path``, each into a fresh index in
    ``folder`` (deleted after): the same work at every call, so its changes over a run are the
    machine's, not the index's."""
    index = folder / "control-index"
    best = float("inf")
    for _ in range(runs):
        shutil.rmtree(index, ignore_errors=True)
        t = time.perf_counter()
        subprocess.run([*neardup_cmd(), "ingest", "--index", str(index), "--quiet", str(path)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t)
    shutil.rmtree(index, ignore_errors=True)
    return round(best, 2)


def run(args: argparse.Namespace) -> None:
    corpus, index = Path(args.corpus), Path(args.index)
    manifest = json.loads((corpus / "manifest.json").read_text())
    parts = manifest["parts"][: args.limit_parts]
    if index.exists() and any(index.iterdir()):
        if not args.overwrite or not (index / "catalog.duckdb").exists():
            sys.exit(f"{index} is not empty (--overwrite deletes it first, if it is a neardup index)")
        shutil.rmtree(index)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    tmp = None
    if args.batches == 1:
        inputs = [str(corpus / "parts")]
        if len(parts) < len(manifest["parts"]):  # a folder of links to the first N parts
            tmp = Path(tempfile.mkdtemp(prefix="scale-parts-"))
            for p in parts:
                (tmp / Path(p["file"]).name).symlink_to((corpus / p["file"]).resolve())
            inputs = [str(tmp)]
        batch_parts = [parts]
    else:
        inputs = [str(corpus / p["file"]) for p in parts]
        batch_parts = [[p] for p in parts]
    log = open(results / f"scale-{args.batches}.log", "w")
    settled = settle(args.settle)
    rows = []
    last_batch = 0
    control = control_input(corpus, parts[0]["file"], args.control, results) if args.control else None
    for b, (inp, ps) in enumerate(zip(inputs, batch_parts)):
        mb = sum(p["text_bytes"] for p in ps) / 1e6
        t = time.perf_counter()
        proc = subprocess.Popen([*neardup_cmd(), "ingest", "--index", str(index), "--quiet", *shlex.split(args.ingest_args), inp],
                                stdout=log, stderr=log)
        peaks = {"RssAnon": 0, "RssFile": 0}
        watch = threading.Thread(target=_sample_rss, args=(proc.pid, peaks), daemon=True)
        watch.start()
        _, status, usage = os.wait4(proc.pid, 0)
        watch.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t
        if proc.returncode:
            print(f"batch {b}: neardup ingest exited {proc.returncode}, see {log.name}", file=sys.stderr)
        row = {"batch": b, "input": inp, "docs_in": sum(p["docs"] for p in ps), "text_mb": round(mb, 1), "wall_s": round(wall, 1),
               "mb_per_s": round(mb / wall, 2), "docs_per_s": round(sum(p["docs"] for p in ps) / wall),
               "peak_rss_mb": round(usage.ru_maxrss / 1024), "peak_anon_mb": peaks["RssAnon"] // 1024,
               "peak_file_mb": peaks["RssFile"] // 1024, "user_s": round(usage.ru_utime, 1), "sys_s": round(usage.ru_stime, 1),
               "minor_faults": usage.ru_minflt, "major_faults": usage.ru_majflt,
               "read_mb": round(usage.ru_inblock * 512 / 1e6, 1), "exit": proc.returncode, "index_mb": round(disk_usage(index) / 1e6, 1), **counts(index)}
        row["prepare_s"], last_batch = prepare_seconds(index, last_batch)
        if control is not None:  # the machine's speed right after this part, on work of a fixed size
            row["control_s"] = control_seconds(control, results)
        rows.append(row)
        print("  ".join(f"{k}={v}" for k, v in row.items() if k != "input"), flush=True)
    log.close()
    if tmp:
        shutil.rmtree(tmp)
    if control is not None:
        control.unlink()
    keys = list(dict.fromkeys(k for r in rows for k in r))
    out_csv = results / f"scale-{args.batches}.csv"
    with open(out_csv, "w", newline="") as fh:
        wr = csv.DictWriter(fh, keys, restval=0)
        wr.writeheader()
        wr.writerows(rows)
    print_table(rows, keys)
    print(summary(rows) + (f"; ingest options: {args.ingest_args}" if args.ingest_args else "")
          + (f"; waited {settled} s for the machine's free memory to settle first" if settled is not None else ""))
    plot(rows, Path(args.plot or results / f"scale-{args.batches}.png"), f"{manifest['docs']:,} docs corpus, {args.batches} batch(es)")
    print(f"-> {out_csv}")


#: where a Linux guest with free page reporting (virtio-balloon) counts the free memory it has handed back to the host
REPORTED = Path("/sys/module/page_reporting/parameters/reported_kib")


def settle(limit: float) -> float | None:
    """Wait, up to ``limit`` seconds, until the machine has handed the free memory back to its host:
    until ``REPORTED`` grows by less than 64 MB in 4 s (a plain wait of ``limit`` where there is no
    such counter). Returns the seconds waited (None when ``limit`` is 0).

    Why: on a virtual machine with free page reporting, a page the guest has just freed is still
    backed by the host, and a page it reported is not, so the first touch of a reported page costs a
    host fault as well. Right after the page cache is dropped, gigabytes of free pages are still
    backed: a first batch started then spends little over a third of the system CPU it spends on
    the same work later, and the ratio of the slowest batch to the first measures the drop, not the engine
    (docs/benchmarks.md, twenty-sixth session)."""
    if limit <= 0:
        return None
    start = time.monotonic()
    if not REPORTED.exists():
        time.sleep(limit)
        return limit
    prev = int(REPORTED.read_text())
    while time.monotonic() - start < limit:
        time.sleep(4)
        cur = int(REPORTED.read_text())
        if cur - prev < 64 * 1024:
            break
        prev = cur
    return round(time.monotonic() - start, 1)


def _sample_rss(pid: int, peaks: dict) -> None:
    """Peak anonymous and file-backed resident memory of a process, sampled every 50 ms until it
    exits (the mapped LMDB pages a batch touches count as resident but are page cache)."""
    while True:
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    key = line.split(":")[0]
                    if key in peaks:
                        peaks[key] = max(peaks[key], int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            return
        time.sleep(0.05)


def summary(rows: list[dict]) -> str:
    """The run in one line: its time, the flatness target's measure (the slowest batch against the
    first), and the CPU of the first and last batches. The system CPU is shown apart because on a
    shared VM its cost per page fault changes with the machine's state, not with the engine
    (docs/benchmarks.md, the twenty-fourth and twenty-fifth sessions), while the user CPU follows
    the work a batch does."""
    wall = [r["wall_s"] for r in rows]
    first, last = rows[0], rows[-1]
    line = (f"{len(rows)} batch(es) in {sum(wall):.1f} s; slowest / first {max(wall) / wall[0]:.2f}x (batch "
            f"{wall.index(max(wall))}); peak RSS {max(r['peak_rss_mb'] for r in rows):,} MB")
    if len(rows) > 1 and rows[0].get("prepare_s"):
        slow = wall.index(max(wall))
        line += (f"; the preparing stages (the batch's own work, not the index's) {rows[0]['prepare_s']} s in the first "
                 f"batch, {rows[slow]['prepare_s']} s in the slowest ({rows[slow]['prepare_s'] / rows[0]['prepare_s']:.2f}x)")
    if len(rows) > 1 and rows[0].get("control_s"):
        ctl = [r["control_s"] for r in rows]
        rel = [w / c for w, c in zip(wall, ctl)]
        line += (f"; the control {ctl[0]} s after the first batch, {min(ctl)}-{max(ctl)} s in all ({max(ctl) / min(ctl):.2f}x); "
                 f"each batch's time over its control: slowest / first {max(rel) / rel[0]:.2f}x (batch {rel.index(max(rel))})")
    if len(rows) > 1:
        line += (f"; user CPU {first['user_s']} -> {last['user_s']} s, system CPU {first['sys_s']} -> {last['sys_s']} s, "
                 f"minor faults {first['minor_faults']:,} -> {last['minor_faults']:,}, read from disk "
                 f"{first.get('read_mb', 0)} -> {last.get('read_mb', 0)} MB (first -> last batch)")
    return line


def print_table(rows: list[dict], keys: list[str]) -> None:
    keys = [k for k in keys if k not in ("input", "user_s", "sys_s", "minor_faults", "major_faults", "read_mb", "exit", "prepare_s", "control_s")] \
        + [k for k in ("prepare_s", "control_s") if any(k in r for r in rows)]
    widths = [max(len(k), *(len(str(r.get(k, 0))) for r in rows)) for k in keys]
    print("  ".join(k.rjust(w) for k, w in zip(keys, widths)))
    for r in rows:
        print("  ".join(str(r.get(k, 0)).rjust(w) for k, w in zip(keys, widths)))


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["batch"] for r in rows]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    a1.bar(x, [r["wall_s"] for r in rows], color="tab:blue")
    if rows and rows[0].get("control_s"):  # the first batch's time at the machine's speed after each batch
        scale = rows[0]["wall_s"] / rows[0]["control_s"]
        a1.plot(x, [r["control_s"] * scale for r in rows], "k--", label="first batch x control / first control")
        a1.legend(loc="lower left", fontsize="small")
    a1.set_ylabel("wall time (s)")
    a1b = a1.twinx()
    a1b.plot(x, [r["mb_per_s"] for r in rows], "o-", color="tab:orange")
    a1b.set_ylabel("MB/s of text", color="tab:orange")
    a2.bar(x, [r["peak_rss_mb"] for r in rows], color="tab:green")
    a2.set_ylabel("peak RSS (MB)")
    a2b = a2.twinx()
    a2b.plot(x, [r["index_mb"] for r in rows], "s-", color="tab:red")
    a2b.set_ylabel("index size (MB)", color="tab:red")
    a2.set_xlabel("batch")
    a2.set_xticks(x)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"-> {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write the corpus")
    b.add_argument("--docs", type=int, default=1_000_000)
    b.add_argument("--out", default=str(HERE / "data" / "scale"))
    b.add_argument("--sites", type=int, default=700)
    b.add_argument("--recrawls", type=float, default=0.10, help="share of docs that are edited recrawls")
    b.add_argument("--copies", type=float, default=0.03, help="share of docs that are copies of a body")
    b.add_argument("--seed", type=int, default=20261123)
    b.add_argument("--level", type=int, default=3, help="zstd level")
    b.add_argument("--warc", action="append", default=[], help="also take paragraphs from this WARC (e.g. benchmarks/data/realsite/both.warc.gz)")
    r = sub.add_parser("run", help="ingest the corpus and measure each batch")
    r.add_argument("--corpus", default=str(HERE / "data" / "scale"))
    r.add_argument("--index", required=True)
    r.add_argument("--batches", type=int, choices=(1, 10), default=10)
    r.add_argument("--limit-parts", type=int, default=None, help="only the first N parts")
    r.add_argument("--results", default=str(HERE / "results"))
    r.add_argument("--plot", default=None, help="PNG path (default RESULTS/scale-<batches>.png)")
    r.add_argument("--overwrite", action="store_true", help="delete a non-empty --index first")
    r.add_argument("--settle", type=float, default=0, metavar="SECONDS",
                   help="before the first batch, wait up to this long for the machine to hand freed memory back to its "
                        "host (free page reporting), so that the first batch runs on memory like the later ones")
    r.add_argument("--control", type=int, default=0, metavar="DOCS",
                   help="after each batch, time an ingest of the first DOCS records of the first part into a fresh "
                        "index (the fastest of two; the same work every time: the machine's speed over the run), and "
                        "report each batch's time against it as well")
    r.add_argument("--ingest-args", default="", help="more options for every `neardup ingest`, e.g. '--pairs jaccard' "
                   "(settings other than the defaults: to tell which part of the work grows with the index)")
    args = ap.parse_args()
    build(args) if args.cmd == "build" else run(args)


if __name__ == "__main__":
    main()
