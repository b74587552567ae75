"""3D SUMMA, 2.5D SUMMA and 2.5D Cannon: right products on every grid the world size admits.

Run under mpiexec with ``--only-mpi`` (any size; the algorithms skip where they admit no grid);
the tests without the mpi mark check the plans and block maps serially.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI
from mpi_helpers import run_and_verify

from algorithms.cannon import ALGORITHM as cannon
from algorithms.cannon25d import ALGORITHM as cannon25d
from algorithms.plan import PlanError
from algorithms.summa import ALGORITHM as summa
from algorithms.summa3d import ALGORITHM as summa3d
from algorithms.summa25d import ALGORITHM as summa25d
from bench.runner import run_plan
from layouts import held_indices, parse_layout
from topology import Mesh

P = MPI.COMM_WORLD.Get_size()
MODULES = [summa3d, summa25d, cannon25d]
# divisible (no padding on any grid of P ranks), then two that pad, smaller than the grid
SHAPES = [(2 * P, 3 * P, 4 * P), (13, 7, 11), (5, 17, 3)]
DTYPES = [np.float32, np.float64]


def _cases(module):
    grids = module.grids(P)
    if not grids:
        pytest.skip(f"{module.name} admits no grid for {P} ranks")
    return grids


@pytest.mark.mpi
@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_grid(module, shape):
    for grid in _cases(module):
        for overlap in (True, False):
            plan = module.plan(shape, P, grid=grid, overlap=overlap)
            if shape == SHAPES[0]:
                assert not (plan.A.is_padded or plan.B.is_padded or plan.C.is_padded), grid
            for dtype in DTYPES:
                r = run_and_verify(module, plan, dtype)
                assert r["verified"], (grid, overlap, np.dtype(dtype).name, r["max_rel_error"])


@pytest.mark.mpi
@pytest.mark.parametrize("panel", [1, 3])
def test_summa25d_panels(panel):
    for grid in _cases(summa25d):
        for overlap in (True, False):
            plan = summa25d.plan((13, 7, 11), P, grid=grid, panel=panel, overlap=overlap)
            widest = summa25d.plan((13, 7, 11), P, grid=grid).params["panel"]
            assert plan.params["panel"] == min(panel, widest)  # wider: cut to K's share
            r = run_and_verify(summa25d, plan, np.float64)
            assert r["verified"], (grid, overlap, r["max_rel_error"])


@pytest.mark.mpi
@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_repeated_runs_leave_the_inputs_alone(module):
    """multiply runs several times on one prepared state: warm-up, repeats, compute-only."""
    for grid in _cases(module):
        for overlap in (True, False):
            plan = module.plan((13, 7, 11), P, grid=grid, overlap=overlap)
            mesh = Mesh(plan.mesh, MPI.COMM_WORLD)
            try:
                r, _ = run_plan(
                    module, plan, mesh, np.dtype(np.float64), repeat=2, warmup=1, verify="exact"
                )
            finally:
                mesh.free()
            assert r["verified"], (grid, overlap, r["max_rel_error"])


def _expected_bytes(module, grid, shape, itemsize):
    """Bytes each rank sends, by the comm layer's convention, from the schedule on paper."""
    M, K, N = shape
    if module is summa3d:
        p = grid[0]
        m, kk, nn = M // p, K // p**2, N // p**2
        # A pieces to p-1 others, B pieces to p-1 others, (p-1)/p of the M/p x N/p partial
        return itemsize * (p - 1) * (m * kk + p * kk * nn + m * nn)
    p, _, d = grid
    m, kk, n = M // p, K // (p * d), N // p
    # layer SUMMA broadcasts / Cannon shifts: own A and B blocks to p-1 others (or p-1 hops),
    # then (d-1)/d of the partial C block
    return itemsize * ((p - 1) * (m * kk + kk * n) + (d - 1) * m * n // d)


@pytest.mark.mpi
@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_bytes_match_the_schedule(module):
    shape = SHAPES[0]
    for grid in _cases(module):
        want = _expected_bytes(module, grid, shape, 8)
        for overlap in (True, False):
            r = run_and_verify(module, module.plan(shape, P, grid=grid, overlap=overlap))
            assert r["bytes_sent_per_rank"] == [want] * P, (grid, overlap)


def _c_block(module, plan, dtype=np.float64):
    mesh = Mesh(plan.mesh, MPI.COMM_WORLD)
    try:
        result, blocks = run_plan(
            module, plan, mesh, np.dtype(dtype), repeat=1, warmup=0, verify="exact"
        )
    finally:
        mesh.free()
    assert result["verified"]
    return result, blocks["C"]


@pytest.mark.mpi
@pytest.mark.parametrize(
    "pair", [(summa25d, summa), (cannon25d, cannon)], ids=["summa25d-summa", "cannon25d-cannon"]
)
def test_one_layer_is_the_2d_algorithm(pair):
    """d = 1: the same bytes and bit for bit the same C block as the 2D algorithm."""
    layered, flat = pair
    if not summa25d.grids(P) or summa25d.grids(P)[-1][2] != 1:
        pytest.skip(f"no p x p x 1 grid for {P} ranks")
    p = summa25d.grids(P)[-1][0]
    shape = (13, 7, 11)
    r3, c3 = _c_block(layered, layered.plan(shape, P, grid=(p, p, 1)))
    r2, c2 = _c_block(flat, flat.plan(shape, P, grid=(p, p)))
    assert r3["bytes_sent_per_rank"] == r2["bytes_sent_per_rank"]
    assert r3["messages"] == r2["messages"]
    assert np.array_equal(c3, c2)


# -- serial: plans, layouts, block maps ------------------------------------------------------
def test_summa3d_layouts_p2():
    plan = summa3d.plan((13, 7, 11), 8)
    assert plan.mesh.axes == (("z", 2), ("y", 2), ("x", 2))
    # M' = 14, K' = 8, N' = 12: A (M'/p, (p_z, p_y, K'/p^2)), B ((p_z, K'/p), (p_y, p_x, N'/p^2))
    assert plan.A == parse_layout("(13,7)/((2_x, 7), (2_z, 2_y, 2))")
    assert plan.B == parse_layout("(7,11)/((2_z, 4), (2_y, 2_x, 3))")
    assert plan.C == parse_layout("(13,11)/((2_x, 7), (2_y, 2_z, 3))")
    plan = summa3d.plan((16, 24, 32), 8, grid=(2, 2, 2))
    assert plan.A == parse_layout("((2_x, 8), (2_z, 2_y, 6))")
    assert plan.B == parse_layout("((2_z, 12), (2_y, 2_x, 8))")
    assert plan.C == parse_layout("((2_x, 8), (2_y, 2_z, 8))")


def test_25d_layouts_p2_d2():
    plan = summa25d.plan((16, 24, 32), 8)
    assert plan.mesh.axes == (("x", 2), ("y", 2), ("z", 2))
    assert plan.params == {"panel": 6, "panels": 2}
    assert plan.A == parse_layout("((2_x, 8:6), (2_z, 2_y, 1:48, 6:1))")  # panel-major
    assert plan.B == parse_layout("((2_z, 2_x, 6), (2_y, 16))")
    assert plan.C == parse_layout("((2_x, 2_z, 4), (2_y, 16))")
    plan = cannon25d.plan((16, 24, 32), 8)
    assert plan.A == parse_layout("((2_x, 8), (2_z, 2_Time, 6); R@[x + y])")
    assert plan.B == parse_layout("((2_z, 2_Time, 6), (2_y, 16); R@[x + y])")
    assert plan.C == parse_layout("((2_x, 2_z, 4), (2_y, 16))")


def test_grids():
    assert summa3d.grids(8) == [(2, 2, 2)] and summa3d.grids(27) == [(3, 3, 3)]
    assert summa3d.grids(4) == []
    for module in (summa25d, cannon25d):
        assert module.grids(1) == [(1, 1, 1)]
        assert module.grids(4) == [(2, 2, 1)]
        assert module.grids(8) == [(2, 2, 2)]
        assert module.grids(16) == [(4, 4, 1)]  # 2 x 2 x 4 would have d > p
        assert module.grids(64) == [(4, 4, 4), (8, 8, 1)]  # largest d first
        assert module.grids(2) == module.grids(6) == []
        assert module.plan((9, 9, 9), 64).grid == (4, 4, 4)


@pytest.mark.parametrize(
    "module, P, counts",
    [
        (summa3d, 4, "1, 8, 27, 64"),
        (summa25d, 6, "1, 4, 8, 9, 16, 18, 25, 27, 32"),
        (cannon25d, 2, "1, 4, 8, 9, 16, 18, 25, 27, 32"),
    ],
)
def test_no_grid_names_the_counts(module, P, counts):
    with pytest.raises(PlanError, match=f"cannot run on {P} ranks .*it can on {counts}"):
        module.plan((8, 8, 8), P)


@pytest.mark.parametrize(
    "module, P, grid, match",
    [
        (summa3d, 8, (4, 2, 1), r"grid 4x2x1 is not a cube .*for 8 ranks: 2x2x2"),
        (summa3d, 8, (3, 3, 3), r"grid 3x3x3 has 27 ranks but the job has 8"),
        (
            summa25d,
            16,
            (2, 2, 4),
            r"grid 2x2x4 is not a p x p x d grid with 1 <= d <= p "
            r".*for 16 ranks: 4x4x1",
        ),
        (cannon25d, 8, (4, 2, 1), r"grid 4x2x1 is not a p x p x d grid .*for 8 ranks: 2x2x2"),
        (cannon25d, 8, (2, 2, 1), r"has 4 ranks but the job has 8"),
    ],
)
def test_bad_grid(module, P, grid, match):
    with pytest.raises(PlanError, match=match):
        module.plan((8, 8, 8), P, grid=grid)


def test_bad_panel_and_shape():
    with pytest.raises(PlanError, match="panel width must be a positive integer"):
        summa25d.plan((8, 8, 8), 8, panel=0)
    for module in MODULES:
        with pytest.raises(PlanError, match="shape must be three positive integers"):
            module.plan((8, 0, 8), 1)


def _mesh_coords(plan):
    am = plan.mesh
    return [am.coords(r) for r in range(am.size)]


@pytest.mark.parametrize("shape", [(16, 24, 32), (13, 7, 11), (5, 17, 3)])
def test_summa3d_pieces_line_up(shape):
    """The allgathers and the reduce-scatter see their pieces in coordinate order."""
    plan = summa3d.plan(shape, 27)
    p = 3
    Mp, Kp, Np = plan.A.padded_shape[0], plan.A.padded_shape[1], plan.B.padded_shape[1]
    for c in _mesh_coords(plan):
        i, j, layer = c["x"], c["y"], c["z"]
        rows = held_indices(plan.A, c)[0]
        k_gathered = np.concatenate([held_indices(plan.A, {**c, "y": jj})[1] for jj in range(p)])
        assert np.array_equal(k_gathered, np.arange(layer * Kp // p, (layer + 1) * Kp // p))
        assert np.array_equal(held_indices(plan.B, c)[0], k_gathered)
        n_gathered = np.concatenate([held_indices(plan.B, {**c, "x": ii})[1] for ii in range(p)])
        assert np.array_equal(n_gathered, np.arange(j * Np // p, (j + 1) * Np // p))
        assert np.array_equal(rows, np.arange(i * Mp // p, (i + 1) * Mp // p))
        c_rows, c_cols = held_indices(plan.C, c)
        assert np.array_equal(c_rows, rows)
        assert np.array_equal(c_cols, np.array_split(n_gathered, p)[layer])


@pytest.mark.parametrize("module", [summa25d, cannon25d], ids=lambda m: m.name)
@pytest.mark.parametrize("grid", [(2, 2, 2), (3, 3, 2), (3, 3, 3)])
def test_25d_layers_hold_their_k_slice(module, grid):
    """Layer l holds K slice l; C's rows of block i are cut over z in layer order."""
    p, _, d = grid
    plan = module.plan((13, 7, 11), p * p * d, grid=grid)
    Mp, Kp = plan.A.padded_shape
    ks = Kp // d
    for c in _mesh_coords(plan):
        i, j, layer = c["x"], c["y"], c["z"]
        a_k = [held_indices(plan.A, c, t)[1] for t in range(p)]
        b_k = [held_indices(plan.B, c, t)[0] for t in range(p)]
        if module is cannon25d:
            # step t: chunk (i + j + t) % p of slice l, for A and B alike
            for t in range(p):
                chunk = (i + j + t) % p
                want = np.arange(layer * ks + chunk * ks // p, layer * ks + (chunk + 1) * ks // p)
                assert np.array_equal(a_k[t], want) and np.array_equal(b_k[t], want)
        else:
            assert np.array_equal(
                a_k[0], np.arange(layer * ks + j * ks // p, layer * ks + (j + 1) * ks // p)
            )
            assert np.array_equal(
                b_k[0], np.arange(layer * ks + i * ks // p, layer * ks + (i + 1) * ks // p)
            )
        a_rows = held_indices(plan.A, c)[0]
        c_rows, c_cols = held_indices(plan.C, c)
        assert np.array_equal(c_rows, np.array_split(a_rows, d)[layer])
        assert np.array_equal(c_cols, held_indices(plan.B, c)[1])
