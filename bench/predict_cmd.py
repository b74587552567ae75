"""`distmm predict ALGO --shape M,K,N (--P N | --grid ...) --profile FILE`: the model, no MPI.

Evaluates the schedule the algorithm's own loop issues (run symbolically for one rank) with the
calibrated parameters, for any rank count, and sets the literature's closed form beside it.
With ``--layouts`` (default native) it also prices moving A and B from the user's layouts into
the algorithm's and C back out (bench/model/redistribution.py, with COSTA's relabelling unless
``--no-relabel``): kernel, redistribute in, redistribute out and end-to-end seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from layouts.endpoints import label

from .calibration import unsteady_note
from .cluster import default_network, threads_text
from .endtoend import unmatched_text
from .errors import UsageError
from .model import (
    Profile,
    plan_moves,
    predict,
    price_moves,
    schedule,
    setup_seconds,
    stated_cost,
)
from .options import (
    add_json,
    add_layouts,
    add_links,
    add_plan_arguments,
    add_profile,
    add_ranks_per_node,
    ranks_per_node,
    resolved_layouts,
)
from .runner import bound_layouts, make_plan, tree_setup
from .units import format_bytes, positive


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_plan_arguments(p)
    p.add_argument(
        "--P",
        type=positive,
        help="rank count (default: the product of --grid, or the size of --topology)",
    )
    add_profile(p)
    add_links(p)
    add_ranks_per_node(p)
    add_layouts(p, "native")
    add_json(p)


def main(args) -> int:
    profile = Profile.load(args.profile)
    default_network(args)
    P = args.P if args.P is not None else (math.prod(args.grid) if args.grid else None)
    if P is None and args.topology != "mesh":
        from topology.tree import parse_topology

        P = parse_topology(args.topology).size
    if P is None:
        raise UsageError("give the rank count with --P N (or a --grid)")
    started = time.perf_counter()
    users = resolved_layouts(args, args.shape, P)
    module, plan = make_plan(args, P)
    rpn = ranks_per_node(args, P)
    on = _on_mesh if args.topology == "mesh" else _on_tree
    if args.topology.startswith("cluster:"):
        from .cluster import on_cluster as on
    record, text = on(args, module, plan, profile, rpn, started, users)
    note = unsteady_note(profile.meta)
    print(json.dumps(record) if args.json else text + (f"\n{note}" if note else ""))
    return 0


def _head(plan, dtype: str) -> dict:
    return {
        "algo": plan.algo,
        "P": plan.P,
        "grid": list(plan.grid),
        "shape": list(plan.shape),
        "dtype": dtype,
    }


def _gflops(plan, pred) -> float | None:
    return plan.flops / pred.seconds / 1e9 if pred.seconds else None


def _end_to_end(plan, pred, price) -> dict:
    """A prediction's end-to-end fields: the kernel ``pred`` plus the moves ``price``."""
    total = pred.seconds + price.seconds
    return {
        "predicted_seconds": total,
        "predicted_multiply_seconds": pred.seconds,
        "predicted_redistribute_in_seconds": price.redistribute_in,
        "predicted_redistribute_out_seconds": price.redistribute_out,
        "predicted_closing_barrier_seconds": price.closing,
        "relabel_bytes_saved": price.bytes_saved,
        "relabel_saved_at_most": price.saved_at_most,  # set: the order laid, kept unmatched
        "predicted_gflops": plan.flops / total / 1e9 if total else None,
    }


def _on_mesh(args, module, plan, profile, rpn: int, started, users) -> tuple[dict, str]:
    """The record and the text of a prediction on a plain mesh."""
    tree_setup(args, plan, args.links)  # (it refuses --bind and links without a tree, as run's)
    events = schedule(module, plan, 0, np.dtype(args.dtype))
    pred = predict(events, profile, args.dtype, rpn, P=plan.P)
    word = np.dtype(args.dtype).itemsize
    stated = stated_cost(plan.algo, plan.shape, plan.P, plan.grid, profile.at(rpn), word)
    price = price_moves(plan_moves(users, plan), plan.P, profile, word, rpn, not args.no_relabel)
    price = price.with_setup(setup_seconds(module, plan, profile, args.dtype, rpn))
    record = {
        **_head(plan, args.dtype),
        "layouts": plan.describe(),
        "user_layouts": {n: str(u) for n, u in users.items()},
        **pred.as_dict(),
        **_end_to_end(plan, pred, price),
        "model_rank_messages": pred.messages,
        "stated": stated,
        "planning_seconds": time.perf_counter() - started,
    }
    M, K, N = plan.shape
    lines = [
        f"distmm predict {plan.algo}: P={plan.P} grid={'x'.join(map(str, plan.grid))} "
        f"shape={M}x{K}x{N} {args.dtype} ({rpn} rank(s) per node, {profile.cores} cores, "
        f"{threads_text(profile, rpn)})",
        *(f"  {name}  {text}" for name, text in plan.describe().items()),
        f"{'phase':<16}{'predicted [s]':>14}",
        *(
            f"{kind:<16}{sec:>14.6f}"
            for kind, sec in sorted(pred.phases.items(), key=lambda kv: -kv[1])
        ),
        f"{'kernel':<16}{pred.seconds:>14.6f}   {plan.flops / pred.seconds / 1e9:.1f} GFLOP/s",
        f"{'redistribute in':<16}{price.redistribute_in:>14.6f}",
        f"{'redistribute out':<16}{price.redistribute_out:>14.6f}",
        *([f"{'closing barrier':<16}{price.closing:>14.6f}"] if price.closing else []),
        f"{'end-to-end':<16}{record['predicted_seconds']:>14.6f}   "
        f"{record['predicted_gflops']:.1f} GFLOP/s"
        + (
            f"   (relabelling saves {format_bytes(price.bytes_saved)})"
            if price.bytes_saved
            else f"   ({unmatched_text(price.saved_at_most)})"
            if price.saved_at_most
            else ""
        ),
        f"rank 0 sends {format_bytes(pred.bytes_sent, 'MiB')} in {pred.messages} messages "
        f"({pred.bytes_sent / word:.4g} words)",
    ]
    if stated:
        lines.append(
            f"literature: {stated['formula']} = {stated['seconds']:.6f} s "
            f"communication, {stated['words_per_rank']:.4g} words per rank"
        )
        if stated["note"]:
            lines.append(f"  note: {stated['note']}")
    lines.append(f"(planned and evaluated in {record['planning_seconds'] * 1e3:.0f} ms)")
    return record, "\n".join(lines)


