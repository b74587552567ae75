"""The tree levels of a rank's events, and link emulation (holding operations to link speed).

:class:`TreeLevels` fills an event's ``level``, ``phase_level`` and ``level_bytes`` (their
meaning is in algorithms/events.py) from the rank's place on the tree. :class:`LinkClock`
emulates the tree's links: an operation that finishes sooner than the link model says is held
(sleep) until that time has passed since it was issued (for a Pending, in ``wait()``). A rank's
operations queue on one link channel, as in the model; a shift is held for the slower of the
links its send and its receive cross.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from topology.links import LinkModel, crossing_level_coords, members_by_level

from .events import Event


@dataclass(frozen=True)
class TreeLevels:
    """One rank of a mesh bound to a tree (``mesh.binding``, ``mesh.tree``)."""

    mesh: object  # topology Mesh or RankView with a binding

    def tree_coords(self, axis: str, disp: int = 0) -> dict[str, int]:
        """The tree coordinates of the rank ``disp`` places along ``axis`` from this one."""
        mesh = self.mesh
        coords = dict(mesh.coords)
        coords[axis] = (coords[axis] + disp) % mesh.sizes[axis]
        return mesh.binding.tree_coords(coords, mesh.tree)

    def shift_level(self, axis: str, disp: int) -> str | None:
        """The level a message to the rank ``disp`` places along ``axis`` crosses."""
        return crossing_level_coords(self.tree_coords(axis, disp), self.tree_coords(axis, 0))

    def annotate(self, kind: str, axes: Sequence[str], g: int, sent: int, disp: int) -> dict:
        """``level``, ``phase_level`` and ``level_bytes`` of a communication event."""
        groups, tree = self.mesh.binding.map, self.mesh.tree
        if kind == "shift":
            (axis,) = axes
            level = self.shift_level(axis, disp)
            top = next(lv for lv in groups[axis] if tree.sizes[lv] > 1)
            return {
                "level": level,
                "phase_level": top,
                "level_bytes": ((level, sent),) if sent else (),
            }
        by = members_by_level(tree, [lv for a in axes for lv in groups[a]])
        level = next(iter(by), None)
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


def hold_until(deadline: float) -> None:
    """Sleep until ``deadline`` (perf_counter seconds); no-op if it is 0 or has passed."""
    if deadline:
        left = deadline - time.perf_counter()
        if left > 0:
            time.sleep(left)


__all__ = ["LinkClock", "TreeLevels", "hold_until"]
