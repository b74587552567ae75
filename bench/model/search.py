"""Best-first search over candidate plans: price only what can change the answer.

The planner needs, exactly, the ``keep`` fastest candidates by key and the key/memory Pareto
front (the fastest plan within any memory budget is on it). A candidate's key is its kernel's
predicted seconds plus an ``extra`` time (a redistribution from the user's layouts, say; 0 for
native layouts), and both parts have cheap lower bounds: the kernel's walk (bench/model/walk.py)
bounds it by the time walked so far plus the GEMMs still to come (Walk.bound), and
``extra_bound`` bounds the extra, ``refine`` more tightly. Candidates sit in a heap by their lower
bound; the smallest is refined until it is exact: its kernel walked on (bench/model/resumable.py:
the loop pauses, it is never run twice) until its bound passes the next candidate's, at least a
quarter and 64 events further than before each time, from a 16-event probe, else its extra
bounded by ``refine``, else priced (its ``prefetch`` told first, and that of up to ``ahead``
next in the heap that are walked to the end and bounded near it, so that workers can price
those meanwhile: bench/plan_workers.py; a worker still idle then takes the next in line,
:func:`_fill_idle`). An exact candidate popped is certainly the next best
(every other key is at least its bound). After ``keep`` of them, only candidates needing less
memory than every one popped can still be on the Pareto front; the rest are left out, their
loops never walked to the end.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from .resumable import Resumable
from .schedule import Pruned
from .walk import Prediction

PROBE_EVENTS = 16  # events each candidate is first walked for
# each later stretch walks a candidate at least this many events further, and this many times
# as far in all: far enough that the hand-overs cost little beside the walking
STRETCH_EVENTS = 64
GROWTH = 1.25
# jobs prefetched ahead are bounded above the one priced by at most this many times its extra's
# bound: what is not yet known of a job is its extra. Within 1.25 times its whole bound, at
# 1048576^3 (the kernels 99.7% of each bound) workers priced T10 moves 10-24% above the one
# priced, dear and never needed, in the way of those needed (1.0 s where this takes 0.7); at
# 1.5 times, a cluster's plan from `cols` had 2 workers price first two dear candidates (0.65
# and 1.2 s, bounded 1.38 and 1.40 times the one priced) never needed
AHEAD_WITHIN = 1.0
# ... and whose extras are at most this many times as dear to work out (Job.work) as the one
# priced: from block at 8192 ranks (8192^3) workers priced tesseract 2x2x2048's and 1x1x8192's
# moves ahead, 17-69 million rank pairs counted as they come (0.6 s each), never needed, where
# T10's needed had 0.1-0.7 million (the plan took 1.8-1.9 s, against 1.3 without them)
AHEAD_DEARER = 4


@dataclass(frozen=True)
class Job:
    """One candidate: ``price(limit=, least_events=, max_events=, pause=)`` returns a
    Prediction or a Pruned (bench.model.schedule.price with everything else bound);
    ``extra()`` the exact extra time (None: 0), at least ``extra_bound``; ``refine()`` (if
    given) a tighter bound on it, dearer than ``extra_bound`` and cheaper than ``extra()``;
    ``prefetch()`` (if given) says that ``refine()`` and ``extra()`` may be asked for soon
    (whatever it starts must not change what they return); ``speculate()`` (if given) the same
    where they may well never be, returning whether it started anything (it refuses what would
    be dear to work out in vain); ``work()`` (if given) how dear its extra is, for comparing
    jobs (:func:`_prefetch`)."""

    price: Callable[..., Prediction | Pruned]
    memory: int
    extra: Callable[[], float] | None = None
    extra_bound: float = 0.0
    refine: Callable[[], float] | None = None
    prefetch: Callable[[], None] | None = None
    speculate: Callable[[], bool] | None = None
    busy: Callable[[], bool] | None = None
    work: Callable[[], int] | None = None  # how dear its extra is to work out (rank pairs)


@dataclass(frozen=True)
class Priced:
    """A candidate priced exactly: its kernel's prediction and its extra time."""

    prediction: Prediction
    extra: float = 0.0

    @property
    def key(self) -> float:
        return self.prediction.seconds + self.extra


