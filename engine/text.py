"""Text extraction and normalisation, over whole Arrow arrays where it can be.

Definitions used by every later method (they are part of the fingerprint
contract: changing one changes fingerprints, so they are versioned with the
index settings):

* **text**: what is stored in ``documents.text``. For HTML, the visible text
  (``script``, ``style``, ``noscript``, ``template``, ``svg``, ``iframe``,
  ``object``, ``canvas`` and comments dropped; block elements start a new
  line; the ``<title>`` is the first line). For plain text, the text itself.
  In both, runs of horizontal white space become one space, lines are
  stripped, and empty lines are dropped.
* **normal form**: Unicode NFKC, then full case folding (``str.casefold``).
* **word**: a maximal run of characters of Unicode general category L
  (letters), M (marks) or N (digits and numerals), per the running
  Python's Unicode database, in the normal form; so Cyrillic and Latin
  alike, and ``don't`` is two words. Tokenising runs in numpy over the
  UTF-8 bytes of a whole chunk (``word_spans``).
* **sentence**: in the normal form, the words between two sentence ends,
  from the first word to the last; a sentence ends at a line break, or at
  ``.``, ``!`` or ``?`` followed by white space, a closing quote or
  bracket, or the end of the text (NFKC has made ``…`` into ``...``). See
  ``analyze``.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrays import unique


_HSPACES = r"\t\x{0b}\x{0c}\x{a0}\x{1680}\x{2000}-\x{200a}\x{202f}\x{205f}\x{3000}"

_DROP_TAGS = ["script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "canvas"]
_BLOCK_TAG_RE2 = (
    r"<(/?(?i:p|div|br|li|h[1-6]|tr|td|th|table|ul|ol|dl|dt|dd|pre|blockquote|section|article|"
    r"header|footer|nav|aside|main|hr|form|figure|figcaption|address|option|caption)\b)"
)


def mark_blocks(html: pa.Array) -> pa.Array:
    """Put a line break before every block-level tag, over a whole array (RE2, no GIL)."""
    return pc.replace_substring_regex(html, _BLOCK_TAG_RE2, "\n<\\1")


@functools.cache
def _lexbor():
    """selectolax's parser class, imported on first use: for HTML input only (3.5 ms), and once,
    not at each document's ``html_to_text``."""
    from selectolax.lexbor import LexborHTMLParser

    return LexborHTMLParser


def html_to_text(html: str, blocks_marked: bool = False) -> str:
    """Visible text of an HTML document (see the module docstring); not yet white-space cleaned.

    Pass ``blocks_marked=True`` for documents already run through ``mark_blocks``.
    """
    if not blocks_marked:
        html = mark_blocks(pa.array([html], pa.large_string()))[0].as_py()
    tree = _lexbor()(html)
    tree.strip_tags(_DROP_TAGS)
    title_node = tree.css_first("title")
    title = title_node.text(deep=True, separator="") if title_node is not None else ""
    body = tree.body
    if body is None:
        root = tree.root
        text = root.text(deep=True, separator="") if root is not None else ""
        return text
    return f"{title}\n{body.text(deep=True, separator='')}"


def clean_whitespace(texts: pa.Array) -> pa.Array:
    r"""Collapse horizontal white space, strip lines, drop empty lines.

    Defined by three RE2 replacements and a trim: ``\r\n?`` by ``\n``; a run
    of two or more spaces and ``_HSPACES``, or one of ``_HSPACES``, by one
    space; `` ?\n[\s]*`` by ``\n``; then Arrow's ``utf8_trim_whitespace``.
    The first three amount to: each maximal run of those characters, CR and
    LF as one line break if it holds a CR or LF, else as one space. That is
    what the compiled ``kernels.collapse_space`` does, in one pass over the
    bytes (a property test checks it against the three replacements).
    """
    from . import kernels

    texts = texts if pa.types.is_large_string(texts.type) else texts.cast(pa.large_string())
    if len(texts) == 0:
        return pc.utf8_trim_whitespace(texts)
    validity, offsets, data = texts.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64, count=len(texts) + 1, offset=texts.offset * 8)
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    out = np.empty(int(offsets[-1] - offsets[0]), dtype=np.uint8)
    out_offsets = np.empty(len(texts) + 1, dtype=np.int64)
    w = kernels.collapse_space(raw, offsets, out, out_offsets)
    valid = texts.is_valid().buffers()[1] if texts.null_count else None
    collapsed = pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(out_offsets), pa.py_buffer(out[:w]), valid)
    return pc.utf8_trim_whitespace(collapsed)


