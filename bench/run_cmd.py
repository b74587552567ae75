"""`distmm run ALGO --shape M,K,N ...`: one distributed multiplication, timed and verified.

Run it under MPI: ``mpiexec -n 4 distmm run summa --shape 2048,2048,2048``. Every rank parses and
validates the same arguments and builds the same plan before the first collective, so bad input
gives one line and exit status 2 on every rank. Each rank generates only its own blocks.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import sys

import numpy as np

from algorithms import ALGORITHMS, get
from algorithms.plan import PlanError

from .cli import UsageError
from .faults import fault_from_env
from .model import Profile, predict, schedule
from .verify import SEED_A, SEED_B, exact, freivalds, method_for, tolerance

DUMP_LIMIT = 1 << 24  # elements per matrix that --dump will gather


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments that choose an algorithm's plan (shared with `distmm predict`)."""
    p.add_argument("algo", metavar="ALGO", help=f"one of: {', '.join(ALGORITHMS)}")
    p.add_argument("--shape", required=True, type=_ints(3), metavar="M,K,N",
                   help="C[M,N] = A[M,K] @ B[K,N]")
    p.add_argument("--grid", type=_ints(None), help="process grid, e.g. 2x3 or 2,2,2 "
                   "(default: the algorithm's choice for the rank count)")
    p.add_argument("--fop", type=_ints(3), metavar="m,k,n", help="t10: operator partition F_op")
    p.add_argument("--pace", type=_positive, help="t10: rotating pace (K chunks per step)")
    p.add_argument("--panel", type=_positive, help="summa family: panel width along K")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--no-overlap", action="store_true",
                   help="blocking communication: no overlap with computation")
    p.add_argument("--topology", default="mesh", help="mesh (default), mncore (the 8192-PE "
                   "board) or mncore:L2B,L1B,MAB,PE (a scaled tree, e.g. mncore:2,2,2,2)")
    p.add_argument("--bind", metavar="AXIS=LEVEL+...,...", help="with a tree: the tree levels "
                   "of each mesh axis, e.g. x=L2B+L1B,y=MAB+PE (default: consecutive levels "
                   "from L2B down, in mesh axis order)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_plan_arguments(p)
    p.add_argument("--repeat", type=_positive, default=3, help="timed repetitions (default 3)")
    p.add_argument("--warmup", type=_nonnegative, default=1, help="untimed warm-ups (default 1)")
    p.add_argument("--profile", help="machine profile (distmm calibrate): add the model's "
                   "prediction to the result")
    p.add_argument("--trace", metavar="DIR", help="write a viztracer trace per rank (and "
                   "combined.json) to DIR; read it with distmm analyze DIR")
    p.add_argument("--verify", choices=["auto", "exact", "freivalds"], default="auto",
                   help="exact (gathered reference) for small shapes, else Freivalds (default)")
    p.add_argument("--dump", metavar="DIR", help="rank 0 writes the gathered A.npy, B.npy, C.npy")
    p.add_argument("--json", action="store_true", help="rank 0 prints one JSON line")
    p.add_argument("--emulate-links", metavar="PRESET|FILE", help="with a tree: hold every "
                   "communication until the link model's time has passed (preset: mncore, "
                   "flat; or a JSON file {level: {alpha, bandwidth, lanes}})")


def _ints(count):
    def parse(text: str) -> tuple[int, ...]:
        parts = text.replace("x", ",").split(",")
        try:
            vals = tuple(int(v) for v in parts)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a list of integers") from None
        if count is not None and len(vals) != count:
            raise argparse.ArgumentTypeError(f"{text!r} needs {count} integers")
        if any(v < 1 for v in vals):
            raise argparse.ArgumentTypeError(f"{text!r}: sizes must be positive")
        return vals
    return parse


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def _nonnegative(text: str) -> int:
    return 0 if text.strip() == "0" else _positive(text)


def make_plan(args, P: int):
    """The algorithm's plan for these arguments; options it does not take are refused."""
    algorithm = get(args.algo)
    given = {"grid": args.grid, "fop": args.fop, "pace": args.pace, "panel": args.panel}
    options = {}
    for name, value in given.items():
        if value is None:
            continue
        if algorithm.option(name) is None:
            raise PlanError(f"{args.algo} takes no --{name}")
        options[name] = value
    return algorithm, algorithm.plan(tuple(args.shape), P, overlap=not args.no_overlap, **options)


def tree_setup(args, plan, links_spec=None):
    """(tree, binding, links) for --topology/--bind (None, None, None on a plain mesh).

    Raises MeshError with one line (listing the valid bindings) when they do not fit."""
    from topology import MeshError
    from topology.links import LinkModel
    from topology.tree import bindings, default_binding, parse_binding, parse_topology

    tree = parse_topology(args.topology)
    if tree is None:
        if args.bind or links_spec:
            raise UsageError("--bind and link models need --topology mncore[:L2B,L1B,MAB,PE]")
        return None, None, None
    if tree.size != plan.P:
        raise MeshError(f"topology {args.topology} has {tree.size} PEs but the plan has "
                        f"{plan.P} ranks")
    valid = bindings(plan.mesh, tree)
    if not valid:
        raise MeshError(f"{plan.algo}'s mesh {plan.mesh} cannot be bound onto tree {tree}")
    if args.bind in (None, "default"):
        binding = default_binding(plan.mesh, tree)
    else:
        try:
            binding = parse_binding(args.bind, plan.mesh, tree)
        except MeshError as err:
            raise MeshError(f"{err}; valid for mesh {plan.mesh}: "
                            f"{' | '.join(map(str, valid))}") from None
    links = LinkModel.load(links_spec, tree) if links_spec else None
    return tree, binding, links


def bound_layouts(plan, binding, tree) -> dict[str, str]:
    from layouts import bind_layout

    return {n: str(bind_layout(getattr(plan, n), binding, tree)) for n in ("A", "B", "C")}


def main(args) -> int:
    from .machine import start_mpi

    if args.dump:
        parent = os.path.dirname(os.path.abspath(args.dump))
        if not os.path.isdir(parent):
            raise UsageError(f"--dump {args.dump}: directory {parent} does not exist")
        if max(a * b for a, b in _pairs(args.shape)) > DUMP_LIMIT:
            raise UsageError(f"--dump is for small shapes (at most {DUMP_LIMIT} elements a matrix)")
    if args.trace and not os.path.isdir(os.path.dirname(os.path.abspath(args.trace))):
        raise UsageError(f"--trace {args.trace}: its parent directory does not exist")
    profile = Profile.load(args.profile) if args.profile else None
    try:
        fault = fault_from_env()
    except ValueError as err:
        raise UsageError(str(err)) from None
    MPI, facts = start_mpi()
    world = MPI.COMM_WORLD
    P = world.Get_size()
    module, plan = make_plan(args, P)
    check_memory(plan, np.dtype(args.dtype), facts["ranks_per_node"])
    tree, binding, links = tree_setup(args, plan, args.emulate_links)
    dtype = np.dtype(args.dtype)
    from topology import Mesh

    tracer = None
    if args.trace:
        from .trace import Tracer

        tracer = Tracer(args.trace, world.Get_rank())
    mesh = Mesh(plan.mesh, world, binding=binding, tree=tree)
    result, blocks = run_plan(module, plan, mesh, dtype, args.repeat, args.warmup, args.verify,
                              tracer, links=links, fault=fault)
    result.update(facts)
    if tree is not None:
        result.update({"topology": args.topology, "tree": dict(tree.axes),
                       "binding": str(binding), "layouts": bound_layouts(plan, binding, tree),
                       "mesh_layouts": plan.describe(),
                       "links": links.as_dict() if links else None,
                       "emulate_links": links.name if links else None})
    if profile is not None:
        events = schedule(module, plan, 0, dtype, binding, tree)
        result.update(predict(events, profile, str(dtype), facts["ranks_per_node"],
                              links=links).as_dict())
    if args.dump:
        _dump(plan, mesh, blocks, args.dump)
    mesh.free()
    if tracer is not None:
        _save_trace(tracer, result, world)
    if world.Get_rank() == 0:
        print(json.dumps(result) if args.json else format_result(result), flush=True)
    if not result["verified"]:
        if world.Get_rank() == 0:
            print(f"distmm run: error: {plan.algo} gave a wrong product (max relative error "
                  f"{result['max_rel_error']:.3g} > {result['tolerance']:.3g})", file=sys.stderr)
        return 1
    return 0


def memory_estimate(plan, dtype) -> int:
    """Bytes one rank needs, roughly: its A, B and C blocks, plus the copies and double
    buffers the algorithms keep (4x the inputs, 3x the output)."""
    blocks = [math.prod(layout.block_shape) for layout in (plan.A, plan.B, plan.C)]
    return dtype.itemsize * (4 * (blocks[0] + blocks[1]) + 3 * blocks[2])


def check_memory(plan, dtype, ranks_per_node: int) -> None:
    """Refuse, before allocating anything, a run whose ranks would not fit in this node's memory
    (every rank computes the same verdict from the plan and the node's physical memory)."""
    need = memory_estimate(plan, dtype)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need * ranks_per_node > 0.8 * total:
        raise UsageError(f"{plan.algo} {'x'.join(map(str, plan.shape))} {dtype} needs about "
                         f"{need / 2**30:.1f} GiB per rank, {need * ranks_per_node / 2**30:.1f} GiB "
                         f"for the {ranks_per_node} ranks on this node, which has "
                         f"{total / 2**30:.1f} GiB: use a smaller shape or more nodes")


def _pairs(shape):
    M, K, N = shape
    return ((M, K), (K, N), (M, N))


def _save_trace(tracer, result: dict, world) -> None:
    """Every rank saves its trace; rank 0 then combines them and writes run.json beside them."""
    from .trace import combine

    os.makedirs(tracer.directory, exist_ok=True)
    tracer.save()
    world.Barrier()
    if world.Get_rank() == 0:
        combine(tracer.directory)
        tmp = tracer.directory / ".run.json.tmp"
        tmp.write_text(json.dumps(result, indent=1))
        os.replace(tmp, tracer.directory / "run.json")
    world.Barrier()


def run_plan(module, plan, mesh, dtype, repeat: int, warmup: int, verify: str, tracer=None,
             links=None, fault=None):
    """Set up, time, measure the compute-only baseline and verify.

    Returns the result record and this rank's blocks {"A", "B", "C"} (held order).
    ``fault`` (bench/faults.py) makes this rank fail where it says."""
    from layouts import generate_block

    from algorithms.comm import Comm

    world = mesh.comm
    hit = fault.trigger_for(world.Get_rank()) if fault is not None else None
    a = generate_block(plan.A, mesh.coords, SEED_A, dtype)
    b = generate_block(plan.B, mesh.coords, SEED_B, dtype)
    state = module.prepare(plan, a, b, mesh.coords)
    if hit:
        hit("setup")
    comm = Comm(mesh, tracer=tracer, links=links, emulate=links is not None, fault=hit)
    times, c = _timed(lambda: module.multiply(plan, comm, state), comm, world, warmup, repeat,
                      tracer)
    compute = Comm(mesh, execute=False)
    compute_times, _ = _timed(lambda: module.multiply(plan, compute, state), compute, world,
                              min(warmup, 1), repeat)
    sent = world.allgather(comm.bytes_sent)
    from .model import level_bytes

    per_level = world.allgather(level_bytes(comm.events))
    messages = world.allreduce(comm.messages)
    peak = world.allreduce(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, op=_max())
    method = method_for(plan.shape) if verify == "auto" else verify
    if hit:
        hit("verify")
    if method == "exact":
        err = world.bcast(exact(plan, mesh, c, dtype), root=0)
    else:
        err = freivalds(plan, mesh, world, c, dtype)
    tol = tolerance(dtype, plan.shape[1])
    median = statistics.median(times)
    compute_median = statistics.median(compute_times)
    return {
        "algo": plan.algo, "P": plan.P, "grid": list(plan.grid),
        "mesh": {n: s for n, s in plan.mesh.axes},
        "shape": list(plan.shape), "dtype": str(dtype), "overlap": plan.overlap,
        "params": plan.params,
        "seconds": median, "seconds_min": min(times), "seconds_max": max(times),
        "repeat": repeat, "gflops": plan.flops / median / 1e9,
        "compute_seconds": compute_median, "compute_ratio": compute_median / median,
        "verified": bool(err <= tol), "verify_method": method, "max_rel_error": err,
        "tolerance": tol,
        "bytes_sent": int(sum(sent)), "bytes_sent_per_rank": [int(s) for s in sent],
        "messages": int(messages), "peak_memory_bytes": int(peak),
        "layouts": plan.describe(),
        **({"level_bytes": _sum_levels(per_level)} if mesh.binding is not None else {}),
    }, {"A": a, "B": b, "C": c}


def _sum_levels(per_rank: list[dict]) -> dict:
    """{level: bytes summed over ranks} in tree order (levels nothing crossed: 0)."""
    from topology.tree import LEVELS

    return {lv: int(sum(d.get(lv, 0) for d in per_rank)) for lv in LEVELS}


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _timed(fn, comm, world, warmup: int, repeat: int, tracer=None):
    """Run ``fn`` warmup + repeat times, barrier before and after each timed one.

    With a tracer, warm-ups are not traced, a ``sync`` marker follows the first timed barrier
    and each repetition is one ``multiply`` span."""
    from mpi4py import MPI

    out = None
    comm.tracer = None
    for _ in range(warmup):
        comm.reset()
        world.Barrier()
        out = fn()
    comm.tracer = tracer
    times = []
    for rep in range(repeat):
        comm.reset()
        world.Barrier()
        t0 = MPI.Wtime()
        if tracer is not None:
            if rep == 0:
                tracer.marker("sync")
            with tracer.span("multiply", rep=rep):
                out = fn()
        else:
            out = fn()
        world.Barrier()
        times.append(MPI.Wtime() - t0)
    return times, out


def _dump(plan, mesh, blocks: dict, directory: str) -> None:
    """Gather A, B and C on rank 0 and write them (each file replaced atomically)."""
    from layouts.redistribute import gather

    layouts = {"A": plan.A, "B": plan.B, "C": plan.C}
    target = mesh
    if mesh.binding is not None:  # bound layouts on the tree itself
        from layouts import bind_layout

        layouts = {n: bind_layout(lay, mesh.binding, mesh.tree) for n, lay in layouts.items()}
        target = mesh.physical
    gathered = {name: gather(block, layouts[name], target) for name, block in blocks.items()}
    if mesh.comm.Get_rank() == 0:
        os.makedirs(directory, exist_ok=True)
        for name, arr in gathered.items():
            tmp = os.path.join(directory, f".{name}.npy.tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, arr)
            os.replace(tmp, os.path.join(directory, f"{name}.npy"))


def format_result(r: dict) -> str:
    M, K, N = r["shape"]
    per = r["bytes_sent_per_rank"]
    lines = [
        f"distmm run {r['algo']}: P={r['P']} grid={'x'.join(map(str, r['grid']))} "
        f"shape={M}x{K}x{N} {r['dtype']} overlap={'on' if r['overlap'] else 'off'}"
        + (f" {r['params']}" if r["params"] else ""),
        "layouts:",
        *(f"  {name}  {text}" for name, text in r["layouts"].items()),
        f"time         {r['seconds']:.4f} s median of {r['repeat']} "
        f"(min {r['seconds_min']:.4f}, max {r['seconds_max']:.4f})   {r['gflops']:.1f} GFLOP/s",
        f"compute-only {r['compute_seconds']:.4f} s   ratio compute/total {r['compute_ratio']:.3f}",
        f"sent         {_mib(r['bytes_sent'])} in total, per rank min {_mib(min(per))} / "
        f"max {_mib(max(per))}; {r['messages']} messages",
        f"peak memory  {_mib(r['peak_memory_bytes'])} (largest rank, RSS)",
        f"verified     {'yes' if r['verified'] else 'NO'} ({r['verify_method']}, max relative "
        f"error {r['max_rel_error']:.2e}, tolerance {r['tolerance']:.1e})",
        f"machine      {r['mpi_library']}; {r['cores']} cores, {r['ranks_per_node']} ranks/node, "
        f"{r['blas_threads']} BLAS thread(s) per rank",
    ]
    if "topology" in r:
        sizes = ", ".join(f"{k}={v}" for k, v in r["tree"].items())
        emulated = f"{r['emulate_links']} (emulated)" if r["emulate_links"] else "not emulated"
        lines[1:2] = [f"tree         {r['topology']} ({sizes}); binding {r['binding']}; "
                      f"links {emulated}", "layouts (MN-Core notation):"]
        lines.append("per level    " + ", ".join(f"{lv} {_mib(n)}"
                                                 for lv, n in r["level_bytes"].items())
                     + " crossed (all ranks)")
    if "predicted_seconds" in r:
        phases = ", ".join(f"{k} {v:.4f}" for k, v in sorted(r["predicted_phases"].items()))
        lines.append(f"model        {r['predicted_seconds']:.4f} s predicted "
                     f"(measured / predicted {r['seconds'] / r['predicted_seconds']:.2f}); {phases}")
    return "\n".join(lines)


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"
