"""`distmm plan --shape M,K,N --P N --profile FILE`: choose the algorithm, grid and parameters.

Every algorithm that admits P ranks is expanded into candidates: each grid (or T10 F_op), each
T10 rotating pace, SUMMA-family panel widths {default, default/2, default/4}, overlap on and off
and, on a tree (``--topology``), each binding of the mesh onto the tree. Each candidate is priced
with the cost model (rank 0's schedule, as `distmm predict` does), its memory per rank estimated
(`distmm run`'s estimate) and its bytes moved per rank counted. The output is the ranked table,
the time/memory Pareto front, the fastest plan within ``--memory-per-rank`` and the command that
runs it. ``--run`` runs the top candidates under mpiexec and sets measured beside predicted.

Chains (``--chain M,K1,K2,...``): X[M,K1] @ W1[K1,K2] @ W2[K2,K3] ... Each product keeps its best
few candidates; consecutive products are joined by the cost of redistributing the previous C
layout into the next A layout (bytes counted from the two layouts' block maps, priced as an
alltoall). The best sequence is a shortest path through this layered graph (dynamic
programming, one layer per product).

Why a shortest path suffices: the seed (onnx-mlir device placement) has two choices per node of
an arbitrary operator graph (CPU or accelerator) and a transfer cost on each edge whose ends
differ; that is a binary labelling with pairwise costs, which reduces to an s-t min-cut (source
side = one device, sink side = the other, node costs on the terminal edges, transfer costs on the
inner edges). Here each node has many choices (algorithm x layout), which a min-cut does not
capture in general, but the graph is a chain: each product's cost depends only on its own choice
and its neighbour's, so the labelling problem is exactly a shortest path through the layers, and
dynamic programming solves it optimally in O(products x choices^2).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from algorithms import ALGORITHMS, get
from algorithms.plan import PlanError

from .cli import UsageError
from .model import Profile, predict, redistribution_seconds, schedule
from .run_cmd import _ints, _positive, memory_estimate

PANEL_ALGOS = ("summa", "summa25d", "tesseract")


def parse_bytes(text: str) -> int:
    """'2GiB', '512MiB', '1.5GB', '1000000' -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?)[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 2GiB, 512MiB, 1000000)")
    value, unit, binary = float(m.group(1)), m.group(2).upper(), m.group(3)
    power = " KMGT".index(unit) if unit else 0
    n = int(value * (1024 if binary or not unit else 1000) ** power) if unit else int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--shape", type=_ints(3), metavar="M,K,N", help="C[M,N] = A[M,K] @ B[K,N]")
    what.add_argument("--chain", type=_ints(None), metavar="M,K1,K2,...",
                      help="plan X[M,K1] @ W1[K1,K2] @ W2[K2,K3] ... as a whole")
    p.add_argument("--P", type=_positive, required=True, help="rank count")
    p.add_argument("--profile", required=True, help="machine profile from distmm calibrate")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--memory-per-rank", type=parse_bytes, metavar="BYTES",
                   help="memory budget per rank (2GiB, 512MiB or plain bytes; default: none)")
    p.add_argument("--ranks-per-node", type=_positive, help="ranks sharing a node's cores "
                   "(default: P, i.e. every rank on this machine)")
    p.add_argument("--topology", default="mesh", help="mesh (default) or a tree "
                   "(mncore[:L2B,L1B,MAB,PE]): every binding is a candidate")
    p.add_argument("--links", metavar="PRESET|FILE", help="with --topology: price communication "
                   "with this link model")
    p.add_argument("--top", type=_positive, default=None,
                   help="rows of the table to print (default 15) / candidates --run runs (3)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--run", action="store_true", help="run the top candidates under mpiexec "
                   "and compare predicted with measured order")
    p.add_argument("--repeat", type=_positive, default=3, help="with --run: timed repetitions")
    p.add_argument("--mpiexec", help="with --run: the mpiexec to use (default: found)")


