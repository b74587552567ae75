"""Machines as hierarchies of links: which levels a machine has, in which order, and which level
a message between two ranks crosses.

A machine (a "tree") is an :class:`AbstractMesh` whose axes are the levels of one hierarchy;
the rank of a device is row-major over the axes in mesh order. The hierarchy gives the levels'
order from the outermost (the slowest, most shared link) in: a message crosses the outermost
level at which the two ranks' coordinates differ. Two hierarchies are known:

- ``mncore``: L2B > L1B > MAB > PE (topology/tree.py; axes in hierarchy order).
- ``cluster``: node > local: nodes on a network, the ranks of one node sharing its memory.
  ``cluster:NODES,RPN`` places ranks on nodes in blocks (rank r on node r // RPN: the axes in
  hierarchy order); ``cluster:NODES,RPN:round-robin`` deals them out (rank r on node r % NODES:
  the same levels with ``local`` first in rank order).

Each level has a link (latency, bandwidth, how many ranks share it): topology/links.py.
"""

from __future__ import annotations

import math

import numpy as np

from .mesh import AbstractMesh, MeshError

MNCORE_LEVELS = ("L2B", "L1B", "MAB", "PE")
CLUSTER_LEVELS = ("node", "local")
HIERARCHIES = {"mncore": MNCORE_LEVELS, "cluster": CLUSTER_LEVELS}
PLACEMENTS = ("block", "round-robin")


def kind_of(tree: AbstractMesh) -> str | None:
    """The hierarchy whose levels are ``tree``'s axes (None: a plain mesh)."""
    for kind, levels in HIERARCHIES.items():
        if sorted(tree.names) == sorted(levels):
            return kind
    return None


def levels_of(tree: AbstractMesh) -> tuple[str, ...]:
    """``tree``'s levels from the outermost in (not necessarily its rank order)."""
    kind = kind_of(tree)
    if kind is None:
        raise MeshError(f"mesh {tree} is not a machine hierarchy ({', '.join(HIERARCHIES)})")
    return HIERARCHIES[kind]


def is_cluster(tree: AbstractMesh | None) -> bool:
    return tree is not None and kind_of(tree) == "cluster"


def cluster_mesh(nodes: int, per_node: int, placement: str = "block") -> AbstractMesh:
    if placement not in PLACEMENTS:
        raise MeshError(f"placement {placement!r} is not one of: {', '.join(PLACEMENTS)}")
    axes = (("node", nodes), ("local", per_node))
    return AbstractMesh(axes if placement == "block" else axes[::-1])


def cluster_size(tree: AbstractMesh) -> tuple[int, int, str]:
    """(nodes, ranks per node, placement) of a cluster."""
    placement = "block" if tree.names[0] == "node" else "round-robin"
    return tree.sizes["node"], tree.sizes["local"], placement


def subtrees_of(tree: AbstractMesh | None) -> list[np.ndarray]:
    """For each level of a machine hierarchy but the innermost, outermost first: the node of
    that level each rank is in (an int array over tree ranks; the cluster's nodes, the MN-Core
    tree's L2B, L1B and MAB). Moving whole subtrees among the nodes of one parent, and ranks
    among the leaves of one innermost node, changes no message's crossing level (the kernel's
    time). Levels that constrain nothing are left out: one node of the level, or nodes of one
    rank each (no rank shares a node's links); [] for a plain mesh."""
    if tree is None or kind_of(tree) is None:
        return []
    levels = levels_of(tree)
    coords = dict(zip(tree.names, np.unravel_index(np.arange(tree.size), tree.shape), strict=True))
    out, ids = [], np.zeros(tree.size, np.int64)
    for i, lv in enumerate(levels[:-1]):
        ids = ids * tree.sizes[lv] + coords[lv]
        if tree.sizes[lv] > 1 and math.prod(tree.sizes[b] for b in levels[i + 1 :]) > 1:
            out.append(ids)
    return out


def parse_cluster(text: str) -> AbstractMesh:
    """``cluster:NODES,RPN`` or ``cluster:NODES,RPN:round-robin`` (``:block`` the default)."""
    body = text[len("cluster:") :]
    sizes, _, placement = body.partition(":")
    want = "as in cluster:8,2 (8 nodes, 2 ranks each) or cluster:8,2:round-robin"
    try:
        nodes, per_node = (int(p) for p in sizes.split(","))
    except ValueError:
        raise MeshError(f"topology {text!r}: give NODES,RANKS_PER_NODE, {want}") from None
    if nodes < 1 or per_node < 1:
        raise MeshError(f"topology {text!r}: sizes must be positive, {want}")
    if placement not in ("", *PLACEMENTS):
        raise MeshError(f"topology {text!r}: placement is block or round-robin, {want}")
    return cluster_mesh(nodes, per_node, placement or "block")


def crossing_level_coords(ca, cb, levels=None) -> str | None:
    """The outermost level at which two coordinate dicts differ (None: the same device).
    ``levels`` (outermost first) defaults to the hierarchy the coordinates' names belong to."""
    if levels is None:
        levels = levels_of(AbstractMesh(tuple((n, 1) for n in ca)))
    for lv in levels:
        if ca[lv] != cb[lv]:
            return lv
    return None


def members_by_level(tree: AbstractMesh, levels) -> dict[str, int]:
    """For a group spanning whole ``levels``: how many other members a member reaches across
    each level (those whose outermost differing coordinate is that level), outermost first."""
    levels = [lv for lv in levels_of(tree) if lv in levels]
    out = {}
    for i, lv in enumerate(levels):
        n = (tree.sizes[lv] - 1) * math.prod(tree.sizes[b] for b in levels[i + 1 :])
        if n:
            out[lv] = n
    return out


def below(tree: AbstractMesh, level: str) -> int:
    """Devices under one node of ``level`` (the ranks that share its uplinks)."""
    levels = levels_of(tree)
    return math.prod(tree.sizes[lv] for lv in levels[levels.index(level) + 1 :])


__all__ = [
    "CLUSTER_LEVELS",
    "HIERARCHIES",
    "MNCORE_LEVELS",
    "PLACEMENTS",
    "below",
    "cluster_mesh",
    "cluster_size",
    "crossing_level_coords",
    "is_cluster",
    "kind_of",
    "levels_of",
    "members_by_level",
    "subtrees_of",
    "parse_cluster",
]
