"""What the algorithms' prepare copies: nothing where the blocks are already laid out as the
loop reads them (SUMMA's A in one panel, T10's B units and A's single unit), so an end-to-end
run's phase in pays no copy the model does not price."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from algorithms import ALGORITHMS, get
from algorithms.symbolic import copied_bytes, placeholder
from bench.model import Profile, plan_moves, price_moves, setup_seconds
from bench.planner import _option_sets
from layouts import to_memory
from layouts.endpoints import user_layouts

SHAPES = [(96, 64, 80), (100, 70, 30), (33, 17, 65)]


@pytest.mark.parametrize("name", ["summa", "summa25d", "tesseract"])
def test_summa_prepare_copies_a_only_for_several_panels(name):
    module, seen = get(name), set()
    for shape, panel in itertools.product(SHAPES, (None, 4, 8)):
        for P in (1, 2, 4, 8):
            for grid in module.grids(P):
                kw = {"grid": grid} if panel is None else {"grid": grid, "panel": panel}
                try:
                    plan = module.plan(shape, P, **kw)
                except ValueError:
                    continue
                a = np.random.default_rng(0).random(plan.A.block_shape).astype(np.float32)
                b = np.ones(plan.B.block_shape, np.float32)
                a_panels, b_panels = module.prepare(plan, a, b, plan.mesh.at(0).coords)
                one = a.shape[1] == plan.params["panel"]
                assert np.shares_memory(a_panels, a) == one, (shape, P, grid, panel)
                assert np.shares_memory(b_panels, b)
                np.testing.assert_array_equal(a_panels.reshape(-1), to_memory(plan.A, a))
                seen.add(one)
    assert seen == {True, False}


@pytest.mark.parametrize("fop", [(2, 1, 2), (4, 1, 1), (1, 4, 1), (1, 1, 4), (2, 2, 2)])
def test_t10_prepare_copies_only_a_units_narrower_than_its_block(fop):
    t10 = get("t10")
    plan = t10.plan((64, 96, 80), 8 if fop == (2, 2, 2) else 4, fop=fop)
    rng = np.random.default_rng(1)
    a = rng.random(plan.A.block_shape).astype(np.float32)
    b = rng.random(plan.B.block_shape).astype(np.float32)
    a_units, b_units = t10.prepare(plan, a, b, plan.mesh.at(0).coords)
    for u in b_units:
        assert np.shares_memory(u, b) and u.flags.c_contiguous
    for u in a_units:
        assert np.shares_memory(u, a) == (u.shape[1] == a.shape[1])
        assert u.flags.c_contiguous
    # every unit is the block's own rows or columns, in some order
    np.testing.assert_array_equal(np.sort(np.concatenate(b_units).ravel()), np.sort(b.ravel()))
    np.testing.assert_array_equal(
        np.sort(np.concatenate(a_units, axis=1).ravel()), np.sort(a.ravel())
    )


@pytest.mark.parametrize("name", ALGORITHMS)
def test_the_model_counts_what_prepare_copies(name):
    """algorithms.symbolic.copied_bytes of prepare on placeholders (what the model prices in an
    end-to-end run's phase in) equals what prepare copies of real blocks, for every candidate
    the planner tries at 1-9 ranks, on every rank."""
    module, copied = get(name), set()
    for shape, P in itertools.product(SHAPES, (1, 2, 4, 6, 8, 9)):
        for opts, _ in _option_sets(module, shape, P):
            plan = module.plan(shape, P, **opts)
            for rank in range(plan.P):
                coords = plan.mesh.at(rank).coords
                a = np.ones(plan.A.block_shape, np.float32)
                b = np.ones(plan.B.block_shape, np.float32)
                real = copied_bytes(module.prepare(plan, a, b, coords), a, b)
                a, b = (placeholder(x.shape, x.dtype) for x in (a, b))
                assert copied_bytes(module.prepare(plan, a, b, coords), a, b) == real, opts
                copied.add(real > 0)
    if name in ("summa", "t10"):  # A in several panels (units) is copied
        assert copied == {True, False}


def test_an_end_to_end_prediction_prices_prepare_in_the_phase_in(profile_file):
    """T10 with A in four units copies A in prepare: predict puts that in the phase in, at the
    profile's copy bandwidth, and not when every layout is native (nothing timed before)."""
    profile = Profile.load(profile_file)
    t10 = get("t10")
    plan = t10.plan((512, 256, 128), 4, fop=(4, 1, 1))
    seconds = setup_seconds(t10, plan, profile, "float32", 4)
    assert seconds == pytest.approx(
        math.prod(plan.A.block_shape) * 4 / profile.copy_bandwidth * profile.slowdown(4)
    )
    cannon = get("cannon")
    assert setup_seconds(cannon, cannon.plan((512, 256, 128), 4), profile, "float32", 4) == 0
    users = user_layouts(dict.fromkeys("ABC", "block"), plan.shape, 4)
    moved = price_moves(plan_moves(users, plan), 4, profile, 4, 4)
    assert moved.with_setup(seconds).redistribute_in == moved.redistribute_in + seconds
    native = price_moves([], 4, profile, 4, 4)
    assert native.with_setup(seconds) == native


@pytest.mark.parametrize("name", ["summa", "summa25d", "tesseract"])
def test_a_panel_wider_than_ks_share_is_cut_to_it(name):
    algo = get(name)
    widest = algo.plan((512, 512, 512), 4).params["panel"]
    plan = algo.plan((512, 512, 512), 4, panel=100_000)  # padded K 400-fold when taken as is
    assert plan.params["panel"] == widest
    assert algo.plan((512, 512, 512), 4, panel=widest // 2).params["panel"] == widest // 2
