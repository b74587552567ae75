"""Ranking `distmm plan`'s candidates by end-to-end time: the kernel the model predicts plus
moving A and B from the user's layouts into the candidate's and C back out (priced from the
block maps with COSTA's relabelling, bench/model/redistribution.py).

Pricing a redistribution counts what every pair of ranks exchanges and solves the relabelling's
assignment problem, up to about a second at P = 4096, so the planner's search
(bench/model/search.py) prices one only when the candidate's lower bound, its kernel plus
:meth:`Redistributions.lower_bound` (the data its replicated native layouts need beyond what a
rank holds), makes it a contender; prices are shared by candidates with the same native layouts
and mesh (overlap, panel and pace variants).
"""

from __future__ import annotations

import math

from .model import Profile, plan_moves, price_moves
from .model.bound import words_bound


def lower_bound_seconds(
    plan, users: dict, profile: Profile, itemsize: int, rpn: int, links=None
) -> float:
    """Seconds no redistribution into ``plan``'s layouts can beat: for A and B, the elements an
    average rank needs (its replicated copies included) beyond the largest user block, at the
    cheapest bandwidth a byte can take (the node's, or a priced link's)."""
    beta = profile.at(rpn).byte_seconds()
    if links is not None:
        from topology.hierarchy import levels_of

        priced = [links.alpha_beta(lv)[1] for lv in levels_of(links.tree) if links.models(lv)]
        beta = min([beta, *priced])
    words = 0.0
    for name in ("A", "B"):
        user = users[name]
        if user.native:
            continue
        layout, mesh = getattr(plan, name), plan.mesh
        copies = math.prod(mesh.sizes[lv] for lv in layout.replicated_levels(mesh.sizes))
        need = math.prod(layout.logical_shape) * copies / plan.P
        words += max(0.0, need - math.prod(user.layout.block_shape))
    return words * itemsize * beta


class Redistributions:
    """The redistributions of candidates from and to the user's layouts, priced once per native
    layouts and mesh."""

    def __init__(
        self, users: dict, profile: Profile, itemsize: int, rpn: int, relabel: bool, links=None
    ):
        self.users, self.profile, self.itemsize = users, profile, itemsize
        self.rpn, self.relabel, self.links = rpn, relabel, links
        self.specs = {n: u.spec for n, u in users.items()}
        self.prices: dict = {}

    def price(self, plan):
        key = (str(plan.A), str(plan.B), str(plan.C), str(plan.mesh))
        if key not in self.prices:
            self.prices[key] = price_moves(
                plan_moves(self.users, plan),
                plan.P,
                self.profile,
                self.itemsize,
                self.rpn,
                self.relabel,
                self.links,
            )
        return self.prices[key]

    def seconds(self, plan) -> float:
        return self.price(plan).seconds

    def lower_bound(self, plan) -> float:
        return lower_bound_seconds(
            plan, self.users, self.profile, self.itemsize, self.rpn, self.links
        )

    def describe(self, c) -> None:
        """Set candidate ``c``'s redistribution fields (its kernel fields are set)."""
        p = self.price(c.plan)
        c.layouts, c.relabel = self.specs, self.relabel
        c.redistribute = (p.redistribute_in, p.redistribute_out)
        c.relabel_bytes_saved = p.bytes_saved
        c.words += p.words


def set_words(cands: list, shape, P: int, itemsize: int) -> None:
    """Each candidate's lower bound on words per rank for its memory (bench/model/bound.py)."""
    for c in cands:
        c.bound = words_bound(shape, P, c.memory / itemsize)


__all__ = ["Redistributions", "lower_bound_seconds", "set_words"]