def search(
    jobs: Sequence[Job],
    keep: int | None,
    ahead: int = 0,
    idle: Callable[[], int] | None = None,
    progress: Callable[[], None] | None = None,
) -> list[Priced | None]:
    """Each job priced, or None where it provably is neither among the ``keep`` smallest keys
    nor on the key/memory Pareto front. ``keep`` None: price every job in full. ``ahead``:
    how many jobs next in line to ``prefetch`` whenever one's extra is bounded or priced
    (with ``keep`` None, any: every job is told first); ``idle()``: how many workers would
    then still have nothing to do (each given a job to ``speculate`` on: :func:`_fill_idle`);
    ``progress()``: wait until some worker finishes what it works on (while the search waits
    for a ``busy`` job, workers that finish are given more: :func:`_await`)."""
    if keep is None:  # every extra wanted: all named first, for workers to price meanwhile
        if ahead:
            for j in jobs:
                if j.prefetch is not None:
                    j.prefetch()
        return [Priced(j.price(), j.extra() if j.extra else 0.0) for j in jobs]
    walks = [Resumable(j.price) for j in jobs]
    try:
        return _best_first(jobs, walks, max(keep, 1), ahead, idle, progress)
    finally:
        for w in walks:
            w.close()


def _best_first(
    jobs: Sequence[Job], walks: list[Resumable], keep: int, ahead: int, idle, progress
) -> list[Priced | None]:
    out: list[Priced | None] = [None] * len(jobs)
    kernel: list[Prediction | None] = [None] * len(jobs)
    extra: list[float | None] = [None if j.extra else 0.0 for j in jobs]
    walked = [0] * len(jobs)
    low = [j.extra_bound for j in jobs]  # the best bound on each extra so far
    refined = [j.refine is None for j in jobs]
    heap = [(j.extra_bound, j.memory, i) for i, j in enumerate(jobs)]
    heapq.heapify(heap)
    done, least, kth = 0, math.inf, math.inf  # exact ones popped, their least memory, key
    while heap:
        bound, memory, i = heapq.heappop(heap)
        if done >= keep and memory >= least and bound > kth:
            walks[i].close()
            continue  # slower than `keep` others (ties kept) and than one needing no more memory
        job = jobs[i]
        others = low[i] if extra[i] is None else extra[i]
        if kernel[i] is None:
            w = walked[i]
            until = max(w + STRETCH_EVENTS, math.ceil(w * GROWTH)) if w else PROBE_EVENTS
            r = walks[i].advance(heap[0][0] - others if heap else math.inf, until)
            if isinstance(r, Prediction):
                kernel[i] = r
                bound = r.seconds + others
            else:
                walked[i] = r.events
                bound = r.at_least + others
            heapq.heappush(heap, (bound, memory, i))
        elif kernel[i].seconds + others > bound:
            # walked to the end ahead of its turn (_walk_ahead, _fill_idle): back by its bound
            heapq.heappush(heap, (kernel[i].seconds + others, memory, i))
        elif not refined[i]:
            if ahead and jobs[i].prefetch is not None:
                limit = _ahead_limit(bound, kernel[i])
                _walk_ahead(heap, walks, kernel, walked, low, extra, limit, ahead)
            _prefetch(jobs, heap, (bound, memory, i), ahead, kernel, extra)
            _await(job, progress, partial(_fill_idle, jobs, walks, heap, kernel, low, extra, idle))
            refined[i] = True
            low[i] = max(low[i], job.refine())
            heapq.heappush(heap, (kernel[i].seconds + low[i], memory, i))
        elif extra[i] is None:
            _prefetch(jobs, heap, (bound, memory, i), ahead, kernel, extra)
            _await(job, progress, partial(_fill_idle, jobs, walks, heap, kernel, low, extra, idle))
            extra[i] = job.extra()
            heapq.heappush(heap, (kernel[i].seconds + extra[i], memory, i))
        else:
            out[i] = Priced(kernel[i], extra[i])
            done, least = done + 1, min(least, memory)
            if done == keep:
                kth = bound
    return out


def _ahead_limit(bound: float, kernel: Prediction) -> float:
    """How far above a job's bound (its kernel exact, its extra bounded) the jobs worth
    working on ahead lie: AHEAD_WITHIN times the bound on its extra."""
    return bound + AHEAD_WITHIN * (bound - kernel.seconds)


