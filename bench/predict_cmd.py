"""`distmm predict ALGO --shape M,K,N (--P N | --grid ...) --profile FILE`: the model, no MPI.

Evaluates the schedule the algorithm's own loop issues (run symbolically for one rank) with the
calibrated parameters, for any rank count, and sets the literature's closed form beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from .cli import UsageError
from .model import Profile, predict, schedule, stated_cost
from .run_cmd import add_plan_arguments, make_plan, tree_setup


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_plan_arguments(p)
    p.add_argument("--P", type=int, help="rank count (default: the product of --grid)")
    p.add_argument("--profile", required=True, help="machine profile from distmm calibrate")
    p.add_argument("--links", metavar="PRESET|FILE", help="with --topology: price communication "
                   "with this link model (preset mncore or flat, or a JSON file)")
    p.add_argument("--ranks-per-node", type=int, default=1,
                   help="ranks sharing a node's cores (default 1: one rank per node)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def main(args) -> int:
    profile = Profile.load(args.profile)
    P = args.P if args.P is not None else (math.prod(args.grid) if args.grid else None)
    if P is None and args.topology != "mesh":
        from topology.tree import parse_topology

        P = parse_topology(args.topology).size
    if P is None or P < 1:
        raise UsageError("give the rank count with --P N (or a --grid)")
    if args.ranks_per_node < 1:
        raise UsageError("--ranks-per-node must be at least 1")
    started = time.perf_counter()
    module, plan = make_plan(args, P)
    if args.topology != "mesh":
        return _tree_main(args, module, plan, profile, started)
    events = schedule(module, plan, 0, np.dtype(args.dtype))
    pred = predict(events, profile, args.dtype, min(args.ranks_per_node, P))
    word = np.dtype(args.dtype).itemsize
    stated = stated_cost(plan.algo, plan.shape, P, plan.grid, profile, word)
    record = {"algo": plan.algo, "P": P, "grid": list(plan.grid), "shape": list(plan.shape),
              "dtype": args.dtype, "layouts": plan.describe(), **pred.as_dict(),
              "predicted_gflops": plan.flops / pred.seconds / 1e9 if pred.seconds else None,
              "model_rank_messages": pred.messages, "stated": stated,
              "planning_seconds": time.perf_counter() - started}
    if args.json:
        print(json.dumps(record))
        return 0
    M, K, N = plan.shape
    print(f"distmm predict {plan.algo}: P={P} grid={'x'.join(map(str, plan.grid))} "
          f"shape={M}x{K}x{N} {args.dtype} ({args.ranks_per_node} rank(s) per node, "
          f"{profile.cores} cores)")
    for name, text in plan.describe().items():
        print(f"  {name}  {text}")
    print(f"{'phase':<16}{'predicted [s]':>14}")
    for kind, sec in sorted(pred.phases.items(), key=lambda kv: -kv[1]):
        print(f"{kind:<16}{sec:>14.6f}")
    print(f"{'total':<16}{pred.seconds:>14.6f}   {record['predicted_gflops']:.1f} GFLOP/s")
    print(f"rank 0 sends {pred.bytes_sent / 2**20:.2f} MiB in {pred.messages} messages "
          f"({pred.bytes_sent / word:.4g} words)")
    if stated:
        print(f"literature: {stated['formula']} = {stated['seconds']:.6f} s communication, "
              f"{stated['words_per_rank']:.4g} words per rank")
        if stated["note"]:
            print(f"  note: {stated['note']}")
    print(f"(planned and evaluated in {record['planning_seconds'] * 1e3:.0f} ms)")
    return 0


def _tree_main(args, module, plan, profile, started) -> int:
    """On a tree: one binding (--bind, default the natural one) or every one (--bind all),
    ranked by predicted time; rank 0's schedule only."""
    from topology.tree import bindings

    spec = args.bind
    args.bind = None if spec == "all" else spec
    tree, binding, links = tree_setup(args, plan, args.links)
    chosen = bindings(plan.mesh, tree) if spec == "all" else [binding]
    rows = []
    for b in chosen:
        t0 = time.perf_counter()
        events = schedule(module, plan, 0, np.dtype(args.dtype), b, tree)
        pred = predict(events, profile, args.dtype, min(args.ranks_per_node, plan.P), links=links)
        rows.append({"binding": str(b), **pred.as_dict(),
                     "predicted_gflops": plan.flops / pred.seconds / 1e9 if pred.seconds else None,
                     "level_bytes": pred.level_bytes,
                     "layouts": {n: str(lay) for n, lay in _bound(plan, b, tree).items()},
                     "seconds_to_evaluate": time.perf_counter() - t0})
    rows.sort(key=lambda r: r["predicted_seconds"])
    record = {"algo": plan.algo, "P": plan.P, "grid": list(plan.grid), "shape": list(plan.shape),
              "dtype": args.dtype, "topology": args.topology, "tree": dict(tree.axes),
              "links": links.as_dict() if links else None, "bindings": rows,
              "planning_seconds": time.perf_counter() - started}
    if args.json:
        print(json.dumps(record))
        return 0
    M, K, N = plan.shape
    print(f"distmm predict {plan.algo}: {args.topology} ({plan.P} PEs) mesh {plan.mesh} "
          f"shape={M}x{K}x{N} {args.dtype}; communication priced by "
          + (f"links {links.name}" if links else "the profile (no --links)"))
    from topology.tree import LEVELS

    print(f"{'binding':<34}{'predicted [s]':>14}" + "".join(f"{lv + ' MiB':>11}" for lv in LEVELS))
    for r in rows:
        print(f"{r['binding']:<34}{r['predicted_seconds']:>14.6f}"
              + "".join(f"{r['level_bytes'].get(lv, 0) / 2**20:>11.3f}" for lv in LEVELS))
    best = rows[0]
    if len(rows) > 1:
        t = best["predicted_seconds"]
        print(f"best: {best['binding']} ({rows[-1]['predicted_seconds'] / t:.2f}x faster than "
              f"the worst, {rows[1]['predicted_seconds'] / t:.3f}x than the next)")
    for name, text in best["layouts"].items():
        print(f"  {name}  {text}")
    print(f"(bytes: rank 0's schedule; planned and evaluated in "
          f"{record['planning_seconds'] * 1e3:.0f} ms)")
    return 0


def _bound(plan, binding, tree):
    from layouts import bind_layout

    return {n: bind_layout(getattr(plan, n), binding, tree) for n in ("A", "B", "C")}
