"""Compiled passes of the normal form (``neardup.text.normal_form``): finding the lines Python must
normalise, and putting its results in place of those lines.

A string's lines (the runs between its line feeds) are normalised one by one: NFKC never carries
anything across a line feed. ``careful_lines`` walks a chunk's UTF-8 bytes once, ASCII eight bytes
at a time, and returns the lines holding a character that Python must see (a 1 in the careful
table, ``text._computed_careful_table``, or any code point of planes 2-16). The other lines are already in
NFKC, and Arrow's lowercasing folds them as ``str.casefold`` does. ``replace_lines`` then copies
Arrow's lowercased strings with Python's result in place of each of those lines.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _code_point(data, i, b):
    """The code point whose UTF-8 starts with byte ``b >= 0x80`` at ``data[i]``, and its length."""
    if b >= 0xF0:
        return ((np.int64(b) & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12) \
            | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F), 4
    if b >= 0xE0:
        return ((np.int64(b) & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), 3
    return ((np.int64(b) & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2


@njit(cache=True, nogil=True)
def _row_lines(data, start, end, table, row, out, n):
    """``careful_lines`` of one string ``data[start:end]`` into ``out[n:]``: returns the new ``n``,
    or -1 when ``out`` has no room left (nothing of the string counts then)."""
    limit = table.size
    i = start
    counted = start  # line feeds are counted up to here
    line = 0  # ... and this is the line that starts after them
    while i < end:
        while i + 8 <= end and (data[i] | data[i + 1] | data[i + 2] | data[i + 3]
                                | data[i + 4] | data[i + 5] | data[i + 6] | data[i + 7]) < 0x80:
            i += 8
        if i >= end:
            break
        b = data[i]
        if b < 0x80:
            i += 1
            continue
        cp, ln = _code_point(data, i, b)
        if cp < limit and table[cp] == 0:
            i += ln
            continue
        s = i
        while s > start and data[s - 1] != 10:
            s -= 1
        e = i
        while e < end and data[e] != 10:
            e += 1
        for q in range(counted, s):
            line += data[q] == 10
        counted = s
        if n == out.shape[0]:
            return -1
        out[n, 0] = s
        out[n, 1] = e
        out[n, 2] = row
        out[n, 3] = line
        n += 1
        i = e
    return n


@njit(cache=True, nogil=True)
def careful_lines(data, offsets, table):
    """The lines of the strings ``data[offsets[r]:offsets[r + 1]]`` (valid UTF-8) that hold a
    character Python must normalise: ``table[cp] != 0``, or ``cp >= table.size``. Returns an
    ``(n, 4)`` array, a line a row in order: its span ``[start, end)`` in ``data`` (without its line
    feed), its string and its index among the string's lines (line feeds before it)."""
    out = np.empty((64, 4), np.int64)
    n = np.int64(0)  # np.int64, not a literal: a literal argument makes numba compile the callee once more for it
    for r in range(offsets.size - 1):
        while True:
            got = _row_lines(data, offsets[r], offsets[r + 1], table, r, out, n)
            if got >= 0:
                n = got
                break
            more = np.empty((2 * out.shape[0], 4), np.int64)
            more[:n] = out[:n]
            out = more
    return out[:n]


@njit(cache=True, nogil=True)
def replace_lines(data, offsets, rows, lines, repl, repl_offsets):
    """The strings ``data[offsets[r]:offsets[r + 1]]`` with line ``lines[k]`` of string ``rows[k]``
    replaced by ``repl[repl_offsets[k]:repl_offsets[k + 1]]`` for every k (in string, then line
    order): ``(out, out_offsets)``."""
    n_rows = offsets.size - 1
    out = np.empty(data.size + repl.size, np.uint8)
    out_offs = np.zeros(n_rows + 1, np.int64)
    o = 0
    k = 0
    for r in range(n_rows):
        s, e = offsets[r], offsets[r + 1]
        if k >= rows.size or rows[k] != r:
            out[o : o + e - s] = data[s:e]
            o += e - s
            out_offs[r + 1] = o
            continue
        p = s
        line = 0
        while True:
            q = p
            while q < e and data[q] != 10:
                q += 1
            if k < rows.size and rows[k] == r and lines[k] == line:
                a, z = repl_offsets[k], repl_offsets[k + 1]
                out[o : o + z - a] = repl[a:z]
                o += z - a
                k += 1
            else:
                out[o : o + q - p] = data[p:q]
                o += q - p
            if q >= e:
                break
            out[o] = 10
            o += 1
            p = q + 1
            line += 1
        out_offs[r + 1] = o
    return out[:o], out_offs
