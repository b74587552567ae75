"""SUMMA with B stationary on any p x q mesh (axes x = mesh row, y = mesh column): see
algorithms/stationary.py. B is 2D-blocked and never moves; M is cut into chunks of A's rows,
broadcast along the rows (axis y) from the mesh column that holds them, and each chunk's product
is reduce-scattered along the columns (axis x), each rank keeping ``panel`` rows of it. A's
chunks are contiguous row ranges of the block as generated, so nothing is copied.
"""

from __future__ import annotations

import sys

import numpy as np

from layouts.builder import build, dev, mem
from topology import AbstractMesh

from .plan import Plan, ceil_to, check_grid, check_shape
from .spec import GRID, Algorithm
from .stationary import PIECE, grids, promised_of, stated_cost, stationary_loop
from .summa import panel_width
from .symbolic import reshaped

NAME = "summa_b"


def plan(shape, P: int, *, grid=None, panel: int | None = None, overlap: bool = True) -> Plan:
    """A: M cut into chunks of h = p*b rows, each mesh column holding a run of them, K split over
    x; B: K over x, N over y (2D blocks); C: each chunk's rows split b by b over x, N over y.
    """
    M, K, N = check_shape(shape, NAME)
    p, q = check_grid(NAME, P, grid, grids, "a p x q grid")
    b = panel_width(NAME, panel, -(-M // P))
    h = p * b
    per_owner = ceil_to(M, q * h) // (q * h)
    chunks = per_owner * q
    k, n = ceil_to(K, p) // p, ceil_to(N, q) // q
    return Plan(
        NAME,
        (M, K, N),
        AbstractMesh((("x", p), ("y", q))),
        A=build((M, K), [[dev("y", q), mem(per_owner * h)], [dev("x", p), mem(k)]]),
        B=build((K, N), [[dev("x", p), mem(k)], [dev("y", q), mem(n)]]),
        C=build((M, N), [[mem(chunks), dev("x", p), mem(b)], [dev("y", q), mem(n)]]),
        params={"panel": b, "chunks": chunks},
        overlap=overlap,
    )


def _chunk_rows(plan: Plan) -> int:
    return plan.mesh.sizes["x"] * plan.params["panel"]


def prepare(plan: Plan, a: np.ndarray, b: np.ndarray, coords):
    return reshaped(a, (-1, _chunk_rows(plan), a.shape[1])), b


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a_chunks, b = state
    c = comm.empty((plan.params["chunks"] * plan.params["panel"], b.shape[1]), b.dtype)
    return stationary_loop(
        comm, a_chunks, b, c, overlap=plan.overlap, bcast_axis="y", reduce_axis="x", side="b"
    )


def gemms(plan: Plan) -> tuple[tuple[int, int, int], ...]:
    return ((_chunk_rows(plan), *plan.B.block_shape),)


def promised(plan: Plan, itemsize: int):
    k, n = plan.B.block_shape
    h = _chunk_rows(plan)
    return promised_of(plan, itemsize, h * k, h * n, "y", "x")


ALGORITHM = Algorithm(
    name=NAME,
    summary="SUMMA with B stationary on any p x q mesh (A chunks broadcast, C reduce-scattered)",
    grids=grids,
    plan=plan,
    multiply=multiply,
    options=(GRID, PIECE),
    prepare=prepare,
    stated_cost=stated_cost,
    gemms=gemms,
    promised=promised,
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
