"""The tree levels of a rank's events, and link emulation (holding operations to link speed).

:class:`TreeLevels` fills an event's ``level``, ``phase_level`` and ``level_bytes`` (their
meaning is in algorithms/events.py) from the rank's place on the machine hierarchy (the MN-Core
tree, or a cluster: topology/hierarchy.py). :class:`LinkClock`
emulates the tree's links: an operation that finishes sooner than the link model says is held
(sleep) until that time has passed since it was issued (for a Pending, in ``wait()``). A rank's
operations queue on one link channel, as in the model; a shift is held for the slower of the
links its send and its receive cross.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from topology.hierarchy import crossing_level_coords, levels_of
from topology.links import LinkModel

from .events import Event


@dataclass(frozen=True)
class TreeLevels:
    """One rank of a mesh bound to a tree (``mesh.binding``, ``mesh.tree``)."""

    mesh: object  # topology Mesh or RankView with a binding (a Binding or a RankOrder)
    # memos: a schedule repeats a few distinct operations many times
    _groups: dict = field(default_factory=dict, compare=False, repr=False)
    _events: dict = field(default_factory=dict, compare=False, repr=False)

    def tree_coords(self, axis: str, disp: int = 0) -> dict[str, int]:
        """The tree coordinates of the rank ``disp`` places along ``axis`` from this one."""
        mesh = self.mesh
        coords = dict(mesh.coords)
        coords[axis] = (coords[axis] + disp) % mesh.sizes[axis]
        return mesh.binding.tree_coords(coords, mesh.tree)

    def shift_level(self, axis: str, disp: int) -> str | None:
        """The level a message to the rank ``disp`` places along ``axis`` crosses."""
        return crossing_level_coords(
            self.tree_coords(axis, disp), self.tree_coords(axis, 0), levels_of(self.mesh.tree)
        )

    def group_levels(self, axes: Sequence[str]) -> dict[str, int]:
        """{level: members of this rank's group along ``axes`` reached across it}."""
        key = tuple(axes)
        if key not in self._groups:
            mesh = self.mesh
            self._groups[key] = mesh.binding.group_levels(mesh.tree, mesh.coords, key)
        return self._groups[key]

    def annotate(self, kind: str, axes: Sequence[str], g: int, sent: int, disp: int) -> dict:
        """``level``, ``phase_level`` and ``level_bytes`` of a communication event (the
        caller may not change the dict)."""
        key = (kind, tuple(axes), g, sent, disp)
        if key not in self._events:
            self._events[key] = self._annotate(kind, axes, g, sent, disp)
        return self._events[key]

    def _annotate(self, kind: str, axes: Sequence[str], g: int, sent: int, disp: int) -> dict:
        by = self.group_levels(axes)
        top = next(iter(by), None)  # the outermost level the group's messages cross
        if kind == "shift":
            (axis,) = axes
            level = self.shift_level(axis, disp)
            return {
                "level": level,
                "phase_level": top,
                "level_bytes": ((level, sent),) if sent else (),
            }
        level = top
        per = sent // (g - 1)
        return {
            "level": level,
            "phase_level": level,
            "level_bytes": tuple((lv, per * n) for lv, n in by.items() if per),
        }


@dataclass
class LinkClock:
    """One rank's link channel under emulation: when it is free, and how long operations take."""

    levels: TreeLevels
    links: LinkModel
    free: float = 0.0  # perf_counter time at which the channel is free
    exchanges: dict = field(default_factory=dict)  # (transfer, itemsize) -> seconds

    def seconds(self, ev: Event, disp: int = 0) -> float:
        """Emulated duration of an operation on the tree's links."""
        if ev.kind == "shift":
            (axis,) = ev.axes
            recv = self.levels.shift_level(axis, -disp)
            return max(self.links.message(ev.level, ev.nbytes), self.links.message(recv, ev.nbytes))
        return self.links.collective(ev.kind, ev.nbytes, ev.group, ev.phase_level)

    def hold(self, ev: Event, started: float, disp: int = 0) -> float:
        """The perf_counter time before which this operation may not complete.

        An operation's link time starts when it is issued or when this rank's previous operation
        has left the link, whichever is later."""
        start = max(started, self.free)
        self.free = start + self.seconds(ev, disp)
        return self.free

    def reset(self) -> None:
        self.free = 0.0

    def exchange(self, transfer, comm, peers, itemsize: int) -> float:
        """Seconds the links take for this rank's part of a redistribution (a
        layouts.transfer.Transfer over ``comm``, whose rank r is tree rank ``peers[r]``, or r
        with ``peers`` None): LinkModel.exchange, computed once per transfer."""
        key = (id(transfer), itemsize)
        if key not in self.exchanges:
            size = comm.Get_size()
            tree = np.arange(size) if peers is None else np.asarray(peers, np.int64)
            me = np.full(size, tree[comm.Get_rank()])
            src, dst = np.concatenate([me, tree]), np.concatenate([tree, me])
            nbytes = np.concatenate([transfer.sendcounts, transfer.recvcounts]) * itemsize
            self.exchanges[key] = float(self.links.exchange(src, dst, nbytes)[me[0]])
        return self.exchanges[key]


def hold_until(deadline: float) -> None:
    """Sleep until ``deadline`` (perf_counter seconds); no-op if it is 0 or has passed."""
    if deadline:
        left = deadline - time.perf_counter()
        if left > 0:
            time.sleep(left)


__all__ = ["LinkClock", "TreeLevels", "hold_until"]
