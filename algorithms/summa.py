"""2D SUMMA (van de Geijn & Watts 1995) on any p x q mesh (axes x = mesh row, y = mesh column).

A, B and C are 2D-blocked. K is cut into panels of width b: for each panel the mesh column that
owns it broadcasts its A panel along the rows (axis y), the mesh row that owns it broadcasts its B
panel along the columns (axis x), and every rank does C += A_panel @ B_panel. A is stored
panel-major (its layout says so: the panel index is the outer memory axis), so every panel is one
contiguous buffer. With overlap on, panel g+1's broadcasts are in flight during panel g's GEMM.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from layouts import to_memory
from layouts.builder import build, dev, mem
from topology import AbstractMesh

from .plan import (
    Plan,
    ceil_to,
    check_grid,
    check_positive,
    check_shape,
    factor_pairs,
)
from .spec import GRID, Algorithm, Option, cube_side, panel_gemms
from .symbolic import is_placeholder, placeholder, reshaped

NAME = "summa"


def grids(P: int) -> list[tuple[int, ...]]:
    return factor_pairs(P)


def panel_width(algo: str, panel: int | None, default: int) -> int:
    """The panel width: ``default`` (the widest: K's share of one process) when none is given,
    else a positive integer (checked), cut to ``default`` (a wider panel would only pad K with
    zeros: 781 MiB sent for a 512^3 SUMMA on 4 ranks with panel 100000, 8 MiB with 256)."""
    if panel is None:
        return default
    return min(check_positive(algo, "panel width", panel), default)


def panel_widths(plan: Plan) -> list[int | None]:
    """The widths the planner tries: the default (None), then half and a quarter of it."""
    w = plan.params["panel"]
    out: list[int | None] = [None]
    for cand in (w // 2, w // 4):
        if cand >= 1 and cand != w and cand not in out:
            out.append(cand)
    return out


PANEL = Option(
    "panel",
    "panel width along K (a wider one is cut to K's share of one process)",
    candidates=panel_widths,
)


def plan(shape, P: int, *, grid=None, panel: int | None = None, overlap: bool = True) -> Plan:
    M, K, N = check_shape(shape, NAME)
    p, q = check_grid(NAME, P, grid, grids, "a p x q grid")
    lcm = math.lcm(p, q)
    b = panel_width(NAME, panel, -(-K // lcm))
    Kp = ceil_to(K, lcm * b)
    m, n = ceil_to(M, p) // p, ceil_to(N, q) // q
    ka, kb = Kp // q, Kp // p
    return Plan(
        NAME,
        (M, K, N),
        AbstractMesh((("x", p), ("y", q))),
        A=build((M, K), [[dev("x", p), mem(m, b)], [dev("y", q), mem(ka // b, m * b), mem(b, 1)]]),
        B=build((K, N), [[dev("x", p), mem(kb)], [dev("y", q), mem(n)]]),
        C=build((M, N), [[dev("x", p), mem(m)], [dev("y", q), mem(n)]]),
        params={"panel": b, "panels": Kp // b},
        overlap=overlap,
    )


def laid_out(layout, block: np.ndarray, one_panel: bool) -> np.ndarray:
    """``block`` as ``layout`` lays it out panel-major: with ``one_panel`` the block as it is
    (no copy), symbolic a placeholder of the same size (nothing laid out), else
    :func:`layouts.to_memory`'s flat copy. Shared with summa_a, whose B is chunk-major."""
    if one_panel:
        return block
    if is_placeholder(block):
        return placeholder((layout.local_size,), block.dtype)
    return to_memory(layout, block)


def prepare(plan: Plan, a: np.ndarray, b: np.ndarray, coords):
    w = plan.params["panel"]
    a_panels = reshaped(laid_out(plan.A, a, a.shape[1] == w), (-1, a.shape[0], w))  # (panels, m, w)
    return a_panels, reshaped(b, (-1, w, b.shape[1]))  # B's row panels are contiguous already


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a, b = state
    c = comm.empty((a.shape[1], b.shape[2]), a.dtype)
    return summa_panels(comm, a, b, c, overlap=plan.overlap)


def summa_panels(
    comm,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    *,
    overlap: bool,
    a_axis: str = "y",
    b_axis: str = "x",
) -> np.ndarray:
    """The SUMMA loop: ``c = sum_g A_g @ B_g`` over the K panels g, returned in ``c``.

    ``a`` holds this rank's A panels (npa, m, w), the panels npa*j .. npa*(j+1)-1 of the rank at
    coordinate j along ``a_axis``; ``b`` its B panels (npb, w, n), those of coordinate i along
    ``b_axis`` likewise. Each panel is broadcast from its owner along that axis. Shared with
    2.5D SUMMA, where it runs on every layer over the layer's K slice.
    """
    npa, npb = a.shape[0], b.shape[0]
    panels = npa * comm.mesh.sizes[a_axis]
    assert panels == npb * comm.mesh.sizes[b_axis], "A and B cut K into different panels"
    me = comm.mesh.coords
    a_bufs = (comm.scratch("summa.a0", a[0]), comm.scratch("summa.a1", a[0]))
    b_bufs = (comm.scratch("summa.b0", b[0]), comm.scratch("summa.b1", b[0]))
    tmp = comm.scratch("summa.tmp", c)

    def fetch(g):
        """Start the broadcasts of panel g from the mesh column / row that owns it."""
        comm.step = g
        col, ia = divmod(g, npa)
        row, ib = divmod(g, npb)
        a_buf = a[ia] if me[a_axis] == col else a_bufs[g % 2]
        b_buf = b[ib] if me[b_axis] == row else b_bufs[g % 2]
        blocking = not overlap
        return (
            comm.ibcast(a_buf, col, a_axis, blocking=blocking),
            comm.ibcast(b_buf, row, b_axis, blocking=blocking),
        )

    pending = fetch(0)
    for g in range(panels):
        a_panel, b_panel = (r.wait() for r in pending)
        pending = fetch(g + 1) if g + 1 < panels else ()
        comm.step = g
        comm.gemm(a_panel, b_panel, c, accumulate=g > 0, tmp=tmp, progress=pending)
    return c


def promised(plan: Plan, itemsize: int) -> tuple[tuple[str, int, int, int, bool], ...]:
    """What every rank of :func:`summa_panels` issues besides GEMMs: every panel's broadcasts,
    A's along y and B's along x (where more than one rank), for a plan whose ``panels`` count
    them all (2D SUMMA's, and a layer's in 2.5D SUMMA and Tesseract)."""
    sizes = plan.mesh.sizes
    m, w, n = plan.A.block_shape[0], plan.params["panel"], plan.B.block_shape[1]
    panels, blocking = plan.params["panels"], not plan.overlap
    out = []
    if sizes["y"] > 1:
        out.append(("bcast", m * w * itemsize, sizes["y"], panels, blocking))
    if sizes["x"] > 1:
        out.append(("bcast", w * n * itemsize, sizes["x"], panels, blocking))
    return tuple(out)


def stated_cost(shape, P: int, grid, alpha: float, beta: float) -> dict:
    """2 sqrt(P) panel broadcasts of n^2/P words each, binomial trees (square n x n)."""
    n = cube_side(shape)
    s = math.sqrt(P)
    words = 2 * s * n * n / P
    return {
        "seconds": 2 * s * alpha * (math.log2(s) if s > 1 else 0) + words * beta,
        "words_per_rank": words,
        "formula": "2 sqrt(P) (alpha log sqrt(P) + n^2/P beta)",
        "note": "counts every panel as received by every rank (binomial broadcasts); "
        "the schedule counts (p-1)/p of that by the direct convention",
    }


ALGORITHM = Algorithm(
    name=NAME,
    summary="2D SUMMA on any p x q mesh (row/column panel broadcasts)",
    grids=grids,
    plan=plan,
    multiply=multiply,
    options=(GRID, PANEL),
    prepare=prepare,
    stated_cost=stated_cost,
    gemms=panel_gemms,
    promised=promised,
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
