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

from layouts import parse_layout

from . import summa
from .plan import Plan, PlanError, ceil_to, check_grid, check_shape, exact_root

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


def _lv(size: int, level: str) -> str:
    """A device factor, or nothing for a level of size 1."""
    return f"{size}_{level}, " if size > 1 else ""


def plan(shape, P: int, *, grid=None, panel: int | None = None, overlap: bool = True) -> Plan:
    M, K, N = check_shape(shape, NAME)
    q, _, d = check_grid(NAME, P, grid, grids(P), WHAT)
    if panel is not None and (not isinstance(panel, int) or panel < 1):
        raise PlanError(f"{NAME}: panel width must be a positive integer, got {panel}")
    w = panel or -(-K // q)
    k = ceil_to(K, q * w) // q  # per-rank K block of A (columns) and of B (rows)
    m, n = ceil_to(M, d * q) // (d * q), ceil_to(N, q) // q
    rows = f"{_lv(d, 'z')}{_lv(q, 'x')}"
    from topology import AbstractMesh

    return Plan(
        NAME, (M, K, N), AbstractMesh((("x", q), ("y", q), ("z", d))),
        A=parse_layout(f"({M},{K})/(({rows}{m}:{w}), ({_lv(q, 'y')}{k // w}:{m * w}, {w}:1))"),
        B=parse_layout(f"({K},{N})/(({_lv(q, 'x')}{k}), ({_lv(q, 'y')}{n})"
                       + ("; B@[z])" if d > 1 else ")")),
        C=parse_layout(f"({M},{N})/(({rows}{m}), ({_lv(q, 'y')}{n}))"),
        params={"panel": w, "panels": q * k // w},
        overlap=overlap,
    )


def prepare(plan: Plan, a: np.ndarray, b: np.ndarray, coords):
    return summa.prepare(plan, a, b, coords)  # the same panel-major A and row-panel B as 2D SUMMA


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a, b = state
    c = np.empty((a.shape[1], b.shape[2]), dtype=a.dtype)
    # Layer z runs SUMMA on its rows: the y and x sub-communicators never leave the layer.
    return summa.summa_panels(comm, a, b, c, overlap=plan.overlap, a_axis="y", b_axis="x")


if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