def _on_tree(args, module, plan, profile, rpn: int, started, users) -> tuple[dict, str]:
    """On a tree: one binding (--bind, default the natural one) or every one (--bind all),
    ranked by predicted time; rank 0's schedule only."""
    from topology.tree import LEVELS, bindings

    spec = args.bind
    args.bind = None if spec == "all" else spec
    tree, binding, links = tree_setup(args, plan, args.links)
    chosen = bindings(plan.mesh, tree) if spec == "all" else [binding]
    word = np.dtype(args.dtype).itemsize
    all_moves = plan_moves(users, plan)
    rows = []
    for b in chosen:
        t0 = time.perf_counter()
        events = schedule(module, plan, 0, np.dtype(args.dtype), b, tree)
        pred = predict(events, profile, args.dtype, rpn, links=links, P=plan.P)
        row = {
            "binding": str(b),
            **pred.as_dict(),
            "predicted_gflops": _gflops(plan, pred),
            "level_bytes": pred.level_bytes,
            "layouts": bound_layouts(plan, b, tree),
        }
        if all_moves:  # from the user's layouts: the mesh starts where the binding lays it
            relabel, placed = not args.no_relabel, b.tree_ranks(plan.mesh, tree)
            price = price_moves(
                all_moves, plan.P, profile, word, rpn, relabel, links, tree=tree, placed=placed
            ).with_setup(setup_seconds(module, plan, profile, args.dtype, rpn))
            row.update(_end_to_end(plan, pred, price))
        rows.append({**row, "seconds_to_evaluate": time.perf_counter() - t0})
    rows.sort(key=lambda r: r["predicted_seconds"])
    record = {
        **_head(plan, args.dtype),
        "topology": args.topology,
        "tree": dict(tree.axes),
        "links": links.as_dict() if links else None,
        "user_layouts": {n: str(u) for n, u in users.items()},
        "bindings": rows,
        "planning_seconds": time.perf_counter() - started,
    }
    M, K, N = plan.shape
    kernel = f"{'kernel [s]':>14}" if all_moves else ""
    lines = [
        f"distmm predict {plan.algo}: {args.topology} ({plan.P} PEs) mesh {plan.mesh} "
        f"shape={M}x{K}x{N} {args.dtype}; communication priced by "
        + (f"links {links.name}" if links else "the profile (no --links)")
        + (f"; end to end from layouts {label(users)}" if all_moves else ""),
        f"{'binding':<34}{kernel}{'predicted [s]':>14}"
        + "".join(f"{lv + ' MiB':>11}" for lv in LEVELS),
    ]
    for r in rows:
        mib = (
            format_bytes(r["level_bytes"].get(lv, 0), "MiB", ">11.3f", label=False) for lv in LEVELS
        )
        k = f"{r['predicted_multiply_seconds']:>14.6f}" if all_moves else ""
        lines.append(f"{r['binding']:<34}{k}{r['predicted_seconds']:>14.6f}" + "".join(mib))
    best = rows[0]
    if len(rows) > 1:
        t = best["predicted_seconds"]
        lines.append(
            f"best: {best['binding']} ({rows[-1]['predicted_seconds'] / t:.2f}x faster "
            f"than the worst, {rows[1]['predicted_seconds'] / t:.3f}x than the next)"
        )
    lines += [f"  {name}  {text}" for name, text in best["layouts"].items()]
    lines.append(
        f"(bytes: rank 0's schedule; planned and evaluated in "
        f"{record['planning_seconds'] * 1e3:.0f} ms)"
    )
    return record, "\n".join(lines)
