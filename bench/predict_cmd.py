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
from .run_cmd import add_plan_arguments, make_plan


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_plan_arguments(p)
    p.add_argument("--P", type=int, help="rank count (default: the product of --grid)")
    p.add_argument("--profile", required=True, help="machine profile from distmm calibrate")
    p.add_argument("--ranks-per-node", type=int, default=1,
                   help="ranks sharing a node's cores (default 1: one rank per node)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def main(args) -> int:
    profile = Profile.load(args.profile)
    P = args.P if args.P is not None else (math.prod(args.grid) if args.grid else None)
    if P is None or P < 1:
        raise UsageError("give the rank count with --P N (or a --grid)")
    if args.ranks_per_node < 1:
        raise UsageError("--ranks-per-node must be at least 1")
    started = time.perf_counter()
    module, plan = make_plan(args, P)
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
