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
* **word**: a maximal run of Unicode letters, marks and digits
  (``[\\p{L}\\p{M}\\p{N}]+``) in the normal form; so Cyrillic and Latin alike,
  and ``don't`` is two words.
* **sentence**: a piece of the text ended by ``.``, ``!``, ``?`` or ``…``
  followed by white space, or by a line break, holding at least one word.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from selectolax.lexbor import LexborHTMLParser

WORD_RE2 = r"[\p{L}\p{M}\p{N}]+"
NON_WORD_RE2 = r"[^\p{L}\p{M}\p{N}]+"
SENTENCE_END_RE2 = r"(?:[.!?…]+(?:\s+|$))|\n+"

_DROP_TAGS = ["script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "canvas"]
_BLOCK = re.compile(
    r"<(?=/?(?:p|div|br|li|h[1-6]|tr|td|th|table|ul|ol|dl|dt|dd|pre|blockquote|section|article|"
    r"header|footer|nav|aside|main|hr|form|figure|figcaption|address|option|caption)\b)",
    re.IGNORECASE,
)


def html_to_text(html: str) -> str:
    """Visible text of an HTML document (see the module docstring); not yet white-space cleaned."""
    tree = LexborHTMLParser(_BLOCK.sub("\n<", html))
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
    """Collapse horizontal white space, strip lines, drop empty lines (vectorised)."""
    t = pc.replace_substring_regex(texts, r"\r\n?", "\n")
    t = pc.replace_substring_regex(t, r"[^\S\n]+", " ")
    t = pc.replace_substring_regex(t, r" ?\n[\s]*", "\n")
    return pc.utf8_trim_whitespace(t)


def normal_form(texts: pa.Array) -> pa.Array:
    """NFKC plus full Unicode case folding of every string (nulls stay null)."""
    out = [None if s is None else unicodedata.normalize("NFKC", s).casefold() for s in texts.to_pylist()]
    return pa.array(out, type=pa.large_string())


def words(normal: pa.Array) -> pa.ListArray:
    """Word lists of normal-form strings: a ListArray aligned with the input."""
    parts = pc.split_pattern_regex(normal, NON_WORD_RE2)
    flat = parts.flatten()
    keep = pc.not_equal(pc.utf8_length(flat), 0)
    counts = _count_per_list(parts, keep)
    offsets = np.zeros(len(parts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(keep))


def count_words(texts: pa.Array) -> np.ndarray:
    """Number of words per string (int32); works on raw or normal-form text alike.

    Folding never merges or splits letter/digit runs for the scripts we read,
    so the count on raw text equals the count on its normal form.
    """
    return _as_int32(pc.count_substring_regex(texts, WORD_RE2))


def sentences(texts: pa.Array) -> pa.ListArray:
    """Sentence lists (pieces holding at least one word), aligned with the input."""
    parts = pc.split_pattern_regex(texts, SENTENCE_END_RE2)
    flat = pc.utf8_trim_whitespace(parts.flatten())
    keep = pc.match_substring_regex(flat, WORD_RE2)
    counts = _count_per_list(parts, keep)
    offsets = np.zeros(len(parts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(keep))


def count_sentences(texts: pa.Array) -> np.ndarray:
    """Number of sentences per string (int32)."""
    parts = pc.split_pattern_regex(texts, SENTENCE_END_RE2)
    keep = pc.match_substring_regex(parts.flatten(), WORD_RE2)
    return _count_per_list(parts, keep).astype(np.int32)


def _count_per_list(lists: pa.ListArray, keep: pa.Array) -> np.ndarray:
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    mask = keep.to_numpy(zero_copy_only=False)
    return np.bincount(parents[mask], minlength=len(lists))


def _as_int32(arr: pa.Array) -> np.ndarray:
    return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)