def normal_form(texts: pa.Array) -> pa.Array:
    """NFKC plus full Unicode case folding of every string (nulls stay null).

    Python's ``unicodedata.normalize("NFKC", s)`` and ``str.casefold`` define
    the result; Python computes it only for the lines that need it. Pure-ASCII
    strings (NFKC leaves them alone and folding is lowercasing) are lowered by
    Arrow. So are the lines of the other strings without a character of
    ``_careful_table`` (or of planes 2-16): such a line is already in NFKC
    (``_nfkc_changeable``) and Arrow's per-character lowercasing folds it as
    ``casefold`` does (``_fold_differs_cps``). The strings are cut at their line
    breaks, which NFKC never carries anything across (a line feed is a starter
    that composes with nothing, and case folding looks at one character at a
    time), and only the lines with such a character go through Python: they
    are found by one compiled pass (``fold_kernels.careful_lines``) and put in
    place of their lowercased lines by another (``fold_kernels.replace_lines``).
    """
    texts = texts if pa.types.is_large_string(texts.type) else texts.cast(pa.large_string())
    ascii_rows = pc.fill_null(pc.string_is_ascii(texts), True)
    if pc.all(ascii_rows).as_py():
        return pc.ascii_lower(texts)
    from . import fold_kernels

    data, offs = _utf8(texts)
    careful = fold_kernels.careful_lines(data, offs, _careful_table())
    lowered = pc.utf8_lower(texts)
    if careful.shape[0] == 0:
        return lowered
    done = [unicodedata.normalize("NFKC", bytes(data[s:e]).decode("utf-8")).casefold().encode("utf-8")
            for s, e in careful[:, :2].tolist()]
    r_offs = np.zeros(len(done) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, done), np.int64, count=len(done)), out=r_offs[1:])
    lo_data, lo_offs = _utf8(lowered)
    out, out_offs = fold_kernels.replace_lines(lo_data, lo_offs, np.ascontiguousarray(careful[:, 2]),
                                               np.ascontiguousarray(careful[:, 3]), np.frombuffer(b"".join(done), np.uint8), r_offs)
    valid = pa.array(texts.is_valid().to_numpy(zero_copy_only=False)).buffers()[1] if texts.null_count else None
    return pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(out_offs), pa.py_buffer(out), valid)


#: code points 0x20000 and up count as needing Python (planes 2-16: CJK compatibility
#: ideographs, which NFKC maps, and no cased script); the tables below cover planes 0 and 1
_PLANES_CHECKED = 0x20000


def _checked_code_points(first: int = 0x80) -> list[int]:
    """The code points from ``first`` of planes 0 and 1, surrogates left out."""
    return np.r_[first:0xD800, 0xE000:_PLANES_CHECKED].tolist()


@functools.cache
def _nfkc_changeable() -> list[int]:
    """The non-ASCII code points of planes 0 and 1 that NFKC may change in some string: those it
    changes alone (``NFKC_QC=No``), those of nonzero combining class (reordered), and those that
    may compose with a character before them (``NFKC_QC=Maybe``: the second character of every
    two-character canonical decomposition, and Hangul medial vowels and final consonants). A
    string of other characters only passes the quick check of UAX #15 with "yes": it is in NFKC."""
    cps = _checked_code_points()
    sep = "\n"  # a line feed: NFKC changes nothing across it (see normal_form)
    alone = unicodedata.normalize("NFKC", sep.join(map(chr, cps))).split(sep)
    assert len(alone) == len(cps)  # no mapping holds a line feed
    out = {c for c, n in zip(cps, alone) if n != chr(c) or unicodedata.combining(chr(c))}
    for c in cps:
        d = unicodedata.decomposition(chr(c)).split()
        if len(d) == 2 and not d[0].startswith("<"):
            out.add(int(d[1], 16))
    out.update(range(0x1161, 0x1176))  # Hangul vowels (V), composed after a leading consonant
    out.update(range(0x11A8, 0x11C3))  # Hangul final consonants (T), composed after an LV syllable
    return sorted(c for c in out if c >= 0x80)


