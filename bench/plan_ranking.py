"""Ranking `distmm plan`'s candidates by end-to-end time: the kernel the model predicts plus
moving A and B from the user's layouts into the candidate's and C back out (priced from the
block maps with COSTA's relabelling, bench/model/redistribution.py).

Pricing a redistribution counts what every pair of ranks exchanges (P x P) and solves the
relabelling's assignment problem, about a second per candidate at P = 4096, so candidates are
priced lazily, best first: each has an optimistic time, its kernel plus a lower bound on its
redistribution (the data its replicated native layouts need beyond what a rank holds), and the
cheapest optimistic candidate is priced until the ``need`` best are exact; prices are shared by
candidates with the same native layouts and mesh (overlap, panel and pace variants). Candidates
never priced keep their optimistic time and ``exact`` False: they cannot be among the best
``need``. Candidates with less memory than every exact one before them are priced too, so the
time/memory Pareto front is exact.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from .model import Profile, plan_moves, price_moves
from .model.bound import words_bound


def lower_bound_seconds(plan, users: dict, profile: Profile, itemsize: int, rpn: int) -> float:
    """Seconds no redistribution into ``plan``'s layouts can beat: for A and B, the elements an
    average rank needs (its replicated copies included) beyond the largest user block."""
    beta = min(profile.beta, profile.beta_large) * profile.collective_factor.get("alltoall", 1.0)
    words = 0.0
    for name in ("A", "B"):
        user = users[name]
        if user.native:
            continue
        layout, mesh = getattr(plan, name), plan.mesh
        copies = math.prod(mesh.sizes[lv] for lv in layout.replicated_levels(mesh.sizes))
        need = math.prod(layout.logical_shape) * copies / plan.P
        words += max(0.0, need - math.prod(user.layout.block_shape))
    return words * itemsize * beta * profile.slowdown(rpn)


def rank_end_to_end(
    cands: list,
    users: dict,
    profile: Profile,
    dtype: str,
    rpn: int,
    relabel: bool = True,
    need: int = 15,
    budget: int | None = None,
) -> list:
    """``cands`` (with ``kernel`` set) priced end to end and sorted; see the module docstring.
    ``need`` best are exact, and the best within ``budget`` (bytes per rank)."""
    itemsize = np.dtype(dtype).itemsize
    prices: dict = {}

    def price(c) -> None:
        plan = c.plan
        key = (str(plan.A), str(plan.B), str(plan.C), str(plan.mesh))
        if key not in prices:
            prices[key] = price_moves(
                plan_moves(users, plan), plan.P, profile, itemsize, rpn, relabel
            )
        p = prices[key]
        c.redistribute = (p.redistribute_in, p.redistribute_out)
        c.relabel_bytes_saved = p.bytes_saved
        c.seconds = c.kernel + p.seconds
        c.words = c.bytes_sent // itemsize + p.words
        c.exact = True

    heap = []
    for i, c in enumerate(cands):
        c.seconds = c.kernel + lower_bound_seconds(c.plan, users, profile, itemsize, rpn)
        c.exact = False
        heap.append((c.seconds, c.memory, i))
    heapq.heapify(heap)
    ranked: list = []
    fits = False
    while heap and (len(ranked) < need or not fits):
        _, _, i = heapq.heappop(heap)
        c = cands[i]
        if c.exact:
            ranked.append(c)
            fits = fits or budget is None or c.memory <= budget
        else:
            price(c)
            heapq.heappush(heap, (c.seconds, c.memory, i))
    rest = [cands[i] for _, _, i in sorted(heap)]
    least = min((c.memory for c in ranked), default=math.inf)
    for c in rest:  # the rest of the Pareto front: less memory than everything faster
        if c.memory < least:
            price(c)
            least = c.memory
    rest.sort(key=lambda c: (c.seconds, c.memory))
    return ranked + rest


def set_words(cands: list, shape, P: int, itemsize: int) -> None:
    """Each candidate's lower bound on words per rank for its memory (bench/model/bound.py)."""
    for c in cands:
        c.bound = words_bound(shape, P, c.memory / itemsize)


__all__ = ["lower_bound_seconds", "rank_end_to_end", "set_words"]
