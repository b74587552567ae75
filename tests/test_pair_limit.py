"""The redistribution counting's limits (layouts.endpoints): moves of more rank pairs than
MAX_PAIRS are not held (nor relabelled) but counted as they come, those of more than
MAX_STREAMED are refused with one line before any is counted; the planner leaves such
candidates out and says so (serial, no MPI)."""

from __future__ import annotations

import pytest

import layouts.endpoints as endpoints
from algorithms import get
from bench.errors import UsageError
from bench.model import Profile, plan_moves
from bench.planner import candidates
from layouts.counting import overlap_pairs, pair_bound
from layouts.endpoints import move_overlaps, pair_bounds, user_layouts
from layouts.tensorlayout import LayoutError

SHAPE = (96, 64, 80)


def _moves(algo: str, layouts: str, P: int):
    plan = get(algo).plan(SHAPE, P)
    users = user_layouts(dict.fromkeys("ABC", layouts), SHAPE, P)
    return plan_moves(users, plan)


@pytest.mark.parametrize(
    "algo,layouts,P",
    [("summa", "block-cyclic:4", 4), ("t10", "cols", 6), ("tesseract", "rows", 8)],
)
def test_pair_bound_holds_every_entry(algo, layouts, P):
    for m in _moves(algo, layouts, P):
        s, _, count, _ = overlap_pairs(m.src, m.src_mesh, m.dst, m.dst_mesh)
        assert s.size <= pair_bound(m.src, m.src_mesh, m.dst, m.dst_mesh)
        assert count.sum() > 0


def test_moves_beyond_the_limit_are_refused_in_one_line(monkeypatch):
    moves = _moves("summa", "block-cyclic:4", 4)
    bound = sum(pair_bounds(moves))
    assert len(move_overlaps(moves)) == 3
    monkeypatch.setattr(endpoints, "MAX_PAIRS", bound - 1)
    with pytest.raises(LayoutError, match="more than the .* distmm holds") as err:
        move_overlaps(moves)
    assert "\n" not in str(err.value) and f"pair up to {bound:,} " in str(err.value)
    assert str(err.value).startswith("moving '")  # valid layouts: not "invalid layout"
    laid = endpoints.relabelling(moves, 4)  # the run's relabelling keeps the order laid
    assert not laid.counted and laid.ranks == (0, 1, 2, 3) and laid.bytes_after > 0


def test_the_planner_leaves_uncountable_candidates_out(monkeypatch, profile_file):
    profile = Profile.load(profile_file)
    users = user_layouts(dict.fromkeys("ABC", "cols"), SHAPE, 4)
    everything = candidates(SHAPE, 4, profile, users=users)
    assert everything.uncountable == 0
    bounds = sorted({sum(pair_bounds(plan_moves(users, c.plan))) for c in everything})
    assert len(bounds) > 1  # a limit between them leaves some candidates in, some out
    monkeypatch.setattr(endpoints, "MAX_PAIRS", bounds[0])  # the others counted as they come
    dense = candidates(SHAPE, 4, profile, users=users)
    assert dense.uncountable == 0 and len(dense) == len(everything)
    monkeypatch.setattr(endpoints, "MAX_STREAMED", bounds[0])  # ... or not at all
    some = candidates(SHAPE, 4, profile, users=users)
    assert some and some.uncountable == len(everything) - len(some)
    for c in some:
        moves = plan_moves(users, c.plan)
        assert sum(pair_bounds(moves)) <= bounds[0]
    monkeypatch.setattr(endpoints, "MAX_PAIRS", 0)
    monkeypatch.setattr(endpoints, "MAX_STREAMED", 0)
    with pytest.raises(UsageError, match="no candidate can be priced end to end"):
        candidates(SHAPE, 4, profile, users=users)


def test_only_moves_too_big_to_count_are_left_out(monkeypatch, profile_file):
    """The planner leaves out candidates whose moves pair too many ranks (TooManyPairs); any
    other LayoutError from counting them is a fault, and surfaces instead of being taken for
    that."""
    import bench.plan_ranking as ranking

    def broken(all_moves):
        raise LayoutError("((4_PE), (8:1))", "inconsistent")

    monkeypatch.setattr(ranking, "move_overlaps", broken)
    users = user_layouts(dict.fromkeys("ABC", "cols"), SHAPE, 4)
    with pytest.raises(LayoutError, match="inconsistent"):
        candidates(SHAPE, 4, Profile.load(profile_file), users=users)


def test_layout_errors_cross_processes_whole():
    """A LayoutError pickles with its text and problem (a plan's worker hands back what it
    raises), its kind kept."""
    import pickle

    from layouts.tensorlayout import TooManyPairs

    for err in (LayoutError("((4_PE), (8:1))", "bad"), TooManyPairs("A x -> y", "too many")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert (back.text, back.problem) == (err.text, err.problem)
