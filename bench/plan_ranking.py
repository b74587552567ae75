"""Ranking `distmm plan`'s candidates by end-to-end time: the kernel the model predicts plus
moving A and B from the user's layouts into the candidate's and C back out (priced from the
block maps with COSTA's relabelling, bench/model/redistribution.py).

Pricing a redistribution counts what every pair of ranks exchanges and solves the relabelling's
assignment problem, 10-100 ms at P = 8192, so the planner's search (bench/model/search.py)
bounds it first from the layouts' shapes (:meth:`Redistributions.lower_bound`), then, for
candidates still in contention, from the overlaps before relabelling
(:meth:`Redistributions.overlap_bound`; bench/model/move_bound.py), and prices it exactly only
for those the tighter bound leaves in contention; everything is shared by candidates with the
same native layouts and mesh (overlap, panel and pace variants). At thousands of ranks workers
price the candidates the search names next meanwhile (bench/plan_workers.py).
"""

from __future__ import annotations

import math

import numpy as np

from algorithms import get
from layouts.endpoints import move_overlaps, pair_bounds
from layouts.tensorlayout import TooManyPairs

from .model import MovePrice, Profile, plan_moves, price_moves, setup_seconds
from .model.bound import words_bound
from .model.move_bound import overlap_bound, shape_bound


class Redistributions:
    """The redistributions of candidates from and to the user's layouts, priced once per native
    layouts, mesh and starting order (on the MN-Core tree each level binding lays the mesh
    differently): bounded from the shapes, then from the overlaps, then exactly."""

    def __init__(
        self,
        users: dict,
        profile: Profile,
        itemsize: int,
        rpn: int,
        relabel: bool,
        links=None,
        tree=None,
        workers: int = 0,
    ):
        self.users, self.profile, self.itemsize = users, profile, itemsize
        self.rpn, self.relabel, self.links, self.tree = rpn, relabel, links, tree
        self.specs = {n: u.spec for n, u in users.items()}
        self.prices: dict = {}
        self.overlaps: dict = {}  # key -> (moves, their overlaps, the bound), until priced
        self.refused = ""  # why some moves could not be counted (too many rank pairs)
        self.keys: dict = {}  # id(plan) -> (plan, its layouts and mesh as text)
        self.shape_bounds: dict = {}
        self.pair_counts: dict = {}
        self.workers = None
        if workers:  # started now: they import what pricing needs while the search walks
            from .plan_workers import Workers

            self.workers = Workers(workers, self)

    def close(self) -> None:
        """Stop the workers, if any (the search has ended)."""
        if self.workers is not None:
            self.workers.close()

    def prefetch(self, plan, binding=None) -> None:
        """Have a worker price ``plan``'s moves, if there are workers and it is not priced."""
        key = self._unpriced(plan, binding)
        if key is not None:
            self.workers.submit(key, plan, binding)

    def _unpriced(self, plan, binding):
        """``plan``'s key where there are workers and it is neither priced nor counted here."""
        key = (*self._key(plan), _start(binding))
        if self.workers is None or key in self.prices or key[:-1] in self.overlaps:
            return None
        return key

    def idle(self) -> int:
        """How many workers have nothing to price (0 without workers)."""
        return 0 if self.workers is None else self.workers.idle()

    def busy(self, plan, binding=None) -> bool:
        """Whether a worker is pricing ``plan``'s moves and has not finished."""
        key = (*self._key(plan), _start(binding))
        return self.workers is not None and key not in self.prices and self.workers.busy(key)

    def progress(self) -> None:
        """Wait until some worker finishes a price (bench/model/search.py waits so for a
        busy candidate, giving idle workers more meanwhile)."""
        if self.workers is not None:
            self.workers.progress()

    def speculate(self, plan, binding=None) -> bool:
        """Have an idle worker price ``plan``'s moves where they are cheap to price in vain
        (their overlaps at most SPECULATE_PAIRS entries, bench/plan_workers.py); whether one
        was given them."""
        from .plan_workers import SPECULATE_PAIRS

        key = self._unpriced(plan, binding)
        if key is None or key in self.workers.pending or not self.idle():
            return False
        if self.pairs(plan) > SPECULATE_PAIRS:
            return False
        self.workers.submit(key, plan, binding)
        return True

    def pairs(self, plan) -> int:
        """At most how many entries ``plan``'s moves' overlaps hold, once per native layouts."""
        key = self._key(plan)
        if key not in self.pair_counts:
            self.pair_counts[key] = sum(pair_bounds(plan_moves(self.users, plan)))
        return self.pair_counts[key]

    def _fetched(self, key, plan) -> tuple[float, MovePrice] | None:
        """(bound, price) a worker computed for ``key`` (waiting for it), else None."""
        if self.workers is None or key not in self.workers.pending:
            return None
        found = self.workers.result(key)
        if found is None:  # the workers died: priced here instead
            return None
        refused, bound, price = found
        if refused:
            self._refuse(plan, refused)
            return math.inf, _UNCOUNTABLE
        return bound, price

    def _refuse(self, plan, why: str, all_moves=None) -> tuple:
        """Record that ``plan``'s moves pair too many ranks to count (``why``: the words of
        the first such refusal are kept); its overlaps entry, which :meth:`uncountable` reads."""
        self.refused = self.refused or why
        found = self.overlaps[self._key(plan)] = (all_moves, None, math.inf)
        return found

    def _key(self, plan) -> tuple[str, ...]:
        """:func:`_key`, once per plan (the search asks about each candidate many times;
        formatting its layouts took 40 ms of a plan at 8192 ranks)."""
        found = self.keys.get(id(plan))
        if found is None or found[0] is not plan:
            found = self.keys[id(plan)] = (plan, _key(plan))
        return found[1]

    def _args(self, P: int) -> tuple:
        return (P, self.profile, self.itemsize, self.rpn)

    def price(self, plan, binding=None):
        key = (*self._key(plan), _start(binding))
        fetched = None if key in self.prices else self._fetched(key, plan)
        if fetched is not None:
            self.prices[key] = fetched[1]
        elif key not in self.prices:
            all_moves, overlaps, _ = self._overlaps(plan)
            if overlaps is None:  # too many pairs to count
                self.prices[key] = _UNCOUNTABLE
                return self.prices[key]
            placed = None if key[-1] is None else binding.tree_ranks(plan.mesh, self.tree)
            try:
                self.prices[key] = price_moves(
                    all_moves,
                    *self._args(plan.P),
                    self.relabel,
                    self.links,
                    None if overlaps is _DENSE else overlaps,  # (dense: counted as they come)
                    self.tree,
                    placed,
                )
            except TooManyPairs as err:  # dense, and not to be counted as they come either
                self._refuse(plan, str(err), all_moves)
                self.prices[key] = _UNCOUNTABLE
                return self.prices[key]
            # their overlaps are not kept (other orders of the same layouts, the tree's other
            # bindings, compute them again: kept, the whole board's took gigabytes)
            del self.overlaps[self._key(plan)]
        return self.prices[key]

    def seconds(self, plan, binding=None, algorithm=None) -> float:
        """The moves' price, with ``algorithm``'s prepare in the phase in (its copies:
        bench.model.setup_seconds; they depend on the plan, not only on its layouts)."""
        return self.price(plan, binding).with_setup(self._setup(algorithm, plan)).seconds

    def _setup(self, algorithm, plan) -> float:
        if algorithm is None:
            return 0.0
        dtype = np.dtype(f"f{self.itemsize}")
        return setup_seconds(algorithm, plan, self.profile, dtype, self.rpn)

    def uncountable(self, plan) -> bool:
        """Whether ``plan``'s moves were found to pair too many ranks to count."""
        found = self.overlaps.get(self._key(plan))
        return found is not None and found[1] is None

    def lower_bound(self, plan) -> float:
        """From the shapes alone (bench/model/move_bound.py), once per native layouts."""
        key = self._key(plan)
        if key not in self.shape_bounds:
            moves = plan_moves(self.users, plan)
            self.shape_bounds[key] = shape_bound(moves, *self._args(plan.P), self.links)
        return self.shape_bounds[key]

    def overlap_bound(self, plan, binding=None) -> float:
        """From the overlaps, before relabelling (bench/model/move_bound.py: whatever the
        order): a worker's where one was asked for (the same figure); once priced, the price
        itself."""
        key = (*self._key(plan), _start(binding))
        if key in self.prices:
            return self.prices[key].seconds
        fetched = self._fetched(key, plan)
        return self._overlaps(plan)[2] if fetched is None else fetched[0]

    def _overlaps(self, plan) -> tuple:
        key = self._key(plan)
        if key not in self.overlaps:
            all_moves = plan_moves(self.users, plan)
            try:
                overlaps = move_overlaps(all_moves)
            except TooManyPairs:  # any other LayoutError is a fault: it surfaces
                # too many to hold: bounded by the shapes, priced as they come where they can
                # be (bench/model/dense_moves.py; else refused by price())
                self.overlaps[key] = (all_moves, _DENSE, self.lower_bound(plan))
                return self.overlaps[key]
            bound = overlap_bound(all_moves, overlaps, *self._args(plan.P), self.links)
            self.overlaps[key] = (all_moves, overlaps, bound)
        return self.overlaps[key]

    def describe(self, c) -> None:
        """Set candidate ``c``'s redistribution fields (its kernel fields are set)."""
        p = self.price(c.plan, c.binding).with_setup(self._setup(get(c.algo), c.plan))
        c.layouts, c.relabel = self.specs, self.relabel
        c.redistribute = (p.redistribute_in, p.redistribute_out)
        c.relabel_bytes_saved = p.bytes_saved
        c.words += p.words


