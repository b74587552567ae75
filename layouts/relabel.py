"""COSTA's rank relabelling: lay the destination mesh on the ranks so that least data moves.

An algorithm's mesh can usually be laid onto the job's ranks in any order. Given V[s, d], the
elements source rank s already holds that destination mesh rank d needs, placing d on rank
pi(d) keeps sum_d V[pi(d), d] elements in place; the permutation maximising it is a linear
assignment problem (scipy.optimize.linear_sum_assignment, Hungarian-type, O(P^3)). Layouts that
differ only by a permutation of ranks then move nothing.

On a cluster with several ranks per node the algorithm's mesh was laid on the nodes in blocks
(mesh rank d on the node of rank d), and its schedule's messages inside and between nodes were
priced that way; an order free to split those blocks can move fewer bytes but sends the kernel's
messages across the network (SUMMA 4x2 on an emulated 1 GbE cluster of 4 nodes of 2, each row
of two split over two nodes: the multiplication took 106 ms, against 49 with the rows kept on
their nodes). So there the order keeps each node's block of
mesh ranks together: it chooses which node each block runs on (keeping the most elements on
their node: an assignment over nodes), then, inside each node, which rank each mesh rank runs on
(the most kept on the rank: an assignment per node). Which mesh ranks share a node, and so the
kernel's time, does not change.
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

    if nodes is None:
        rows, cols = linear_sum_assignment(V, maximize=True)
        order = np.empty(P, np.int64)
        order[cols] = rows  # destination cols[i] runs on rank rows[i]
        on_node = V
    else:
        nodes = np.asarray(nodes)
        by_node = _by_node(V, nodes)
        order = _node_blocks(V, by_node, nodes, linear_sum_assignment)
        on_node = by_node[nodes]  # [t, d]: what d needs from the ranks on t's node
    kept = int(V[order, np.arange(P)].sum())
    identity = (int(np.trace(on_node)), kept_identity)
    if (int(on_node[order, np.arange(P)].sum()), kept) <= identity:
        ranks, kept = tuple(range(P)), kept_identity
    else:
        ranks = tuple(int(r) for r in order)
    return Relabelling(ranks, (total - kept_identity) * itemsize, (total - kept) * itemsize)


def _node_blocks(V: np.ndarray, by_node: np.ndarray, nodes: np.ndarray, assign) -> np.ndarray:
    """order[d]: the rank mesh rank d runs on, each node's block of mesh ranks (d with
    nodes[d] == n) kept together on one node: the blocks on the nodes that hold the most of
    what they need (``by_node``: :func:`_by_node`), then each block's ranks on that node's
    ranks that hold the most of what each needs (``assign``:
    scipy.optimize.linear_sum_assignment)."""
    members = np.argsort(nodes, kind="stable").reshape(len(by_node), -1)
    blocks = by_node[:, members].sum(axis=2)  # [node, block]
    order = np.empty(V.shape[1], np.int64)
    for node, block in zip(*assign(blocks, maximize=True), strict=True):
        ranks, mesh = members[node], members[block]
        rows, cols = assign(V[np.ix_(ranks, mesh)], maximize=True)
        order[mesh[cols]] = ranks[rows]
    return order


def _by_node(V: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """[n, d]: the sum of V[s, d] over the ranks s on node n."""
    by_node = np.zeros((int(nodes.max()) + 1, V.shape[1]), np.int64)
    np.add.at(by_node, nodes, V)
    return by_node


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
