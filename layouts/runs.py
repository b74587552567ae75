"""Runs of consecutive flat positions: what the index of a move's elements is made of.

A move lists the positions of a block it sends, receives or keeps in an order (by peer, each in
row-major order); those positions come in runs, a stretch of a block row each
(layouts/transfer.py). Kept as (starts, lengths), a few per block row, instead of one integer
per element, they cost a pass over the runs where the integers cost several over the elements
(calibrate's moves at 16 ranks of 16 MiB each: 4 million positions a rank, 1 to 61 440 runs),
and an index spelled out element by element is needed only where a copy has no strided
structure to follow (layouts.strided.IndexCopy.index).
"""

from __future__ import annotations

import numpy as np


def of_index(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The maximal runs of ``index`` (a 1-D int64 array), in order."""
    if not index.size:
        return index[:0], index[:0]
    first = np.concatenate(([0], np.flatnonzero(np.diff(index) != 1) + 1))
    return index[first], np.diff(np.append(first, index.size))


def merged(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs with neighbours that continue each other joined and empty ones left out:
    the maximal runs of the positions they list."""
    if not (lengths > 0).all():
        starts, lengths = starts[lengths > 0], lengths[lengths > 0]
    if starts.size < 2:
        return starts, lengths
    new = np.append(True, starts[1:] != starts[:-1] + lengths[:-1])
    if new.all():
        return starts, lengths
    first = np.flatnonzero(new)
    return starts[first], np.add.reduceat(lengths, first)


def cut_at_rows(starts: np.ndarray, lengths: np.ndarray, row: int) -> tuple[np.ndarray, np.ndarray]:
    """The runs, each that is not whole rows of a block ``row`` long cut at every row start
    inside it (see layouts.strided._pieces for why)."""
    whole = (starts % row == 0) & (lengths % row == 0)
    end = starts + lengths
    first_cut = (starts // row + 1) * row  # the first row start after each run's start
    cuts = np.where(whole, 0, np.maximum((end - 1 - first_cut) // row + 1, 0))
    if not cuts.any():
        return starts, lengths
    k = np.repeat(np.arange(starts.size), cuts + 1)  # the run each new run comes from
    j = np.arange(k.size) - np.repeat(np.cumsum(cuts) - cuts + np.arange(cuts.size), cuts + 1)
    new_start = np.where(j == 0, starts[k], first_cut[k] + (j - 1) * row)
    new_end = np.where(j == cuts[k], end[k], first_cut[k] + j * row)
    return new_start, new_end - new_start


def window(
    starts: np.ndarray, lengths: np.ndarray, lo: int, hi: int, ends: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The runs of positions ``lo`` .. ``hi`` of the list (its elements in order); ``ends``:
    ``np.cumsum(lengths)``, given where many windows of one list are taken."""
    ends = np.cumsum(lengths) if ends is None else ends
    a = int(np.searchsorted(ends, lo, side="right"))
    b = int(np.searchsorted(ends, hi, side="left")) + 1  # the run holding hi - 1, and on
    b = min(b, ends.size) if hi > lo else a
    s, n = starts[a:b].copy(), lengths[a:b].copy()
    if s.size:
        cut = lo - (ends[a] - lengths[a])
        s[0] += cut
        n[0] -= cut
        n[-1] -= ends[b - 1] - hi
    return s, n


def one_run_each(lengths: np.ndarray, begins, counts) -> bool:
    """Whether each part (``begins[i]`` .. + ``counts[i]`` of the list; empty ones aside) lies
    in one run: no run starts inside it."""
    first = np.cumsum(lengths) - lengths  # where each run starts in the list
    lo, n = np.asarray(begins, np.int64), np.asarray(counts, np.int64)
    inside = np.searchsorted(first, lo + n, side="left") - np.searchsorted(first, lo, "right")
    return bool((inside[n > 0] == 0).all())


def at(starts: np.ndarray, lengths: np.ndarray, offsets, counts) -> np.ndarray:
    """The position ``offsets[i]`` elements into the list, for each part i of ``counts[i]``
    elements that is not empty (0 for an empty one)."""
    offsets, counts = np.asarray(offsets, np.int64), np.asarray(counts, np.int64)
    if not starts.size:
        return np.zeros(offsets.size, np.int64)
    ends = np.cumsum(lengths)
    k = np.minimum(np.searchsorted(ends, offsets, side="right"), ends.size - 1)
    return np.where(counts > 0, starts[k] + offsets - (ends[k] - lengths[k]), 0)


def spelled(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Every position the runs list, in order."""
    if lengths.size == 0 or (lengths == lengths[0]).all():  # one length: rows of a table
        n = int(lengths[0]) if lengths.size else 0
        return np.add.outer(starts, np.arange(n, dtype=np.int64)).ravel()
    # each position's step from the one before it: a run of ones after each run's first
    step = np.ones(int(lengths.sum()), np.int64)
    ends = np.cumsum(lengths)[:-1]
    step[0] = starts[0]
    step[ends] = starts[1:] - (starts[:-1] + lengths[:-1] - 1)
    return np.cumsum(step, out=step)


__all__ = ["at", "cut_at_rows", "merged", "of_index", "one_run_each", "spelled", "window"]
