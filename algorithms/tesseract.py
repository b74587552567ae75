"""Tesseract (Wang et al. 2021; Colossal-AI's 2.5D tensor parallelism) on a q x q x d mesh,
P = q^2 d (axes x = mesh row i, y = mesh column j, z = layer l; ranks row-major in x, y, z).

Tesseract keeps 2.5D's d layers but not its K split or its d copies of the activations: A (the
activations) is cut into d*q row blocks and q column blocks, and layer l, mesh row i holds row
block l*q + i (the M split is z outer, x inner); B (the weights) is q x q blocked within a layer
and replicated over the d layers (``B@[z]``); C is split like A. Each layer then runs 2D SUMMA
(algorithms.summa's panel loop, shared, not copied) on its own M/d rows: the owners broadcast A
panels along the layer's rows (axis y) and B panels along its columns (axis x); the broadcasts
never cross layers and there is no reduction along z, since every layer computes whole dot
products for its rows.

Cost per rank (words, square n): the layer's SUMMA receives about n^2/(d q) of A panels and n^2/q
of B panels; B's panels are the same on every layer, which is the price of not reducing along z.
Memory: B's q x q blocks are stored d times (n^2 d / P per rank, against n^2/P for A and C).

Grids: every (q, q, d) with q^2 d = P, the most cubic first (smallest |q - d|, then larger q), so
8 ranks default to 2x2x2 and 4 ranks to 2x2x1. d = 1 is 2D SUMMA on q x q (the same layouts and
schedule); q = 1 splits M over the d layers and needs no communication at all.

Panel width ``panel`` (default: K/q, one panel per mesh column) as in summa: K is padded up to a
multiple of q * panel; A is stored panel-major (its layout's memory strides say so) so every
panel is one contiguous buffer. With overlap on, panel g+1's broadcasts are in flight during
panel g's GEMM. Levels of size 1 are left out of the layouts (d = 1 prints no z).
"""

from __future__ import annotations

import sys

import numpy as np

from layouts.builder import build, dev, mem
from topology import AbstractMesh

from .plan import Plan, ceil_to, check_grid, check_shape, exact_root
from .spec import GRID, Algorithm, one_layer, panel_gemms
from .summa import PANEL, panel_width, summa_panels
from .summa import prepare as summa_prepare
from .summa import promised as summa_promised

NAME = "tesseract"
WHAT = "a q x q x d grid (P = q*q*d ranks)"


def grids(P: int) -> list[tuple[int, ...]]:
    """Every (q, q, d) with q*q*d == P, most cubic first (smallest |q - d|, then larger q)."""
    out = []
    for d in range(1, P + 1):
        q = exact_root(P // d, 2) if P % d == 0 else None
        if q:
            out.append((q, q, d))
    return sorted(out, key=lambda g: (abs(g[0] - g[2]), -g[0]))


def plan(shape, P: int, *, grid=None, panel: int | None = None, overlap: bool = True) -> Plan:
    M, K, N = check_shape(shape, NAME)
    q, _, d = check_grid(NAME, P, grid, grids, WHAT)
    w = panel_width(NAME, panel, -(-K // q))
    k = ceil_to(K, q * w) // q  # per-rank K block of A (columns) and of B (rows)
    m, n = ceil_to(M, d * q) // (d * q), ceil_to(N, q) // q
    mesh = AbstractMesh((("x", q), ("y", q), ("z", d)))
    return Plan(
        NAME,
        (M, K, N),
        mesh,
        A=build(
            (M, K),
            [[dev("z", d), dev("x", q), mem(m, w)], [dev("y", q), mem(k // w, m * w), mem(w, 1)]],
        ),
        B=build(
            (K, N),
            [[dev("x", q), mem(k)], [dev("y", q), mem(n)]],
            broadcast=["z"],
            sizes=mesh.sizes,
        ),
        C=build((M, N), [[dev("z", d), dev("x", q), mem(m)], [dev("y", q), mem(n)]]),
        params={"panel": w, "panels": q * k // w},
        overlap=overlap,
    )


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a, b = state
    c = comm.empty((a.shape[1], b.shape[2]), a.dtype)
    # Layer z runs SUMMA on its rows: the y and x sub-communicators never leave the layer.
    return summa_panels(comm, a, b, c, overlap=plan.overlap, a_axis="y", b_axis="x")


ALGORITHM = Algorithm(
    name=NAME,
    summary="Tesseract (2.5D tensor parallel, Colossal-AI) on a q x q x d mesh",
    grids=grids,
    plan=plan,
    multiply=multiply,
    options=(GRID, PANEL),
    prepare=summa_prepare,  # the same panel-major A and row-panel B as 2D SUMMA
    gemms=panel_gemms,
    promised=summa_promised,
    same_as=one_layer("summa"),
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
