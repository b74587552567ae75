"""`distmm plan`'s workers (bench/plan_workers.py) price the candidates' redistributions ahead of
the search: the plan is the same with them as without, when a worker dies, and where moves pair
too many ranks to count (serial, no MPI)."""

from __future__ import annotations

import json
import os
import sys
import types
from functools import partial

import pytest
from launch import distmm

import bench.plan_ranking as plan_ranking
import bench.plan_workers as plan_workers
import layouts.endpoints as endpoints
from bench.model import Profile, plan_moves
from bench.planner import candidates
from layouts.endpoints import pair_bounds, user_layouts

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux only")

# (shape, P, layouts, topology, links): a mesh, a cluster priced pair by pair, the MN-Core tree
CASES = [
    ((96, 64, 80), 4, "block-cyclic:4", "mesh", None),
    ((300, 500, 200), 12, "cols", "mesh", None),
    ((200, 96, 128), 8, "rows", "cluster:4,2", "1gbe"),
    ((64, 48, 80), 16, "block", "mncore:2,2,2,2", None),
]


@pytest.fixture(autouse=True)
def _outside_mpi(monkeypatch):
    """Earlier tests of the session may have initialised MPI in this process, where the
    planner forks no workers; these never touch MPI."""
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)


def _plan(case, profile, **kw):
    shape, P, layouts, topology, links = case
    users = user_layouts(dict.fromkeys("ABC", layouts), shape, P)
    return candidates(shape, P, profile, "float32", None, topology, links, users=users, **kw)


def _table(cands) -> tuple:
    rows = [
        (c.algo, repr(sorted(c.options.items())), c.overlap, str(c.binding), c.seconds, c.kernel)
        + (c.redistribute, c.relabel_bytes_saved, c.words, c.pareto)
        for c in cands
    ]
    return rows, cands.pruned, cands.uncountable


def _only_in_workers(parent: int):
    """plan_ranking.price_moves failing in the process ``parent`` (the workers, forked with
    it patched, price as before)."""
    price_moves = plan_ranking.price_moves

    def priced(*args, **kwargs):
        if os.getpid() == parent:
            raise AssertionError("a redistribution was priced in the parent")
        return price_moves(*args, **kwargs)

    return priced


def _die(*args):
    os._exit(3)  # a worker killed while pricing (say, by the kernel's OOM killer)


@pytest.mark.parametrize("keep", [5, None], ids=["pruned", "exhaustive"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3]}-P{c[1]}")
def test_workers_price_what_the_plan_prices_alone(case, keep, profile_file, monkeypatch):
    profile = Profile.load(profile_file)
    alone = _plan(case, profile, keep=keep, workers=0)
    monkeypatch.setattr(plan_ranking, "price_moves", _only_in_workers(os.getpid()))
    assert _table(_plan(case, profile, keep=keep, workers=2)) == _table(alone)


def test_a_dead_worker_leaves_its_prices_to_the_parent(profile_file, monkeypatch):
    profile = Profile.load(profile_file)
    alone = _plan(CASES[1], profile, keep=5, workers=0)
    monkeypatch.setattr(plan_workers, "_priced", _die)  # the forked workers inherit it
    assert _table(_plan(CASES[1], profile, keep=5, workers=2)) == _table(alone)


@pytest.mark.parametrize("limits", [("MAX_PAIRS",), ("MAX_PAIRS", "MAX_STREAMED")])
def test_moves_a_worker_cannot_hold_are_priced_or_left_out_as_alone(
    profile_file, monkeypatch, limits
):
    """Moves of more pairs than MAX_PAIRS are counted as they come (bench/model/dense_moves.py),
    of more than MAX_STREAMED left out: by workers as alone."""
    profile = Profile.load(profile_file)
    shape, P, layouts, _, _ = CASES[1]
    users = user_layouts(dict.fromkeys("ABC", layouts), shape, P)
    bounds = sorted({sum(pair_bounds(plan_moves(users, c.plan))) for c in _plan(CASES[1], profile)})
    for limit in limits:
        monkeypatch.setattr(endpoints, limit, bounds[0])
    alone = _plan(CASES[1], profile, keep=5, workers=0)
    assert (alone.uncountable > 0) == (len(limits) == 2)
    assert _table(_plan(CASES[1], profile, keep=5, workers=2)) == _table(alone)


