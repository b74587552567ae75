"""SUMMA with A stationary on any p x q mesh (axes x = mesh row, y = mesh column): B stationary's
loop (algorithms/stationary.py) on the transposed product C^T = B^T A^T. A is 2D-blocked and
never moves; N is cut into chunks of B's columns, broadcast along the columns (axis x) from the
mesh row that holds them, and each chunk's product is reduce-scattered along the rows (axis y),
each rank keeping ``panel`` columns of it.

B is held chunk by chunk, each chunk transposed (its layout's memory strides say so), so a
chunk is one contiguous buffer and the GEMM reads it as B^T; C is held transposed, so each
reduce-scatter writes its piece in place. A is read as A^T, a view. The loop's GEMMs are
(q*panel, k, m): C^T's rows.
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
from .symbolic import is_placeholder, placeholder

NAME = "summa_a"


def plan(shape, P: int, *, grid=None, panel: int | None = None, overlap: bool = True) -> Plan:
    """A: 2D blocks; B: K over y, N in chunks of w = q*panel columns, each mesh row holding a
    run of them, each chunk stored transposed; C: M over x, each chunk's columns split panel by
    panel over y, stored transposed."""
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
            (K, N), [[dev("y", q), mem(k, 1)], [dev("x", p), mem(per_owner, w * k), mem(w, k)]]
        ),
        C=build((M, N), [[dev("x", p), mem(m, 1)], [mem(chunks, b * m), dev("y", q), mem(b, m)]]),
        params={"panel": b, "chunks": chunks},
        overlap=overlap,
    )


def _chunk_cols(plan: Plan) -> int:
    return plan.mesh.sizes["y"] * plan.params["panel"]


def prepare(plan: Plan, a: np.ndarray, b: np.ndarray, coords):
    """B's chunks as laid out, (per owner, w, k): one transposing copy."""
    k, w = b.shape[0], _chunk_cols(plan)
    if is_placeholder(b):
        return placeholder((b.shape[1] // w, w, k), b.dtype), a.T
    return np.ascontiguousarray(b.reshape(k, -1, w).transpose(1, 2, 0)), a.T


def multiply(plan: Plan, comm, state) -> np.ndarray:
    b_chunks, a_t = state
    c_t = comm.empty((plan.params["chunks"] * plan.params["panel"], a_t.shape[1]), a_t.dtype)
    loop = stationary_loop(
        comm, b_chunks, a_t, c_t, overlap=plan.overlap, bcast_axis="x", reduce_axis="y"
    )
    return loop.T


def gemms(plan: Plan) -> tuple[tuple[int, int, int], ...]:
    m, k = plan.A.block_shape
    return ((_chunk_cols(plan), k, m),)


def promised(plan: Plan, itemsize: int):
    m, k = plan.A.block_shape
    return promised_of(plan, itemsize, (_chunk_cols(plan), k), m, "x", "y")


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
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
