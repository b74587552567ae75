"""Tesseract and T10: right products on every grid / F_op and pace the world size admits.

Run under mpiexec with ``--only-mpi`` (any size); the tests without the mpi mark check plans,
layouts, windows and schedules serially (schedules on the symbolic communication layer, every
rank of a mesh in one process). T10 F_op = [p, 1, p] must be Cannon, and Tesseract with one
layer must be 2D SUMMA, layout for layout and event for event.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import numpy as np
import pytest
from mpi4py import MPI
from mpi_helpers import run_and_verify

from algorithms.cannon import ALGORITHM as cannon
from algorithms.comm import Comm
from algorithms.plan import PlanError
from algorithms.summa import ALGORITHM as summa
from algorithms.t10 import ALGORITHM as t10
from algorithms.tesseract import ALGORITHM as tesseract
from bench.runner import make_plan, run_plan
from bench.verify import SEED_A, SEED_B
from layouts import Factor, Rotation, TensorLayout, generate_block, global_matrix, parse_layout
from topology import Mesh

P = MPI.COMM_WORLD.Get_size()
# divisible for every grid and F_op of 1..9 ranks (L = lcm(F_m, F_n) <= 9, F_k L <= 9), then two
# shapes that pad, some smaller than the grid
SHAPES = [(72, 72, 72), (13, 7, 11), (5, 17, 3)]
CASES = [(np.float32, True), (np.float64, False)]  # (dtype, overlap) pairs


def paces(plan) -> list[int]:
    """Every valid pace of a T10 plan's F_op: divisors of L up to the smaller window."""
    L, w = plan.params["units"], min(plan.params["window_A"], plan.params["window_B"])
    return [r for r in range(1, w + 1) if L % r == 0]


def _events(module, plan, rank: int, rename=None) -> list:
    """Rank ``rank``'s schedule on the symbolic layer, axes renamed (rank-independent data)."""
    a = np.zeros(plan.A.block_shape, np.float32)
    b = np.zeros(plan.B.block_shape, np.float32)
    view = plan.mesh.at(rank)
    comm = Comm(view, execute=False, compute=False)
    module.multiply(plan, comm, module.prepare(plan, a, b, view.coords))
    rename = rename or {}
    return [replace(e, axes=tuple(rename.get(x, x) for x in e.axes)) for e in comm.events]


def _rename(layout: TensorLayout, names: dict) -> TensorLayout:
    dims = tuple(
        tuple(Factor(f.size, names.get(f.level, f.level), f.stride) for f in dim)
        for dim in layout.dims
    )
    rot = layout.rotation and Rotation(
        tuple((names.get(lv, lv), c) for lv, c in layout.rotation.offset), layout.rotation.pace
    )
    return TensorLayout(dims, layout.logical_shape, layout.broadcast, layout.partial, rot)


# -- MPI: products -----------------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_tesseract_every_grid(shape):
    for grid in tesseract.grids(P):
        for panel in (None, 2):
            for dtype, overlap in CASES:
                plan = tesseract.plan(shape, P, grid=grid, panel=panel, overlap=overlap)
                r = run_and_verify(tesseract, plan, dtype)
                assert r["verified"], (grid, panel, overlap, r["max_rel_error"])


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_t10_every_fop_and_pace(shape):
    for fop in t10.grids(P):
        for pace in paces(t10.plan(shape, P, fop=fop)):
            for dtype, overlap in CASES:
                plan = t10.plan(shape, P, fop=fop, pace=pace, overlap=overlap)
                if shape == SHAPES[0]:
                    assert not (plan.A.is_padded or plan.B.is_padded or plan.C.is_padded)
                r = run_and_verify(t10, plan, dtype)
                assert r["verified"], (fop, pace, overlap, r["max_rel_error"])


@pytest.mark.mpi
def test_gemms_polled_in_row_chunks_compute_the_product():
    """Blocks tall enough for comm.gemm to poll the rotation between row chunks
    (algorithms.local_gemm.CHUNK_ROWS; the shapes above are thinner): F_op P x 1 x 1, each
    rank's rows 2 CHUNK_ROWS + 3, B rotating while they multiply."""
    from algorithms.local_gemm import CHUNK_ROWS

    plan = t10.plan(((2 * CHUNK_ROWS + 3) * P, 12, 5), P, fop=(P, 1, 1), overlap=True)
    r = run_and_verify(t10, plan, np.float64)
    assert r["verified"], r["max_rel_error"]