# the overlaps entry of moves pairing too many ranks to hold (layouts.endpoints.MAX_PAIRS)
_DENSE = "dense"
# the price of moves pairing too many ranks to count: ranked after every other
_UNCOUNTABLE = MovePrice(math.inf, 0.0, 0, None, 0)


def _key(plan) -> tuple[str, ...]:
    return (str(plan.A), str(plan.B), str(plan.C), str(plan.mesh))


def _start(binding) -> str | None:
    """The order the mesh starts from: a level binding's on the MN-Core tree (the tree has
    several per layouts), else None (mesh rank d on rank d: a plain mesh's, a cluster's)."""
    return None if binding is None or not binding.by_levels else str(binding)


def set_words(cands: list, shape, P: int, itemsize: int) -> None:
    """Each candidate's lower bound on words per rank for its memory (bench/model/bound.py)."""
    for c in cands:
        c.bound = words_bound(shape, P, c.memory / itemsize)


class Ranking(list):
    """Candidates by predicted time; ``pruned`` counts those left out (see candidates),
    ``uncountable`` those whose moves pair too many ranks to count (layouts.endpoints)."""

    pruned: int = 0
    uncountable: int = 0


def mark_pareto(cands: list) -> None:
    """Mark the candidates no other beats in both predicted time and memory (sorted by time)."""
    best_mem = math.inf
    for c in cands:  # sorted by (seconds, memory): non-dominated iff memory drops below all so far
        c.pareto = c.memory < best_mem
        best_mem = min(best_mem, c.memory)


__all__ = ["Ranking", "Redistributions", "mark_pareto", "set_words"]
