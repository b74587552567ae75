"""A candidate's pricing walked in stretches: its loop paused between them, never re-run.

:func:`bench.model.schedule.price` walks an algorithm's loop while the loop issues its events
and can stop it early, but a stopped Python loop cannot be continued, so a search that wants to
walk a candidate further would have to run it again from the start. Here the loop runs in a
greenlet of its own (a coroutine that can pause anywhere in its call stack, switched in under a
microsecond; OS threads took 50-500 us a hand-over here, more than the walking they saved), and
pauses inside the walk (``Walk.pause``) until the search asks for the next stretch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from greenlet import greenlet

from .schedule import Pruned
from .walk import Prediction, Stop, Walk


class Resumable:
    """``price(limit=, least_events=, max_events=, pause=)`` (bench.model.schedule.price with
    everything else bound) walked by :meth:`advance` in stretches; :meth:`close` ends a walk
    left paused."""

    def __init__(self, price: Callable[..., Prediction | Pruned]):
        self._price = price
        self._loop: greenlet | None = None
        self._stretch = (math.inf, 0, math.inf)
        self._result: Prediction | Pruned | None = None
        self._closing = False

    def advance(
        self, limit: float = math.inf, least_events: int = 0, max_events: float = math.inf
    ) -> Prediction | Pruned:
        """Walk on until the bound passes ``limit`` with at least ``least_events`` walked in
        all, or ``max_events`` are walked (a Pruned: how far, and the bound), or the loop ends
        (the Prediction, returned again by any later call). An exception in the loop is raised
        here."""
        if isinstance(self._result, Prediction):
            return self._result
        self._stretch = (limit, least_events, max_events)
        if self._loop is None:
            self._loop = greenlet(self._run)
        self._loop.switch()  # back when the walk pauses or the loop ends
        return self._result

    def close(self) -> None:
        """End a walk left paused (its loop unwinds by a Stop)."""
        if self._loop is not None and not self._loop.dead:
            self._closing = True
            self._loop.switch()

    def _run(self) -> None:
        limit, least, most = self._stretch
        self._result = self._price(
            limit=limit, least_events=least, max_events=most, pause=self._pause
        )

    def _pause(self, walk: Walk) -> None:
        self._result = Pruned(walk.bound(), len(walk.kinds), walk.by_limit)
        self._loop.parent.switch()
        if self._closing:
            raise Stop
        walk.limit, walk.least_events, walk.max_events = self._stretch


__all__ = ["Resumable"]
