"""Pricing `distmm plan`'s redistributions in worker processes, ahead of the search.

From the user's layouts at thousands of ranks, pricing one candidate's moves (counting what
every pair of ranks exchanges, relabelling, summing each rank's load: bench/plan_ranking.py)
takes 50-150 ms, and the search (bench/model/search.py) asks for one price after another while
the rest of the plan waits. Here forked workers price the candidates the search says come next
(Job.prefetch; with ``--exhaustive``, every candidate, named at the start) while it walks or
waits for the one it needs. A worker prices with the parent's own Redistributions, inherited by
the fork, so the plan's answer is the same with workers or without. The workers start with the
plan and import SciPy (for the relabelling's matchings, 0.3 s) below the parent's priority while
it walks the candidates' loops; a worker that dies leaves its prices to the parent. Where the
search is about to wait with workers idle, and again each time a worker finishes while it waits,
they price the candidates next in line whose moves pair at most SPECULATE_PAIRS rank parts
(Redistributions.speculate): cheap to price in vain.

Only where pricing is dear (:data:`FROM_RANKS`), on Linux (where fork is the default start, and
the only one that needs no re-import of the caller's main module), and never inside an MPI job:
forking a process that has initialised MPI is not safe.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import sys
import tempfile
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from .machine import keep_freed
from .metadata import cores

FROM_RANKS = 1024  # below this many ranks moves price in milliseconds: no workers
MOST_WORKERS = 4  # each holds one candidate's rank pairs (up to a few hundred MB)
# candidates the search names ahead per worker (bench.model.search: only those walked to the
# end and bounded near the one priced): at 8192 ranks from block layouts 4 had 2 workers price
# 8-13 layouts where 8 were needed, 0-0.1 s faster than 2, 0.1-0.5 s faster than 1
AHEAD_PER_WORKER = 4
# idle workers price a candidate the search may never need only where its moves' overlaps hold
# at most this many entries (layouts.endpoints.pair_bounds; about 0.2 us each to count and
# relabel): from block layouts at 4096 ranks, tesseract 2x2x1024's 4.5 million took both
# workers 1.2-2 s each, and the plan 3.9 s where it takes 0.7 without them
SPECULATE_PAIRS = 1 << 20

SPOOL_PREFIX = "distmm-plan-"  # then the plan's pid: its workers' prices (Workers.spool)

_PRICER = None  # the planner's Redistributions (bench/plan_ranking.py), for the fork


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

    def __init__(self, count: int, pricer):
        global _PRICER
        _PRICER = pricer  # the forked workers inherit it
        self.pool = ProcessPoolExecutor(
            count, mp_context=multiprocessing.get_context("fork"), initializer=_warm
        )
        self.pool.submit(int)  # the first task starts every worker (and their imports) now
        self.pending: dict = {}
        self.fetched: dict = {}  # key -> what result() read of it
        self.count = count
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        swept(shm)
        # prices, a file each
        self.spool = tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{os.getpid()}-", dir=shm)

    def idle(self) -> int:
        """How many workers have nothing to price (any submitted and not done is busy)."""
        busy = sum(f is not None and not f.done() for f in self.pending.values())
        return max(self.count - busy, 0)

    def submit(self, key, plan, binding) -> None:
        if key not in self.pending:
            try:
                self.pending[key] = self.pool.submit(_priced, plan, binding, self.spool)
            except BrokenProcessPool:
                self.pending[key] = None

    def busy(self, key) -> bool:
        """Whether ``key`` was submitted and its price is not ready (asking would wait)."""
        found = self.pending.get(key)
        return found is not None and not found.done()

    def progress(self) -> None:
        """Wait until some worker finishes what it prices (at once if none is pricing)."""
        running = [f for f in self.pending.values() if f is not None and not f.done()]
        if running:
            wait(running, return_when=FIRST_COMPLETED)

    def result(self, key):
        if key in self.fetched:
            return self.fetched[key]
        found = self.pending[key]
        try:
            out = None if found is None else unspooled(found.result())
        except BrokenProcessPool:  # a worker died (the kernel's OOM killer, say)
            out = None
        self.fetched[key] = out
        return out

    def close(self) -> None:
        """Stop the workers, pricing or not (what is left to price is not wanted)."""
        processes = list((getattr(self.pool, "_processes", None) or {}).values())
        manager = getattr(self.pool, "_executor_manager_thread", None)  # (shutdown forgets it)
        self.pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:  # (Python 3.14's terminate_workers)
            p.terminate()
        for p in processes:
            p.join()
        if manager is not None:
            # its clean-up closes the pipe the interpreter's exit wakes it through: done first,
            # or at exit the two race (1 plan in about 60 printed "OSError: [Errno 9] Bad file
            # descriptor" from concurrent.futures' _python_exit)
            manager.join(timeout=5)
        shutil.rmtree(self.spool, ignore_errors=True)  # prices never asked for, or cut short


def _warm() -> None:
    """Import what pricing needs while the parent walks, below its priority (where cores are
    few the walk keeps one), with freed memory kept for the next arrays (machine.keep_freed)."""
    os.nice(10)
    keep_freed()
    _PRICER.workers = None  # a worker prices in itself
    import scipy.sparse.csgraph  # noqa: F401


def _priced(plan, binding, spool: str) -> str:
    """(why its moves pair too many ranks to count, else "", the overlap bound, the MovePrice)
    of a candidate, from the parent's Redistributions' own methods, :func:`spooled` to a file
    in ``spool``."""
    _PRICER.refused = ""
    bound = _PRICER.overlap_bound(plan, binding)
    price = _PRICER.price(plan, binding)
    return spooled((_PRICER.refused if _PRICER.uncountable(plan) else "", bound, price), spool)


def spooled(result, spool: str) -> str:
    """``result`` pickled to a new file in ``spool``; its path, what the worker sends back.
    A price's relabelling holds a rank each (40 KB at P = 8192): sent whole through the pool's
    pipe, a worker ended while writing it (the search done, Workers.close) left the pool's
    reader thread waiting for the rest, and the plan hanging at exit after its table (2 plans in
    about 40 on a loaded machine). A path takes one write no longer than PIPE_BUF: whole or not
    at all."""
    fd, path = tempfile.mkstemp(dir=spool, suffix=".part")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(path, path[: -len(".part")])
    return path[: -len(".part")]


def swept(where: str) -> None:
    """Remove the spools in ``where`` of plans no longer running: a plan killed outright
    (SIGKILL, the OOM killer) cannot remove its own, and /dev/shm is memory. A spool's name
    carries its plan's pid; one whose process exists, or that another user owns, is kept."""
    for name in os.listdir(where):
        if not name.startswith(SPOOL_PREFIX):
            continue
        pid = name[len(SPOOL_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(where, name), ignore_errors=True)
        except PermissionError:  # another user's plan, running
            pass


def unspooled(path: str):
    """What :func:`spooled` wrote to ``path`` (the file removed)."""
    with open(path, "rb") as f:
        found = pickle.load(f)
    os.unlink(path)
    return found


__all__ = [
    "AHEAD_PER_WORKER",
    "FROM_RANKS",
    "MOST_WORKERS",
    "SPECULATE_PAIRS",
    "Workers",
    "workers_for",
]