def _walk_ahead(heap, walks, kernel, walked, low, extra, limit: float, ahead: int) -> None:
    """Walk on the kernels of up to ``ahead`` jobs next in the heap bounded within ``limit``
    until each ends or its bound passes the limit, so that :func:`_prefetch` can tell the
    near ones (walks stopped early by what their algorithms promise left none ended, and
    workers idle: 8 prices of 8192^3 at P = 8192 from block one after another). Their heap
    entries stay lower bounds (the search puts each back by its exact one when popped). Only
    as many as :func:`_prefetch` could name beside those within the limit walked already: on a
    cluster, where candidates' kernels lie within a few percent, each job priced had 8 more
    walked to the end, 123 in all where the search needed 17 (2.1 s where a plan without
    workers takes 1.3)."""
    near = [j for b, _, j in sorted(heap) if b <= limit]
    ready = sum(kernel[j] is not None and extra[j] is None for j in near)
    for j in [j for j in near if kernel[j] is None][: max(ahead - ready, 0)]:
        r = walks[j].advance(limit - low[j])
        if isinstance(r, Prediction):
            kernel[j] = r
        else:
            walked[j] = r.events


def _prefetch(jobs: Sequence[Job], heap: list, now: tuple, ahead: int, kernel, extra) -> None:
    """Tell the job popped (``now``: its heap entry, its kernel exact), then up to ``ahead``
    jobs next in the heap whose kernels are exact and extras not, and whose bounds pass its
    own by at most AHEAD_WITHIN times its extra's bound, that their extras may be wanted. A job
    not yet walked, or bounded far above the one priced now, may well never need its extra
    (at 8192 ranks such ones took a second to price, in the way of those needed)."""
    bound, _, i = now
    if jobs[i].prefetch is None:
        return
    jobs[i].prefetch()
    if ahead:
        limit = _ahead_limit(bound, kernel[i])
        most = AHEAD_DEARER * jobs[i].work() if jobs[i].work is not None else math.inf
        near = (e for e in sorted(heap) if e[0] <= limit)
        ready = (j for _, _, j in near if kernel[j] is not None and extra[j] is None)
        cheap = (j for j in ready if jobs[j].work is None or jobs[j].work() <= most)
        for j in itertools.islice(cheap, ahead):
            jobs[j].prefetch()


def _await(job: Job, progress, fill) -> None:
    """Before the search asks for ``job``'s extra: ``fill()`` the idle workers, and while a
    worker still works the extra out, again each time one finishes (``progress()`` waits for
    that). Filled only before the wait, a worker that finished a cheap guess sat idle while
    another priced the job waited for (0.15 s at 8192 ranks from block, 8192^3; the plan took
    1.22-1.29 s so, against 1.48-1.51 before: medians of 5, taking turns, on 2 cores)."""
    fill()
    while progress is not None and job.busy is not None and job.busy():
        progress()
        fill()


def _fill_idle(jobs, walks, heap, kernel, low, extra, idle) -> None:
    """Before the search waits for an extra, give each worker ``idle()`` says has nothing to
    do a job to ``speculate`` on: of the 2 x idle next in the heap whose extras are unknown
    and not being worked out, their kernels walked to the end (the search would wait
    meanwhile), the least bounded.
    At 8192 ranks from block layouts the moves of 8192^3 were then priced two at a time (the
    plan took 1.03 s, against 1.23 s with the ones named ahead only), where only the one
    needed next is near enough to name ahead (:func:`_prefetch`)."""
    n = 0 if idle is None else idle()
    if n <= 0:
        return
    near = [j for _, _, j in sorted(heap) if extra[j] is None and _guessable(jobs[j])][: 2 * n]
    for j in near:
        if kernel[j] is None and isinstance(r := walks[j].advance(), Prediction):
            kernel[j] = r
    ranked = sorted((kernel[j].seconds + low[j], j) for j in near if kernel[j])
    for _, j in ranked:
        if n <= 0:
            return
        n -= jobs[j].speculate()


def _guessable(job: Job) -> bool:
    """Whether ``job`` can be given to speculate on (not while a worker works it out)."""
    return job.speculate is not None and not (job.busy is not None and job.busy())


__all__ = ["AHEAD_DEARER", "GROWTH", "Job", "PROBE_EVENTS", "Priced", "search"]
