"""The counting's keys one per window of Time chunks sharing holders (layouts/residues.py):
the same counts as chunk by chunk and as element by element, for B from cols into T10 grids
whose windows are narrower than their Time axes, and back (serial, no MPI)."""

from __future__ import annotations

import numpy as np
import pytest
from test_exchange_counts import brute

from algorithms import get
from bench.model.redistribution import plan_moves
from layouts import counting
from layouts.endpoints import user_layouts

SHAPE = (96, 64, 80)
# (P, T10 F_op) whose B, from cols, has windows of 2 or 4 of its 4 or 8 Time chunks
GRIDS = [(8, (2, 1, 4)), (16, (2, 1, 8)), (16, (2, 2, 4))]


def _moves_of_b(P, fop):
    plan = get("t10").plan(SHAPE, P, fop=fop, pace=1)
    (into,) = [m for m in plan_moves(user_layouts({"B": "cols"}, SHAPE, P), plan) if m.into]
    return [
        (into.src, into.src_mesh, into.dst, into.dst_mesh),
        (into.dst, into.dst_mesh, into.src, into.src_mesh),  # the windows on the source side
    ]


def _counted(move):
    """exchange_counts, overlap_pairs and piece_counts of ``move``, afresh (not cached)."""
    counting._counting.cache_clear()
    counting.piece_counts.cache_clear()
    return (
        counting.exchange_counts(*move),
        counting.overlap_pairs(*move),
        counting.piece_counts(*move),
    )


@pytest.mark.parametrize("P,fop", GRIDS)
def test_counts_by_window_are_the_counts_by_chunk(P, fop, monkeypatch):
    windowed, counted = [], counting.windowed_keys

    def spy(*args):
        keys = counted(*args)
        windowed.append(keys is not None)
        return keys

    monkeypatch.setattr(counting, "windowed_keys", spy)
    for move in _moves_of_b(P, fop):
        by_window = _counted(move)
        assert windowed and all(windowed), move  # each count went window by window
        windowed.clear()
        counts, overlap, needed = brute(*move)
        assert np.array_equal(by_window[0], counts), move
        s, d, c, got_needed = by_window[1]
        assert np.array_equal(np.asarray(overlap)[s, d], c) and c.sum() == overlap.sum()
        assert np.array_equal(got_needed, needed)
        with monkeypatch.context() as chunk_by_chunk:
            chunk_by_chunk.setattr(counting, "windowed_keys", lambda *args: None)
            by_chunk = _counted(move)
        assert np.array_equal(by_chunk[0], by_window[0])
        assert all(np.array_equal(a, b) for a, b in zip(by_chunk[1], by_window[1], strict=True))
        # pieces: what the chunks count, over-counting as layouts.counting.piece_counts says
        assert all(np.array_equal(a, b) for a, b in zip(by_chunk[2], by_window[2], strict=True))
    counting._counting.cache_clear()
    counting.piece_counts.cache_clear()


def test_keys_by_window_are_fewer():
    """B into T10 F_op 2x1x8 at 16 ranks: 8 Time chunks in windows of 4, two windows' holders."""
    move = _moves_of_b(16, (2, 1, 8))[0]
    entries = sum(s.size for s, *_ in counting.overlap_chunks(*move))
    s, d, _, _ = counting.overlap_pairs(*move)
    assert entries == s.size  # one entry per rank pair (chunk by chunk: 4 per pair)


@pytest.mark.parametrize("P,fop", GRIDS)
def test_the_pair_bound_is_the_windows(P, fop, monkeypatch):
    """layouts.counting.pair_bound counts a window as the counting does: at least the entries
    it makes, fewer than chunk by chunk (what decides whether a move's pairs are held)."""
    for move in _moves_of_b(P, fop):
        counting._counting.cache_clear()
        entries = sum(s.size for s, *_ in counting.overlap_chunks(*move))
        bound = counting.pair_bound(*move)
        with monkeypatch.context() as chunk_by_chunk:
            chunk_by_chunk.setattr(counting, "windowed_size", lambda *args: None)
            chunk_by_chunk.setattr(counting, "windowed_keys", lambda *args: None)
            chunks = counting.pair_bound(*move)
            assert entries < sum(s.size for s, *_ in counting.overlap_chunks(*move)) <= chunks
        assert entries <= bound < chunks, move
    counting._counting.cache_clear()


def test_a_move_of_8192_ranks_is_bounded_by_its_windows():
    """B from cols into T10 F_op 2x64x64 at 8192 ranks (8192^3): 64 chunks in 2 windows, 33.5
    million entries chunk by chunk, beyond layouts.endpoints.MAX_PAIRS; by window 1.05 million
    (bounded, not made: no counting here)."""
    shape, P = (8192, 8192, 8192), 8192
    plan = get("t10").plan(shape, P, fop=(2, 64, 64), pace=1)
    (into,) = [m for m in plan_moves(user_layouts({"B": "cols"}, shape, P), plan) if m.into]
    assert counting.pair_bound(into.src, into.src_mesh, into.dst, into.dst_mesh) == 1 << 20
