"""Cannon's algorithm (1969) on a p x p mesh (axes x = mesh row i, y = mesh column j).

Device (i, j) starts with A[i, (i+j) % p] and B[(i+j) % p, j]: the skew is the rotation
``R@[x + y]`` of the K blocks (Time axis), so the initial placement is set up directly from the
layouts, with no skewing messages. Then p steps: C += A @ B, and (except after the last) A moves
one step left along its row and B one step up along its column. With overlap on, the shifts of
step t+1's blocks are in flight while step t multiplies.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from layouts.builder import build, dev, mem, rotate, time
from topology import AbstractMesh

from .plan import Plan, ceil_to, check_grid, check_shape, exact_root
from .spec import Algorithm, block_gemms, cube_side

NAME = "cannon"


def grids(P: int) -> list[tuple[int, ...]]:
    p = exact_root(P, 2)
    return [(p, p)] if p else []


def plan(shape, P: int, *, grid=None, overlap: bool = True) -> Plan:
    M, K, N = check_shape(shape, NAME)
    p, _ = check_grid(NAME, P, grid, grids, "a square number of ranks (p x p)")
    m, k, n = ceil_to(M, p) // p, ceil_to(K, p) // p, ceil_to(N, p) // p
    mesh = AbstractMesh((("x", p), ("y", p)))
    skew = rotate({"x": 1, "y": 1})
    return Plan(
        NAME,
        (M, K, N),
        mesh,
        A=build(
            (M, K), [[dev("x", p), mem(m)], [time(p), mem(k)]], rotation=skew, sizes=mesh.sizes
        ),
        B=build(
            (K, N), [[time(p), mem(k)], [dev("y", p), mem(n)]], rotation=skew, sizes=mesh.sizes
        ),
        C=build((M, N), [[dev("x", p), mem(m)], [dev("y", p), mem(n)]]),
        overlap=overlap,
    )


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a, b = state
    c = comm.empty((a.shape[0], b.shape[1]), a.dtype)
    return cannon_steps(comm, a, b, c, overlap=plan.overlap)


def cannon_steps(
    comm,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    *,
    overlap: bool,
    a_axis: str = "y",
    b_axis: str = "x",
) -> np.ndarray:
    """Cannon's p steps from the skewed start: ``c = sum_t A_t @ B_t``, returned in ``c``.

    After each step but the last, A moves one place back along ``a_axis`` (left along the row)
    and B one place back along ``b_axis`` (up the column); both rings have p ranks. ``a`` and
    ``b`` are not modified. Shared with 2.5D Cannon, where every layer runs it on its K slice.
    """
    p = comm.mesh.sizes[a_axis]
    tmp = comm.scratch("cannon.tmp", c)
    a_bufs = (comm.scratch("cannon.a0", a), comm.scratch("cannon.a1", a))
    b_bufs = (comm.scratch("cannon.b0", b), comm.scratch("cannon.b1", b))
    for t in range(p):
        comm.step = t
        if t == p - 1:
            comm.gemm(a, b, c, accumulate=t > 0, tmp=tmp)
        elif overlap:
            next_a = comm.ishift(a, a_axis, -1, a_bufs[t % 2])
            next_b = comm.ishift(b, b_axis, -1, b_bufs[t % 2])
            comm.gemm(a, b, c, accumulate=t > 0, tmp=tmp, progress=(next_a, next_b))
            a, b = next_a.wait(), next_b.wait()
        else:
            comm.gemm(a, b, c, accumulate=t > 0, tmp=tmp)
            a = comm.shift(a, a_axis, -1, a_bufs[t % 2])
            b = comm.shift(b, b_axis, -1, b_bufs[t % 2])
    return c


def stated_cost(shape, P: int, grid, alpha: float, beta: float, note: str = "") -> dict:
    """2(sqrt(P) - 1) shifts of an n^2/P block of A and of B (square n x n)."""
    n = cube_side(shape)
    s = math.sqrt(P)
    words = 2 * (s - 1) * n * n / P
    return {
        "seconds": 2 * (s - 1) * alpha + words * beta,
        "words_per_rank": words,
        "formula": "2(sqrt(P)-1)(alpha + n^2/P beta)",
        "note": note,
    }


ALGORITHM = Algorithm(
    name=NAME,
    summary="Cannon's algorithm on a p x p mesh (skewed start, ring shifts)",
    grids=grids,
    plan=plan,
    multiply=multiply,
    stated_cost=stated_cost,
    gemms=block_gemms,
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
