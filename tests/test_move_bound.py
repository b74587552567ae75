"""The planner's lower bounds on a run's moves (bench/model/move_bound.py) never exceed the
exact price (bench.model.price_moves), for every algorithm's grids, the user layouts, shapes
that do not divide, ranks sharing cores or not, and links real or emulated: a bound above it
would make the planner's search leave out a candidate that belongs in the answer."""

import json
from dataclasses import replace

import pytest
from conftest import PROFILE

from algorithms import ALGORITHMS, get
from bench.model import Profile, plan_moves, price_moves
from bench.model.move_bound import most_shared, overlap_bound, shape_bound
from layouts.counting import overlap_pairs
from layouts.endpoints import user_layouts
from topology.hierarchy import cluster_mesh
from topology.links import LinkModel


def _counted(g: int) -> dict:
    """A rank count whose layout changes were timed (so priced by their coefficients)."""
    a2av = {"start": 4e-5, "message": 2e-5, "byte": 3e-10, "copy": 1e-10, "piece": 2e-7}
    a2av["timed"] = []
    p2p = {"alpha": 2e-6, "beta": 1e-10, "alpha_large": 5e-6, "beta_large": 1e-10}
    return {"ranks": g, **p2p, "collective_factor": {}, "alltoallv": a2av}


@pytest.fixture(params=["timed", "formula"])
def profile(request, tmp_path):
    data = dict(PROFILE)
    if request.param == "timed":
        data["counts"] = [_counted(g) for g in (1, 2)]
    f = tmp_path / "profile.json"
    f.write_text(json.dumps(data))
    return Profile.load(f)


CASES = [
    (6, "block-cyclic:16", (100, 70, 90)),
    (8, "cols", (96, 64, 80)),
    (8, "block", (64, 256, 48)),
    (9, "rows", (90, 27, 45)),
    (12, "block", (100, 36, 52)),
    (8, "cols;C=native", (96, 64, 80)),  # nothing moves out: the closing barrier alone
    (6, "rows;A=native;B=native", (60, 30, 42)),  # nothing moves in: that phase's barrier
]


@pytest.mark.parametrize("P,spec,shape", CASES)
def test_bounds_never_exceed_the_exact_price(profile, P, spec, shape):
    spec, *others = spec.split(";")
    users = user_layouts({**dict.fromkeys("ABC", spec), **dict(o.split("=") for o in others)},
                         shape, P)  # fmt: skip
    links = [None]
    if P == 8:  # a cluster of 4 nodes of 2, its links real or emulated
        real = LinkModel.load("1gbe", cluster_mesh(4, 2))
        links += [real, replace(real, emulated=True)]
    checked = 0
    for name in ALGORITHMS:
        algorithm = get(name)
        for g in algorithm.grids(P):
            plan = algorithm.plan(shape, P, **{algorithm.grid_option.name: tuple(g)})
            mv = plan_moves(users, plan)
            overlaps = [overlap_pairs(m.src, m.src_mesh, m.dst, m.dst_mesh) for m in mv]
            for m, o in zip(mv, overlaps, strict=True):
                assert o[2].max(initial=0) <= most_shared(m.src, m.dst), (name, g, m.matrix)
            for rpn in (1, P):
                for lk in links:
                    exact = price_moves(mv, P, profile, 4, rpn, links=lk).seconds
                    cheap = shape_bound(mv, P, profile, 4, rpn, lk)
                    tight = overlap_bound(mv, overlaps, P, profile, 4, rpn, lk)
                    assert cheap <= exact * (1 + 1e-12), (name, g, rpn, lk)
                    assert tight <= exact * (1 + 1e-12), (name, g, rpn, lk)
                    checked += 1
    assert checked > 20


def test_the_pieces_a_move_copies_raise_its_bound(tmp_path):
    """Block-cyclic tiles of 4 make a piece of every 4 elements a rank copies, in any order:
    the overlap bound counts them (move_bound._pieces) where the profile prices pieces, and
    stays below the exact price."""
    shape, P = (96, 64, 80), 6
    users = user_layouts(dict.fromkeys("ABC", "block-cyclic:4"), shape, P)
    plan = get("summa").plan(shape, P, grid=(2, 3))
    mv = plan_moves(users, plan)
    overlaps = [overlap_pairs(m.src, m.src_mesh, m.dst, m.dst_mesh) for m in mv]
    bounds = []
    for piece in (0.0, 2e-7):
        data = {**PROFILE, "counts": [_counted(g) for g in (1, 2)]}
        for c in data["counts"]:
            c["alltoallv"]["piece"] = piece
        f = tmp_path / f"profile-{piece}.json"
        f.write_text(json.dumps(data))
        prof = Profile.load(f)
        exact = price_moves(mv, P, prof, 4, P).seconds
        bounds.append(overlap_bound(mv, overlaps, P, prof, 4, P))
        assert bounds[-1] <= exact * (1 + 1e-12)
    assert bounds[1] > bounds[0]
