"""Residues in the counting (layouts/counting.py): their sums over dimensions, and one key per
window of Time chunks sharing holders, not one per chunk.

An element's residue (its Time chunk, less the rotation of its split coordinates) is the sum of
every dimension's residue part modulo the layout's chunks, and its holders are a row of the
placement chosen by it. In T10 layouts a window of consecutive chunks shares one row: B into
T10 F_op 2x64x64 from cols at 8192 ranks has 64 chunks in two windows, and counting chunk by
chunk made 33.5 million keys of the 1.05 million rank pairs they are, each 32 times over. Here
the first dimension's rows (where T10 puts its Time axis) are summed per residue into a
histogram, and each of the other dimensions' rows takes the histogram's sum over each window
that its own residue part shifts it into: the same pairs and the same element and run counts,
summed over the chunks of a window. Only where one of the two layouts has such windows and the
other's residues are all 0 (from or into a user's layout); elsewhere nothing changes.
"""

from __future__ import annotations

import numpy as np

from .redistribute import Placement


def residue_sums(first: np.ndarray, rest: np.ndarray, n_time: int) -> np.ndarray:
    """The residue parts of ``first`` and ``rest`` summed (np.add.outer, raveled) modulo the
    layout's time chunks; where there is one chunk (most layouts), zeros: a read-only broadcast,
    nothing summed."""
    if n_time == 1:
        return np.broadcast_to(np.zeros(1, np.int64), (first.size * rest.size,))
    parts = np.add.outer(first, rest).ravel()
    if n_time & (n_time - 1) == 0:  # a power of two (T10's Time axes): a mask, not a division
        return np.bitwise_and(parts, n_time - 1, out=parts)
    return np.remainder(parts, n_time, out=parts)


def windows(place: Placement) -> tuple[np.ndarray, np.ndarray] | None:
    """(window, rep): each residue's window and each window's lowest residue, where fewer
    windows than residues (same holders and primary); else None."""
    rows = np.concatenate([place.holders, place.primary[:, None]], axis=1)
    _, rep, window = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    if len(rep) == place.n_time:
        return None
    return window.ravel().astype(np.int64), rep.astype(np.int64)


def windowed_keys(first, first_counts, rest, weights, splace, dplace, chunk: int):
    """:func:`layouts.counting._keys`' (src base, src residue, dst base, dst residue, *weights)
    arrays over ``first`` x ``rest`` (key rows (src rank, src residue, dst rank, dst residue)
    with ``first_counts`` elements each; ``weights`` per rest row), window by window, about
    ``chunk`` entries at a time; None where it does not apply (see the module's doc)."""
    rest_residues = (bool(rest[:, 1].any()), bool(rest[:, 3].any()))
    found = _windowing(first, rest_residues, splace, dplace)
    if found is None:
        return None
    col, n_time, window, rep, groups, group = found
    by_res = first[:, col] % n_time
    hist = np.zeros((len(groups), n_time), np.int64)
    np.add.at(hist, (group, by_res), first_counts)
    shifts, at = np.unique(rest[:, col] % n_time, return_inverse=True)
    # per rest shift v, (groups, windows): the elements whose residue a + v is in the window
    summed = np.empty((len(shifts), len(groups), len(rep)), np.int64)
    for i, v in enumerate(shifts):
        into = np.zeros((n_time, len(rep)), np.int64)
        into[np.arange(n_time), window[(np.arange(n_time) + v) % n_time]] = 1
        summed[i] = hist @ into
    return _entries(groups, summed, at.ravel(), rest, weights, col, rep, chunk)


def windowed_size(first, rest_rows: int, rest_residues: tuple[bool, bool], splace, dplace):
    """At most how many keys :func:`windowed_keys` makes over ``first`` and ``rest_rows`` rest
    rows (``rest_residues``: whether any has a source residue, a destination residue), found
    without making them; None where it does not apply."""
    found = _windowing(first, rest_residues, splace, dplace)
    if found is None:
        return None
    _, _, _, rep, groups, _ = found
    return len(groups) * len(rep) * rest_rows


def _windowing(first, rest_residues: tuple[bool, bool], splace, dplace):
    """(residue column, chunks, window, rep, groups, group) where one layout's windows are
    narrower than its Time axis, the other's residues are all 0, and counting by window makes
    fewer keys (``groups``: the distinct rank parts of ``first``; ``group``: each row's);
    else None."""
    for col, place, other in ((3, dplace, 1), (1, splace, 3)):
        if place.n_time == 1 or first[:, other].any() or rest_residues[other // 2]:
            continue
        found = windows(place)
        if found is None:
            continue
        window, rep = found
        groups, group = np.unique(first[:, [0, 2]], axis=0, return_inverse=True)
        if len(groups) * len(rep) >= len(first):  # nothing to gain
            return None
        return col, place.n_time, window, rep, groups, group.ravel()
    return None


def _entries(groups, summed, at, rest, weights, col, rep, chunk):
    """The entries (group g, rest row j, window w) holding elements: summed[at[j], g, w] of
    them times rest row j's weights, about ``chunk`` at a time."""
    step = max(1, chunk // max(1, len(rest) * len(rep)))
    for lo in range(0, len(groups), step):
        out = [[] for _ in range(4 + len(weights))]
        for w, residue in enumerate(rep):
            elements = summed[at, lo : lo + step, w]  # (rest rows, groups)
            j, g = np.nonzero(elements)
            n = elements[j, g]
            g += lo
            out[0].append(groups[g, 0] + rest[j, 0])
            out[2].append(groups[g, 1] + rest[j, 2])
            out[col].append(np.full(j.size, residue, np.int64))
            out[4 - col].append(np.zeros(j.size, np.int64))
            for k, weight in enumerate(weights):
                out[4 + k].append(n * weight[j])
        yield tuple(np.concatenate(parts) for parts in out)


__all__ = ["residue_sums", "windowed_keys", "windowed_size", "windows"]
