"""Moves of more rank pairs than distmm holds (layouts.endpoints.MAX_PAIRS) are counted a chunk
at a time and not relabelled (bench/model/dense_moves.py): priced exactly as the held pairs
price the same order, on one machine and on a cluster, and the run keeps the order laid
(serial, no MPI)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import every_grid, pieces_profile

import layouts.endpoints as endpoints
from algorithms import get
from bench.model import Profile, plan_moves, price_moves
from bench.model.dense_moves import streamed_price
from layouts.endpoints import move_counts, relabelling, user_layouts
from layouts.redistribute import one_holder
from layouts.tensorlayout import TooManyPairs
from topology.links import LinkModel
from topology.tree import parse_topology

CASES = [  # (P, user layouts, shape)
    (4, "block-cyclic:4", (96, 64, 80)),
    (6, "cols", (100, 70, 90)),
    (8, "rows", (96, 64, 80)),
    (9, "block", (90, 72, 63)),
]


def _moves(P: int, spec: str, shape):
    """conftest.every_grid's moves where every source holds each element once."""
    for name, g, moves in every_grid(P, spec, shape):
        if all(one_holder(m.src, m.src_mesh) for m in moves):
            yield (name, g), moves


@pytest.mark.parametrize("pieces", [False, True])
def test_counted_in_chunks_as_the_held_pairs_price_them(profile_file, tmp_path, pieces):
    prof = pieces_profile(profile_file, tmp_path) if pieces else Profile.load(profile_file)
    checked = 0
    for P, spec, shape in CASES:
        for case, moves in _moves(P, spec, shape):
            held = price_moves(moves, P, prof, 4, P, relabel=False)
            streamed = streamed_price(moves, P, prof, 4, P)
            for field in ("redistribute_in", "redistribute_out", "closing"):
                want = getattr(held, field)
                assert getattr(streamed, field) == pytest.approx(want, rel=1e-12), (case, field)
            assert streamed.words == held.words and streamed.bytes_saved == 0, case
            checked += 1
    assert checked > 40


@pytest.mark.parametrize("net,emulated", [("1gbe", False), ("10gbe", True)])
def test_on_a_cluster_too(profile_file, net, emulated):
    prof = Profile.load(profile_file)
    clusters = [(4, "cols", "cluster:2,2"), (8, "block-cyclic:4", "cluster:2,4")]
    for P, spec, topology in clusters:
        shape = (96, 64, 80)
        links = replace(LinkModel.load(net, parse_topology(topology)), emulated=emulated)
        for case, moves in _moves(P, spec, shape):
            held = price_moves(moves, P, prof, 4, 2, relabel=False, links=links)
            streamed = streamed_price(moves, P, prof, 4, 2, links)
            assert streamed.seconds == pytest.approx(held.seconds, rel=1e-12), case
            assert streamed.redistribute_in == pytest.approx(held.redistribute_in, rel=1e-12)
            assert streamed.words == held.words


def test_beyond_the_limit_held_moves_keep_the_order_laid(profile_file, monkeypatch):
    """Past MAX_PAIRS the relabelling keeps the order laid (counted False) and says what that
    moves; the model prices the same; past MAX_STREAMED both refuse in one line."""
    prof = Profile.load(profile_file)
    plan = get("summa").plan((96, 64, 80), 6)
    moves = plan_moves(user_layouts(dict.fromkeys("ABC", "cols"), plan.shape, 6), plan)
    chosen = relabelling(moves, 6, 4)
    assert chosen.counted and chosen.bytes_saved > 0  # relabelled while held
    placed = np.array([5, 4, 3, 2, 1, 0])
    held = price_moves(moves, 6, prof, 4, 6, relabel=False, placed=placed)
    monkeypatch.setattr(endpoints, "MAX_PAIRS", 0)
    for start in (None, placed):
        laid = relabelling(moves, 6, 4, placed=start)
        order = np.arange(6) if start is None else start
        assert not laid.counted and laid.ranks == tuple(order.tolist())
        moved = sum(int(c.sum() - np.trace(c)) for c in (move_counts(m, laid.ranks) for m in moves))
        assert laid.bytes_before == laid.bytes_after == 4 * moved
    dense = price_moves(moves, 6, prof, 4, 6, placed=placed)  # relabel asked: not possible
    assert dense.seconds == pytest.approx(held.seconds, rel=1e-12)
    assert dense.ranks == tuple(placed.tolist()) and dense.bytes_saved == 0
    monkeypatch.setattr(endpoints, "MAX_STREAMED", 0)
    for call in (lambda: relabelling(moves, 6, 4), lambda: price_moves(moves, 6, prof, 4, 6)):
        with pytest.raises(TooManyPairs, match="more than the 0 distmm counts") as err:
            call()
        assert "\n" not in str(err.value)


def test_a_replicated_source_too_dense_to_hold_is_left_out_of_a_plan(profile_file, monkeypatch):
    """A source holding elements more than once cannot be counted as it comes (its receivers
    choose among holders): past MAX_PAIRS `predict` refuses such moves in one line and `plan`
    leaves their candidates out, by workers as alone."""
    from bench.errors import UsageError
    from bench.planner import candidates

    prof = Profile.load(profile_file)
    specs = {"A": "[r=B]@r=4", "B": "cols", "C": "cols"}  # A on every rank
    users = user_layouts(specs, (96, 64, 80), 4)
    assert candidates((96, 64, 80), 4, prof, users=users)
    monkeypatch.setattr(endpoints, "MAX_PAIRS", 0)
    for workers in (0, 2):  # every candidate left out: the plan says why, in one line
        with pytest.raises(UsageError, match="holds elements more than once"):
            candidates((96, 64, 80), 4, prof, users=users, workers=workers)
    plan = get("summa").plan((96, 64, 80), 4)
    with pytest.raises(TooManyPairs, match="holds elements more than once"):
        price_moves(plan_moves(users, plan), 4, prof, 4, 4)
