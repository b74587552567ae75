"""The MN-Core device tree (L2B > L1B > MAB > PE), clusters, and placements of algorithm meshes.

A tree is an :class:`AbstractMesh` whose axes are the tree levels, ranks row-major over
L2B, L1B, MAB, PE (rank = PE index on the board). A subtree or a whole level is then a
sub-communicator over some levels, as for any mesh.

A :class:`Binding` maps each axis of an algorithm's mesh to a group of tree levels (in tree
order); the axis coordinate is row-major over its levels. ``layouts.bind_layout`` rewrites an
algorithm's layout in MN-Core notation (``n_x`` -> ``a_L2B, b_L1B``), so the same descriptors
set up data on the tree.

A cluster (topology/hierarchy.py: node > local) holds the job's ranks as they are: algorithm
rank r (row-major over its mesh) is job rank r, on the node the placement (block or
round-robin) gives. Its one placement is :class:`RankOrder`, which answers what a Binding does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from .hierarchy import (
    MNCORE_LEVELS,
    is_cluster,
    kind_of,
    levels_of,
    members_by_level,
    parse_cluster,
)
from .mesh import AbstractMesh, MeshError
from .radix import digits, number

LEVELS = MNCORE_LEVELS
BOARD = (16, 8, 16, 4)


def tree_mesh(sizes) -> AbstractMesh:
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) != len(LEVELS):
        raise MeshError(
            f"an MN-Core tree has {len(LEVELS)} levels ({', '.join(LEVELS)}); "
            f"got {len(sizes)} sizes"
        )
    return AbstractMesh(tuple(zip(LEVELS, sizes, strict=True)))


def parse_topology(text: str | None) -> AbstractMesh | None:
    """``mesh`` (or None) -> None (a plain mesh); ``mncore`` -> the board; ``mncore:a,b,c,d``;
    ``cluster:NODES,RPN[:round-robin]`` -> a cluster."""
    if text is None or text.strip() == "mesh":
        return None
    text = text.strip()
    if text == "mncore":
        return tree_mesh(BOARD)
    if text.startswith("mncore:"):
        parts = text[len("mncore:") :].replace("x", ",").split(",")
        try:
            sizes = [int(p) for p in parts]
        except ValueError:
            raise MeshError(
                f"topology {text!r}: sizes must be integers, as in mncore:2,2,2,2 (L2B,L1B,MAB,PE)"
            ) from None
        if len(sizes) != 4 or any(s < 1 for s in sizes):
            raise MeshError(
                f"topology {text!r}: give four positive sizes L2B,L1B,MAB,PE, as in mncore:2,2,2,2"
            )
        return tree_mesh(sizes)
    if text.startswith("cluster:"):
        return parse_cluster(text)
    raise MeshError(
        f"topology {text!r} is not one of: mesh, mncore, mncore:L2B,L1B,MAB,PE, "
        f"cluster:NODES,RANKS_PER_NODE[:round-robin]"
    )


def is_tree(mesh: AbstractMesh) -> bool:
    """A machine hierarchy (the MN-Core tree or a cluster), not an algorithm's mesh."""
    return kind_of(mesh) is not None


