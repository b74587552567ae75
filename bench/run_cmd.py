"""`distmm run ALGO --shape M,K,N ...`: one distributed multiplication, timed and verified.

Run it under MPI: ``mpiexec -n 4 distmm run summa --shape 2048,2048,2048``. Every rank parses and
validates the same arguments and builds the same plan before the first collective, so bad input
gives one line and exit status 2 on every rank. Each rank generates only its own blocks.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

import numpy as np

from layouts.tensorlayout import TooManyPairs

from .calibration import other_machine_note
from .endtoend import PHASES, end_to_end, job_comm, placed_binding, unmatched_text
from .errors import UsageError
from .faults import fault_from_env
from .metadata import collect
from .model import Profile, predict, price_moves, schedule, setup_seconds
from .options import add_json, add_layouts, add_plan_arguments, add_profile, layout_specs
from .run_checks import check_memory, check_paths
from .runner import (
    Repetitions,
    bound_layouts,
    dump,
    make_plan,
    run_plan,
    save_trace,
    tree_setup,
)
from .units import format_bytes, format_seconds, nonnegative, positive


def repeat_count(text: str) -> int | str:
    """The argparse type of --repeat: a positive integer or ``auto``."""
    return "auto" if text.strip().lower() == "auto" else positive(text)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_plan_arguments(p)
    add_layouts(p, default="native")
    p.add_argument(
        "--repeat",
        type=repeat_count,
        default=3,
        metavar="N|auto",
        help="timed repetitions (default 3); auto: until the median's 95%% interval is within "
        "--ci-width, at least 5 and at most --max-repeat of them, at most --max-seconds (either "
        "cap may stop it sooner, even below 5: the result says so)",
    )
    p.add_argument(
        "--ci-width",
        type=positive_float,
        default=0.05,
        help="--repeat auto: the interval's width relative to the median (default 0.05)",
    )
    p.add_argument(
        "--max-repeat",
        type=positive,
        default=50,
        help="--repeat auto: most repetitions (default 50)",
    )
    p.add_argument(
        "--max-seconds",
        type=positive_float,
        default=60.0,
        help="--repeat auto: stop once the timed repetitions took this long (default 60)",
    )
    p.add_argument("--warmup", type=nonnegative, default=1, help="untimed warm-ups (default 1)")
    add_profile(p, required=False, use="add the model's prediction to the result")
    p.add_argument(
        "--trace",
        metavar="DIR",
        help="write a viztracer trace per rank (and "
        "combined.json) to DIR; read it with distmm analyze DIR",
    )
    p.add_argument(
        "--verify",
        choices=["auto", "exact", "freivalds"],
        default="auto",
        help="exact (gathered reference) for small shapes, else Freivalds (default)",
    )
    p.add_argument("--dump", metavar="DIR", help="rank 0 writes the gathered A.npy, B.npy, C.npy")
    add_json(p, "rank 0 prints one JSON line")
    p.add_argument(
        "--emulate-links",
        nargs="?",
        const="default",
        metavar="PRESET|FILE",
        help="with --topology mncore or cluster: hold every communication until the link "
        "model's time has passed (mncore presets: mncore, mncore-emu, flat; cluster presets: "
        "1gbe, 10gbe, 25gbe, 100gbe, ib-hdr, ib-ndr; or a JSON file "
        "{level: {alpha, bandwidth, lanes}}; alone: mncore-emu on the tree, 1gbe on a cluster)",
    )


def _auto_text(r: dict) -> str:
    if r.get("repeat_mode") != "auto":
        return ""
    if r.get("ci_width_met"):
        return "; --repeat auto"
    return "; --repeat auto, stopped by --max-repeat or --max-seconds before --ci-width"


def repetitions(args) -> Repetitions:
    """The --repeat rule from the arguments."""
    count = None if args.repeat == "auto" else args.repeat
    return Repetitions(count, args.ci_width, args.max_repeat, args.max_seconds)


def main(args) -> int:
    from .machine import start_mpi, validated

    check_paths(args)
    profile = Profile.load(args.profile) if args.profile else None
    try:
        fault = fault_from_env()
    except ValueError as err:
        raise UsageError(str(err)) from None
    MPI, facts = start_mpi(keep=False)  # kept from the timed repetitions on (bench.runner)
    world = MPI.COMM_WORLD
    P = world.Get_size()
    module, plan = make_plan(args, P)
    dtype = np.dtype(args.dtype)
    check_memory(plan, dtype, facts["ranks_per_node"])
    tree, binding, links = tree_setup(args, plan, args.emulate_links, "the job")
    if links is not None:
        links = replace(links, emulated=True)
    specs = layout_specs(args)
    e2e = end_to_end(specs, plan, dtype.itemsize, not args.no_relabel, tree, binding, world)
    laid, shown = binding, str(binding)  # on the MN-Core tree the level binding given
    if tree is not None and not e2e.native:
        binding = placed_binding(plan.mesh, e2e)
        shown = str(binding)  # a cluster's: ranks, or ranks (relabelled)
        if laid.by_levels:  # the tree: the order starts from the level binding's
            moved = e2e.ranks != tuple(laid.tree_ranks(plan.mesh, tree).tolist())
            shown = f"{laid}, whole subtrees relabelled" if moved else str(laid)
    from topology import Mesh

    tracer = None
    if args.trace:
        from .trace import Tracer

        tracer = Tracer(args.trace, world.Get_rank())
    validated()  # every rank has checked everything: collectives from here
    job = job_comm(world, e2e)
    mesh = Mesh(plan.mesh, job, binding=binding, tree=tree)
    result, blocks = run_plan(
        module,
        plan,
        mesh,
        dtype,
        repetitions(args),
        args.warmup,
        args.verify,
        tracer,
        links=links,
        fault=fault,
        e2e=e2e,
        world=world,
    )
    result.update(facts)
    result.update(collect(world, facts["cores"]))  # a collective: every rank gathers the hosts
    if tree is not None:
        result.update(
            {
                "topology": args.topology,
                "tree": dict(tree.axes),
                "binding": shown,
                "layouts": bound_layouts(plan, laid, tree),
                "mesh_layouts": plan.describe(),
                "links": links.as_dict() if links else None,
                "emulate_links": links.name if links else None,
            }
        )
    if profile is not None and world.Get_rank() == 0:  # the one rank that prints it
        result.update(_predicted(module, plan, profile, dtype, facts, binding, tree, links, e2e))
    if args.dump:
        dump(plan, mesh, blocks, args.dump, e2e, world)
    mesh.free()
    if job is not world:
        job.Free()
    if tracer is not None:
        save_trace(tracer, result, world)
    if world.Get_rank() == 0:
        print(json.dumps(result) if args.json else format_result(result), flush=True)
        note = other_machine_note(profile.meta) if profile is not None else None
        if note:
            print(note, file=sys.stderr, flush=True)
    if not result["verified"]:
        if world.Get_rank() == 0:
            print(
                f"distmm run: error: {plan.algo} gave a wrong product (max relative error "
                f"{result['max_rel_error']:.3g} > {result['tolerance']:.3g})",
                file=sys.stderr,
            )
        return 1
    return 0


def _predicted(module, plan, profile, dtype, facts, binding, tree, links, e2e) -> dict:
    """The model's figures for the run just made: its kernel's and its moves' with the order
    the run used (priced from the sparse overlaps, as `plan` prices them: the P x P counts took
    134 MB a move at P = 4096); the kernel's alone, said on stderr, where the moves cannot be
    priced (too many rank pairs to count: layouts.endpoints.MAX_STREAMED)."""
    rpn = facts["ranks_per_node"]
    events = schedule(module, plan, 0, dtype, binding, tree)
    out = predict(events, profile, str(dtype), rpn, links=links, P=plan.P).as_dict()
    out["predicted_multiply_seconds"] = out.pop("predicted_seconds")
    setup = setup_seconds(module, plan, profile, dtype, rpn)
    try:
        moved = price_moves(
            list(e2e.moves), plan.P, profile, dtype.itemsize, rpn, False, links, placed=e2e.ranks
        ).with_setup(setup)
    except TooManyPairs as err:
        print(f"distmm run: note: the moves are not predicted: {err}", file=sys.stderr)
        return out
    out["predicted_redistribute_in_seconds"] = moved.redistribute_in
    out["predicted_redistribute_out_seconds"] = moved.redistribute_out
    out["predicted_closing_barrier_seconds"] = moved.closing
    out["predicted_seconds"] = out["predicted_multiply_seconds"] + moved.seconds
    return out


def format_result(r: dict) -> str:
    M, K, N = r["shape"]
    per = r["bytes_sent_per_rank"]
    low, high = r["seconds_ci"]
    sec = format_seconds

    def mib(n: int) -> str:
        return format_bytes(n, "MiB")

    lines = [
        f"distmm run {r['algo']}: P={r['P']} grid={'x'.join(map(str, r['grid']))} "
        f"shape={M}x{K}x{N} {r['dtype']} overlap={'on' if r['overlap'] else 'off'}"
        + (f" {r['params']}" if r["params"] else ""),
        "layouts:",
        *(f"  {name}  {text}" for name, text in r["layouts"].items()),
        f"time         {sec(r['seconds'])} s median of {r['repeat']} "
        f"(min {sec(r['seconds_min'])}, max {sec(r['seconds_max'])})   {r['gflops']:.1f} GFLOP/s",
        f"interval     {sec(low)} .. {sec(high)} s ({r['ci_method']})" + _auto_text(r),
        f"compute-only {sec(r['compute_seconds'])} s   ratio compute/kernel "
        f"{r['compute_ratio']:.3f}",
        f"sent         {mib(r['bytes_sent'])} in total, per rank min {mib(min(per))} / "
        f"max {mib(max(per))}; {r['messages']} messages",
        f"peak memory  {mib(r['peak_memory_bytes'])} (largest rank, RSS)",
        f"verified     {'yes' if r['verified'] else 'NO'} ({r['verify_method']}, max relative "
        f"error {r['max_rel_error']:.2e}, tolerance {r['tolerance']:.1e})",
        f"machine      {r['mpi_library']}; {r['cores']} cores, {r['ranks_per_node']} ranks/node, "
        f"{r['blas_threads']} BLAS thread(s) per rank",
        "settings     " + (" ".join(f"{k}={v}" for k, v in r["settings"].items()) or "none"),
    ]
    if r.get("layout_label", "native") != "native":
        lines[1:1] = [
            "user layouts (where A and B start, C ends):",
            *(f"  {n}  {text}" for n, text in r["layouts_user"].items()),
        ]
        lines[lines.index("layouts:")] = "native layouts:"
        ph = r["phases"]
        at = next(i for i, line in enumerate(lines) if line.startswith("time "))
        lines[at] = lines[at].replace("time        ", "end to end  ")
        lines.insert(
            at + 1,
            "phases       "
            + ", ".join(
                f"{p.replace('_', ' ')} {sec(ph[p]['seconds'])} s"
                + (
                    f" (busiest rank {mib(max(ph[p]['bytes_sent_per_rank']))})"
                    if p != "multiply"
                    else ""
                )
                for p in PHASES
            )
            + f"; end to end / kernel {r['seconds'] / r['multiply_seconds']:.2f}",
        )
        rl = r["relabel"]
        lines.insert(
            at + 2,
            f"relabel      {'on' if rl['enabled'] else 'off'}: redistribution moves "
            f"{mib(rl['bytes_after'])} (in order: {mib(rl['bytes_before'])}, "
            + (
                "not relabelled: the moves pair too many ranks to match)"
                if not rl.get("counted", True)
                else f"{unmatched_text(rl['saved_at_most'])})"
                if rl.get("saved_at_most")  # (0: the order laid is the best, said as saved)
                else f"saved {mib(rl['bytes_saved'])})"
                if rl["bytes_saved"] >= 0  # on a machine hierarchy: fewer across outer levels
                else f"{mib(-rl['bytes_saved'])} more, fewer across the outer levels)"
            ),
        )
    if "topology" in r:
        sizes = ", ".join(f"{k}={v}" for k, v in r["tree"].items())
        emulated = f"{r['emulate_links']} (emulated)" if r["emulate_links"] else "not emulated"
        lines.insert(
            1, f"tree         {r['topology']} ({sizes}); binding {r['binding']}; links {emulated}"
        )
        if "layouts:" in lines:
            lines[lines.index("layouts:")] = "layouts (on the tree's levels):"
        lines.append(
            "per level    "
            + ", ".join(f"{lv} {mib(n)}" for lv, n in r["level_bytes"].items())
            + " crossed (all ranks)"
        )
    if "predicted_seconds" in r:
        phases = ", ".join(f"{k} {v:.4f}" for k, v in sorted(r["predicted_phases"].items()))
        if r.get("layout_label", "native") != "native":
            phases += "; " + ", ".join(
                f"{p.replace('_', ' ')} {r[f'predicted_{p}_seconds']:.4f}"
                for p in PHASES
                if p != "multiply"
            )
        gemm = r["predicted_phases"].get("gemm")
        # the GEMM-only loop against the GEMM phase: where the two ratios agree, the miss is
        # the machine computing at another speed than when it was calibrated
        alone = f", compute-only / gemm {r['compute_seconds'] / gemm:.2f}" if gemm else ""
        lines.append(
            f"model        {sec(r['predicted_seconds'])} s predicted "
            f"(measured / predicted {r['seconds'] / r['predicted_seconds']:.2f}{alone}); {phases}"
        )
    return "\n".join(lines)