# -- candidates -----------------------------------------------------------------------------
@dataclass
class Candidate:
    algo: str
    options: dict  # grid / fop / pace / panel as `distmm run` takes them
    overlap: bool
    plan: object = field(repr=False)
    binding: object = None
    seconds: float = math.inf
    memory: int = 0
    bytes_sent: int = 0
    pareto: bool = False

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

    def run_args(self, shape, dtype: str, topology: str = "mesh") -> list[str]:
        args = ["run", self.algo, "--shape", ",".join(map(str, shape))]
        for k in ("grid", "fop", "pace", "panel"):
            if k in self.options:
                v = self.options[k]
                args += [f"--{k}", ",".join(map(str, v)) if isinstance(v, tuple) else str(v)]
        if not self.overlap:
            args.append("--no-overlap")
        if dtype != "float32":
            args += ["--dtype", dtype]
        if topology != "mesh":
            args += ["--topology", topology]
            if self.binding is not None:
                args += ["--bind", str(self.binding)]
        return args

    def record(self, shape, P, dtype, topology) -> dict:
        return {"algo": self.algo, "grid": list(self.plan.grid),
                "options": {k: list(v) if isinstance(v, tuple) else v
                            for k, v in self.options.items()},
                "overlap": self.overlap, "binding": str(self.binding) if self.binding else None,
                "predicted_seconds": self.seconds,
                "predicted_gflops": self.plan.flops / self.seconds / 1e9 if self.seconds else None,
                "memory_per_rank": self.memory, "bytes_per_rank": self.bytes_sent,
                "pareto": self.pareto,
                "command": run_command(self, shape, P, dtype, topology)}


def run_command(c: Candidate, shape, P: int, dtype: str, topology: str = "mesh") -> str:
    return f"mpiexec -n {P} distmm " + " ".join(c.run_args(shape, dtype, topology))


def _option_sets(module, algo: str, shape, P: int):
    """(options) dicts for every grid/F_op and every candidate of the other options."""
    key = module.grid_option.name
    others = [o for o in module.options if not o.is_grid and o.candidates is not None]
    for g in module.grids(P):
        base = {key: tuple(g)}
        try:
            default = module.plan(tuple(shape), P, **base)
        except PlanError:
            continue
        values = [list(o.candidates(default)) for o in others]
        for combo in itertools.product(*values):
            chosen = zip(others, combo, strict=True)
            yield {**base, **{o.name: v for o, v in chosen if v != o.default}}


def candidates(shape, P: int, profile: Profile, dtype: str = "float32",
               ranks_per_node: int | None = None, topology: str = "mesh",
               links_spec: str | None = None, algos=None) -> list[Candidate]:
    """Every candidate plan, priced, ranked by predicted time, Pareto front marked."""
    tree = links = None
    if topology != "mesh":
        from topology.links import LinkModel
        from topology.tree import parse_topology

        tree = parse_topology(topology)
        if tree.size != P:
            raise UsageError(f"topology {topology} has {tree.size} PEs but --P is {P}")
        links = LinkModel.load(links_spec, tree) if links_spec else None
    elif links_spec:
        raise UsageError("--links needs --topology mncore[:L2B,L1B,MAB,PE]")
    rpn = min(ranks_per_node or P, P)
    npdt = np.dtype(dtype)
    out: list[Candidate] = []
    for algo in algos or ALGORITHMS:
        module = get(algo)
        if not module.grids(P):
            continue
        for opts in _option_sets(module, algo, shape, P):
            states: dict = {}  # prepare and scratch buffers, shared by overlap on and off
            for overlap in (True, False):
                try:
                    plan = module.plan(tuple(shape), P, overlap=overlap, **opts)
                except PlanError:
                    continue
                mem = memory_estimate(plan, npdt)
                if tree is None:
                    binds = [None]
                else:
                    from topology.tree import bindings

                    binds = bindings(plan.mesh, tree)
                for b in binds:
                    events = schedule(module, plan, 0, npdt, b, tree, cache=states)
                    pred = predict(events, profile, dtype, rpn, links=links)
                    out.append(Candidate(algo, opts, overlap, plan, b, pred.seconds, mem,
                                         pred.bytes_sent))
    out.sort(key=lambda c: (c.seconds, c.memory))
    mark_pareto(out)
    return out