def test_a_worker_sends_back_a_path_one_pipe_write_holds(tmp_path):
    """A worker's price travels in a file, the pool's pipe carrying only its path: no worker
    ended mid-message leaves the pool's reader waiting for the rest at exit."""
    import pickle
    import select

    price = ("", 1.5, tuple(range(8192)))  # a relabelling of 8192 ranks: 40 KB pickled
    path = plan_workers.spooled(price, str(tmp_path))
    assert len(pickle.dumps(path)) + 8 < select.PIPE_BUF < len(pickle.dumps(price))
    assert plan_workers.unspooled(path) == price and not any(tmp_path.iterdir())


def test_a_killed_plans_spool_is_swept_by_the_next(tmp_path):
    """A plan killed outright leaves its spool behind; the next plan's Workers remove it, and
    keep those of plans still running and whatever else is there."""
    import subprocess

    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = tmp_path / f"{plan_workers.SPOOL_PREFIX}{int(ended.stdout)}-x1"
    alive = tmp_path / f"{plan_workers.SPOOL_PREFIX}{os.getpid()}-x2"
    other = tmp_path / f"{plan_workers.SPOOL_PREFIX}abc"
    for d in (dead, alive, other):
        d.mkdir()
        (d / "price").write_bytes(b"x")
    plan_workers.swept(str(tmp_path))
    assert not dead.exists() and alive.exists() and other.exists()


def test_how_many_workers(monkeypatch):
    monkeypatch.setattr(plan_workers, "cores", lambda: 8)
    assert plan_workers.workers_for(plan_workers.FROM_RANKS - 1) == 0
    assert plan_workers.workers_for(8192) == plan_workers.MOST_WORKERS
    assert plan_workers.workers_for(16, 3) == 3 and plan_workers.workers_for(8192, 0) == 0
    monkeypatch.setattr(plan_workers, "cores", lambda: 1)
    assert plan_workers.workers_for(8192) == 0
    mpi = types.SimpleNamespace(Is_initialized=lambda: True, Is_finalized=lambda: False)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)
    assert plan_workers.workers_for(8192, 2) == 0  # never fork a process running MPI


def test_plan_cli_workers(profile_file):
    base = ["plan", "--shape", "300,500,200", "--P", "12", "--profile", str(profile_file)]
    outs = [json.loads(distmm(*base, "--json", "--workers", n).stdout) for n in ("0", "2")]
    for out in outs:
        del out["planning_seconds"]
    assert outs[0] == outs[1]
    bad = distmm(*base, "--workers", "-1")
    assert bad.returncode == 2 and "--workers: '-1' must be at least 0" in bad.stderr


def test_the_search_names_ahead_only_jobs_walked_and_bounded_near():
    from bench.model.search import AHEAD_WITHIN, Job, _prefetch

    named = []
    jobs = [Job(price=print, memory=0, prefetch=partial(named.append, k)) for k in range(6)]
    exact = types.SimpleNamespace(seconds=0.8)  # the kernels walked to the end
    walked = [exact, exact, None, exact, exact, exact]
    extra = [None, None, None, 0.5, None, None]  # job 3 already priced
    near = 1.0 + AHEAD_WITHIN * 0.2  # job 0's bound passed by AHEAD_WITHIN times its extra's
    heap = [(1.0, 0, 0), (1.05, 0, 1), (1.1, 0, 2), (1.15, 0, 3), (near, 0, 4)]
    heap.append((near * 1.01, 0, 5))
    _prefetch(jobs, heap[1:], heap[0], 8, walked, extra)
    assert named == [0, 1, 4]  # 2 not walked to the end, 3 priced, 5 bounded too far
    named.clear()
    _prefetch(jobs, heap[1:], heap[0], 1, walked, extra)
    assert named == [0, 1]


def test_the_search_names_ahead_no_job_far_dearer_than_the_one_priced():
    """Jobs near in bound but AHEAD_DEARER times dearer to price (Job.work: rank pairs) than
    the one priced are left for the search to ask for (moves counted as they come took 0.6 s
    each, ahead, for nothing)."""
    from bench.model.search import AHEAD_DEARER, Job, _prefetch

    named = []
    work = [100, 100 * AHEAD_DEARER, 100 * AHEAD_DEARER + 1, 50]
    jobs = [
        Job(price=print, memory=0, prefetch=partial(named.append, k), work=lambda k=k: work[k])
        for k in range(4)
    ]
    exact = types.SimpleNamespace(seconds=0.8)
    heap = [(1.0, 0, 0), (1.01, 0, 1), (1.02, 0, 2), (1.03, 0, 3)]
    _prefetch(jobs, heap[1:], heap[0], 8, [exact] * 4, [None] * 4)
    assert named == [0, 1, 3]


