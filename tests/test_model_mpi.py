"""The model's schedule is the executed one: bytes per rank and event kinds match the real run."""

import numpy as np
import pytest
from mpi4py import MPI

from algorithms import ALGORITHMS, get
from algorithms.comm import Comm
from bench.model import schedule
from topology import Mesh

world = MPI.COMM_WORLD
P = world.Get_size()


def plans(name):
    module = get(name)
    for grid in module.grids(P):
        kw = {"fop": grid} if name == "t10" else {"grid": grid}
        yield module, module.plan((13, 11, 9), P, **kw)


@pytest.mark.mpi
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_symbolic_schedule_equals_executed(name):
    for module, plan in plans(name):
        mesh = Mesh(plan.mesh, world)
        from layouts import generate_block

        a = generate_block(plan.A, mesh.coords, 1, np.float64)
        b = generate_block(plan.B, mesh.coords, 2, np.float64)
        comm = Comm(mesh)
        module.multiply(plan, comm, module.prepare(plan, a, b, mesh.coords))
        mesh.free()
        model = schedule(module, plan, world.Get_rank(), np.float64)
        strip = lambda evs: [(e.kind, e.axes, e.group, e.nbytes, e.sent, e.shape) for e in evs]  # noqa: E731
        assert strip(model) == strip(comm.events), (name, plan.grid)


@pytest.mark.mpi
def test_collectives_timed_on_the_rows_and_columns_of_a_grid():
    """calibrate's timings above the cores on the most square grid of the ranks (none where
    P is prime): every kind the grid times, at each size, none negative."""
    from bench.calibration_counts import GRID_KINDS, grid_collectives
    from layouts.named import grid

    out = grid_collectives(world, quick=True)
    p, q = grid(P)
    if p < 2:
        assert out == {}
        return
    assert out["grid"] == [p, q] and set(out["grid_collectives"]) == set(GRID_KINDS)
    for rows in out["grid_collectives"].values():
        assert len(rows) == 2 and all(n > 0 and seconds >= 0 for n, seconds in rows)


@pytest.mark.mpi
def test_busy_gemm_times_any_shape_with_every_rank_at_once():
    """calibrate's GEMM with every rank busy, of a square size and of an M x K x N shape (what
    scripts/gemm_busy.py --shapes times): each rank's same barrier-to-barrier seconds."""
    from bench.calibration import busy_gemm

    n, square = busy_gemm(world, 2, True, 64)
    shape, thin = busy_gemm(world, 2, True, shape=(96, 32, 16))
    assert n == 64 and shape == (96, 32, 16)
    assert square > 0 and thin > 0
    assert world.allgather(thin) == [thin] * P  # rank 0's time, told to every rank
