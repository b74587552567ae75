"""SUMMA with A or B stationary (algorithms/stationary.py): the right product for every grid the
world size admits, any shape, panel and overlap; serially, their layouts and schedules.

Run under mpiexec with ``--only-mpi`` (any size); the tests without the mpi mark run serially.
"""

import itertools
from collections import Counter

import numpy as np
import pytest
from mpi4py import MPI
from mpi_helpers import run_and_verify

from algorithms import get
from algorithms.plan import PlanError
from bench.model import schedule
from layouts import generate_block, to_memory
from layouts.blockmap import local_address, owner

P = MPI.COMM_WORLD.Get_size()
SHAPES = [(12, 18, 24), (13, 7, 11), (5, 17, 3), (1, 1, 1)]
NAMES = ["summa_a", "summa_b"]


@pytest.mark.mpi
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("panel", [None, 1, 3])
def test_every_grid_panel_and_overlap(name, shape, panel):
    algorithm = get(name)
    for grid in algorithm.grids(P):
        for overlap in (True, False):
            plan = algorithm.plan(shape, P, grid=grid, panel=panel, overlap=overlap)
            r = run_and_verify(algorithm, plan, np.float64)
            assert r["verified"], (grid, r)


@pytest.mark.mpi
@pytest.mark.parametrize("name", NAMES)
def test_chunks_large_enough_to_poll_messages_during_their_gemms(name):
    """Chunks of 600 rows (summa_b) / columns (summa_a): the GEMM runs in row chunks, polling
    the next chunk's broadcast between them."""
    algorithm = get(name)
    shape = (600 * P, 40, 70) if name == "summa_b" else (70, 40, 600 * P)
    for grid in algorithm.grids(P):
        plan = algorithm.plan(shape, P, grid=grid, panel=600 // grid[0 if name == "summa_b" else 1])
        r = run_and_verify(algorithm, plan, np.float32)
        assert r["verified"], (grid, r)


def test_stationary_a_holds_b_chunk_by_chunk():
    """summa_a's chunks are B's column chunks, each contiguous; one chunk a mesh row is the
    block as generated (no copy)."""
    algorithm = get("summa_a")
    for panel, copied in ((2, True), (None, False)):
        plan = algorithm.plan((9, 14, 23), 6, grid=(2, 3), panel=panel)
        w = 3 * plan.params["panel"]
        for coords in ({"x": 0, "y": 0}, {"x": 1, "y": 2}):
            a = generate_block(plan.A, coords, 1, np.float64)
            b = generate_block(plan.B, coords, 2, np.float64)
            a_kept, chunks = algorithm.prepare(plan, a, b, coords)
            assert a_kept is a and np.shares_memory(chunks, b) != copied
            for i, chunk in enumerate(chunks):
                assert chunk.flags.c_contiguous
                assert np.array_equal(chunk, b[:, i * w : (i + 1) * w])
            assert np.array_equal(chunks.reshape(-1), to_memory(plan.B, b))


def test_stationary_b_copies_nothing():
    algorithm = get("summa_b")
    plan = algorithm.plan((23, 14, 9), 6, grid=(3, 2), panel=2)
    a = generate_block(plan.A, {"x": 1, "y": 1}, 1, np.float64)
    b = generate_block(plan.B, {"x": 1, "y": 1}, 2, np.float64)
    chunks, b_kept = algorithm.prepare(plan, a, b, {"x": 1, "y": 1})
    assert np.shares_memory(chunks, a) and b_kept is b


@pytest.mark.parametrize("name", NAMES)
def test_with_overlap_each_reduce_scatter_but_the_last_is_in_flight_over_the_next_gemm(name):
    """Chunk g's reduce-scatter is posted after its GEMM and waited after chunk g+1's (before
    chunk g+2's, which reuses its buffers); the last one blocks, as does every one without
    overlap. summa_a copies each piece into C once it has it."""
    algorithm = get(name)
    for overlap in (True, False):
        plan = algorithm.plan((40, 30, 50), 6, grid=(2, 3), panel=2, overlap=overlap)
        events = schedule(algorithm, plan, 4, "float64")
        sums = [i for i, e in enumerate(events) if e.kind == "reduce_scatter"]
        gemms = [i for i, e in enumerate(events) if e.kind == "gemm"]
        assert len(sums) == len(gemms) == plan.params["chunks"] > 2
        posted = [i for i in sums if events[i].overlapped]
        assert posted == (sums[:-1] if overlap else [])
        for g, i in enumerate(posted):
            (wait,) = [j for j, e in enumerate(events) if e.kind == "wait" and e.waits == (i,)]
            assert gemms[g + 1] < wait < (gemms[g + 2] if g + 2 < len(gemms) else len(events))
            if name == "summa_a":
                assert events[wait + 1].kind == "copy"


def _messages(name, plan, rank, axes: dict) -> Counter:
    return Counter(
        (e.kind, e.nbytes, e.sent, tuple(axes.get(a, a) for a in e.axes), e.flops)
        for e in schedule(get(name), plan, rank, "float64")
        if e.kind not in ("copy", "wait")
    )


@pytest.mark.parametrize("grid", [(2, 3), (3, 2), (1, 6), (6, 1)])
def test_a_stationary_mirrors_b_stationary_on_the_transposed_product(grid):
    """summa_a on M x K x N over p x q sends what summa_b does on N x K x M over q x p, with
    its axes swapped, and does as many flops, rank for rank (summa_a copies C's pieces into
    place besides)."""
    a_plan = get("summa_a").plan((10, 31, 45), 6, grid=grid, panel=2)
    b_plan = get("summa_b").plan((45, 31, 10), 6, grid=grid[::-1], panel=2)
    for x in range(grid[0]):
        for y in range(grid[1]):
            ours = _messages("summa_a", a_plan, x * grid[1] + y, {})
            assert ours == _messages("summa_b", b_plan, y * grid[0] + x, {"x": "y", "y": "x"})


def test_a_wide_panel_is_cut_to_the_share_and_a_bad_one_refused():
    for name in NAMES:
        algorithm = get(name)
        assert algorithm.plan((64, 8, 64), 4, grid=(2, 2), panel=10**6).params == {
            "panel": 16,
            "chunks": 2,
        }
        with pytest.raises(PlanError, match="panel width must be a positive integer"):
            algorithm.plan((64, 8, 64), 4, panel=0)


@pytest.mark.parametrize("shape", [(100, 77, 53), (512, 8192, 512), (13, 7, 11)])
@pytest.mark.parametrize("P", [3, 4, 6])
def test_a_stationary_on_one_mesh_row_is_t10_k_split(shape, P):
    """summa_a on 1 x P is T10's F_op [1, P, 1] (Algorithm.same_as): the same layouts (but for
    the axis' name and memory factors of size 1) and the same schedule on every rank."""
    ours, theirs = (
        get("summa_a").plan(shape, P, grid=(1, P)),
        get("t10").plan(shape, P, fop=(1, P, 1)),
    )
    assert get("summa_a").same_as((1, P)) == ("t10", (1, P, 1))
    for name in "ABC":
        mine, t10 = getattr(ours, name), getattr(theirs, name)
        assert (mine.block_shape, mine.padded_shape) == (t10.block_shape, t10.padded_shape)
        sample = ({*range(0, n, max(1, n // 40)), n - 1} for n in mine.logical_shape)
        for index in itertools.product(*sample):
            assert owner(mine, index) == {"y": owner(t10, index)["k"]}
            assert local_address(mine, index) == local_address(t10, index)
    for rank in range(P):
        assert [
            (e.kind, e.nbytes, e.shape, e.group)
            for e in schedule(get("summa_a"), ours, rank, "float32")
        ] == [
            (e.kind, e.nbytes, e.shape, e.group)
            for e in schedule(get("t10"), theirs, rank, "float32")
        ]