@dataclass(frozen=True)
class Binding:
    """{algorithm axis: tree levels (tree order)} as a tuple of pairs, in algorithm axis order."""

    axes: tuple[tuple[str, tuple[str, ...]], ...]
    by_levels = True  # each axis lives on whole levels (a RankOrder's axes do not)

    @property
    def map(self) -> dict[str, tuple[str, ...]]:
        return dict(self.axes)

    def level_axis(self) -> dict[str, str]:
        return {lv: a for a, lvs in self.axes for lv in lvs}

    def __str__(self) -> str:
        return ",".join(f"{a}={'+'.join(lvs) if lvs else '1'}" for a, lvs in self.axes)

    def check(self, algo: AbstractMesh, tree: AbstractMesh) -> None:
        """Raise MeshError unless this binding fits ``algo`` onto ``tree``."""
        if set(self.map) != set(algo.names) or len(self.axes) != len(algo.names):
            raise MeshError(f"binding {self} must name every mesh axis ({', '.join(algo.names)})")
        used = [lv for _, lvs in self.axes for lv in lvs]
        for lv in used:
            if lv not in tree.sizes:
                raise MeshError(
                    f"binding {self}: {lv} is not a tree level ({', '.join(tree.names)})"
                )
        if sorted(used) != sorted(tree.names):
            raise MeshError(f"binding {self} must use every tree level exactly once")
        for a, lvs in self.axes:
            if list(lvs) != sorted(lvs, key=tree.names.index):
                raise MeshError(f"binding {self}: the levels of {a} must be in tree order")
            size = math.prod(tree.sizes[lv] for lv in lvs)
            if size != algo.sizes[a]:
                raise MeshError(
                    f"binding {self}: axis {a} has size {algo.sizes[a]} but its levels give {size}"
                )

    # -- coordinates ----------------------------------------------------------------------
    def tree_coords(self, algo_coords: Mapping[str, int], tree: AbstractMesh) -> dict[str, int]:
        out = {}
        for a, lvs in self.axes:
            out.update(
                zip(lvs, digits(algo_coords[a], [tree.sizes[lv] for lv in lvs]), strict=True)
            )
        return out

    def algo_coords(self, tree_coords: Mapping[str, int], tree: AbstractMesh) -> dict[str, int]:
        return {
            a: number((tree_coords[lv] for lv in lvs), [tree.sizes[lv] for lv in lvs])
            for a, lvs in self.axes
        }

    def tree_ranks(self, algo: AbstractMesh, tree: AbstractMesh) -> np.ndarray:
        """The tree rank of every algorithm rank (row-major over ``algo``)."""
        coords = np.unravel_index(np.arange(algo.size), algo.shape)
        at = dict.fromkeys(tree.names, 0)
        for a, lvs in self.axes:
            rest = coords[algo.names.index(a)]
            for lv in reversed(lvs):  # an axis is row-major over its levels
                rest, at[lv] = divmod(rest, tree.sizes[lv])
        return np.ravel_multi_index(tuple(at[lv] for lv in tree.names), tree.shape)

    def group_levels(
        self, tree: AbstractMesh, coords: Mapping[str, int], axes: Sequence[str]
    ) -> dict[str, int]:
        """{level: members of this rank's group along ``axes`` whose messages cross it},
        outermost level first (the same for every member of the group)."""
        return members_by_level(tree, [lv for a in axes for lv in self.map[a]])


@dataclass(frozen=True)
class RankOrder:
    """A cluster's placement: algorithm rank r (row-major over ``algo``) is tree rank r, or
    ``ranks[r]`` where an end-to-end run relabels the mesh (COSTA's rank order: native mesh rank
    d runs on job rank ``ranks[d]``, and job rank t is tree rank t). An axis is not a group of
    levels; levels come from the ranks themselves."""

    algo: AbstractMesh
    ranks: tuple[int, ...] | None = None
    by_levels = False

    def __str__(self) -> str:
        return "ranks" if self.ranks is None else "ranks (relabelled)"

    def check(self, algo: AbstractMesh, tree: AbstractMesh) -> None:
        if algo != self.algo or algo.size != tree.size:
            raise MeshError(f"mesh {algo} does not fill cluster {tree} rank for rank")

    def tree_rank(self, algo_rank: int) -> int:
        return algo_rank if self.ranks is None else self.ranks[algo_rank]

    def tree_ranks(self, algo: AbstractMesh, tree: AbstractMesh) -> np.ndarray:
        return np.arange(algo.size) if self.ranks is None else np.asarray(self.ranks, np.int64)

    def tree_coords(self, algo_coords: Mapping[str, int], tree: AbstractMesh) -> dict[str, int]:
        return tree.coords(self.tree_rank(self.algo.rank(algo_coords)))

    def algo_coords(self, tree_coords: Mapping[str, int], tree: AbstractMesh) -> dict[str, int]:
        t = tree.rank(tree_coords)
        return self.algo.coords(t if self.ranks is None else self.ranks.index(t))

    def group_levels(
        self, tree: AbstractMesh, coords: Mapping[str, int], axes: Sequence[str]
    ) -> dict[str, int]:
        """As Binding.group_levels, counted over this rank's group (groups of one kind may
        differ: block placement need not align groups with nodes), vectorised over its members
        (a group of a 4096-rank cluster plan has up to thousands)."""
        levels = levels_of(tree)
        me = self.algo.rank(coords)
        others = np.asarray([r for r in self.algo.group(me, axes) if r != me], np.int64)
        ranks = others if self.ranks is None else np.asarray(self.ranks, np.int64)[others]
        theirs = dict(zip(tree.names, np.unravel_index(ranks, tree.shape), strict=True))
        mine = tree.coords(self.tree_rank(me))
        out, left = {}, np.ones(len(ranks), bool)  # not yet placed at an outer level
        for lv in levels:
            crosses = left & (theirs[lv] != mine[lv])
            if crosses.any():
                out[lv] = int(crosses.sum())
            left &= ~crosses
        return out


