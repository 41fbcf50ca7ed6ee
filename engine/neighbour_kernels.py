"""Compiled loops of the concept neighbour search (``neardup.neighbours``): a batch's sketch values
grouped in value order (``sorted_groups``) and each document's rarest
values chosen (``slot_ranks``, ``smallest_per_segment``)."""

from __future__ import annotations

import numpy as np
from numba import njit, uint64


@njit(cache=True, nogil=True)
def _mix64(x):
    """A 64-bit finaliser spreading a value over a hash table's slots (``kernels.distinct_counts``)."""
    x ^= x >> uint64(33)
    x *= uint64(0xFF51AFD7ED558CCD)
    x ^= x >> uint64(33)
    x *= uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> uint64(33)
    return x


@njit(cache=True, nogil=True)
def sorted_groups(data, order):
    """Group equal values along ``order`` (their ascending order, ``arrays.hash_order``).
    Returns ``(group of each value, each group's value ascending, how many values each group
    holds)``: the groups are numbered in value order, so a group's number is also its value's rank
    among the distinct values. Read in sorted order, the counts and keys are written in sequence,
    where a hash table (the earlier ``value_slots``) touched a table 1.5-3 times the values at random."""
    n = data.size
    slot = np.empty(n, np.int64)
    keys = np.empty(n, np.uint64)
    counts = np.empty(n, np.int64)
    g = -1
    for i in range(n):
        j = order[i]
        v = data[j]
        if g < 0 or v != keys[g]:
            g += 1
            keys[g] = v
            counts[g] = 0
        counts[g] += 1
        slot[j] = g
    return slot, keys[: g + 1].copy(), counts[: g + 1].copy()


@njit(cache=True, nogil=True)
def slot_ranks(slot, counts, frequent):
    """Per value, its slot's rank: ``frequent[s] << 40 | min(counts[s], 2**40 - 1)`` for its slot
    ``s`` (one pass and one array, where numpy's expression made five temporaries of the batch's
    size: 0.27 s -> 0.06-0.11 s for a batch of 33,000 pages, beside the other threads)."""
    out = np.empty(slot.size, np.int64)
    cap = (np.int64(1) << np.int64(40)) - np.int64(1)
    high = np.int64(1) << np.int64(40)
    for i in range(slot.size):
        s = slot[i]
        r = min(counts[s], cap)
        if frequent[s]:
            r |= high
        out[i] = r
    return out


@njit(cache=True, nogil=True)
def smallest_per_segment(rank, offs, take):
    """Per run ``offs[i]:offs[i+1]``, the positions of its ``take[i]`` smallest ``rank`` values,
    ties kept in run order (a stable sort), runs in order. Each run's selection is kept sorted as
    the run is read (an insertion into at most ``take[i]`` kept values: a document's sketch is
    about a hundred values, of which the search takes a quarter), not sorted whole."""
    total = 0
    most = 0
    for i in range(offs.size - 1):
        n = min(take[i], offs[i + 1] - offs[i])
        if n > 0:
            total += n
            most = max(most, n)
    out = np.empty(total, np.int64)
    kept = np.empty(most, rank.dtype)
    o = 0
    for i in range(offs.size - 1):
        s, e = offs[i], offs[i + 1]
        n = min(take[i], e - s)
        if n <= 0:
            continue
        m = 0
        for j in range(s, e):
            r = rank[j]
            if m == n:
                if r >= kept[n - 1]:  # an equal rank read later comes after it in a stable order
                    continue
                p = n - 1  # the largest kept (the last read of the largest) leaves
            else:
                p = m
                m += 1
            while p > 0 and kept[p - 1] > r:
                kept[p] = kept[p - 1]
                out[o + p] = out[o + p - 1]
                p -= 1
            kept[p] = r
            out[o + p] = j
        o += n
    return out
