"""THE symbolic schedule: the events a rank issues in one multiplication, from the algorithm's
own ``multiply`` loop on a communication layer that records and moves nothing (no MPI, no
GEMMs), over placeholder blocks (algorithms/symbolic.py): no buffer of the real size is made, so
the cost does not grow with the matrices. `distmm run` (its byte check), `distmm predict` and
`distmm plan` all price this.
"""

from __future__ import annotations

import numpy as np

from algorithms.comm import Comm
from algorithms.events import Event
from algorithms.symbolic import placeholder


def schedule(
    algorithm,
    plan,
    rank: int = 0,
    dtype="float32",
    binding=None,
    tree=None,
    cache: dict | None = None,
) -> list[Event]:
    """The events rank ``rank`` issues in one multiplication of ``plan``.

    ``algorithm`` is anything with ``prepare`` and ``multiply``. With a binding onto a tree,
    ``rank`` is a PE of the tree and the events carry their levels. ``cache`` (a dict the caller
    keeps across calls) reuses the prepared state and the symbolic Comm of a plan with the same
    A and B layouts, mesh and binding (and algorithm, parameters, rank, dtype and tree): prepare
    does not depend on overlap, and a symbolic multiply only reads shapes, so plans that differ
    in overlap alone share them.
    """
    key = (
        str(plan.A),
        str(plan.B),
        str(plan.mesh),
        str(binding),
        plan.algo,
        repr(sorted(plan.params.items())),
        rank,
        np.dtype(dtype).str,
        str(tree),
    )
    if cache is None or key not in cache:
        view = plan.mesh.at(rank, binding, tree)
        a = placeholder(plan.A.block_shape, dtype)
        b = placeholder(plan.B.block_shape, dtype)
        state = (
            Comm(view, execute=False, compute=False),
            algorithm.prepare(plan, a, b, view.coords),
        )
        if cache is not None:
            cache[key] = state
    else:
        state = cache[key]
    comm, prepared = state
    comm.reset()
    algorithm.multiply(plan, comm, prepared)
    return comm.events


def bytes_per_rank(algorithm, plan, dtype="float32") -> list[int]:
    """Bytes each rank sends in one multiplication (the counting convention of
    algorithms/events.py)."""
    return [sum(e.sent for e in schedule(algorithm, plan, r, dtype)) for r in range(plan.P)]


__all__ = ["bytes_per_rank", "schedule"]