def parse_binding(text: str, algo: AbstractMesh, tree: AbstractMesh) -> Binding:
    """``x=L2B+L1B,y=MAB+PE`` (``x=1`` for an axis with no levels), checked; on a cluster
    only ``ranks`` (its one placement)."""
    if is_cluster(tree):
        if text.strip() != "ranks":
            raise MeshError(f"binding {text!r}: on a cluster the only placement is 'ranks'")
        return RankOrder(algo)
    order = tree.names
    pairs = []
    for part in text.split(","):
        name, eq, levels = (p.strip() for p in part.partition("="))
        if not eq or "=" in levels:
            raise MeshError(
                f"binding {text!r}: write axis=LEVEL+LEVEL,... (e.g. x=L2B+L1B,y=MAB+PE)"
            )
        if name not in algo.names:
            raise MeshError(f"binding {text!r}: {name!r} is not an axis of the mesh ({algo})")
        if name in dict(pairs):
            raise MeshError(f"binding {text!r} names axis {name!r} twice")
        lvs = () if levels in ("", "1") else tuple(v.strip() for v in levels.split("+"))
        pairs.append((name, tuple(sorted(lvs, key=lambda v: order.index(v) if v in order else -1))))
    names = dict(pairs)
    b = Binding(tuple((a, names.get(a, ())) for a in algo.names))
    try:
        b.check(algo, tree)
    except MeshError as err:  # said of the text as the user wrote it
        raise MeshError(str(err).replace(f"binding {b}", f"binding {text!r}", 1)) from None
    return b


@cache
def bindings(algo: AbstractMesh, tree: AbstractMesh) -> tuple[Binding, ...]:
    """Every valid binding; levels of size 1 go to the last axis. Natural order first: axes in
    mesh order take consecutive levels from L2B down. On a cluster: RankOrder, the only one.
    Kept per mesh and tree: the planner asks for every candidate (trying each grouping of the
    board's levels took 4 ms a mesh, 1.4 s of a whole-board plan)."""
    if is_cluster(tree):
        return (RankOrder(algo),) if algo.size == tree.size else ()
    big = [lv for lv in tree.names if tree.sizes[lv] > 1]
    ones = [lv for lv in tree.names if tree.sizes[lv] == 1]
    want = [algo.sizes[a] for a in algo.names]
    out = []
    for assign in itertools.product(range(len(algo.names)), repeat=len(big)):
        got = [1] * len(want)
        for lv, k in zip(big, assign, strict=True):
            got[k] *= tree.sizes[lv]
        if got != want:
            continue  # the axis sizes do not come out (most groupings)
        groups = {a: [] for a in algo.names}
        for lv, k in zip(big, assign, strict=True):
            groups[algo.names[k]].append(lv)
        groups[algo.names[-1]] += ones
        b = Binding(tuple((a, tuple(sorted(groups[a], key=tree.names.index))) for a in algo.names))
        b.check(algo, tree)  # holds: every level once, in tree order, the sizes checked above
        out.append((_natural_key(b, algo, tree), b))
    out.sort(key=lambda kb: kb[0])
    return tuple(b for _, b in out)


def _natural_key(b: Binding, algo, tree):
    # non-decreasing axis index along the tree levels first (consecutive groups), then any
    lv_axis = b.level_axis()
    seq = [algo.names.index(lv_axis[lv]) for lv in tree.names if tree.sizes[lv] > 1]
    return (seq != sorted(seq), seq)


def default_binding(algo: AbstractMesh, tree: AbstractMesh) -> Binding:
    found = bindings(algo, tree)
    if not found:
        raise MeshError(
            f"mesh {algo} cannot be bound onto tree {tree}: no grouping of the "
            f"levels gives the axis sizes"
        )
    return found[0]


__all__ = [
    "LEVELS",
    "BOARD",
    "Binding",
    "RankOrder",
    "bindings",
    "default_binding",
    "is_tree",
    "parse_binding",
    "parse_topology",
    "tree_mesh",
]
