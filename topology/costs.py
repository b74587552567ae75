"""What one message or collective costs: MPICH's algorithms in the alpha-beta-gamma model.

The formulas follow MPICH's collective algorithms (Thakur, Rabenseifner, Gropp 2005). ``nbytes``
is what an event's ``nbytes`` means (algorithms/events.py): the buffer, and for an allgather one
rank's piece. Messages shorter than :data:`EAGER_LIMIT` use the small-message parameters
(``alpha``, ``beta``), longer ones the large-message ones (which default to the small ones).
``gamma`` is the seconds a rank takes to combine one byte in a reduction (MPI's SUM on its
cores; 0: not counted). The cost model (bench/model) scales these by calibrated factors; the
tree's and clusters' link model (topology/links.py) calls them with one level's parameters.
"""

from __future__ import annotations

import math

import numpy as np

EAGER_LIMIT = 16384  # bytes: below, MPICH uses the short-message algorithms
REDUCING = ("reduce_scatter", "allreduce")  # the collectives that combine what they receive
# the collectives whose rank copies its own block into place (called not in place, as the
# communication layer calls them); the broadcast, the shift and the in-place allreduce copy none
PLACING = ("allgather", "reduce_scatter", "alltoall")


def own_block_bytes(kind: str, nbytes: int, g: int) -> int:
    """Bytes of its own a rank copies into place in MPICH's algorithm for ``kind`` on g ranks
    (:data:`PLACING`): an allgather's own piece (n), a reduce-scatter's or an all-to-all's own
    block (n / g; a short reduce-scatter's recursive halving copies all n). No network moves
    them: the rank's core does."""
    if g <= 1 or kind not in PLACING:
        return 0
    return nbytes if kind == "allgather" else nbytes // g


def collective_seconds(
    kind: str,
    nbytes: int,
    g: int,
    alpha: float,
    beta: float,
    alpha_large: float | None = None,
    beta_large: float | None = None,
    gamma: float = 0.0,
) -> float:
    """Seconds for ``kind`` (shift, bcast, allgather, reduce_scatter, allreduce, alltoall,
    barrier) on g ranks; ``beta`` and ``gamma`` are seconds per byte."""
    if g <= 1:
        return 0.0
    n = nbytes
    if kind == "barrier":  # dissemination: ceil(log2 g) rounds of empty messages
        return math.ceil(math.log2(g)) * alpha
    if kind == "alltoall":  # n is this rank's whole buffer; pairwise exchange, g - 1 rounds
        return exchange_seconds(g - 1, (g - 1) / g * n, alpha, beta, alpha_large, beta_large)
    lg = math.ceil(math.log2(g))
    if n < EAGER_LIMIT:
        a, b = alpha, beta
    else:
        a = alpha if alpha_large is None else alpha_large
        b = beta if beta_large is None else beta_large
    if kind == "shift":
        return a + n * b
    if kind == "bcast":  # binomial tree, or scatter + ring allgather for long messages
        if n < EAGER_LIMIT or g < 8:
            return lg * (a + n * b)
        return (lg + g - 1) * a + 2 * (g - 1) / g * n * b
    if kind == "allgather":  # n is one rank's piece: ring
        return (g - 1) * (a + n * b)
    if kind == "reduce_scatter":  # n is the whole buffer; recursive halving or pairwise
        return lg * a + (g - 1) / g * n * (b + gamma)
    if kind == "allreduce":  # Rabenseifner: a reduce-scatter, then an allgather
        return 2 * lg * a + 2 * (g - 1) / g * n * b + (g - 1) / g * n * gamma
    raise ValueError(f"no cost formula for {kind}")


def exchange_seconds(
    messages,
    nbytes,
    alpha: float,
    beta: float,
    alpha_large: float | None = None,
    beta_large: float | None = None,
):
    """Seconds for one rank of a pairwise exchange (an all-to-all, or the Alltoallv of a
    redistribution) to send ``messages`` messages of ``nbytes`` in all: messages x alpha +
    nbytes x beta, with the small-message parameters when the average message is shorter than
    EAGER_LIMIT. Works on NumPy arrays (one entry per rank) too."""
    a = alpha if alpha_large is None else alpha_large
    b = beta if beta_large is None else beta_large
    small = np.asarray(nbytes) < EAGER_LIMIT * np.asarray(messages)
    out = messages * np.where(small, alpha, a) + nbytes * np.where(small, beta, b)
    return float(out) if np.ndim(out) == 0 else out


__all__ = [
    "EAGER_LIMIT",
    "PLACING",
    "REDUCING",
    "collective_seconds",
    "exchange_seconds",
    "own_block_bytes",
]