def mark_pareto(cands: list[Candidate]) -> None:
    """Mark the candidates no other beats in both predicted time and memory (sorted by time)."""
    best_mem = math.inf
    for c in cands:  # sorted by (seconds, memory): non-dominated iff memory drops below all so far
        c.pareto = c.memory < best_mem
        best_mem = min(best_mem, c.memory)


def recommend(cands: list[Candidate], budget: int | None) -> Candidate:
    fits = [c for c in cands if budget is None or c.memory <= budget]
    if not fits:
        small = min(cands, key=lambda c: c.memory)
        raise UsageError(f"no plan fits --memory-per-rank {_size(budget)}: the smallest needs "
                         f"{_size(small.memory)} per rank ({small.algo} {small.grid_text})")
    return fits[0]


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def run_set(cands: list[Candidate], best: Candidate, k: int) -> list[Candidate]:
    """The recommendation, then the next fastest with a different (algorithm, grid): variants
    of one grid (overlap, panel, pace) are often predicted within a hair of each other, and
    measuring them against each other would test the timer's noise, not the plan."""
    out, seen = [best], {(best.algo, best.grid_text)}
    for c in cands:
        if len(out) >= k:
            break
        if (c.algo, c.grid_text) not in seen:
            seen.add((c.algo, c.grid_text))
            out.append(c)
    return out


# -- running ---------------------------------------------------------------------------------
def measure(cands: list[Candidate], shape, P: int, dtype: str, repeat: int,
            topology: str = "mesh", mpiexec: str | None = None, timeout: float = 300) -> list:
    """Run each candidate with `distmm run --json` under mpiexec; [(seconds | None, note)]."""
    import os

    from .sweep_cmd import _env, find_mpiexec, launch, mpi_flavour, mpiexec_command

    exe = find_mpiexec(mpiexec)
    flavour, _ = mpi_flavour(exe)
    cores = os.cpu_count() or 1
    out = []
    for c in cands:
        cmd = mpiexec_command(exe, flavour, P, cores) + [sys.executable, "-m", "bench.cli"] + \
            c.run_args(shape, dtype, topology) + ["--json", "--repeat", str(repeat)]
        state, rc, stdout, err = launch(cmd, timeout, _env(P, cores))
        if state != "done" or rc != 0:
            out.append((None, f"{state}, exit {rc}: {(err.strip().splitlines() or [''])[-1]}"))
            continue
        rec = json.loads(stdout.strip().splitlines()[-1])
        out.append((rec["seconds"], "" if rec["verified"] else "NOT VERIFIED"))
    return out


# -- chains ----------------------------------------------------------------------------------
def _edge_seconds(prev: Candidate, nxt: Candidate, profile: Profile, dtype: str,
                  ranks_per_node: int, cache: dict) -> float:
    """Time to move prev's C layout into nxt's A layout, priced as an alltoall."""
    src, dst = prev.plan.C, nxt.plan.A
    key = (str(src), str(prev.plan.mesh), str(dst), str(nxt.plan.mesh))
    if key not in cache:
        cache[key] = redistribution_seconds(src, prev.plan.mesh, dst, nxt.plan.mesh, profile,
                                            np.dtype(dtype).itemsize, ranks_per_node)
    return cache[key]


def plan_chain(dims, P: int, profile: Profile, dtype: str = "float32",
               ranks_per_node: int | None = None, keep: int = 4,
               budget: int | None = None) -> dict:
    """Shortest path over (product, candidate) with redistribution edges; and the greedy path."""
    rpn = min(ranks_per_node or P, P)
    M = dims[0]
    layers = []
    for k, n in zip(dims[1:-1], dims[2:]):
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
        redis = [edge(a, b) for a, b in zip(chosen, chosen[1:])]
        return chosen, redis, sum(c.seconds for c in chosen) + sum(redis)

    chosen, redis, total = describe(path)
    g_chosen, g_redis, g_total = describe([0] * len(layers))
    return {"layers": layers, "chosen": chosen, "redistribution": redis, "total": total,
            "greedy": g_chosen, "greedy_redistribution": g_redis, "greedy_total": g_total}


