"""The planner behind `distmm plan`: every candidate plan (algorithm, grid or F_op, pace or
panel width, overlap, binding) priced by the cost model, the time/memory Pareto front, the
recommendation within a memory budget and chains of products planned as a shortest path (see
plan_cmd's docstring for why that suffices); measuring the top candidates: bench/plan_measure.py."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from algorithms import ALGORITHMS, get, left_to_twin
from algorithms.plan import PlanError

from .errors import UsageError
from .launch import run_argv, shell_command
from .model import Job, Profile, price, redistribution_seconds, search
from .plan_ranking import Ranking, Redistributions, mark_pareto, set_words
from .units import format_bytes


@dataclass
class Candidate:
    algo: str
    options: dict  # grid / fop / pace / panel as `distmm run` takes them
    overlap: bool
    plan: object = field(repr=False)
    binding: object = None
    seconds: float = math.inf  # end to end (the kernel alone for native layouts)
    memory: int = 0
    bytes_sent: int = 0
    pareto: bool = False
    kernel: float = math.inf  # the multiplication alone
    redistribute: tuple[float, float] = (0.0, 0.0)  # (in, out) seconds
    relabel_bytes_saved: int = 0
    words: int = 0  # elements the rank sends in the kernel + the busiest rank moves around it
    bound: float = 0.0  # lower bound on words per rank for this memory (bench/model/bound.py)
    exact: bool = True  # False: never priced end to end (seconds is a lower bound)
    layouts: dict | None = None  # the user's layout specs {"A", "B", "C"} (None: native)
    relabel: bool = True
    # this plan with overlap the other way, where the two are priced alike (nothing the model
    # sees hidden): the table shows the pair as one row (bench.plan_view.table_rows)
    overlap_twin: Candidate | None = field(default=None, repr=False)

    @property
    def on_front(self) -> bool:
        """On the Pareto front, or its overlap twin is."""
        return self.pareto or (self.overlap_twin is not None and self.overlap_twin.pareto)

    @property
    def words_ratio(self) -> float | None:
        return self.words / self.bound if self.bound > 0 else None

    @property
    def grid_text(self) -> str:
        g = self.options.get("fop") or self.options.get("grid") or self.plan.grid
        return ("F_op " if "fop" in self.options else "") + "x".join(map(str, g))

    @property
    def params_text(self) -> str:
        parts = [f"{k}={self.options[k]}" for k in ("pace", "panel") if k in self.options]
        if self.binding is not None:
            parts.append(f"bind {self.binding}")
        return " ".join(parts) or "-"

    def run_args(
        self, shape, dtype: str, topology: str = "mesh", emulate_links: str | None = None
    ) -> list[str]:
        """The `distmm run` arguments of this candidate."""
        return run_argv(
            self.algo,
            shape,
            self.options,
            dtype=dtype,
            overlap=self.overlap,
            topology=topology,
            binding=self.binding,
            layouts=self.layouts,
            relabel=self.relabel,
            emulate_links=emulate_links,
        )

    def command(self, shape, P: int, dtype: str, topology: str = "mesh", emulate=None) -> str:
        """The command that runs this candidate (``emulate``: the links its run emulates)."""
        return shell_command(P, self.run_args(shape, dtype, topology, emulate))

    def record(self, shape, P, dtype, topology, emulate=None) -> dict:
        return {
            "algo": self.algo,
            "grid": list(self.plan.grid),
            "options": {k: list(v) if isinstance(v, tuple) else v for k, v in self.options.items()},
            "overlap": self.overlap,
            "binding": str(self.binding) if self.binding else None,
            "predicted_seconds": self.seconds if self.exact else None,
            "predicted_seconds_at_least": self.seconds,
            "predicted_multiply_seconds": self.kernel,
            "predicted_redistribute_in_seconds": self.redistribute[0] if self.exact else None,
            "predicted_redistribute_out_seconds": self.redistribute[1] if self.exact else None,
            "relabel_bytes_saved": self.relabel_bytes_saved,
            "words_per_rank": self.words if self.exact else None,
            "words_bound": self.bound,
            "predicted_gflops": self.plan.flops / self.seconds / 1e9 if self.seconds else None,
            "memory_per_rank": self.memory,
            "bytes_per_rank": self.bytes_sent,
            "pareto": self.pareto,
            "overlap_alike": self.overlap_twin is not None,
            "command": self.command(shape, P, dtype, topology, emulate),
        }


def _option_sets(algorithm, shape, P: int, algos=()):
    """(options, plan with overlap) for every grid/F_op (but those left to a twin in ``algos``)
    and every candidate of the other options; the plan is None unless all the others are at
    their defaults (then it is the one planned to find their candidates)."""
    key = algorithm.grid_option.name
    others = [o for o in algorithm.options if not o.is_grid and o.candidates is not None]
    for g in [g for g in algorithm.grids(P) if not left_to_twin(algorithm, g, P, algos)]:
        base = {key: tuple(g)}
        try:
            default = algorithm.plan(tuple(shape), P, overlap=True, **base)
        except PlanError:
            continue
        values = [list(o.candidates(default)) for o in others]
        for combo in itertools.product(*values):
            chosen = zip(others, combo, strict=True)
            opts = {**base, **{o.name: v for o, v in chosen if v != o.default}}
            yield opts, default if opts == base else None


def candidates(
    shape,
    P: int,
    profile: Profile,
    dtype: str = "float32",
    ranks_per_node: int | None = None,
    topology: str = "mesh",
    links_spec: str | None = None,
    algos=None,
    users: dict | None = None,
    relabel: bool = True,
    keep: int | None = None,
    emulated: bool = False,
    workers: int | None = None,
) -> Ranking:
    """Every candidate plan, priced, ranked by predicted time, Pareto front marked. With
    ``users`` (layouts.endpoints.user_layouts) not all native the time is end to end: the kernel
    plus the redistributions from and to the user's layouts (bench/plan_ranking.py). With
    ``keep``, only the ``keep`` fastest and the Pareto front are certain to be there (and are
    exact): candidates provably in neither are left out, their loops stopped early
    (bench/model/search.py); the Ranking's ``pruned`` counts them. ``emulated``: priced as
    runs emulating the links here are (LinkModel.emulated; a cluster's ranks share this node).
    ``workers``: processes pricing the moves ahead of the search (bench/plan_workers.py; None:
    as many as cores, up to 4, from 1024 ranks)."""
    tree = links = None
    if topology != "mesh":
        from topology.hierarchy import is_cluster
        from topology.links import LinkModel
        from topology.tree import bindings, parse_topology

        tree = parse_topology(topology)
        if tree.size != P:
            units = "ranks" if is_cluster(tree) else "PEs"
            raise UsageError(f"topology {topology} has {tree.size} {units} but --P is {P}")
        links = LinkModel.load(links_spec, tree) if links_spec else None
        if links is not None and emulated:
            links = replace(links, emulated=True)
    elif links_spec:
        raise UsageError("--links/--network need --topology mncore[:...] or cluster:NODES,RPN")
    rpn = min(ranks_per_node or P, P)
    if topology.startswith("cluster:"):
        from .cluster import need_network
        from .options import cluster_ranks_per_node

        need_network(tree, links)
        if not emulated:
            rpn = cluster_ranks_per_node(tree, ranks_per_node)
    npdt = np.dtype(dtype)
    moves, ahead = None, 0
    if users is not None and not all(u.native for u in users.values()):
        from .plan_workers import AHEAD_PER_WORKER, workers_for  # (not for native layouts)

        count = workers_for(P, workers)
        moves = Redistributions(users, profile, npdt.itemsize, rpn, relabel, links, tree, count)
        ahead = AHEAD_PER_WORKER * count
    cands: list[Candidate] = []
    jobs: list[Job] = []
    prices: dict = {}  # one price per distinct operation, shared by every candidate
    for algo in algos or ALGORITHMS:
        algorithm = get(algo)
        if not algorithm.grids(P):
            continue
        for opts, on in _option_sets(algorithm, shape, P, algos or ALGORITHMS):
            states: dict = {}  # prepared state and symbolic comm, shared by overlap on and off
            try:  # overlap changes nothing of a plan but itself: its layouts are built once
                on = on or algorithm.plan(tuple(shape), P, overlap=True, **opts)
            except PlanError:
                continue
            for plan in (on, replace(on, overlap=False)):
                mem = algorithm.memory(plan, npdt.itemsize)
                for b in [None] if tree is None else bindings(plan.mesh, tree):
                    cands.append(Candidate(algo, opts, plan.overlap, plan, b, memory=mem))
                    run = partial(
                        price,
                        algorithm,
                        plan,
                        profile,
                        npdt,
                        rpn,
                        binding=b,
                        tree=tree,
                        links=links,
                        cache=states,
                        prices=prices,
                    )
                    if moves is not None:
                        extra = partial(moves.seconds, plan, b, algorithm)
                        refine = partial(moves.overlap_bound, plan, b)
                        bound, fetch = moves.lower_bound(plan), partial(moves.prefetch, plan, b)
                        guess, busy, work = (
                            partial(moves.speculate, plan, b),
                            partial(moves.busy, plan, b),
                            partial(moves.pairs, plan),
                        )
                        jobs.append(Job(run, mem, extra, bound, refine, fetch, guess, busy, work))
                    else:
                        jobs.append(Job(run, mem))
    out = Ranking()
    try:
        idle, progress = (None, None) if moves is None else (moves.idle, moves.progress)
        found = search(jobs, keep, ahead, idle, progress)
    finally:
        if moves is not None:
            moves.close()
    for c, priced in zip(cands, found, strict=True):
        if moves is not None and moves.uncountable(c.plan):
            out.uncountable += 1
            continue
        if priced is None:
            out.pruned += 1
            continue
        pred = priced.prediction
        c.kernel, c.seconds, c.bytes_sent = pred.seconds, priced.key, pred.bytes_sent
        c.words = c.bytes_sent // npdt.itemsize
        if moves is not None:
            moves.describe(c)
        out.append(c)
    if not out and moves is not None and moves.refused:
        raise UsageError(f"no candidate can be priced end to end: {moves.refused}")
    set_words(out, shape, P, npdt.itemsize)
    out.sort(key=lambda c: (c.seconds, c.memory))
    mark_pareto(out)
    mark_overlap_alike(out)
    return out


def mark_overlap_alike(cands: list[Candidate]) -> None:
    """Pair the candidates of one plan with overlap on and off that are priced alike in every
    figure the table shows (on a node with more ranks than cores, or where no message has a
    GEMM to hide behind, the model hides nothing): ``overlap_twin``."""

    def plan(c: Candidate) -> tuple:
        return (c.algo, c.grid_text, c.params_text, c.memory, c.words)

    def alike(a: Candidate, b: Candidate) -> bool:  # summed in another order: last bits differ
        pairs = ((a.seconds, b.seconds), (a.kernel, b.kernel))
        return all(math.isclose(x, y, rel_tol=1e-9) for x, y in pairs)

    on = {plan(c): c for c in cands if c.overlap and c.exact}
    for c in cands:
        twin = None if c.overlap or not c.exact else on.get(plan(c))
        if twin is not None and alike(c, twin):
            c.overlap_twin, twin.overlap_twin = twin, c


def recommend(cands: list[Candidate], budget: int | None) -> Candidate:
    fits = [c for c in cands if budget is None or c.memory <= budget]
    if not fits:
        small = min(cands, key=lambda c: c.memory)
        raise UsageError(
            f"no plan fits --memory-per-rank {format_bytes(budget)}: the smallest "
            f"needs {format_bytes(small.memory)} per rank ({small.algo} "
            f"{small.grid_text})"
        )
    return fits[0]


def run_set(cands: list[Candidate], best: Candidate, k: int) -> list[Candidate]:
    """The recommendation, then the next fastest with a different (algorithm, grid) and a
    different prediction: variants of one grid (overlap, panel, pace) are often predicted within
    a hair of each other, and algorithms that reduce to one schedule (summa p x q against
    summa25d and tesseract p x q x 1, cannon against cannon25d p x p x 1 and t10 F_op p x 1 x p)
    are predicted exactly alike; measuring those against each other would test the timer's
    noise, not the plan."""

    def same(c: Candidate) -> tuple:
        return (c.seconds, c.kernel, c.redistribute, c.bytes_sent, c.words)

    out = [best]
    seen, predicted = {(best.algo, best.grid_text)}, {same(best)}
    for c in cands:
        if len(out) >= k:
            break
        if (c.algo, c.grid_text) not in seen and same(c) not in predicted:
            seen.add((c.algo, c.grid_text))
            predicted.add(same(c))
            out.append(c)
    return out


# -- chains ----------------------------------------------------------------------------------
def _edge_seconds(
    prev: Candidate, nxt: Candidate, profile: Profile, dtype: str, ranks_per_node: int, cache: dict
) -> float:
    """Time to move prev's C layout into nxt's A layout (bench.model.redistribution_seconds)."""
    src, dst = prev.plan.C, nxt.plan.A
    key = (str(src), str(prev.plan.mesh), str(dst), str(nxt.plan.mesh))
    if key not in cache:
        cache[key] = redistribution_seconds(
            src,
            prev.plan.mesh,
            dst,
            nxt.plan.mesh,
            profile,
            np.dtype(dtype).itemsize,
            ranks_per_node,
        )
    return cache[key]


def plan_chain(
    dims,
    P: int,
    profile: Profile,
    dtype: str = "float32",
    ranks_per_node: int | None = None,
    keep: int = 4,
    budget: int | None = None,
) -> dict:
    """Shortest path over (product, candidate) with redistribution edges; and the greedy path."""
    rpn = min(ranks_per_node or P, P)
    M = dims[0]
    layers = []
    for k, n in zip(dims[1:-1], dims[2:], strict=True):
        cands = candidates((M, k, n), P, profile, dtype, rpn)
        recommend(cands, budget)  # one line naming the smallest need when nothing fits
        seen, kept = set(), []
        for c in cands:
            if budget is not None and c.memory > budget:
                continue  # distinct A/C layouts first: the choice that matters for the edges
            sig = (str(c.plan.A), str(c.plan.C), str(c.plan.mesh))
            if sig in seen:
                continue
            seen.add(sig)
            kept.append(c)
            if len(kept) == keep:
                break
        layers.append(kept)
    cache: dict = {}

    def edge(a, b):
        return _edge_seconds(a, b, profile, dtype, rpn, cache)

    # dynamic programming: best[i][j] = cheapest time ending with candidate j of product i
    best = [[c.seconds for c in layers[0]]]
    back = [[None] * len(layers[0])]
    for i in range(1, len(layers)):
        row, brow = [], []
        for c in layers[i]:
            costs = [best[i - 1][j] + edge(p, c) for j, p in enumerate(layers[i - 1])]
            j = int(np.argmin(costs))
            row.append(costs[j] + c.seconds)
            brow.append(j)
        best.append(row)
        back.append(brow)
    j = int(np.argmin(best[-1]))
    path = [j]
    for i in range(len(layers) - 1, 0, -1):
        j = back[i][j]
        path.append(j)
    path.reverse()

    def describe(choice):
        chosen = [layers[i][j] for i, j in enumerate(choice)]
        redis = [edge(a, b) for a, b in zip(chosen, chosen[1:], strict=False)]
        return chosen, redis, sum(c.seconds for c in chosen) + sum(redis)

    chosen, redis, total = describe(path)
    g_chosen, g_redis, g_total = describe([0] * len(layers))
    return {
        "layers": layers,
        "chosen": chosen,
        "redistribution": redis,
        "total": total,
        "greedy": g_chosen,
        "greedy_redistribution": g_redis,
        "greedy_total": g_total,
    }
