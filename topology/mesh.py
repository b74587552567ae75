"""Meshes with named axes: an abstract form (sizes and names, no MPI) and an MPI-backed one.

Ranks are laid out row-major over the axes (the first axis is the most significant), so a
mesh ``(("row", 3), ("col", 4))`` puts rank r at row r // 4, column r % 4. Axis names are the
device levels that layouts name (``4_col``), so one layout works on any mesh that has its levels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from .radix import digits, number, strides

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


class MeshError(ValueError):
    """A mesh that cannot be built: bad names or sizes, or a size that does not match -n."""


@dataclass(frozen=True)
class AbstractMesh:
    """Axis names and sizes only: what the cost model and block maps need."""

    axes: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        axes = tuple((str(n), int(s)) for n, s in self.axes)
        names = [n for n, _ in axes]
        if not axes:
            raise MeshError("a mesh needs at least one axis")
        for n, s in axes:
            if not _NAME.fullmatch(n) or n == "Time":
                raise MeshError(f"mesh axis name {n!r} must be a plain name (not Time)")
            if s < 1:
                raise MeshError(f"mesh axis {n} has size {s}; sizes must be >= 1")
        if len(set(names)) != len(names):
            raise MeshError(f"mesh axis names repeat: {names}")
        object.__setattr__(self, "axes", axes)

    @classmethod
    def of(cls, **sizes: int) -> AbstractMesh:
        return cls(tuple(sizes.items()))

    @cached_property  # (asked for on every message: algorithms/comm.py)
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @cached_property
    def shape(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def sizes(self) -> dict[str, int]:
        return dict(self.axes)

    @cached_property
    def rank_strides(self) -> dict[str, int]:
        return dict(zip(self.names, strides(self.shape), strict=True))

    def coords(self, rank: int) -> dict[str, int]:
        if not 0 <= rank < self.size:
            raise MeshError(f"rank {rank} is outside a mesh of {self.size}")
        return dict(zip(self.names, digits(rank, self.shape), strict=True))

    def rank(self, coords: Mapping[str, int]) -> int:
        return number((coords[n] for n in self.names), self.shape)

    def group(self, rank: int, names: Iterable[str]) -> list[int]:
        """Ranks that share ``rank``'s coordinates except along ``names`` (a sub-communicator)."""
        names = list(names)
        base = self.coords(rank)
        out = [self.rank(base)]
        for n in names:
            out = [
                r + (k - base[n]) * self.rank_strides[n] for r in out for k in range(self.sizes[n])
            ]
        return sorted(out)

    def __str__(self) -> str:
        return ",".join(f"{n}={s}" for n, s in self.axes)

    def at(self, rank: int, binding=None, tree=None) -> RankView:
        """One rank's view of the mesh without MPI (what the cost model runs a schedule on);
        with a binding, ``rank`` is a rank of ``tree``."""
        return RankView(self, rank, binding, tree)


class _Axes:
    """Names and sizes of the axes of ``abstract`` (an algorithm's mesh, or a tree's levels)."""

    abstract: AbstractMesh

    @property
    def names(self) -> tuple[str, ...]:
        return self.abstract.names

    @property
    def sizes(self) -> dict[str, int]:
        return self.abstract.sizes

    @property
    def size(self) -> int:
        return self.abstract.size

    def sub_rank(self, names: Iterable[str]) -> int:
        """This rank's rank in the sub-communicator of axes ``names`` (row-major over them, in
        the mesh's order: Mesh.sub)."""
        axes = [a for a in self.names if a in names]
        return number((self.coords[a] for a in axes), [self.sizes[a] for a in axes])


@dataclass(frozen=True)
class RankView(_Axes):
    """The attributes of a :class:`Mesh` that do not need MPI: names, sizes, rank, coords."""

    abstract: AbstractMesh
    rank: int
    binding: object = None  # topology.tree.Binding: ``rank`` is then a tree rank (a PE)
    tree: AbstractMesh | None = None

    @cached_property
    def coords(self) -> dict[str, int]:
        if self.binding is not None:
            return self.binding.algo_coords(self.tree_coords, self.tree)
        return self.abstract.coords(self.rank)

    @cached_property
    def tree_coords(self) -> dict[str, int]:
        return self.tree.coords(self.rank)


