"""COSTA's rank relabelling: lay the destination mesh on the ranks so that least data moves.

An algorithm's mesh can usually be laid onto the job's ranks in any order. Given V[s, d], the
elements source rank s already holds that destination mesh rank d needs, placing d on rank
pi(d) keeps sum_d V[pi(d), d] elements in place; the permutation maximising it is a linear
assignment problem (scipy.optimize.linear_sum_assignment, Hungarian-type, O(P^3)). Layouts that
differ only by a permutation of ranks then move nothing.

On a cluster with several ranks per node, a byte between nodes costs far more than one inside
a node, so the order keeps the most elements on their node first and, of the orders that do,
the most on their rank: the weight of placing d on rank t is ``on_node[t, d] * (total + 1) +
V[t, d]``, where ``on_node[t, d]`` sums V[s, d] over the ranks s on t's node (still linear in
the assignment; in float64 the second criterion is exact while total^2 < 2^53, about 9e7
elements, and only approximate beyond).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topology.mesh import AbstractMesh

from .tensorlayout import TensorLayout
from .transfer import overlap_counts


@dataclass(frozen=True)
class Relabelling:
    """Destination mesh rank d runs on rank ``ranks[d]`` (pass it to ``redistribute_between``)."""

    ranks: tuple[int, ...]
    bytes_before: int  # moved with the identity order (rank d of the mesh on rank d)
    bytes_after: int  # moved with ``ranks``

    @property
    def bytes_saved(self) -> int:
        return self.bytes_before - self.bytes_after

    @property
    def is_identity(self) -> bool:
        return self.ranks == tuple(range(len(self.ranks)))


def relabel(
    volume: np.ndarray, needed: np.ndarray | None = None, itemsize: int = 1, nodes=None
) -> Relabelling:
    """The order of destination ranks that keeps the most data in place.

    ``volume[s, d]``: elements source rank s holds that destination rank d needs;
    ``needed[d]``: elements d needs (default: the column sums, right when no element has two
    source holders). Bytes moved = (needed.sum() - kept) * itemsize. ``nodes[s]``: the node of
    rank s on a cluster (topology.hierarchy.nodes_of; None: keep the most on each rank only).
    Where the identity order is already optimal it is kept.
    """
    V = np.asarray(volume)
    if V.ndim != 2 or V.shape[0] != V.shape[1]:
        raise ValueError(f"the volume matrix must be square (P x P), not {V.shape}")
    total = int((V.sum(axis=0) if needed is None else np.asarray(needed)).sum())
    P = V.shape[0]
    kept_identity = int(np.trace(V))
    # imported here: scipy.optimize takes half a second to import, and `distmm plan` and
    # `predict` import this module without relabelling anything
    from scipy.optimize import linear_sum_assignment

    on_node, score = V, V
    if nodes is not None:
        on_node = _on_node(V, np.asarray(nodes))
        score = V + on_node * float(total + 1)  # lexicographic: on the node first
    rows, cols = linear_sum_assignment(score, maximize=True)
    kept = int(V[rows, cols].sum())
    identity = (int(np.trace(on_node)), kept_identity)
    if (int(on_node[rows, cols].sum()), kept) <= identity:
        ranks, kept = tuple(range(P)), kept_identity
    else:
        order = np.empty(P, np.int64)
        order[cols] = rows  # destination cols[i] runs on rank rows[i]
        ranks = tuple(int(r) for r in order)
    return Relabelling(ranks, (total - kept_identity) * itemsize, (total - kept) * itemsize)


def _on_node(V: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """[t, d]: the sum of V[s, d] over the ranks s on rank t's node."""
    by_node = np.zeros((int(nodes.max()) + 1, V.shape[1]), np.int64)
    np.add.at(by_node, nodes, V)
    return by_node[nodes]


def relabel_layouts(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    itemsize: int = 1,
) -> Relabelling:
    """:func:`relabel` for moving ``src`` on ``src_mesh`` into ``dst`` on ``dst_mesh``."""
    V, needed = overlap_counts(src, src_mesh, dst, dst_mesh)
    return relabel(V, needed, itemsize)


__all__ = ["Relabelling", "relabel", "relabel_layouts"]
