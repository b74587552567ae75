"""Cannon and 2D SUMMA give the right product for every grid the world size admits, any shape."""

import numpy as np
import pytest
from mpi4py import MPI
from mpi_helpers import run_and_verify

from algorithms.cannon import ALGORITHM as cannon
from algorithms.summa import ALGORITHM as summa

P = MPI.COMM_WORLD.Get_size()
SHAPES = [(12, 18, 24), (13, 7, 11), (5, 17, 3), (1, 1, 1)]


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("overlap", [True, False])
def test_cannon(shape, overlap):
    if not cannon.grids(P):
        pytest.skip(f"cannon needs a square rank count, not {P}")
    plan = cannon.plan(shape, P, overlap=overlap)
    for dtype in (np.float32, np.float64):
        r = run_and_verify(cannon, plan, dtype)
        assert r["verified"], r


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("panel", [None, 1, 3])
def test_summa_every_grid(shape, panel):
    for grid in summa.grids(P):
        for overlap in (True, False):
            plan = summa.plan(shape, P, grid=grid, panel=panel, overlap=overlap)
            r = run_and_verify(summa, plan, np.float64)
            assert r["verified"], (grid, r)


@pytest.mark.mpi
def test_freivalds_agrees_with_exact():
    plan = summa.plan((40, 33, 27), P)
    exact = run_and_verify(summa, plan, np.float32, verify="exact")
    randomised = run_and_verify(summa, plan, np.float32, verify="freivalds")
    assert exact["verified"] and randomised["verified"]
    assert randomised["max_rel_error"] < 1e-5


@pytest.mark.mpi
def test_bytes_counted_match_the_schedule():
    """Cannon on p x p sends 2 (p - 1) blocks per rank; SUMMA's broadcasts by the convention."""
    if cannon.grids(P):
        p = cannon.grids(P)[0][0]
        r = run_and_verify(cannon, cannon.plan((8 * p, 8 * p, 8 * p), P), np.float64)
        assert r["bytes_sent_per_rank"] == [2 * (p - 1) * 8 * 8 * 8] * P
    p, q = summa.grids(P)[0]
    n = 6 * p * q
    r = run_and_verify(summa, summa.plan((n, n, n), P), np.float64)
    # every A panel goes from its owner to q-1 others, every B panel to p-1 others
    assert r["bytes_sent"] == 8 * n * n * ((q - 1) + (p - 1))


@pytest.mark.mpi
def test_ranks_refusing_leave_together_after_rank_0():
    """bench.machine.leave_together: no rank leaves before the last arrives (rank 0, late
    here, has printed its line by then), so a launcher that ends the job at the first rank's
    non-zero exit, as Open MPI's does, cannot cut rank 0's one line."""
    import time

    from bench.machine import leave_together

    world = MPI.COMM_WORLD
    world.Barrier()
    start = time.monotonic()
    if world.Get_rank() == 0:
        time.sleep(0.3)
    leave_together()
    waited = time.monotonic() - start
    assert waited >= (0.3 if P > 1 else 0.0) - 0.01, waited
