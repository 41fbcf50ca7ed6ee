"""The edits ``neardup generate`` makes to a text, and its seeded random choices.

A text is a list of paragraphs, each a list of words (``generate.canonical``).
Every choice comes from ``_Rng``, which uses only ``random()`` of
``random.Random`` (a sequence Python keeps stable across versions).
"""

from __future__ import annotations

import html
import random
import re
from collections.abc import Sequence

#: the kinds of variant a generated corpus draws from (``neardup.generate``)
KINDS = ("exact", "edit", "reorder", "boilerplate")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


class _Rng:
    """Random choices built on ``random()`` only (stable across Python versions), seeded by a key."""

    def __init__(self, *key: object):
        self._r = random.Random(":".join(str(k) for k in key))

    def random(self) -> float:
        return self._r.random()

    def below(self, n: int) -> int:
        return min(int(self._r.random() * n), n - 1)

    def between(self, lo: int, hi: int) -> int:
        return lo + self.below(hi - lo + 1)

    def uniform(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * self._r.random()

    def pick(self, items: Sequence):
        return items[self.below(len(items))]

    def shuffle(self, items: list) -> None:
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


def edit(lines: list[list[str]], n: int, rng: _Rng, vocabulary: Sequence[str]) -> tuple[list[list[str]], list[dict]]:
    """``n`` random word insertions, deletions and substitutions; returns the text and the edits
    (``line``/``word`` are positions in the text as it was when that edit was made)."""
    lines = [list(ws) for ws in lines]
    ops = []
    for _ in range(n):
        op = rng.pick(("insert", "delete", "substitute"))
        sizes = [len(ws) for ws in lines]
        pos = rng.below(sum(sizes) + (op == "insert"))
        li = 0  # an insertion may also go after a paragraph's last word
        while li < len(lines) - 1 and pos >= sizes[li] + (op == "insert"):
            pos -= sizes[li]
            li += 1
        ws = lines[li]
        if op == "delete" and len(ws) == 1:
            op = "substitute"  # never empty a paragraph
        if op == "insert":
            word = rng.pick(vocabulary)
            ws.insert(pos, word)
            ops.append({"op": "insert", "line": li, "word": pos, "new": word})
        elif op == "delete":
            ops.append({"op": "delete", "line": li, "word": pos, "old": ws.pop(pos)})
        else:
            word = rng.pick(vocabulary)
            while word == ws[pos] and len(vocabulary) > 1:
                word = rng.pick(vocabulary)
            ops.append({"op": "substitute", "line": li, "word": pos, "old": ws[pos], "new": word})
            ws[pos] = word
    return lines, ops


def _sentences(ws: list[str]) -> list[list[str]]:
    return [s.split(" ") for s in _SENTENCE_END.split(" ".join(ws))]


def can_reorder(lines: list[list[str]]) -> bool:
    return len(lines) >= 2 or len(_sentences(lines[0])) >= 2


def reorder(lines: list[list[str]], rng: _Rng) -> tuple[list[list[str]], list[dict]]:
    """Two paragraphs swapped; a one-paragraph text swaps two of its sentences instead."""
    unit, blocks = ("paragraph", [list(ws) for ws in lines]) if len(lines) >= 2 else ("sentence", _sentences(lines[0]))
    i = rng.below(len(blocks))
    j = rng.below(len(blocks) - 1)
    j += j >= i
    i, j = min(i, j), max(i, j)
    blocks[i], blocks[j] = blocks[j], blocks[i]
    out = blocks if unit == "paragraph" else [[w for s in blocks for w in s]]
    return out, [{"op": "swap", "unit": unit, "i": i, "j": j}]


def frame_lines(words: list[str], header: int, footer: int) -> tuple[list[str], list[str]]:
    return words[:header], words[header : header + footer]




def html_page(lines: list[list[str]], frame: tuple[int, int] = (0, 0)) -> str:
    """A text as an HTML page: its first ``frame[0]`` and last ``frame[1]`` paragraphs as the site's
    navigation header (one link per 4 words) and footer, the others as the paragraphs of
    ``<main><article>``. Its visible text holds the text's words in the same order."""
    head, body, foot = lines[: frame[0]], lines[frame[0] : len(lines) - frame[1]], lines[len(lines) - frame[1] :]
    esc = html.escape
    parts = ['<!doctype html>\n<html><head><meta charset="utf-8"></head><body>']
    words = [w for ws in head for w in ws]
    if words:
        links = "".join(f'<li><a href="#">{esc(" ".join(words[i : i + 4]))}</a></li>' for i in range(0, len(words), 4))
        parts.append(f"<header><nav><ul>{links}</ul></nav></header>")
    parts.append("<main><article>" + "".join(f"<p>{esc(' '.join(ws))}</p>" for ws in body) + "</article></main>")
    if any(foot):
        parts.append("<footer>" + "".join(f"<p>{esc(' '.join(ws))}</p>" for ws in foot) + "</footer>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
