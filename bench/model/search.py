"""Branch and bound over candidate plans: price only what can change the answer.

The planner needs, exactly, the ``keep`` fastest candidates and the time/memory Pareto front (the
fastest plan within any memory budget is on it). A candidate's walk (bench/model/walk.py) has a
lower bound that only grows, the time walked so far plus the GEMMs still to come; once it exceeds
both the ``keep``-th best complete key and the best complete key among candidates needing no more
memory, the candidate can be in neither set: its loop is stopped there
(:func:`bench.model.schedule.price`), and it is left out.

Candidates are walked in rounds: a few events each first (the good plans, with short
schedules, finish there and set the bounds), then those still open, from scratch, each round
eight times further than the last and in the order of the bounds they had reached, so the loops
that lose stop early (within about 1.5 times the events an oracle knowing the final bounds
would walk, at 4096 and 8192 ranks). A key is ``offset + predicted seconds``: a ranking
that adds a known time to each candidate (a redistribution, say) passes it as the offset.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .schedule import Pruned
from .walk import Prediction

PROBE_EVENTS = 16  # events each candidate is first walked for
GROWTH = 8  # each later round walks the candidates still open this many times further


@dataclass(frozen=True)
class Job:
    """One candidate: ``price(limit=..., max_events=...)`` returns a Prediction or a Pruned
    (bench.model.schedule.price with everything else bound)."""

    price: Callable[..., Prediction | Pruned]
    memory: int
    offset: float = 0.0


class _Bounds:
    """The complete keys so far: the ``keep``-th smallest, and per memory the smallest key of
    the candidates needing no more (a staircase, by memory, with falling keys)."""

    def __init__(self, keep: int):
        self.keep = keep
        self.keys: list[float] = []
        self.mems: list[int] = []  # staircase: memory ascending ...
        self.best: list[float] = []  # ... and the best key at or below it, descending

    def limit(self, memory: int) -> float:
        """The key above which a candidate needing ``memory`` changes nothing."""
        kth = self.keys[self.keep - 1] if len(self.keys) >= self.keep else math.inf
        i = bisect.bisect_right(self.mems, memory)
        return max(kth, self.best[i - 1] if i else math.inf)

    def add(self, key: float, memory: int) -> None:
        if len(self.keys) < self.keep or key < self.keys[-1]:
            bisect.insort(self.keys, key)
            del self.keys[self.keep :]
        i = bisect.bisect_right(self.mems, memory)
        if i and self.best[i - 1] <= key:
            return  # dominated: the staircase does not change
        if i and self.mems[i - 1] == memory:
            i -= 1  # replaces the step at its memory
        j = i
        while j < len(self.mems) and self.best[j] >= key:
            j += 1  # entries needing as much memory or more, and no faster: now dominated
        self.mems[i:j] = [memory]
        self.best[i:j] = [key]


def search(jobs: Sequence[Job], keep: int | None) -> list[Prediction | None]:
    """Each job's Prediction, or None where it provably is neither among the ``keep`` smallest
    keys nor on the key/memory Pareto front. ``keep`` None: price every job in full."""
    if keep is None:
        return [job.price() for job in jobs]
    bounds = _Bounds(max(keep, 1))
    out: list[Prediction | None] = [None] * len(jobs)

    def run(i: int, max_events: float) -> Pruned | None:
        job = jobs[i]
        r = job.price(limit=bounds.limit(job.memory) - job.offset, max_events=max_events)
        if isinstance(r, Prediction):
            out[i] = r
            bounds.add(job.offset + r.seconds, job.memory)
            return None
        return r

    # rounds of growing event budgets, each in the order of the bounds reached so far: the
    # candidates that finish early (the good ones) tighten the limits before long loops run
    pending, budget = [(0.0, i) for i in range(len(jobs))], PROBE_EVENTS
    while pending:
        stopped = []
        for at_least, i in pending:
            if at_least > bounds.limit(jobs[i].memory) - jobs[i].offset:
                continue
            r = run(i, budget)
            if r is not None and not r.by_limit:
                stopped.append((r.at_least, i))
        pending, budget = sorted(stopped), budget * GROWTH
    return out


__all__ = ["Job", "PROBE_EVENTS", "search"]