# -- the command -----------------------------------------------------------------------------
def main(args) -> int:
    profile = Profile.load(args.profile)
    P = args.P
    rpn = args.ranks_per_node or P
    if args.chain is not None:
        return _chain_main(args, profile, rpn)
    shape = tuple(args.shape)
    started = time.perf_counter()
    cands = candidates(shape, P, profile, args.dtype, rpn, args.topology, args.links)
    elapsed = time.perf_counter() - started
    if not cands:
        raise UsageError(f"no algorithm admits {P} ranks")
    best = recommend(cands, args.memory_per_rank)
    top = args.top or (3 if args.run else 15)
    measured = None
    if args.run:
        runs = run_set(cands, best, top)
        measured = list(zip(runs, measure(runs, shape, P, args.dtype, args.repeat,
                                          args.topology, args.mpiexec)))
    rec = {c_id: c for c_id, c in enumerate(cands)}
    if args.json:
        out = {"shape": list(shape), "P": P, "dtype": args.dtype, "ranks_per_node": rpn,
               "topology": args.topology, "memory_per_rank": args.memory_per_rank,
               "planning_seconds": elapsed,
               "candidates": [c.record(shape, P, args.dtype, args.topology) for c in cands],
               "pareto": [i for i, c in rec.items() if c.pareto],
               "recommended": best.record(shape, P, args.dtype, args.topology)}
        if measured is not None:
            out["measured"] = [{**c.record(shape, P, args.dtype, args.topology),
                                "measured_seconds": s, "note": note}
                               for c, (s, note) in measured]
        print(json.dumps(out))
        return 0
    M, K, N = shape
    print(f"distmm plan: {M}x{K}x{N} {args.dtype} on {P} ranks, {rpn} per node "
          f"({'all on this machine, ' if rpn == P else ''}{profile.cores} cores in the profile)"
          + (f", topology {args.topology}" if args.topology != "mesh" else "")
          + (f", budget {_size(args.memory_per_rank)}/rank" if args.memory_per_rank else ""))
    print(f"{len(cands)} candidates priced in {elapsed * 1e3:.0f} ms; the best "
          f"{min(top, len(cands))} by predicted time (* = on the time/memory Pareto front):")
    print(_table(cands[:top]))
    hidden = [c for c in cands[top:] if c.pareto]
    if hidden:
        print("further Pareto-optimal (less memory, slower):")
        print(_table(hidden, start={id(c): cands.index(c) + 1 for c in hidden}, header=False))
    print(f"recommended: {best.algo} {best.grid_text} {best.params_text} overlap="
          f"{'on' if best.overlap else 'off'}: {best.seconds * 1e3:.2f} ms predicted, "
          f"{_size(best.memory)}/rank")
    print(f"run it:  {run_command(best, shape, P, args.dtype, args.topology)}")
    if measured is not None:
        _print_measured(measured)
    return 0


def _table(cands, start=None, header=True) -> str:
    lines = []
    if header:
        lines.append(f"{'#':>3} {'algorithm':<10}{'grid/F_op':<14}{'params':<18}{'ovl':<5}"
                     f"{'pred [ms]':>10}{'GFLOP/s':>9}{'mem/rank':>12}{'bytes/rank':>12}  P")
    for i, c in enumerate(cands):
        n = start[id(c)] if start else i + 1
        gf = c.plan.flops / c.seconds / 1e9 if c.seconds else 0.0
        lines.append(f"{n:>3} {c.algo:<10}{c.grid_text:<14}{c.params_text:<18}"
                     f"{'on' if c.overlap else 'off':<5}{c.seconds * 1e3:>10.3f}{gf:>9.1f}"
                     f"{_size(c.memory):>12}{_size(c.bytes_sent):>12}  {'*' if c.pareto else ''}")
    return "\n".join(lines)