@pytest.mark.mpi
def test_t10_repeated_runs_and_bytes():
    """Three runs on one state (multiply must not touch its inputs), and per rank exactly the
    units it lacks: (L - W_A) units of A, (L - W_B) of B, (F_k - 1)/F_k of the partial C."""
    M, K, N = shape = SHAPES[0]
    world = MPI.COMM_WORLD
    for fop in t10.grids(P):
        fm, fk, fn = fop
        for overlap in (True, False):
            plan = t10.plan(shape, P, fop=fop, overlap=overlap)
            mesh = Mesh(plan.mesh, world)
            try:
                r, _ = run_plan(
                    t10, plan, mesh, np.dtype(np.float64), repeat=2, warmup=1, verify="exact"
                )
            finally:
                mesh.free()
            L, u = plan.params["units"], plan.params["unit"]
            m, n = M // fm, N // fn
            want = 8 * ((L - L // fn) * m * u + (L - L // fm) * u * n + (fk - 1) * m * n // fk)
            assert r["verified"], (fop, overlap)
            assert r["bytes_sent_per_rank"] == [want] * P, (fop, overlap)


@pytest.mark.mpi
def test_t10_square_is_cannon():
    """F_op = [p, 1, p]: Cannon's schedule, event for event, and bit for bit its C block."""
    if not cannon.grids(P):
        pytest.skip(f"cannon needs a square rank count, not {P}")
    p = cannon.grids(P)[0][0]
    world = MPI.COMM_WORLD
    for overlap in (True, False):
        out = {}
        for module, plan in (
            (cannon, cannon.plan((13, 7, 11), P, overlap=overlap)),
            (t10, t10.plan((13, 7, 11), P, fop=(p, 1, p), overlap=overlap)),
        ):
            mesh = Mesh(plan.mesh, world)
            try:
                a = generate_block(plan.A, mesh.coords, SEED_A, np.float64)
                b = generate_block(plan.B, mesh.coords, SEED_B, np.float64)
                comm = Comm(mesh)
                c = module.multiply(plan, comm, module.prepare(plan, a, b, mesh.coords))
            finally:
                mesh.free()
            rename = {"m": "x", "n": "y"} if module is t10 else {}
            out[module.name] = (
                c,
                [replace(e, axes=tuple(rename.get(x, x) for x in e.axes)) for e in comm.events],
            )
        assert np.array_equal(out["t10"][0], out["cannon"][0])
        assert out["t10"][1] == out["cannon"][1]


# -- serial: plans and errors ------------------------------------------------------------------
def test_t10_grids_are_every_triple():
    for n in range(1, 13):
        triples = t10.grids(n)
        assert len(set(triples)) == len(triples)
        assert all(math.prod(f) == n for f in triples)
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        assert len(triples) == sum(1 for d in divisors for e in divisors if (n // d) % e == 0)
    assert t10.grids(4)[0] == (2, 1, 2) and t10.grids(8)[0] == (2, 2, 2)
    assert t10.grids(9)[0] == (3, 1, 3) and t10.grids(1) == [(1, 1, 1)]


def test_t10_default_fop_follows_the_volume():
    assert t10.plan((3072, 3072, 3072), 4).params["fop"] == [2, 1, 2]
    assert t10.plan((3072, 3072, 3072), 8).params["fop"] == [2, 2, 2]
    assert t10.plan((3072, 3072, 3072), 9).params["fop"] == [3, 1, 3]
    assert t10.plan((4096, 64, 64), 4).params["fop"] == [4, 1, 1]  # tall A: split M only
    assert t10.plan((64, 4096, 64), 4).params["fop"] == [1, 4, 1]  # deep K: split K only


def test_tesseract_grids():
    assert tesseract.grids(1) == [(1, 1, 1)]
    assert tesseract.grids(4) == [(2, 2, 1), (1, 1, 4)]
    assert tesseract.grids(8) == [(2, 2, 2), (1, 1, 8)]
    assert tesseract.grids(16) == [(2, 2, 4), (4, 4, 1), (1, 1, 16)]
    assert tesseract.grids(6) == [(1, 1, 6)] and tesseract.grids(18)[0] == (3, 3, 2)
    assert tesseract.plan((9, 9, 9), 8).grid == (2, 2, 2)


def test_tesseract_layouts():
    plan = tesseract.plan((16, 24, 32), 8)
    assert plan.mesh.axes == (("x", 2), ("y", 2), ("z", 2))
    assert plan.params == {"panel": 12, "panels": 2}
    assert plan.A == parse_layout("((2_z, 2_x, 4:12), (2_y, 1:48, 12:1))")  # panel-major
    assert plan.B == parse_layout("((2_x, 12), (2_y, 16); B@[z])")
    assert plan.C == parse_layout("((2_z, 2_x, 4), (2_y, 16))")
    plan = tesseract.plan((13, 7, 11), 8, grid=(1, 1, 8))  # M split over 8 layers, no messages
    assert plan.A == parse_layout("(13,7)/((8_z, 2:7), (1:14, 7:1))")
    assert plan.B == parse_layout("((7), (11); B@[z])")
    assert all(e.kind == "gemm" for r in range(8) for e in _events(tesseract, plan, r))


@pytest.mark.parametrize(
    "P_, fop, match",
    [
        (6, (2, 1, 2), r"F_op 2,1,2 has 4 cores but the job has 6 \(for 6 ranks: 2,1,3; 3,1,2;"),
        (4, (2, 2), r"F_op must be three positive integers"),
        (4, (2, 0, 2), r"F_op must be three positive integers"),
    ],
)
def test_t10_bad_fop(P_, fop, match):
    with pytest.raises(PlanError, match=match):
        t10.plan((8, 8, 8), P_, fop=fop)


@pytest.mark.parametrize(
    "fop, pace, match",
    [
        (
            (2, 1, 3),
            3,
            r"pace 3 is not valid for F_op 2,1,3 \(L = 6 units, windows W_A = 2, "
            r"W_B = 3; valid: 1, 2\)",
        ),
        ((2, 1, 2), 2, r"valid: 1\)"),
        ((4, 1, 6), 4, r"L = 12 units, windows W_A = 2, W_B = 3; valid: 1, 2\)"),
        ((2, 1, 3), 0, r"pace 0 is not valid"),
    ],
)
def test_t10_bad_pace(fop, pace, match):
    with pytest.raises(PlanError, match=match):
        t10.plan((8, 8, 8), math.prod(fop), fop=fop, pace=pace)


def test_t10_options():
    plan = t10.plan((8, 8, 8), 24, fop=(4, 1, 6))
    assert plan.params["units"] == 12 and plan.params["window_A"] == 2
    assert plan.params["window_B"] == 3 and plan.params["pace"] == 2  # default: min(W_A, W_B)
    assert t10.plan((8, 8, 8), 24, fop=(4, 1, 6), pace=1).params["steps"] == 12

    def args(**kw):
        base = dict(
            algo="t10",
            shape=(8, 8, 8),
            grid=None,
            fop=None,
            pace=None,
            panel=None,
            no_overlap=False,
        )
        return argparse.Namespace(**{**base, **kw})

    with pytest.raises(PlanError, match="t10 takes no --grid"):
        make_plan(args(grid=(2, 2)), 4)
    with pytest.raises(PlanError, match="t10 takes no --panel"):
        make_plan(args(panel=2), 4)
    with pytest.raises(PlanError, match="tesseract takes no --fop"):
        make_plan(args(algo="tesseract", fop=(1, 1, 4)), 4)
    assert make_plan(args(fop=(2, 1, 2), pace=1), 4)[1].params["fop"] == [2, 1, 2]


@pytest.mark.parametrize(
    "grid, match",
    [
        ((2, 3, 1), r"grid 2x3x1 is not a q x q x d grid .*for 6 ranks: 1x1x6"),
        ((2, 2, 1), r"grid 2x2x1 has 4 ranks but the job has 6"),
    ],
)
def test_tesseract_bad_grid(grid, match):
    with pytest.raises(PlanError, match=match):
        tesseract.plan((8, 8, 8), 6, grid=grid)
    with pytest.raises(PlanError, match="panel width must be a positive integer"):
        tesseract.plan((8, 8, 8), 4, panel=0)


# -- serial: Cannon and SUMMA as special cases -------------------------------------------------
@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("shape", [(12, 12, 12), (13, 7, 11), (5, 17, 3)])
def test_t10_square_has_cannons_layouts(p, shape):
    ours = t10.plan(shape, p * p, fop=(p, 1, p))
    theirs = cannon.plan(shape, p * p)
    names = {"m": "x", "n": "y"}
    assert ours.params["units"] == p and ours.params["pace"] == 1
    assert ours.params["window_A"] == ours.params["window_B"] == 1
    for key in "ABC":
        assert _rename(getattr(ours, key), names) == getattr(theirs, key), key
    assert "R@[m + n]" in str(ours.A)


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("overlap", [True, False])
def test_t10_square_has_cannons_schedule(p, overlap):
    ours = t10.plan((13, 7, 11), p * p, fop=(p, 1, p), overlap=overlap)
    theirs = cannon.plan((13, 7, 11), p * p, overlap=overlap)
    for rank in range(p * p):
        # rank r is (x, y) = divmod(r, p) for cannon and (m, 0, n) for t10: the same core
        assert _events(t10, ours, rank, {"m": "x", "n": "y"}) == _events(cannon, theirs, rank)


@pytest.mark.parametrize("q", [2, 3])  # q = 1: summa keeps its 1_x, 1_y levels
@pytest.mark.parametrize("panel", [None, 2])
def test_tesseract_one_layer_is_summa(q, panel):
    ours = tesseract.plan((13, 7, 11), q * q, grid=(q, q, 1), panel=panel)
    theirs = summa.plan((13, 7, 11), q * q, grid=(q, q), panel=panel)
    assert (ours.A, ours.B, ours.C) == (theirs.A, theirs.B, theirs.C)
    assert ours.params == theirs.params
    for rank in range(q * q):
        assert _events(tesseract, ours, rank) == _events(summa, theirs, rank)


def test_tesseract_layers_never_talk():
    plan = tesseract.plan((13, 7, 11), 8)
    for rank in range(8):
        ev = _events(tesseract, plan, rank)
        assert {e.axes for e in ev if e.kind == "bcast"} == {("x",), ("y",)}


# -- serial: T10's worked example, windows and schedules ---------------------------------------
def test_worked_example():
    """C[2,3] += A[2,6] @ B[6,3], F_op = [2,1,3] on 6 cores (the T10 paper's example)."""
    plan = t10.plan((2, 6, 3), 6, fop=(2, 1, 3))
    assert not (plan.A.is_padded or plan.B.is_padded or plan.C.is_padded)
    assert plan.C.block_shape == (1, 1)  # each core computes C[1,1]
    assert plan.params["units"] == 6 and plan.params["unit"] == 1
    assert 6 // plan.params["window_A"] == 3  # f_t^A = 3 chunks (one per core of A's ring)
    assert 6 // plan.params["window_B"] == 2  # f_t^B = 2 chunks
    A, B = global_matrix((2, 6), SEED_A), global_matrix((6, 3), SEED_B)
    for rank in range(6):
        coords = plan.mesh.coords(rank)
        a, b = _windows(plan, coords)
        assert [u.shape for u in a] == [(1, 1)] * 2 and [u.shape for u in b] == [(1, 1)] * 3
        # over the 6 units of K the core sees all of A[1,6] (its row) and B[6,1] (its column)
        h = (3 * coords["m"] + 2 * coords["n"]) % 6
        assert a[0][0, 0] == A[coords["m"], h] and b[0][0, 0] == B[h, coords["n"]]
    # A's ring (m fixed, along n) holds 3 windows of 2 units covering A[m, 0:6] once
    for m in range(2):
        starts = sorted((3 * m + 2 * n) % 6 for n in range(3))
        assert {(s + j) % 6 for s in starts for j in range(2)} == set(range(6))


def _windows(plan, coords, dtype=np.float64):
    a = generate_block(plan.A, coords, SEED_A, dtype)
    b = generate_block(plan.B, coords, SEED_B, dtype)
    return t10.prepare(plan, a, b, coords)


@pytest.mark.parametrize(
    "fop", [(2, 1, 3), (3, 1, 2), (2, 2, 3), (1, 1, 4), (4, 1, 1), (2, 3, 1), (4, 1, 6)]
)
@pytest.mark.parametrize("shape", [(13, 7, 11), (24, 48, 36)])
def test_windows_are_consecutive_units_of_the_k_slice(fop, shape):
    """Core (a, c, b)'s windows: units h..h+W-1 (mod L) of K slice c, h = a W_B + b W_A, and
    each ring's windows cover the slice once."""
    plan = t10.plan(shape, math.prod(fop), fop=fop)
    L, u = plan.params["units"], plan.params["unit"]
    wa, wb = plan.params["window_A"], plan.params["window_B"]
    Mp, Kp = plan.A.padded_shape
    Np = plan.B.padded_shape[1]
    A = np.zeros((Mp, Kp))
    A[: shape[0], : shape[1]] = global_matrix(shape[:2], SEED_A)
    B = np.zeros((Kp, Np))
    B[: shape[1], : shape[2]] = global_matrix(shape[1:], SEED_B)
    m_, n_ = Mp // fop[0], Np // fop[2]
    cover_a, cover_b = {}, {}
    for rank in range(plan.P):
        co = plan.mesh.coords(rank)
        a, b = _windows(plan, co)
        assert len(a) == wa and len(b) == wb
        h = (wb * co["m"] + wa * co["n"]) % L
        for j, unit in enumerate(a):
            col = co["k"] * L * u + ((h + j) % L) * u
            assert np.array_equal(unit, A[co["m"] * m_ : (co["m"] + 1) * m_, col : col + u])
            cover_a.setdefault((co["m"], co["k"]), []).append((h + j) % L)
        for j, unit in enumerate(b):
            row = co["k"] * L * u + ((h + j) % L) * u
            assert np.array_equal(unit, B[row : row + u, co["n"] * n_ : (co["n"] + 1) * n_])
            cover_b.setdefault((co["n"], co["k"]), []).append((h + j) % L)
    assert all(sorted(v) == list(range(L)) for v in cover_a.values())
    assert all(sorted(v) == list(range(L)) for v in cover_b.values())


@pytest.mark.parametrize("fop", [(2, 1, 3), (3, 2, 2), (1, 1, 4), (4, 1, 6), (1, 3, 1)])
@pytest.mark.parametrize("overlap", [True, False])
def test_schedule_counts(fop, overlap):
    """Per core: L GEMMs of depth u in L/rp steps, L - W_A A units and L - W_B B units each one
    message, one reduce-scatter along k when F_k > 1, and a wait per overlapped message."""
    P_ = math.prod(fop)
    for pace in paces(t10.plan((13, 7, 11), P_, fop=fop)):
        plan = t10.plan((13, 7, 11), P_, fop=fop, pace=pace, overlap=overlap)
        L, u = plan.params["units"], plan.params["unit"]
        wa, wb = plan.params["window_A"], plan.params["window_B"]
        m, n = plan.A.block_shape[0], plan.B.block_shape[1]
        for rank in range(P_):
            ev = _events(t10, plan, rank)
            gemms = [e for e in ev if e.kind == "gemm"]
            assert [e.shape for e in gemms] == [(m, u, n)] * L
            assert [e.step for e in gemms] == [t for t in range(L // pace) for _ in range(pace)]
            shifts = [e for e in ev if e.kind == "shift"]
            assert sum(e.axes == ("n",) for e in shifts) == (L - wa if fop[2] > 1 else 0)
            assert sum(e.axes == ("m",) for e in shifts) == (L - wb if fop[0] > 1 else 0)
            assert all(e.overlapped == overlap and e.messages == 1 for e in shifts)
            assert sum(e.kind == "wait" for e in ev) == (len(shifts) if overlap else 0)
            rs = [e for e in ev if e.kind == "reduce_scatter"]
            assert len(rs) == (fop[1] > 1) and all(e.axes == ("k",) for e in rs)


def test_window_layouts_hold_each_unit_on_every_ring_member_that_needs_it():
    """With F_m != F_n a core holds W units: the layouts say so (window=W), round-trip, and at
    step 0 every element of A and B is held, so they can be gathered and redistributed."""
    from layouts import held_indices, parse_layout

    plan = t10.plan((13, 7, 11), 6, fop=(2, 1, 3))
    assert "window=2" in str(plan.A) and "window=3" in str(plan.B)
    assert parse_layout(str(plan.A)) == plan.A and parse_layout(str(plan.B)) == plan.B
    for layout in (plan.A, plan.B):
        count = np.zeros(layout.padded_shape, int)
        for rank in range(plan.P):
            rows, cols = held_indices(layout, plan.mesh.coords(rank))
            count[np.ix_(rows, cols)] += 1
        assert (count >= 1).all()
