"""SUMMA with A or B stationary (van de Geijn & Watts 1995; Schatz, van de Geijn & Poulson 2016):
the loop both share. 2D SUMMA (algorithms/summa.py) is "stationary C": A and B move, C stays.

Stationary B (algorithms/summa_b.py) keeps B in place and cuts M into chunks. Each chunk of A
rows is broadcast along the mesh rows from the column that owns it, every rank multiplies it by
its B block, and the partial products, one per K block, are summed and scattered along the mesh
columns by a reduce-scatter: each rank keeps its piece of that chunk of C. Stationary A is the
same loop on the transposed product C^T = B^T A^T (algorithms/summa_a.py): B's chunks move,
A stays, and C's pieces are reduce-scattered. Elemental picks B stationary where m <= n and
2m <= k, A where n <= m and 2n <= k: there C is the smallest matrix and moves instead of A or B.
"""

from __future__ import annotations

import math

from .plan import Plan, factor_pairs
from .spec import Option, cube_side
from .summa import panel_widths
from .symbolic import placeholder


def grids(P: int) -> list[tuple[int, ...]]:
    return factor_pairs(P)


PIECE = Option(
    "panel",
    "columns (summa_a) or rows (summa_b) of C a rank keeps per step (at most its share)",
    candidates=panel_widths,
)


def stationary_loop(comm, moving, fixed, c, *, overlap: bool, bcast_axis: str, reduce_axis: str):
    """For every chunk g of the moving matrix: broadcast it from its owner along
    ``bcast_axis``, T = chunk @ fixed, and reduce-scatter T's rows along ``reduce_axis``: this
    rank's piece of T is rows g*b .. (g+1)*b of ``c``. Returns ``c``.

    ``moving`` holds this rank's chunks (per_owner, h, k), chunks per_owner*j .. of the rank at
    coordinate j along ``bcast_axis``. With overlap, chunk g+1's broadcast is in flight during
    chunk g's GEMM and reduce-scatter."""
    per_owner = moving.shape[0]
    chunks = per_owner * comm.mesh.sizes[bcast_axis]
    piece = c.shape[0] // chunks
    me = comm.mesh.coords[bcast_axis]
    bufs = (comm.scratch("stationary.0", moving[0]), comm.scratch("stationary.1", moving[0]))
    reduced = comm.mesh.sizes[reduce_axis] > 1  # else T is this rank's piece: no reduce-scatter
    t_shape = (moving.shape[1], c.shape[1])
    t = comm.scratch("stationary.t", placeholder(t_shape, c.dtype)) if reduced else None

    def fetch(g):
        comm.step = g
        owner, i = divmod(g, per_owner)
        buf = moving[i] if me == owner else bufs[g % 2]
        return comm.ibcast(buf, owner, bcast_axis, blocking=not overlap)

    pending = fetch(0)
    for g in range(chunks):
        chunk = pending.wait()
        pending = fetch(g + 1) if g + 1 < chunks else None
        comm.step = g
        rows = c[g * piece : (g + 1) * piece]
        progress = (pending,) if pending is not None else ()
        comm.gemm(chunk, fixed, t if reduced else rows, accumulate=False, progress=progress)
        if reduced:
            comm.reduce_scatter(t, reduce_axis, dim=0, out=rows)
    return c


def promised_of(plan: Plan, itemsize: int, moving, fixed_cols: int, bcast: str, reduce: str):
    """What every rank of :func:`stationary_loop` issues besides GEMMs: each chunk's
    broadcast (``moving``: its rows and columns) and reduce-scatter (where more than one rank)."""
    sizes, chunks, blocking = plan.mesh.sizes, plan.params["chunks"], not plan.overlap
    rows, cols = moving
    out = []
    if sizes[bcast] > 1:
        out.append(("bcast", rows * cols * itemsize, sizes[bcast], chunks, blocking))
    if sizes[reduce] > 1:
        out.append(("reduce_scatter", rows * fixed_cols * itemsize, sizes[reduce], chunks, True))
    return tuple(out)


def stated_cost(shape, P: int, grid, alpha: float, beta: float) -> dict:
    """sqrt(P) chunk broadcasts and sqrt(P) reduce-scatters of n^2/P words each (square n x n,
    one chunk per owner, binomial broadcasts, recursive-halving reduce-scatters)."""
    n = cube_side(shape)
    s = math.sqrt(P)
    words = 2 * s * n * n / P
    lg = math.log2(s) if s > 1 else 0
    return {
        "seconds": 2 * s * alpha * lg + words * beta,
        "words_per_rank": words,
        "formula": "2 sqrt(P) (alpha log sqrt(P) + n^2/P beta)",
        "note": "SUMMA's cost with one of its two broadcasts a reduce-scatter of C (Schatz et "
        "al. 2016); counts every chunk as received whole, the schedule (p-1)/p of it",
    }
