#!/usr/bin/env python
"""Predicted vs measured time of every algorithm on an emulated MN-Core tree, for two bindings
(the ones the model ranks best and worst among all valid bindings; the default too when it is
neither), and whether the binding the model prefers is the one measured faster.

    python scripts/tree_study.py [--topology mncore:2,2,2,2] [--links mncore-emu]
        [--shape 1024,1024,1024] [--repeat 3] [--profile results/profile.json] [--algos ...]
        [--layouts block]

Each run is `mpiexec -n P distmm run ALGO --topology ... --bind B --emulate-links L --profile P
--json`. Prints one table (also written as JSON with --out). With ``--layouts`` the runs start
from those layouts and end in them: bindings are ranked and compared end to end (the kernel
plus the moves, relabelled by whole subtrees), and the table adds the redistribution's
predicted and measured seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from algorithms import ALGORITHMS, get  # noqa: E402
from algorithms.plan import PlanError  # noqa: E402
from bench.files import write_json_atomic  # noqa: E402
from bench.launch import Launcher, run_argv  # noqa: E402
from bench.model import Profile, ProfileError  # noqa: E402
from bench.units import parse_ints  # noqa: E402
from topology.tree import LEVELS, bindings, parse_topology  # noqa: E402


def model_seconds(algo, plan, binding, tree, args, profile) -> float:
    """The kernel's predicted seconds, plus the moves' from --layouts (if given)."""
    from bench.model import plan_moves, predict, price_moves, schedule
    from layouts.endpoints import user_layouts
    from topology.links import LinkModel

    links = replace(LinkModel.load(args.links, tree), emulated=True)  # as the runs hold it
    events = schedule(get(algo), plan, 0, "float32", binding, tree)
    kernel = predict(events, profile, "float32", tree.size, links=links).seconds
    if not args.layouts:
        return kernel
    users = user_layouts(dict.fromkeys("ABC", args.layouts), plan.shape, plan.P)
    placed = binding.tree_ranks(plan.mesh, tree)
    moves = price_moves(plan_moves(users, plan), plan.P, profile, 4, tree.size, True, links,
                        tree=tree, placed=placed)  # fmt: skip
    return kernel + moves.seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default="mncore:2,2,2,2")
    ap.add_argument("--links", default="mncore-emu")
    ap.add_argument("--shape", default="1024,1024,1024")
    ap.add_argument("--repeat", default="3")
    ap.add_argument("--profile", default=str(ROOT / "results" / "profile.json"))
    ap.add_argument("--algos", nargs="*", default=list(ALGORITHMS))
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--layouts", help="where A and B start and C ends (default: native)")
    args = ap.parse_args()
    try:  # once, before any run: every prediction needs it
        profile = Profile.load(args.profile)
    except ProfileError as err:
        sys.exit(str(err))
    tree = parse_topology(args.topology)
    shape = parse_ints(args.shape, 3)
    launcher = Launcher.find()
    rows = []
    print(
        f"{args.topology}, links {args.links} (emulated), shape {args.shape}, "
        f"median of {args.repeat}" + (f", end to end from {args.layouts}" if args.layouts else "")
    )
    moved = f"{'redist p':>10}{'redist m':>10}" if args.layouts else ""
    print(
        f"{'algo':<10}{'binding':<30}{'predicted':>10}{'measured':>10}{'meas/pred':>10}{moved}  "
        + " ".join(f"{lv + ' MiB':>9}" for lv in LEVELS)
    )
    for algo in args.algos:
        try:
            plan = get(algo).plan(shape, tree.size)
        except PlanError as err:
            print(f"{algo:<10}skipped: {err}")
            continue
        found = bindings(plan.mesh, tree)
        if not found:
            print(f"{algo:<10}skipped: mesh {plan.mesh} has no binding onto the tree")
            continue
        ranked = sorted(found, key=lambda b: model_seconds(algo, plan, b, tree, args, profile))
        chosen = [ranked[0]] + ([ranked[-1]] if len(ranked) > 1 else [])
        if found[0] not in chosen:
            chosen.append(found[0])
        mine = []
        for b in chosen:
            argv = run_argv(
                algo,
                shape,
                topology=args.topology,
                binding=b,
                emulate_links=args.links,
                repeat=args.repeat,
                profile=os.path.abspath(args.profile),  # the runs start in ROOT
                as_json=True,
                layouts=args.layouts,
            )
            r, why = launcher.run_json(tree.size, argv, 600, cwd=ROOT)
            if r is None:
                print(f"{algo:<10}{str(b):<30}FAILED: {why}")
                continue
            row = {
                "algo": algo,
                "binding": str(b),
                "predicted": r["predicted_seconds"],
                "measured": r["seconds"],
                "level_bytes": r["level_bytes"],
                "verified": r["verified"],
            }
            text = ""
            if args.layouts:
                row["redistribution_predicted"] = row["predicted"] - r["predicted_multiply_seconds"]
                row["redistribution_measured"] = row["measured"] - r["multiply_seconds"]
                text = f"{row['redistribution_predicted']:>10.4f}"
                text += f"{row['redistribution_measured']:>10.4f}"
            mine.append(row)
            print(
                f"{algo:<10}{str(b):<30}{row['predicted']:>10.4f}{row['measured']:>10.4f}"
                f"{row['measured'] / row['predicted']:>10.2f}{text}  "
                + " ".join(f"{row['level_bytes'][lv] / 2**20:>9.2f}" for lv in LEVELS)
                + ("" if row["verified"] else "  NOT VERIFIED"),
                flush=True,
            )
        if len(mine) >= 2:
            p = min(mine, key=lambda x: x["predicted"])
            m = min(mine, key=lambda x: x["measured"])
            ties = [x for x in mine if x["predicted"] <= p["predicted"] * 1.02]
            agree = m in ties
            print(
                f"{'':<10}model prefers {' or '.join(x['binding'] for x in ties)}; measured "
                f"fastest {m['binding']}: {'agree' if agree else 'DISAGREE'}",
                flush=True,
            )
            for x in mine:
                x["model_agrees"] = agree
        rows += mine
    if args.out:
        write_json_atomic(args.out, rows, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