@dataclass(eq=False)
class Mesh(_Axes):
    """An AbstractMesh bound to an MPI communicator (a periodic Cartesian one, no reordering)."""

    abstract: AbstractMesh
    comm: object  # mpi4py.MPI.Intracomm
    binding: object = None  # topology.tree.Binding: the axes live on these tree levels
    tree: AbstractMesh | None = None
    _subs: dict = field(default_factory=dict, repr=False)
    _asked: dict = field(default_factory=dict, repr=False)  # the names as asked -> _subs' entry

    def __post_init__(self) -> None:
        if self.comm.Get_size() != self.abstract.size:
            raise MeshError(
                f"mesh {self.abstract} needs {self.abstract.size} ranks, "
                f"the job has {self.comm.Get_size()}"
            )
        if self.binding is None:
            self.cart = self.comm.Create_cart(
                list(self.abstract.shape), periods=[True] * len(self.abstract.axes), reorder=False
            )
            self.rank = self.cart.Get_rank()
            self.coords = self.abstract.coords(self.rank)
            return
        # On a tree: the Cartesian communicator is over the tree levels (rank = PE index);
        # coords, sizes and names stay the algorithm's (an axis is row-major over its levels).
        self.binding.check(self.abstract, self.tree)
        self.cart = self.comm.Create_cart(
            list(self.tree.shape), periods=[True] * len(self.tree.axes), reorder=False
        )
        self.rank = self.cart.Get_rank()
        if self.binding.by_levels:
            self.tree_coords = self.tree.coords(self.rank)
            self.coords = self.binding.algo_coords(self.tree_coords, self.tree)
            self.physical = PhysicalView(
                self.tree, self.comm, self.cart, self.rank, self.tree_coords
            )
        else:  # a cluster: the communicator's rank is the algorithm's (the binding says where
            # it runs), so the mesh itself is the physical view
            self.coords = self.abstract.coords(self.rank)
            self.tree_coords = self.binding.tree_coords(self.coords, self.tree)
            self.physical = PhysicalView(
                self.abstract, self.comm, self.cart, self.rank, self.coords
            )

    def sub(self, *names: str):
        """The sub-communicator along the given axes (ranks ordered row-major in those axes)."""
        found = self._asked.get(names)  # (every message asks: once found, at once)
        if found is None:
            found = self._asked[names] = self._sub(names)
        return found

    def _sub(self, names: tuple[str, ...]):
        key = tuple(n for n in self.names if n in names)
        unknown = set(names) - set(self.names)
        if unknown:
            raise MeshError(f"mesh {self.abstract} has no axis {sorted(unknown)[0]!r}")
        if key not in self._subs:
            if self.binding is None:
                self._subs[key] = self.cart.Sub([n in key for n in self.names])
            else:
                self._subs[key] = self._tree_sub(key)
        return self._subs[key]

    def _tree_sub(self, key: tuple[str, ...]):
        """Sub-communicator over the levels of the axes ``key``, ranked row-major over those
        axes in mesh order (cart.Sub when the tree order gives the same ranking, else Split)."""
        if self.binding.by_levels:  # a cluster's RankOrder: axes are not whole levels
            groups = self.binding.map
            levels = [lv for a in key for lv in groups[a]]
            if levels == [lv for lv in self.tree.names if lv in levels]:
                return self.cart.Sub([lv in levels for lv in self.tree.names])
        color = sum(
            self.coords[a] * self.abstract.rank_strides[a] for a in self.names if a not in key
        )
        return self.cart.Split(color, self.sub_rank(key))

    def ring(self, name: str, disp: int = 1) -> tuple[int, int]:
        """(source, dest) ranks in ``sub(name)`` for a shift by ``disp`` along axis ``name``."""
        size = self.sizes[name]
        me = self.coords[name]
        return (me - disp) % size, (me + disp) % size

    def free(self) -> None:
        for c in self._subs.values():
            c.Free()
        self._subs.clear()
        self._asked.clear()
        self.cart.Free()


@dataclass(frozen=True)
class PhysicalView(_Axes):
    """A bound mesh seen as the tree itself (what gather/redistribute of bound layouts need)."""

    abstract: AbstractMesh
    comm: object
    cart: object
    rank: int
    coords: dict
