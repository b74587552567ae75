"""Runs two index lists share, stacked per place in the pattern they repeat.

Where a block's rows cross another layout's tiles, a move's runs come in a pattern of lengths
and steps that repeats every row, so neither side splits into pieces of one shape
(layouts/strided.py), yet the runs at one place of the pattern stack into one strided copy.
"""

from __future__ import annotations

import numpy as np

MAX_PERIOD = 64  # joint runs are stacked in up to this many interleaved classes


def joint_stacks(
    a: np.ndarray, b: np.ndarray, min_piece: int, min_run: int, max_runs: int
) -> list | None:
    """(shape, start, strides, its start, its strides) in elements for each stack copying
    ``a``'s positions to ``b``'s, from the runs the two share (cut where either side's run
    ends); None where there are fewer than ``min_piece`` elements, runs shorter than
    ``min_run`` on average, ``max_runs`` runs or more, or stacks shorter than ``min_piece``
    on average. A tile column of block-cyclic:64 into a block 342 wide whose rows hold 20 of
    one tile and 64 of the next (8192 x 1024 over 3 x 3 ranks) is runs of 20 and 64 in turn,
    each a stack of its own. So the runs are split into p classes (run k in class k mod p),
    for the period p up to MAX_PERIOD at which the pattern repeats best; stacks of different
    classes interleave, which a copy from ``a`` to ``b`` does not mind."""
    n = a.size
    if n < min_piece:
        return None
    first = np.flatnonzero((np.diff(a) != 1) | (np.diff(b) != 1)) + 1
    if n < min_run * (first.size + 1) or first.size >= max_runs:
        return None
    first = np.concatenate(([0], first))
    runs = a[first], b[first], np.diff(np.append(first, n))
    p = _period(*runs)
    stacks = [s for j in range(p) for s in _stack_jointly(*(r[j::p].tolist() for r in runs))]
    return None if len(stacks) * min_piece > n else stacks


def _period(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> int:
    """The period p (up to MAX_PERIOD) whose classes make the fewest stacks, counted as p
    plus the runs where the pattern does not repeat p runs on (another length, or another
    step to the next run on either side); the smallest such p."""
    m = lengths.size
    step, to_step = np.diff(a), np.diff(b)
    best, least = 1, m + 1
    for p in range(1, min(MAX_PERIOD, m - 1) + 1):
        if p >= least:
            break
        breaks = np.count_nonzero(lengths[p:] != lengths[:-p]) + np.count_nonzero(
            (step[p:] != step[:-p]) | (to_step[p:] != to_step[:-p])
        )
        if p + breaks < least:
            best, least = p, p + breaks
    return best


def _stack_jointly(a: list, b: list, lengths: list) -> list:
    """Runs ``a[k]`` -> ``b[k]`` of ``lengths[k]`` elements, consecutive ones of one length
    at one step on both sides stacked (greedy, in order): (shape, start, strides, its start,
    its strides) in elements."""
    out, i, m = [], 0, len(a)
    while i < m:
        j, n = i + 1, lengths[i]
        if j < m and lengths[j] == n:
            step, to_step = a[j] - a[i], b[j] - b[i]
            while (
                j + 1 < m
                and lengths[j + 1] == n
                and a[j + 1] - a[j] == step
                and b[j + 1] - b[j] == to_step
            ):
                j += 1
            j += 1
            out.append(((j - i, n), a[i], (step, 1), b[i], (to_step, 1)))
        else:
            out.append(((n,), a[i], (1,), b[i], (1,)))
        i = j
    return out


__all__ = ["MAX_PERIOD", "joint_stacks"]