def _print_measured(measured) -> None:
    ok = [(c, s) for c, (s, _) in measured if s is not None]
    by_meas = sorted(ok, key=lambda cs: cs[1])
    meas_rank = {id(c): i + 1 for i, (c, _) in enumerate(by_meas)}
    print("predicted vs measured:")
    print(f"{'pred#':>5} {'meas#':>5} {'algorithm':<10}{'grid/F_op':<14}{'params':<18}{'ovl':<5}"
          f"{'pred [ms]':>10}{'meas [ms]':>10}")
    for i, (c, (s, note)) in enumerate(measured):
        ms = f"{s * 1e3:>10.3f}" if s is not None else f"{'failed':>10}"
        print(f"{i + 1:>5} {meas_rank.get(id(c), '-'):>5} {c.algo:<10}{c.grid_text:<14}"
              f"{c.params_text:<18}{'on' if c.overlap else 'off':<5}{c.seconds * 1e3:>10.3f}"
              f"{ms}" + (f"  {note}" if note else ""))
    if by_meas:
        first = measured[0][0]
        fs = measured[0][1][0]
        fastest = by_meas[0]
        if fastest[0] is first:
            print("first choice was the measured fastest")
        elif fs is not None:
            print(f"first choice was not the measured fastest: {fs / fastest[1]:.3f}x the "
                  f"fastest ({fastest[0].algo} {fastest[0].grid_text} {fastest[0].params_text})")


def _chain_main(args, profile: Profile, rpn: int) -> int:
    dims = tuple(args.chain)
    if len(dims) < 3:
        raise UsageError("--chain needs at least M,K1,K2 (one product)")
    if args.topology != "mesh" or args.run:
        raise UsageError("--chain plans on a plain mesh without --run")
    started = time.perf_counter()
    res = plan_chain(dims, args.P, profile, args.dtype, rpn, budget=args.memory_per_rank)
    elapsed = time.perf_counter() - started
    M = dims[0]
    if args.json:
        def rows(chosen):
            return [c.record((M, c.plan.shape[1], c.plan.shape[2]), args.P, args.dtype, "mesh")
                    for c in chosen]
        print(json.dumps({"chain": list(dims), "P": args.P, "planning_seconds": elapsed,
                          "chosen": rows(res["chosen"]), "redistribution": res["redistribution"],
                          "total": res["total"], "greedy": rows(res["greedy"]),
                          "greedy_redistribution": res["greedy_redistribution"],
                          "greedy_total": res["greedy_total"]}))
        return 0
    print(f"distmm plan --chain: {len(dims) - 2} products on {args.P} ranks ({rpn} per node), "
          f"{args.dtype}; planned in {elapsed * 1e3:.0f} ms")
    for label, chosen, redis, total in (("shortest path", res["chosen"], res["redistribution"],
                                         res["total"]),
                                        ("greedy (each product's fastest alone)", res["greedy"],
                                         res["greedy_redistribution"], res["greedy_total"])):
        print(f"{label}: total {total * 1e3:.3f} ms")
        for i, c in enumerate(chosen):
            M_, K_, N_ = c.plan.shape
            print(f"  {i + 1}. {M_}x{K_}x{N_}: {c.algo} {c.grid_text} {c.params_text} "
                  f"overlap={'on' if c.overlap else 'off'}  {c.seconds * 1e3:.3f} ms")
            print(f"       C {c.plan.C}")
            if i < len(redis):
                print(f"     redistribute C -> next A: {redis[i] * 1e3:.3f} ms")
    gain = res["greedy_total"] - res["total"]
    print(f"shortest path saves {gain * 1e3:.3f} ms over greedy "
          f"({gain / res['greedy_total'] * 100 if res['greedy_total'] else 0:.1f}%)")
    return 0
