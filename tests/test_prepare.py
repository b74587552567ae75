"""What the algorithms' prepare copies: nothing where the blocks are already laid out as the
loop reads them (SUMMA's A in one panel, T10's B units and A's single unit), so an end-to-end
run's phase in pays no copy the model does not price."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from algorithms import get
from layouts import to_memory

SHAPES = [(96, 64, 80), (100, 70, 30), (33, 17, 65)]


def _arrays(state):
    for x in state:
        if isinstance(x, np.ndarray):
            yield x
        else:
            yield from _arrays(x)


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
