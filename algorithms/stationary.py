"""SUMMA with A or B stationary (van de Geijn & Watts 1995; Schatz, van de Geijn & Poulson 2016):
the loop both share. 2D SUMMA (algorithms/summa.py) is "stationary C": A and B move, C stays.

Stationary B (algorithms/summa_b.py) keeps B in place and cuts M into chunks. Each chunk of A
rows is broadcast along the mesh rows from the column that owns it, every rank multiplies it by
its B block, and the partial products, one per K block, are summed and scattered along the mesh
columns by a reduce-scatter: each rank keeps its piece of that chunk of C. Stationary A
(algorithms/summa_a.py) is its mirror: B's column chunks move, A stays, and C's column pieces
are reduce-scattered. Elemental picks B stationary where m <= n and 2m <= k, A where n <= m and
2n <= k: there C is the smallest matrix and moves instead of A or B.
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


def stationary_loop(
    comm, moving, fixed, c, *, overlap: bool, bcast_axis: str, reduce_axis: str, side: str
):
    """For every chunk g of the moving matrix: broadcast it from its owner along
    ``bcast_axis``, multiply it by the stationary block (B stationary, ``side="b"``: T = chunk @
    B, A stationary, ``side="a"``: T = A @ chunk) and reduce-scatter T along ``reduce_axis``:
    this rank's piece of it is rows (B) or columns (A) g*b .. (g+1)*b of ``c``. Returns ``c``.

    ``moving`` holds this rank's chunks (per_owner, ...), chunks per_owner*j .. of the rank at
    coordinate j along ``bcast_axis``. A's pieces are C's columns: the reduce-scatter packs T's
    column pieces and each piece is copied into place (both recorded, so priced).

    With overlap, chunk g+1's broadcast is in flight during chunk g's GEMM, and chunk g's
    reduce-scatter is posted after it and waited before chunk g+2's GEMM, which needs its
    buffers: so it is in flight during chunk g+1's GEMM, which polls it (from 512 rows,
    algorithms/local_gemm.py). The last chunk's reduce-scatter blocks: no GEMM follows it. On
    2 cores runs so took a median 0.85 of their time with every reduce-scatter blocking at 12
    and 16 ranks, 1.02 at 4 (results/vm-2c-zen4/stationary_posted.txt)."""
    per_owner = moving.shape[0]
    chunks = per_owner * comm.mesh.sizes[bcast_axis]
    dim = 0 if side == "b" else 1
    piece = c.shape[dim] // chunks
    me = comm.mesh.coords[bcast_axis]
    bufs = (comm.scratch("stationary.0", moving[0]), comm.scratch("stationary.1", moving[0]))
    reduced = comm.mesh.sizes[reduce_axis] > 1  # else T is this rank's piece: no reduce-scatter
    rows, cols = (
        (moving.shape[1], fixed.shape[1]) if dim == 0 else (fixed.shape[0], moving.shape[2])
    )
    strided = dim == 1 and chunks > 1  # C's pieces are columns of c: received, then copied in
    pair = (0, 1) if overlap else (0,)  # with overlap two chunks' reduce-scatters are in flight

    def scratch(name, shape, needed):
        return [comm.scratch(f"{name}{i}", placeholder(shape, c.dtype)) for i in pair if needed]

    ts, mine = (
        scratch("stationary.t", (rows, cols), reduced),
        scratch("stationary.p", (rows, piece), strided),
    )

    def fetch(g):
        comm.step = g
        owner, i = divmod(g, per_owner)
        buf = moving[i] if me == owner else bufs[g % 2]
        return comm.ibcast(buf, owner, bcast_axis, blocking=not overlap)

    def place(summed, part) -> None:  # a chunk's reduce-scatter done: its piece in c
        got = summed.wait()
        if strided:
            comm.copy(part, got)

    pending, summing = fetch(0), []  # summing: (reduce-scatter, c's part) in flight
    for g in range(chunks):
        chunk = pending.wait()
        pending = fetch(g + 1) if g + 1 < chunks else None
        comm.step = g
        if len(summing) == 2:  # chunk g-2's buffers are chunk g's
            place(*summing.pop(0))
        part = c[g * piece : (g + 1) * piece] if dim == 0 else c[:, g * piece : (g + 1) * piece]
        left, right = (chunk, fixed) if dim == 0 else (fixed, chunk)
        progress = [p for p in (pending, *(s for s, _ in summing)) if p is not None]
        t = ts[g % len(pair)] if reduced else part
        comm.gemm(left, right, t, accumulate=False, progress=progress)
        if reduced:
            out = mine[g % len(pair)] if strided else part
            posted = overlap and g + 1 < chunks  # (the last one has no GEMM to hide behind)
            summed = comm.ireduce_scatter(t, reduce_axis, dim=dim, out=out, blocking=not posted)
            summing.append((summed, part))
            if not posted:
                place(*summing.pop())
    comm.step = chunks - 1
    for summed, part in summing:
        place(summed, part)
    return c


def promised_of(plan: Plan, itemsize: int, chunk: int, product: int, bcast: str, reduce: str):
    """What every rank of :func:`stationary_loop` issues besides GEMMs and copies: each chunk's
    broadcast (``chunk`` elements) and the reduce-scatter of its product (``product``), where
    more than one rank takes part."""
    sizes, chunks, blocking = plan.mesh.sizes, plan.params["chunks"], not plan.overlap
    out = []
    if sizes[bcast] > 1:
        out.append(("bcast", chunk * itemsize, sizes[bcast], chunks, blocking))
    if sizes[reduce] > 1:  # with overlap posted, all but the last
        posted = 0 if blocking else chunks - 1
        rs = ("reduce_scatter", product * itemsize, sizes[reduce])
        out += [(*rs, posted, False)] if posted else []
        out.append((*rs, chunks - posted, True))
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
