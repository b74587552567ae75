"""2.5D SUMMA (after Solomonik & Demmel 2011) on a p x p x d mesh, 1 <= d <= p, P = p^2 d
(axes x = mesh row i, y = mesh column j, z = layer l).

K is cut into d slices, one per layer, and every layer runs 2D SUMMA (algorithms.summa's panel
loop, shared, not copied) over its slice: the owners broadcast A panels along the rows and B
panels along the columns of the layer, and each rank accumulates a K-partial C block. A
reduce-scatter along z then sums the d partials and leaves layer l with the l-th 1/d of the
block's rows.

Initial distribution (a design decision, not the textbook's): A and B start 2D-blocked within
each layer with K split over the layers, A ``[i, l*p + j]`` and B ``[l*p + i, j]`` (block
indices, z outer in the K split), so each rank holds 1/P of A and B like every other algorithm
here and layer l already holds the K slice it works on. The textbook version starts with A and B
on layer 0 and broadcasts them along z (d copies); that broadcast, and the d-fold memory, are
not needed here. C ends 2D-blocked over (x, y) with each block's rows split over z.

Cost per rank (words, square n): the layer SUMMA receives about 2 n^2 / (p d) (A and B panels
of the layer's slice), the reduce-scatter sends (d-1)/d n^2/p^2. For fixed P this decreases with
d as long as d <= P^(1/3), which d <= p guarantees, so the default grid is the one with the
largest d. d = 1 is 2D SUMMA (no reduce-scatter); d = p is a 3D algorithm.

Panel width ``panel`` (default: the layer's K slice / p, one panel per mesh column) must divide
the per-rank K block; K is padded up to a multiple of d * p * panel. With overlap on, panel
g+1's broadcasts are in flight during panel g's GEMM; the final reduce-scatter is blocking (no
computation is left to hide it behind).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from layouts.builder import build, dev, mem
from topology import AbstractMesh

from .plan import Plan, ceil_to, check_grid, check_shape, exact_root
from .spec import GRID, Algorithm, cube_side, one_layer, panel_gemms
from .summa import PANEL, panel_width, summa_panels
from .summa import prepare as summa_prepare
from .summa import promised as summa_promised

NAME = "summa25d"
WHAT = "a p x p x d grid with 1 <= d <= p (P = p*p*d ranks)"


def grids(P: int) -> list[tuple[int, ...]]:
    """Every (p, p, d) with p*p*d == P and 1 <= d <= p, largest d first (the cheapest)."""
    out = []
    for d in range(P, 0, -1):
        p = exact_root(P // d, 2) if P % d == 0 else None
        if p and d <= p:
            out.append((p, p, d))
    return out


def plan(shape, P: int, *, grid=None, panel: int | None = None, overlap: bool = True) -> Plan:
    M, K, N = check_shape(shape, NAME)
    p, _, d = check_grid(NAME, P, grid, grids, WHAT)
    w = panel_width(NAME, panel, -(-K // (d * p)))
    kk = ceil_to(K, d * p * w) // (d * p)  # per-rank K block of A and B
    m, n = ceil_to(M, p * d) // p, ceil_to(N, p) // p
    mesh = AbstractMesh((("x", p), ("y", p), ("z", d)))
    return Plan(
        NAME,
        (M, K, N),
        mesh,
        A=build(
            (M, K),
            [[dev("x", p), mem(m, w)], [dev("z", d), dev("y", p), mem(kk // w, m * w), mem(w, 1)]],
        ),
        B=build((K, N), [[dev("z", d), dev("x", p), mem(kk)], [dev("y", p), mem(n)]]),
        C=build((M, N), [[dev("x", p), dev("z", d), mem(m // d)], [dev("y", p), mem(n)]]),
        params={"panel": w, "panels": p * kk // w},
        overlap=overlap,
    )


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a, b = state
    c = comm.empty((a.shape[1], b.shape[2]), a.dtype)
    c = summa_panels(comm, a, b, c, overlap=plan.overlap)  # layer l: C over K slice l
    comm.step = None
    return comm.reduce_scatter(c, "z", dim=0)  # sum the layers; layer l keeps row piece l


def promised(plan: Plan, itemsize: int) -> tuple[tuple[str, int, int, int, bool], ...]:
    """The layer's SUMMA broadcasts, then (more than one layer) C's reduce-scatter along z."""
    d = plan.mesh.sizes["z"]
    c = plan.A.block_shape[0] * plan.B.block_shape[1] * itemsize
    return summa_promised(plan, itemsize) + ((("reduce_scatter", c, d, 1, True),) if d > 1 else ())


def stated_cost(shape, P: int, grid, alpha: float, beta: float) -> dict:
    """The 2.5D bound as stated (Solomonik & Demmel), for a p x p x d grid (square n x n)."""
    n = cube_side(shape)
    p, _, d = grid if len(grid) == 3 else (grid[0], grid[1], 1)
    words = 2 * n * n / (p * d) + 2 * (d - 1) * n * n / d
    return {
        "seconds": 2 * alpha * math.log2(max(p, 2)) + alpha * math.log2(max(d, 1)) + words * beta,
        "words_per_rank": words,
        "formula": "2 alpha log p + 2 n^2/(p d) beta + alpha log d + 2 (d-1) n^2/d beta",
        "note": "suspect: the replication/reduction term 2(d-1)n^2/d is a whole matrix per "
        "rank; a layer's block is n^2/p^2, so the term should read "
        "2(d-1)/d n^2/p^2 (and this suite starts with K split over layers, so "
        "only C's reduction remains: (d-1)/d n^2/p^2)",
    }


ALGORITHM = Algorithm(
    name=NAME,
    summary="2.5D SUMMA on a p x p x d mesh (K split over layers, C reduce-scattered)",
    grids=grids,
    plan=plan,
    multiply=multiply,
    options=(GRID, PANEL),
    prepare=summa_prepare,  # the same panel-major A and row-panel B as 2D SUMMA
    stated_cost=stated_cost,
    gemms=panel_gemms,
    promised=promised,
    same_as=one_layer("summa"),
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
