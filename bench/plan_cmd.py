"""`distmm plan --shape M,K,N --P N --profile FILE`: choose the algorithm, grid and parameters.

Every algorithm that admits P ranks is expanded into candidates: each grid (or T10 F_op), each
T10 rotating pace, SUMMA-family panel widths {default, default/2, default/4}, overlap on and off
and, on a tree (``--topology``), each binding of the mesh onto the tree. Each candidate is priced
with the cost model (rank 0's schedule, as `distmm predict` does), its memory per rank estimated
(`distmm run`'s estimate) and its bytes moved per rank counted. Candidates provably neither among
the best ``max(--top, 15)`` nor on the Pareto front are left out, their loops stopped early
(bench/model/search.py); ``--exhaustive`` prices every one in full. The output is the ranked table,
the time/memory Pareto front, the fastest plan within ``--memory-per-rank`` and the command that
runs it. Candidates are ranked by end-to-end time from the layouts the user names (``--layouts``,
default ``block``; ``native`` ranks the kernels alone), with the words each moves per rank
against the lower bound for its memory (bench/plan_ranking.py, bench/model/bound.py).
``--run`` runs the top candidates (under mpiexec, or ``--launcher srun`` / a template, with
``--hostfile``, ``--ranks-per-node`` and ``--pin``) and sets measured beside predicted; with
``--rounds N`` (N >= 2) it also says how often one round alone picks the fastest of the other
rounds, how far that comparison can be trusted on this machine (bench/plan_measure.py).

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
import json
import time

from layouts.endpoints import label

from .calibration import unsteady_note
from .cluster import default_network, measured_network
from .errors import UsageError
from .launch import Launcher, add_launcher_arguments, stop_on_sigterm
from .model import Profile
from .options import (
    add_dtype,
    add_json,
    add_layouts,
    add_links,
    add_profile,
    add_ranks_per_node,
    add_shape,
    add_topology,
    layout_specs,
    ranks_per_node,
    resolved_layouts,
)
from .plan_measure import measure
from .plan_view import (
    BOUND_NOTE,
    NEAR,
    candidate_table,
    chain_record,
    chain_text,
    measured_text,
    near_text,
    recommendation,
    table_rows,
)
from .planner import candidates, plan_chain, recommend, run_set
from .units import format_bytes, ints, nonnegative, parse_bytes, positive


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group(required=True)
    add_shape(what, required=False)
    what.add_argument(
        "--chain",
        type=ints(None),
        metavar="M,K1,K2,...",
        help="plan X[M,K1] @ W1[K1,K2] @ W2[K2,K3] ... as a whole",
    )
    p.add_argument(
        "--P", type=positive, help="rank count (default: the size of --topology, if given)"
    )
    add_profile(p)
    add_dtype(p)
    p.add_argument(
        "--memory-per-rank",
        type=parse_bytes,
        metavar="BYTES",
        help="memory budget per rank (2GiB, 512MiB or plain bytes; default: none)",
    )
    add_ranks_per_node(p)
    add_topology(p, "; with a tree every binding is a candidate")
    add_links(p)
    p.add_argument(
        "--top",
        type=positive,
        default=None,
        help="rows of the table to print (default 15) / candidates --run runs (3)",
    )
    # block on a mesh and a cluster, native on the MN-Core tree (README: the whole board's
    # candidates that copy a matrix to thousands of PEs make its moves dear to price)
    add_layouts(p, None, "block; native with --topology mncore")
    add_json(p)
    p.add_argument(
        "--run",
        action="store_true",
        help="run the top candidates under mpiexec and compare predicted with measured order",
    )
    p.add_argument(
        "--exhaustive",
        action="store_true",
        help="price every candidate in full (default: leave out those provably neither in the "
        "table nor on the Pareto front, stopping their loops early)",
    )
    p.add_argument(
        "--workers",
        type=nonnegative,
        default=None,
        metavar="N",
        help="processes pricing redistributions ahead of the search (default: as many as "
        "cores, up to 4, from 1024 ranks; 0: none)",
    )
    p.add_argument("--repeat", type=positive, default=3, help="with --run: timed repetitions")
    p.add_argument(
        "--rounds",
        type=positive,
        default=1,
        help="with --run: run the candidates in turn this many times, each keeping its median "
        "(a slow spell of the machine then hits every candidate alike)",
    )
    p.add_argument(
        "--emulate",
        action="store_true",
        help="with --run: hold the runs' messages to --links/--network (distmm run "
        "--emulate-links), to check the plan of a cluster or tree on one machine; a cluster's "
        "candidates are then priced as the emulation runs (every rank on this machine)",
    )
    p.add_argument("--mpiexec", help="with --run: the mpiexec to use (default: found)")
    add_launcher_arguments(p, ranks_per_node=False)  # --ranks-per-node: the model's, above


def _network_source(args) -> str:
    """The links the plan priced with, as named (a profile's: measured across nodes)."""
    return measured_network(args.profile) if args.links == args.profile else args.links


def main(args) -> int:
    profile = Profile.load(args.profile)
    default_network(args)
    if args.emulate and not args.links:
        raise UsageError("--emulate needs the links to emulate (--links or --network)")
    if args.P is None:
        if args.topology == "mesh":
            raise UsageError("give the rank count with --P (or a --topology, whose size it is)")
        from topology.tree import parse_topology

        args.P = parse_topology(args.topology).size
    P = args.P
    rpn = ranks_per_node(args, P)
    # emulated runs put every rank on this machine: rank them as they will run
    emulated = bool(args.run and args.emulate)
    if emulated and args.topology.startswith("cluster:"):
        rpn = P
    if args.chain is not None:
        return _chain_main(args, profile, rpn)
    shape = tuple(args.shape)
    if args.layouts is None:
        args.layouts = "native" if args.topology.startswith("mncore") else "block"
    users = resolved_layouts(args, shape, P)
    top = args.top or (3 if args.run else 15)
    keep = None if args.exhaustive else max(top, 15)
    started = time.perf_counter()
    cands = candidates(
        shape,
        P,
        profile,
        args.dtype,
        rpn,
        args.topology,
        args.links,
        users=users,
        relabel=not args.no_relabel,
        keep=keep,
        emulated=emulated,
        workers=args.workers,
    )
    elapsed = time.perf_counter() - started
    if not cands:
        raise UsageError(f"no algorithm admits {P} ranks")
    best = recommend(cands, args.memory_per_rank)
    close = near_ties(cands, best, args.memory_per_rank)
    emulate = args.links if args.emulate else None  # the runs' and the commands' (run it:)
    measured = None
    if args.run:
        stop_on_sigterm()
        launcher = Launcher.find(
            args.mpiexec, args.launcher, args.hostfile, args.ranks_per_node, args.pin
        )
        runs = run_set(cands, best, top)
        times = measure(
            runs,
            shape,
            P,
            args.dtype,
            args.repeat,
            args.topology,
            launcher=launcher,
            emulate_links=emulate,
            rounds=args.rounds,
        )
        measured = list(zip(runs, times, strict=True))
    if args.json:
        out = {
            "shape": list(shape),
            "P": P,
            "dtype": args.dtype,
            "ranks_per_node": rpn,
            "topology": args.topology,
            "layouts": label(users),
            "memory_per_rank": args.memory_per_rank,
            "planning_seconds": elapsed,
            "pruned": cands.pruned,
            "uncountable": cands.uncountable,
            "candidates": [c.record(shape, P, args.dtype, args.topology, emulate) for c in cands],
            "pareto": [i for i, c in enumerate(cands) if c.pareto],
            "recommended": best.record(shape, P, args.dtype, args.topology, emulate),
            "near": [cands.index(c) for c in close],
        }
        if measured is not None:
            out["measured"] = [
                {
                    **c.record(shape, P, args.dtype, args.topology, emulate),
                    "measured_seconds": m.seconds,
                    "rounds_seconds": list(m.rounds),
                    "note": m.note,
                }
                for c, m in measured
            ]
        print(json.dumps(out))
        return 0
    M, K, N = shape
    print(
        f"distmm plan: {M}x{K}x{N} {args.dtype} on {P} ranks, {rpn} per node "
        f"({'all on this machine, ' if rpn == P else ''}{profile.cores} cores in the profile)"
        + (f", topology {args.topology}" if args.topology != "mesh" else "")
        + (f", network {_network_source(args)}" if args.links else "")
        + (f", budget {format_bytes(args.memory_per_rank)}/rank" if args.memory_per_rank else "")
        + (", priced as the emulation runs" if emulated else "")
    )
    pruned = (
        f" ({cands.pruned} left out: provably neither in the best {keep} nor on the Pareto front)"
        if cands.pruned
        else ""
    )
    if cands.uncountable:
        pruned += (
            f" ({cands.uncountable} left out: their moves pair too many ranks to count, "
            "layouts.endpoints.MAX_STREAMED)"
        )
    by = (
        f"end-to-end time from layouts {label(users)}"
        if label(users) != "native"
        else "kernel time (native layouts)"
    )
    priced = len(cands) + cands.pruned + cands.uncountable
    rows = table_rows(cands)
    print(
        f"{priced} candidates priced in {elapsed * 1e3:.0f} ms{pruned}; the "
        f"best {min(top, len(rows))} by predicted {by} (* = on the time/memory Pareto front"
        + ("; ovl on/off: priced alike with overlap on and off" if len(rows) < len(cands) else "")
        + "):"
    )
    print(candidate_table(rows[:top]))
    print(BOUND_NOTE)
    hidden = [c for c in rows[top:] if c.on_front]
    if hidden:
        print("further Pareto-optimal (less memory, slower):")
        print(candidate_table(hidden, {id(c): rows.index(c) + 1 for c in hidden}, header=False))
    print(recommendation(best))
    print(f"run it:  {best.command(shape, P, args.dtype, args.topology, emulate)}")
    note = unsteady_note(profile.meta)
    if note:
        print(note)
    if close and measured is None:
        print(near_text(best, close))
    if measured is not None:
        print(measured_text(measured))
    return 0


def near_ties(cands, best, budget: int | None) -> list:
    """The next candidates `--run` would measure (bench.planner.run_set: another algorithm or
    grid, another prediction) predicted within NEAR of ``best`` and within the budget: what the
    model cannot tell from the recommendation."""
    return [
        c
        for c in run_set(cands, best, 3)[1:]
        if c.seconds <= best.seconds * (1 + NEAR) and (budget is None or c.memory <= budget)
    ]


def _chain_main(args, profile: Profile, rpn: int) -> int:
    dims = tuple(args.chain)
    if len(dims) < 3:
        raise UsageError("--chain needs at least M,K1,K2 (one product)")
    if args.topology != "mesh" or args.run:
        raise UsageError("--chain plans on a plain mesh without --run")
    if any(v not in (None, "native") for v in (args.layouts, *layout_specs(args).values())):
        raise UsageError("--chain plans native layouts only (no --layouts yet)")
    started = time.perf_counter()
    res = plan_chain(dims, args.P, profile, args.dtype, rpn, budget=args.memory_per_rank)
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps(chain_record(res, dims, args.P, args.dtype, elapsed)))
    else:
        print(chain_text(res, dims, args.P, rpn, args.dtype, elapsed))
    return 0
