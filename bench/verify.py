"""Verification of a distributed product, without any rank building a global matrix unless the
shape is small: exact comparison against a gathered reference, or Freivalds' randomised check
C x == A (B x), computed in stripes spread over all ranks."""

from __future__ import annotations

import numpy as np

from layouts import held_indices
from layouts.data import values

SEED_A, SEED_B, SEED_X = 1, 2, 3
EXACT_LIMIT = 1 << 22  # elements of A, B and C together, gathered on rank 0


def tolerance(dtype, K: int) -> float:
    return float(32 * np.finfo(dtype).eps * np.sqrt(K))


def method_for(shape) -> str:
    M, K, N = shape
    return "exact" if M * K + K * N + M * N <= EXACT_LIMIT else "freivalds"


def _split(n: int, parts: int, i: int) -> tuple[int, int]:
    return n * i // parts, n * (i + 1) // parts


def _is_primary(layout, mesh) -> bool:
    """Whether this rank's copy counts (coordinate 0 along every level the layout replicates)."""
    return all(mesh.coords[lv] == 0 for lv in layout.replicated_levels(mesh.names))


def freivalds(plan, mesh, world, c_block: np.ndarray, dtype, c_layout=None) -> float:
    """max |C x - A (B x)| / max |A (B x)| for a fixed pseudo-random x, every rank taking part.
    ``c_block`` is in ``c_layout`` (default the plan's C) on ``mesh``."""
    from mpi4py import MPI

    layout = plan.C if c_layout is None else c_layout
    M, K, N = plan.shape
    P, r = world.Get_size(), world.Get_rank()
    x = values(SEED_X, np.arange(N))
    y = np.zeros(M)
    if _is_primary(layout, mesh):
        rows, cols = held_indices(layout, mesh.coords)
        keep_r, keep_c = rows < M, cols < N
        y[rows[keep_r]] = c_block[np.ix_(keep_r, keep_c)].astype(np.float64) @ x[cols[keep_c]]
    world.Allreduce(MPI.IN_PLACE, y, op=MPI.SUM)
    w = np.zeros(K)
    lo, hi = _split(K, P, r)
    stripe = values(SEED_B, np.arange(lo, hi)[:, None], np.arange(N)[None, :], dtype=dtype)
    w[lo:hi] = stripe.astype(np.float64) @ x
    world.Allreduce(MPI.IN_PLACE, w, op=MPI.SUM)
    z = np.zeros(M)
    lo, hi = _split(M, P, r)
    stripe = values(SEED_A, np.arange(lo, hi)[:, None], np.arange(K)[None, :], dtype=dtype)
    z[lo:hi] = stripe.astype(np.float64) @ w
    world.Allreduce(MPI.IN_PLACE, z, op=MPI.SUM)
    return float(np.max(np.abs(y - z)) / max(np.max(np.abs(z)), 1e-300))


def exact(plan, mesh, c_block: np.ndarray, dtype, c_layout=None) -> float | None:
    """Gather C on rank 0 and compare with the float64 product of the same inputs (rank 0 only
    returns a value; the caller broadcasts it). ``c_block`` is in ``c_layout`` (default the
    plan's C) on ``mesh``."""
    from layouts.redistribute import gather

    if c_layout is not None:
        c = gather(c_block, c_layout, mesh)
    elif getattr(mesh, "binding", None) is not None:  # on a tree: the bound layout, tree ranks
        from layouts import bind_layout

        c = gather(c_block, bind_layout(plan.C, mesh.binding, mesh.tree), mesh.physical)
    else:
        c = gather(c_block, plan.C, mesh)
    if c is None:
        return None
    M, K, N = plan.shape
    a = values(SEED_A, np.arange(M)[:, None], np.arange(K)[None, :], dtype=dtype)
    b = values(SEED_B, np.arange(K)[:, None], np.arange(N)[None, :], dtype=dtype)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return float(np.max(np.abs(c.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-300))
