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
    def of(cls, **sizes: int) -> "AbstractMesh":
        return cls(tuple(sizes.items()))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
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
        out, acc = {}, 1
        for n, s in reversed(self.axes):
            out[n] = acc
            acc *= s
        return out

    def coords(self, rank: int) -> dict[str, int]:
        if not 0 <= rank < self.size:
            raise MeshError(f"rank {rank} is outside a mesh of {self.size}")
        return {n: (rank // self.rank_strides[n]) % s for n, s in self.axes}

    def rank(self, coords: Mapping[str, int]) -> int:
        return sum((coords[n] % s) * self.rank_strides[n] for n, s in self.axes)

    def group(self, rank: int, names: Iterable[str]) -> list[int]:
        """Ranks that share ``rank``'s coordinates except along ``names`` (a sub-communicator)."""
        names = list(names)
        base = self.coords(rank)
        out = [self.rank(base)]
        for n in names:
            out = [r + (k - base[n]) * self.rank_strides[n] for r in out for k in range(self.sizes[n])]
        return sorted(out)

    def __str__(self) -> str:
        return ",".join(f"{n}={s}" for n, s in self.axes)

    def at(self, rank: int) -> "RankView":
        """One rank's view of the mesh without MPI (what the cost model runs a schedule on)."""
        return RankView(self, rank)


@dataclass(frozen=True)
class RankView:
    """The attributes of a :class:`Mesh` that do not need MPI: names, sizes, rank, coords."""

    abstract: AbstractMesh
    rank: int

    @property
    def names(self) -> tuple[str, ...]:
        return self.abstract.names

    @property
    def sizes(self) -> dict[str, int]:
        return self.abstract.sizes

    @property
    def size(self) -> int:
        return self.abstract.size

    @cached_property
    def coords(self) -> dict[str, int]:
        return self.abstract.coords(self.rank)


@dataclass(eq=False)
class Mesh:
    """An AbstractMesh bound to an MPI communicator (a periodic Cartesian one, no reordering)."""

    abstract: AbstractMesh
    comm: object  # mpi4py.MPI.Intracomm
    _subs: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.comm.Get_size() != self.abstract.size:
            raise MeshError(f"mesh {self.abstract} needs {self.abstract.size} ranks, "
                            f"the job has {self.comm.Get_size()}")
        self.cart = self.comm.Create_cart(list(self.abstract.shape),
                                          periods=[True] * len(self.abstract.axes), reorder=False)
        self.rank = self.cart.Get_rank()
        self.coords = self.abstract.coords(self.rank)

    @property
    def names(self) -> tuple[str, ...]:
        return self.abstract.names

    @property
    def sizes(self) -> dict[str, int]:
        return self.abstract.sizes

    @property
    def size(self) -> int:
        return self.abstract.size

    def sub(self, *names: str):
        """The sub-communicator along the given axes (ranks ordered row-major in those axes)."""
        key = tuple(n for n in self.names if n in names)
        unknown = set(names) - set(self.names)
        if unknown:
            raise MeshError(f"mesh {self.abstract} has no axis {sorted(unknown)[0]!r}")
        if key not in self._subs:
            self._subs[key] = self.cart.Sub([n in key for n in self.names])
        return self._subs[key]

    def ring(self, name: str, disp: int = 1) -> tuple[int, int]:
        """(source, dest) ranks in ``sub(name)`` for a shift by ``disp`` along axis ``name``."""
        size = self.sizes[name]
        me = self.coords[name]
        return (me - disp) % size, (me + disp) % size

    def free(self) -> None:
        for c in self._subs.values():
            c.Free()
        self._subs.clear()
        self.cart.Free()
