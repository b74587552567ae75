"""THE symbolic schedule: the events a rank issues in one multiplication, from the algorithm's
own ``multiply`` loop on a communication layer that records and moves nothing (no MPI, no
GEMMs), over placeholder blocks (algorithms/symbolic.py): no buffer of the real size is made, so
the cost does not grow with the matrices. `distmm run --profile`, `distmm predict` and `distmm
plan` all price this, and scripts/model_accuracy.py and scripts/fuzz_runs.py check every run's
bytes per rank against it (:func:`bytes_per_rank`); :func:`price` walks it while the loop issues
it, so a search can stop a loop whose time already loses (bench/model/search.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from algorithms.comm import Comm
from algorithms.events import Event
from algorithms.symbolic import copied_bytes, placeholder

from .profile import Profile
from .walk import Prediction, Stop, Walk, barrier_seconds, copy_seconds


def schedule(
    algorithm,
    plan,
    rank: int = 0,
    dtype="float32",
    binding=None,
    tree=None,
    cache: dict | None = None,
) -> list[Event]:
    """The events rank ``rank`` issues in one multiplication of ``plan``.

    ``algorithm`` is anything with ``prepare`` and ``multiply``. With a binding onto a tree,
    ``rank`` is a PE of the tree and the events carry their levels. ``cache`` (a dict the caller
    keeps across calls) reuses the prepared state and the symbolic Comm of a plan with the same
    A and B layouts, mesh and binding (and algorithm, parameters, rank, dtype and tree): prepare
    does not depend on overlap, and a symbolic multiply only reads shapes, so plans that differ
    in overlap alone share them.
    """
    comm, prepared = _symbolic(algorithm, plan, rank, dtype, binding, tree, cache)
    comm.reset()
    algorithm.multiply(plan, comm, prepared)
    return comm.events


@dataclass(frozen=True)
class Pruned:
    """A pricing stopped before the loop ended: the prediction is at least ``at_least``."""

    at_least: float
    events: int  # walked before it stopped
    by_limit: bool  # stopped because at_least passed the limit (else: the event budget ran out)


def price(
    algorithm,
    plan,
    profile: Profile,
    dtype,
    ranks_per_node: int,
    *,
    rank: int = 0,
    binding=None,
    tree=None,
    links=None,
    limit: float = math.inf,
    max_events: float = math.inf,
    least_events: int = 0,
    pause=None,
    cache: dict | None = None,
    prices: dict | None = None,
) -> Prediction | Pruned:
    """``predict(schedule(...), P=plan.P)``, walked while the loop issues it: the same events,
    the same prediction, but the loop stops (:class:`Pruned`) as soon as the prediction is
    certain to exceed ``limit`` (once ``least_events`` are walked) or ``max_events`` have been
    walked; with ``pause`` the walk pauses there instead (Walk) and the loop always runs to its
    end or to a Stop the pause raises (bench/model/resumable.py). ``cache`` is
    :func:`schedule`'s; ``prices`` a dict shared by the calls with the same profile, dtype,
    ranks per node and links (bench/model/walk.py).

    Certain to exceed: the walk's time so far plus the GEMMs still to come, priced at the
    cheapest rate per flop of the shapes the algorithm says its GEMMs take (Algorithm.gemms;
    else of any shape), plus the blocking operations it promises still to come
    (Algorithm.promised), or the messages in flight and those promised ending if later, then
    the closing barrier (Walk.bound); every rank computes at least its share ``plan.flops / P``
    of the product (with padding, more; tests/test_plan_speed.py holds all three for every
    algorithm). At P = 8192 and 1048576^3 the shapes' rate walked 26 000 events where the
    cheapest of any took 122 000; from block layouts at 8192^3 the promises took the events
    walked from 56 138 to 15 902 (T10 candidates whose rotations alone lose stop at once).
    Promises are not priced on links (a message's price there needs the level it crosses).
    """
    name = np.dtype(dtype).name
    slow = profile.slowdown(ranks_per_node)
    at = profile.at(ranks_per_node)
    walk = Walk(
        profile,
        name,
        ranks_per_node,
        links,
        prices,
        limit=limit,
        share=plan.flops / plan.P,
        # a hair under the cheapest rate of the plan's GEMMs (summing flops may round a few
        # ulps differently)
        per_flop=at.least_seconds_per_flop(name, _gemms(algorithm, plan)) * slow * (1 - 1e-9),
        max_events=max_events,
        least_events=least_events,
        pause=pause,
        closing=barrier_seconds(at, plan.P, links),
    )
    promised = getattr(algorithm, "promised", None)
    if promised is not None and links is None:  # (on links a message's price needs its level)
        walk.promise(promised(plan, np.dtype(dtype).itemsize))
    if pause is None and walk.bound() > limit:  # its GEMMs (or messages) alone lose: no loop
        return Pruned(walk.bound(), 0, True)
    comm, prepared = _symbolic(algorithm, plan, rank, dtype, binding, tree, cache)
    if pause is not None:  # paused, this loop may sit beside others sharing the cache's comm
        shared, comm = comm, Comm(comm.mesh, execute=False, compute=False)
        comm.levels = shared.levels  # a tree's level memos: pure functions of the mesh view
    comm.reset()
    comm.observer = walk.push
    try:
        algorithm.multiply(plan, comm, prepared)
    except Stop:
        return Pruned(walk.bound(), len(walk.kinds), walk.by_limit)
    finally:
        comm.observer = None
        comm.reset()  # the events are walked: do not keep them alive in the cache
    walk.close(plan.P)
    if pause is None and walk.t > limit:
        return Pruned(walk.t, len(walk.kinds), True)
    return walk.prediction()


def _gemms(algorithm, plan) -> tuple | None:
    """The shapes of the plan's GEMMs, if the algorithm says (Algorithm.gemms; anything with
    only ``prepare`` and ``multiply`` does not)."""
    gemms = getattr(algorithm, "gemms", None)
    return None if gemms is None else gemms(plan)


def _symbolic(algorithm, plan, rank, dtype, binding, tree, cache):
    """(symbolic Comm, prepared state) of ``plan`` at ``rank``, from ``cache`` if there."""
    key = (
        str(plan.A),
        str(plan.B),
        str(plan.mesh),
        str(binding),
        plan.algo,
        repr(sorted(plan.params.items())),
        rank,
        np.dtype(dtype).str,
        str(tree),
    )
    state = None if cache is None else cache.get(key)
    if state is None:
        view = plan.mesh.at(rank, binding, tree)
        a = placeholder(plan.A.block_shape, dtype)
        b = placeholder(plan.B.block_shape, dtype)
        state = (
            Comm(view, execute=False, compute=False),
            algorithm.prepare(plan, a, b, view.coords),
        )
        if cache is not None:
            cache[key] = state
    return state


def setup_seconds(algorithm, plan, profile: Profile, dtype, ranks_per_node: int) -> float:
    """What the algorithm's prepare copies (rank 0's blocks into what its loop reads: SUMMA's A
    in several panels, T10's A units; algorithms.symbolic.copied_bytes) costs at the profile's
    copy bandwidth, slowed as GEMMs are where ranks share cores. An end-to-end run prepares in
    its phase in (bench/endtoend.py); a native run before its timed region, unpriced."""
    a, b = (placeholder(m.block_shape, dtype) for m in (plan.A, plan.B))
    copied = copied_bytes(algorithm.prepare(plan, a, b, plan.mesh.at(0).coords), a, b)
    return copy_seconds(copied, profile, profile.slowdown(ranks_per_node))


def bytes_per_rank(algorithm, plan, dtype="float32") -> list[int]:
    """Bytes each rank sends in one multiplication (the counting convention of
    algorithms/events.py)."""
    return [sum(e.sent for e in schedule(algorithm, plan, r, dtype)) for r in range(plan.P)]


__all__ = ["Pruned", "bytes_per_rank", "price", "schedule", "setup_seconds"]
