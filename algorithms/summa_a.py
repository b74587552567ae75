"""SUMMA with A stationary on any p x q mesh (axes x = mesh row, y = mesh column): see
algorithms/stationary.py. A is 2D-blocked and never moves; N is cut into chunks of B's columns,
broadcast along the columns (axis x) from the mesh row that holds them, and each chunk's product
is reduce-scattered along the rows (axis y), each rank keeping ``panel`` columns of it.

B is held chunk-major (its layout's memory strides say so), so every chunk is one contiguous
buffer; with one chunk per mesh row (the default) that is the block as generated. The
reduce-scatter packs the product's column pieces, and each rank copies its piece into place
(with one chunk, N split over y alone, the piece is C's block and lands there).
"""

from __future__ import annotations

import sys

import numpy as np

from layouts.builder import build, dev, mem
from topology import AbstractMesh

from .plan import Plan, ceil_to, check_grid, check_shape
from .spec import GRID, Algorithm
from .stationary import PIECE, grids, promised_of, stated_cost, stationary_loop
from .summa import laid_out, panel_width
from .symbolic import reshaped

NAME = "summa_a"


def plan(shape, P: int, *, grid=None, panel: int | None = None, overlap: bool = True) -> Plan:
    """A: 2D blocks; B: K over y, N in chunks of w = q*panel columns, each mesh row holding a
    run of them, chunk-major; C: M over x, each chunk's columns split panel by panel over y."""
    M, K, N = check_shape(shape, NAME)
    p, q = check_grid(NAME, P, grid, grids, "a p x q grid")
    b = panel_width(NAME, panel, -(-N // P))
    w = q * b
    per_owner = ceil_to(N, p * w) // (p * w)
    chunks = per_owner * p
    m, k = ceil_to(M, p) // p, ceil_to(K, q) // q
    return Plan(
        NAME,
        (M, K, N),
        AbstractMesh((("x", p), ("y", q))),
        A=build((M, K), [[dev("x", p), mem(m)], [dev("y", q), mem(k)]]),
        B=build(
            (K, N), [[dev("y", q), mem(k, w)], [dev("x", p), mem(per_owner, k * w), mem(w, 1)]]
        ),
        C=build((M, N), [[dev("x", p), mem(m)], [mem(chunks), dev("y", q), mem(b)]]),
        params={"panel": b, "chunks": chunks},
        overlap=overlap,
    )


def _chunk_cols(plan: Plan) -> int:
    return plan.mesh.sizes["y"] * plan.params["panel"]


def prepare(plan: Plan, a: np.ndarray, b: np.ndarray, coords):
    w = _chunk_cols(plan)  # one chunk a mesh row (the default): the block as generated
    return a, reshaped(laid_out(plan.B, b, b.shape[1] == w), (-1, b.shape[0], w))


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a, b_chunks = state
    c = comm.empty((a.shape[0], plan.params["chunks"] * plan.params["panel"]), a.dtype)
    return stationary_loop(
        comm, b_chunks, a, c, overlap=plan.overlap, bcast_axis="x", reduce_axis="y", side="a"
    )


def gemms(plan: Plan) -> tuple[tuple[int, int, int], ...]:
    return ((*plan.A.block_shape, _chunk_cols(plan)),)


def promised(plan: Plan, itemsize: int):
    """The loop's broadcasts and reduce-scatters, and where C's pieces are columns (more than
    one rank along y) the packing of each product and, with more than one chunk, the copy of
    each piece into place."""
    (m, k), w, chunks = plan.A.block_shape, _chunk_cols(plan), plan.params["chunks"]
    out = promised_of(plan, itemsize, k * w, m * w, "x", "y")
    if plan.mesh.sizes["y"] > 1:
        out += (("copy", m * w * itemsize, 1, chunks, True),)
        if chunks > 1:
            out += (("copy", m * plan.params["panel"] * itemsize, 1, chunks, True),)
    return out


def t10_twin(grid: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
    """Algorithm.same_as: on 1 x q (one chunk, nothing to broadcast) this is T10's F_op =
    [1, q, 1], K over every rank and C's columns reduce-scattered, with the same layouts and
    schedule (tests/test_stationary_mpi.py); the planner ranks that one (a narrower panel, more
    reduce-scatters in turn, is then not ranked)."""
    p, q = grid
    return ("t10", (1, q, 1)) if p == 1 else None


ALGORITHM = Algorithm(
    name=NAME,
    summary="SUMMA with A stationary on any p x q mesh (B chunks broadcast, C reduce-scattered)",
    grids=grids,
    plan=plan,
    multiply=multiply,
    options=(GRID, PIECE),
    prepare=prepare,
    stated_cost=stated_cost,
    gemms=gemms,
    promised=promised,
    same_as=t10_twin,
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