def test_the_search_walks_ahead_only_what_it_can_name():
    """Kernels are walked ahead of their turn (bench.model.search._walk_ahead) only as many as
    the jobs already walked within the limit leave for the prefetch to name (on a cluster each
    job priced had 8 more walked to the end: 123 for the 17 the search needed)."""
    from bench.model.search import _walk_ahead
    from bench.model.walk import Prediction

    class Walk:
        def __init__(self, k):
            self.k = k

        def advance(self, limit):
            advanced.append(self.k)
            return Prediction(1.0, {}, 0, 0, 0, 1.0)  # walked to the end

    advanced = []
    exact = types.SimpleNamespace(seconds=1.0)
    kernel = [exact, exact, None, None, None, None, None]
    extra = [None, 0.1, None, None, None, None, None]  # job 1 priced: not one to name
    heap = [(0.9 + 0.01 * k, 0, k) for k in range(6)] + [(2.0, 0, 6)]  # job 6 beyond the limit
    walks, low = [Walk(k) for k in range(7)], [0.0] * 7
    _walk_ahead(heap, walks, kernel, [0] * 7, low, extra, 1.5, 3)
    assert advanced == [2, 3]  # job 0 is ready: two more make the three the prefetch names
    assert kernel[2] is not None and kernel[3] is not None
    advanced.clear()
    _walk_ahead(heap, walks, kernel, [0] * 7, low, extra, 1.5, 3)
    assert advanced == []  # three ready within the limit already
    _walk_ahead(heap, walks, kernel, [0] * 7, low, extra, 1.5, 5)
    assert advanced == [4, 5]  # never job 6, bounded past the limit


def test_while_the_search_waits_for_a_worker_the_idle_ones_are_given_more():
    """The search waits for a candidate a worker prices one worker finish at a time
    (``progress``), filling the idle workers before and after each (bench.model.search._await);
    jobs being priced are not given to speculate on again."""
    from bench.model.search import Job, _await, _guessable

    left, calls = [2], []

    def busy():
        return left[0] > 0

    def progress():
        calls.append("progress")
        left[0] -= 1

    job = Job(price=print, memory=0, speculate=lambda: True, busy=busy)
    _await(job, progress, lambda: calls.append("fill"))
    assert calls == ["fill", "progress", "fill", "progress", "fill"]
    assert _guessable(job)  # no longer busy
    left[0] = 1
    assert not _guessable(job)
    calls.clear()
    _await(Job(price=print, memory=0), progress, lambda: calls.append("fill"))
    assert calls == ["fill"]  # nothing priced elsewhere: no wait


def test_idle_workers_change_neither_what_the_search_bounds_nor_the_plan(profile_file, monkeypatch):
    """Idle workers price candidates next in line, their kernels walked to the end ahead of
    their turn (bench.model.search._fill_idle); the search still bounds the moves of the same
    candidates, in the same order, as alone, and plans the same. From block at 4096 ranks
    (8192^3) it once bounded three such by their stale heap entries (11 s below their kernels,
    with results/vm-2c-amx's profile) and waited 2 s for a worker pricing their moves in full."""
    profile = Profile.load(profile_file)
    asked, given = [], []
    bound, speculate = (
        plan_ranking.Redistributions.overlap_bound,
        plan_ranking.Redistributions.speculate,
    )

    def overlap_bound(self, plan, binding=None):
        asked.append(self._key(plan))
        return bound(self, plan, binding)

    def guessed(self, plan, binding=None):
        found = speculate(self, plan, binding)
        given.extend([self._key(plan)] if found else [])
        return found

    monkeypatch.setattr(plan_ranking.Redistributions, "overlap_bound", overlap_bound)
    monkeypatch.setattr(plan_ranking.Redistributions, "speculate", guessed)
    shape, P = (8192,) * 3, 4096
    users = user_layouts(dict.fromkeys("ABC", "block"), shape, P)
    runs = []
    for workers in (0, 2):
        cands = candidates(shape, P, profile, users=users, keep=15, workers=workers)
        runs.append((list(asked), _table(cands)))
        asked.clear()
        assert bool(given) == bool(workers)  # (no workers: nothing given)
    assert runs[0] == runs[1]
