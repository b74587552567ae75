"""The tree levels of a rank's events, and link emulation (holding operations to link speed).

:class:`TreeLevels` fills an event's ``level``, ``phase_level`` and ``level_bytes`` (their
meaning is in algorithms/events.py) from the rank's place on the machine hierarchy (the MN-Core
tree, or a cluster: topology/hierarchy.py). :class:`LinkClock`
emulates the tree's links: an operation that finishes sooner than the link model says is held
(asleep: :func:`hold_until`) until that time has passed since it was issued (for a Pending, in
``wait()``). A rank's operations queue on one link channel, as in the model; a shift is held
for the slower of the links its send and its receive cross.
"""

from __future__ import annotations

import ctypes
import sys
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
    # (kind, axes, bytes, group, levels, disp) -> seconds: pricing an operation anew took 25-30
    # us of Python (the receive's level, each level's sharing), added to every emulated message
    # (a shift held to 100gbe's 2 us took 49 us where one not held took 15)
    durations: dict = field(default_factory=dict)

    def __post_init__(self):
        least_timer_slack()  # once, for every hold this rank's clock asks for (_Waker)

    def seconds(self, ev: Event, disp: int = 0) -> float:
        """Emulated duration of an operation on the tree's links."""
        key = (ev.kind, ev.axes, ev.nbytes, ev.group, ev.level, ev.phase_level, disp)
        found = self.durations.get(key)
        if found is None:
            found = self.durations[key] = self._seconds(ev, disp)
        return found

    def _seconds(self, ev: Event, disp: int) -> float:
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


class _Waker:
    """Sleeps that end at their deadline, not a wake-up later.

    A sleep returns late: the kernel's timer slack (50 us by default) plus the wake-up itself,
    a median of 120-165 us in all on our 2-core VM, idle or not (scripts/hold_precision.py:
    8-15 us with this), against the 1gbe preset's 50 us latency and mncore-emu's 10-100 us.
    So a hold sleeps until ``early`` before its deadline, ``early`` a running median of the
    sleeps' lateness (moved STEP towards each new one; at most MOST_EARLY, a busy core's rare
    wake-ups of milliseconds do not pull it up), and spins the rest on the clock: never before
    the deadline, at it in the median, and the spin short (about the lateness's spread) so that
    ranks sharing cores lose little computation to it. A LinkClock sets the timer slack to 1 ns
    (:func:`least_timer_slack`), which takes about 50 us off the lateness and narrows its
    spread."""

    MOST_EARLY = 5e-4  # seconds: a hold never spins longer than this
    STEP = 4e-6  # seconds the median moves by per sleep (about 20 sleeps to find it)

    def __init__(self):
        self.early = 0.0

    def until(self, deadline: float) -> None:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        if left > self.early:
            asked = deadline - self.early
            time.sleep(left - self.early)
            if time.perf_counter() - asked > self.early:
                self.early = min(self.early + self.STEP, self.MOST_EARLY)
            else:
                self.early = max(self.early - self.STEP, 0.0)
        while time.perf_counter() < deadline:
            pass


_PR_SET_TIMERSLACK = 29  # linux/prctl.h


def least_timer_slack() -> None:
    """This thread's timer slack at 1 ns (prctl PR_SET_TIMERSLACK), where the OS has it."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


_WAKER = _Waker()


def hold_until(deadline: float) -> None:
    """Wait until ``deadline`` (perf_counter seconds), asleep but for the last few tens of
    microseconds (:class:`_Waker`); no-op if it is 0 or has passed."""
    if deadline:
        _WAKER.until(deadline)


__all__ = ["LinkClock", "TreeLevels", "hold_until", "least_timer_slack"]