def _computed_careful_table() -> np.ndarray:
    """Per code point of planes 0 and 1 (uint8): 1 for those whose lines ``normal_form`` leaves
    to Python, the ones NFKC may change (``_nfkc_changeable``) and those ``str.casefold`` maps
    otherwise than Arrow's ``utf8_lower`` (``_fold_differs_cps``); every code point of planes 2-16
    counts as 1 too (``fold_kernels.careful_lines``)."""
    table = np.zeros(_PLANES_CHECKED, np.uint8)
    table[sorted(set(_nfkc_changeable()) | set(_fold_differs_cps()))] = 1
    return table


#: code points of the word table
_CODE_POINTS = 0x110000


@functools.cache
def _tables() -> dict[str, np.ndarray]:
    """The word table (bits) and the careful table, from ``tablecache``'s file or computed."""
    from . import tablecache

    def check(t: dict[str, np.ndarray]) -> bool:
        words, careful = t.get("words"), t.get("careful")
        return (words is not None and words.dtype == np.uint8 and words.shape == (_CODE_POINTS // 8,)
                and careful is not None and careful.dtype == np.uint8 and careful.shape == (_PLANES_CHECKED,))

    return tablecache.cached(
        "text",
        lambda: {"words": np.packbits(_computed_word_table()), "careful": _computed_careful_table()},
        check,
    )


@functools.cache
def _careful_table() -> np.ndarray:
    """Code point (planes 0 and 1) -> 1 where its line goes to Python in ``normal_form``
    (``_computed_careful_table``, kept between processes by ``tablecache``)."""
    return _tables()["careful"]


@functools.cache
def _fold_differs_cps() -> list[int]:
    """The code points of planes 0 and 1 whose ``str.casefold`` differs from Arrow's ``utf8_lower``.

    Both map each character on its own (neither looks at context), so a
    string without any of these (or of planes 2-16) folds the same either way.
    """
    cps = _checked_code_points(1)
    joined = "\0".join(map(chr, cps))
    by_arrow = pc.utf8_lower(pa.array([joined], pa.large_string()))[0].as_py().split("\0")
    by_python = joined.casefold().split("\0")
    return [c for c, a, b in zip(cps, by_arrow, by_python) if a != b]


def _utf8(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes and int64 offsets (starting at 0) of a string array; nulls read as ""."""
    a = strings.fill_null("") if strings.null_count else strings
    if not pa.types.is_large_string(a.type):
        a = a.cast(pa.large_string())
    _, obuf, dbuf = a.buffers()
    offs = np.frombuffer(obuf, dtype=np.int64)[a.offset : a.offset + len(a) + 1]
    data = np.frombuffer(dbuf, dtype=np.uint8) if dbuf is not None else np.empty(0, np.uint8)
    data = data[offs[0] : offs[-1]] if len(offs) else data[:0]
    return data, (offs - offs[0]) if len(offs) else np.zeros(1, np.int64)


@functools.cache
def _word_table() -> np.ndarray:
    """Code point -> is a word character (``_computed_word_table``, kept between processes by
    ``tablecache``)."""
    return np.unpackbits(_tables()["words"]).view(bool)


def _computed_word_table() -> np.ndarray:
    """Code point -> is a word character (general category L*, M* or N*).

    Built from the running Python's Unicode database, over the planes that
    hold letters, marks or digits: 0-3 and, in plane 14, the variation
    selectors U+E0100-U+E01EF (marks); the rest is private use, tags and
    unassigned.
    """
    t = np.zeros(_CODE_POINTS, dtype=bool)
    for lo, hi in ((0, 0x32400), (0xE0000, 0xE1000)):
        t[lo:hi] = np.fromiter((unicodedata.category(chr(c))[0] in "LMN" for c in range(lo, hi)), dtype=bool, count=hi - lo)
    return t


@functools.cache
def _ascii_table() -> np.ndarray:
    t = np.zeros(256, dtype=bool)
    t[:128] = _word_table()[:128]
    return t


def _byte_is_word(data: np.ndarray) -> np.ndarray:
    """Per UTF-8 byte: does it belong to a word character (continuation bytes follow their lead)."""
    isw = _ascii_table()[data]
    lead = np.flatnonzero(data >= 0xC0)
    if lead.size:
        n = data.size
        b0 = data[lead].astype(np.int32)
        nbytes = 2 + (b0 >= 0xE0) + (b0 >= 0xF0)
        b1 = (data[np.minimum(lead + 1, n - 1)] & 0x3F).astype(np.int32)
        b2 = (data[np.minimum(lead + 2, n - 1)] & 0x3F).astype(np.int32)
        b3 = (data[np.minimum(lead + 3, n - 1)] & 0x3F).astype(np.int32)
        cp = np.where(
            nbytes == 4,
            ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3,
            np.where(nbytes == 3, ((b0 & 0x0F) << 12) | (b1 << 6) | b2, ((b0 & 0x1F) << 6) | b1),
        )
        w = _word_table()[cp]
        isw[lead] = w
        for k in (1, 2, 3):  # continuation bytes take their lead's class
            more = nbytes > k
            isw[lead[more] + k] = w[more]
    return isw


def word_spans(normal: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tokenise a whole array at once, in numpy over its UTF-8 bytes.

    Returns ``(data, in_word, starts, ends, counts)``: the concatenated UTF-8
    bytes, a mask of the bytes that belong to words, the byte span
    ``[starts[i], ends[i])`` of every word in order, and the number of words
    of each string. Cost: a dozen passes over the bytes.
    """
    data, offs = _utf8(normal)
    counts = np.zeros(len(offs) - 1, dtype=np.int64)
    if data.size == 0:
        e = np.empty(0, np.int64)
        return data, np.zeros(0, bool), e, e, counts
    isw = _byte_is_word(data)
    # runs of word bytes: their edges alternate start, end, start, ...
    edges = np.flatnonzero(isw[1:] != isw[:-1]) + 1
    if isw[0]:
        edges = np.concatenate([[0], edges])
    if isw[-1]:
        edges = np.concatenate([edges, [data.size]])
    # a word never runs across two strings: split runs at string boundaries inside them
    inner = offs[1:-1]
    inner = unique(inner[(inner > 0) & (inner < data.size)])
    cut = inner[isw[inner - 1] & isw[inner]]
    if cut.size:
        edges = np.sort(np.concatenate([edges, cut, cut]), kind="stable")
    starts, ends = edges[0::2], edges[1::2]
    counts = np.diff(np.searchsorted(starts, offs))
    return data, isw, starts, ends, counts


def words(normal: pa.Array) -> pa.ListArray:
    """Word lists of normal-form strings: a ListArray aligned with the input."""
    data, in_word, starts, ends, counts = word_spans(normal)
    woffs = np.zeros(starts.size + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=woffs[1:])
    word_bytes = data[in_word]  # words are maximal runs, so these are exactly their bytes, in order
    flat = pa.LargeStringArray.from_buffers(starts.size, pa.py_buffer(woffs), pa.py_buffer(word_bytes.tobytes()))
    loffs = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=loffs[1:])
    return pa.LargeListArray.from_arrays(pa.array(loffs), flat)


def count_words(normal: pa.Array) -> np.ndarray:
    """Number of words per normal-form string (int32)."""
    return word_spans(normal)[4].astype(np.int32)


_ASCII_SPACE = np.zeros(256, dtype=bool)
_ASCII_SPACE[[9, 10, 11, 12, 13, 32]] = True
_TERMINATOR = np.zeros(256, dtype=bool)
_TERMINATOR[[ord("."), ord("!"), ord("?")]] = True


@dataclass(eq=False)
class Analysis:
    """Words and sentences of a whole array of normal-form strings, as byte spans.

    ``data``: the concatenated UTF-8 bytes; ``offsets``: string i is
    ``data[offsets[i]:offsets[i+1]]``; word j is ``data[word_starts[j]:word_ends[j]]``;
    ``word_counts[i]`` words belong to string i (in order); ``sentence_first[k]``
    is the index of the first word of sentence k; ``sentence_counts[i]``
    sentences belong to string i. The three span arrays are made on first use
    when ``analyze`` was told the caller only needs counts and hashes.
    """

    data: np.ndarray
    offsets: np.ndarray
    word_counts: np.ndarray
    sentence_counts: np.ndarray
    #: XXH64 (seeded) of every word's UTF-8 bytes, when computed by ``analyze``
    word_hashes: np.ndarray | None = None
    seed: int | None = None
    #: ``(word_starts, word_ends, sentence_first)``, or None until first needed
    spans: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.spans is None:
            from . import kernels

            starts, ends, _, _, first, _ = kernels.tokenize(self.data, self.offsets, _word_table(), np.uint64(self.seed or 0), True)
            self.spans = (starts, ends, first)
        return self.spans

    @property
    def word_starts(self) -> np.ndarray:
        return self._spans()[0]

    @property
    def word_ends(self) -> np.ndarray:
        return self._spans()[1]

    @property
    def sentence_first(self) -> np.ndarray:
        return self._spans()[2]

    @functools.cached_property
    def in_word(self) -> np.ndarray:
        """Mask of the bytes that belong to words."""
        from . import kernels

        return kernels.span_mask(self.data.size, self.word_starts, self.word_ends)


_CLOSERS = [b'"', b"'", b")", b"]", "»".encode(), "”".encode(), "’".encode()]


def analyze(normal: pa.Array, seed: int = 0, spans: bool = True) -> Analysis:
    """Words, sentences and word hashes of normal-form strings, in one compiled pass
    (``neardup.kernels.tokenize``); ``analyze_reference`` is the same in numpy and defines it.

    ``spans=False`` skips the word and sentence positions (counts and hashes
    only, about a fifth faster); they are then made on first use."""
    from . import kernels

    data, offs = _utf8(normal)
    starts, ends, hashes, counts, first, sent_counts = kernels.tokenize(data, offs, _word_table(), np.uint64(seed), spans)
    return Analysis(data, offs, counts, sent_counts, hashes, seed, (starts, ends, first) if spans else None)


def analyze_reference(normal: pa.Array) -> Analysis:
    """Tokenise words and split sentences of normal-form strings in one pass set.

    A sentence ends at a line break, or at a ``.``/``!``/``?`` followed by white
    space, a closing quote or bracket, or the end of the string (so ``3.11``
    does not end one; NFKC has already turned ``…`` into ``...``). A sentence
    runs from its first word to its last word.
    """
    data, in_word, starts, ends, counts = word_spans(normal)
    _, offs = _utf8(normal)
    n_words = starts.size
    new = np.zeros(n_words, dtype=bool)
    if n_words:
        term = np.flatnonzero(_TERMINATOR[data])
        # a terminator ends a sentence when white space, a closer or the string's end follows
        ok = np.zeros(term.size, dtype=bool)
        last = np.searchsorted(offs, term, side="right")  # 1 + index of the string holding it
        ok |= term + 1 == offs[last]
        inside = term + 1 < data.size
        nxt = term[inside] + 1
        ok[inside] |= _ASCII_SPACE[data[nxt]]
        for c in _CLOSERS:
            hit = np.ones(nxt.size, dtype=bool)
            for j, byte in enumerate(c):
                pos = np.minimum(nxt + j, data.size - 1)
                hit &= (data[pos] == byte) & (nxt + j < data.size)
            ok[inside] |= hit
        bpos = np.concatenate([term[ok], np.flatnonzero(data == 10)])
        # each sentence end makes the next word (if any) start a sentence
        k = np.searchsorted(starts, bpos, side="right")
        new[k[k < n_words]] = True
        loffs = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=loffs[1:])
        new[loffs[:-1][counts > 0]] = True  # the first word of a string starts a sentence
        cs = np.zeros(n_words + 1, dtype=np.int64)
        np.cumsum(new, out=cs[1:])
        sent_counts = cs[loffs[1:]] - cs[loffs[:-1]]
    else:
        sent_counts = np.zeros(counts.size, dtype=np.int64)
    return Analysis(data, offs, counts, sent_counts, spans=(starts, ends, np.flatnonzero(new)))


def sentences(normal: pa.Array) -> pa.ListArray:
    """Sentence lists of normal-form strings (see ``analyze``), aligned with the input."""
    a = analyze(normal)
    first = a.sentence_first
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    if first.size:
        last[-1] = a.word_starts.size - 1
    s_start, s_end = a.word_starts[first], a.word_ends[last]
    mark = np.zeros(a.data.size + 1, dtype=np.int64)
    mark[s_start] += 1  # spans are disjoint and ordered: indices are unique
    mark[s_end] -= 1
    inside = np.cumsum(mark[:-1]) > 0
    soffs = np.zeros(first.size + 1, dtype=np.int64)
    np.cumsum(s_end - s_start, out=soffs[1:])
    flat = pa.LargeStringArray.from_buffers(first.size, pa.py_buffer(soffs), pa.py_buffer(a.data[inside].tobytes()))
    loffs = np.zeros(a.sentence_counts.size + 1, dtype=np.int64)
    np.cumsum(a.sentence_counts, out=loffs[1:])
    return pa.LargeListArray.from_arrays(pa.array(loffs), flat)


def count_sentences(normal: pa.Array) -> np.ndarray:
    """Number of sentences per normal-form string (int32)."""
    return analyze(normal).sentence_counts.astype(np.int32)
