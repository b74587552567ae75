"""Pricing `distmm plan`'s redistributions in worker processes, ahead of the search.

From the user's layouts at thousands of ranks, pricing one candidate's moves (counting what
every pair of ranks exchanges, relabelling, summing each rank's load: bench/plan_ranking.py)
takes 50-150 ms, and the search (bench/model/search.py) asks for one price after another while
the rest of the plan waits. Here forked workers price the candidates the search says come next
(Job.prefetch; with ``--exhaustive``, every candidate, named at the start) while it walks or
waits for the one it needs. Each price is computed by the same functions
from the same inputs as in the parent (a fork inherits the profile and the settings), so the
plan's answer is the same with workers or without. The workers start with the plan and import
SciPy (for the relabelling's matchings, 0.3 s) below the parent's priority while it walks the
candidates' loops; a worker that dies leaves its prices to the parent.

Only where pricing is dear (:data:`FROM_RANKS`), on Linux (where fork is the default start, and
the only one that needs no re-import of the caller's main module), and never inside an MPI job:
forking a process that has initialised MPI is not safe.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from layouts.endpoints import move_overlaps
from layouts.tensorlayout import LayoutError

from .metadata import cores
from .model import price_moves
from .model.move_bound import overlap_bound

FROM_RANKS = 1024  # below this many ranks moves price in milliseconds: no workers
MOST_WORKERS = 4  # each holds one candidate's rank pairs (up to a few hundred MB)
# candidates the search names ahead per worker (bench.model.search: only those walked to the
# end and bounded near the one priced): at 8192 ranks from block layouts 4 had 2 workers price
# 8-13 layouts where 8 were needed, 0-0.1 s faster than 2, 0.1-0.5 s faster than 1
AHEAD_PER_WORKER = 4

_SETTINGS: tuple = ()  # (profile, itemsize, ranks per node, relabel, links, tree), for the fork


def workers_for(P: int, asked: int | None = None) -> int:
    """How many workers price a plan on P ranks (0: the plan prices in turn); ``asked``: the
    user's count (None: min(cores, MOST_WORKERS) from FROM_RANKS ranks, none below)."""
    if not sys.platform.startswith("linux") or _in_mpi():
        return 0
    if asked is not None:
        return asked
    if P < FROM_RANKS:
        return 0
    n = min(cores(), MOST_WORKERS)
    return n if n > 1 else 0


def _in_mpi() -> bool:
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized()


class Workers:
    """Forked processes pricing moves: :meth:`submit` once per key; :meth:`result` waits for
    it ((refused, bound, MovePrice): :func:`_priced`), None if the workers died."""

    def __init__(self, count: int, settings: tuple):
        global _SETTINGS
        _SETTINGS = settings  # the forked workers inherit it
        self.pool = ProcessPoolExecutor(
            count, mp_context=multiprocessing.get_context("fork"), initializer=_warm
        )
        self.pool.submit(int)  # the first task starts every worker (and their imports) now
        self.pending: dict = {}

    def submit(self, key, all_moves, P: int, placed) -> None:
        if key not in self.pending:
            try:
                self.pending[key] = self.pool.submit(_priced, all_moves, P, placed)
            except BrokenProcessPool:
                self.pending[key] = None

    def result(self, key):
        found = self.pending[key]
        try:
            return None if found is None else found.result()
        except BrokenProcessPool:  # a worker died (the kernel's OOM killer, say)
            return None

    def close(self) -> None:
        """Stop the workers, pricing or not (what is left to price is not wanted)."""
        processes = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:  # (Python 3.14's terminate_workers)
            p.terminate()
        for p in processes:
            p.join()


def _warm() -> None:
    """Import what pricing needs while the parent walks, below its priority: where cores are
    few the walk keeps one."""
    os.nice(10)
    import scipy.sparse.csgraph  # noqa: F401


def _priced(all_moves, P: int, placed) -> tuple[str, float, object]:
    """("", the overlap bound, the MovePrice) of one candidate's moves, as Redistributions
    computes them in the parent; (why, inf, None) where the moves pair too many ranks."""
    profile, itemsize, rpn, relabel, links, tree = _SETTINGS
    try:
        overlaps = move_overlaps(all_moves)
    except LayoutError as err:
        return str(err), math.inf, None
    bound = overlap_bound(all_moves, overlaps, P, profile, itemsize, rpn, links)
    price = price_moves(
        all_moves, P, profile, itemsize, rpn, relabel, links, overlaps, tree, placed
    )
    return "", bound, price


__all__ = ["AHEAD_PER_WORKER", "FROM_RANKS", "MOST_WORKERS", "Workers", "workers_for"]
