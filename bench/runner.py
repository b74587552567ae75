"""The run driver behind `distmm run`: the plan from the arguments and the tree set-up, then
set-up, timed repetitions, the compute-only baseline and verification on every rank
(``run_plan``), and the files a run leaves (--dump, --trace); what a run refuses beforehand is
in bench/run_checks.py."""

from __future__ import annotations

import os
import resource
import statistics
import time
from dataclasses import dataclass
from functools import partial

from algorithms import get

from .errors import UsageError
from .files import save_npy_atomic, write_json_atomic
from .machine import keep_freed, page_faults
from .model import level_bytes
from .options import algorithm_options
from .stats import MIN_SAMPLES, ci_coverage, enough, median_ci
from .verify import SEED_A, SEED_B, exact, freivalds, method_for, tolerance

DEFAULT_LINKS = {"mncore": "mncore-emu", "cluster": "1gbe"}  # --emulate-links alone, by kind
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Repetitions:
    """How many timed repetitions: ``count`` of them, or (count None, ``--repeat auto``) until the
    median's 95% interval is within ``ci_width`` of the median, at least MIN_SAMPLES and at most
    ``max_repeat`` of them; ``max_seconds`` of timed repetitions stop it sooner (even below
    MIN_SAMPLES: it is a cap)."""

    count: int | None = 3
    ci_width: float = 0.05
    max_repeat: int = 50
    max_seconds: float = 60.0

    @property
    def mode(self) -> str:
        return "fixed" if self.count is not None else "auto"

    def done(self, times: list[float]) -> bool:
        """Whether to stop after these repetitions (a pure function of rank 0's times)."""
        if self.count is not None:
            return len(times) >= self.count
        return (
            len(times) >= self.max_repeat
            or sum(times) >= self.max_seconds
            or enough(times, self.ci_width, CONFIDENCE, MIN_SAMPLES)
        )


def interval(samples: list[float]) -> tuple[list[float], str]:
    """([low, high] of the median's 95% interval, the method in words)."""
    _, low, high = median_ci(samples, CONFIDENCE)
    method = "order statistics (binomial), 95%"
    coverage = ci_coverage(len(samples), CONFIDENCE)
    if coverage < CONFIDENCE:
        method += (
            f"; with {len(samples)} sample(s) the interval is (min, max), "
            f"coverage {100 * coverage:.1f}%"
        )
    return [low, high], method


def make_plan(args, P: int):
    """The algorithm's plan for these arguments; options it does not take are refused."""
    algorithm = get(args.algo)
    options = algorithm_options(args, algorithm)
    return algorithm, algorithm.plan(tuple(args.shape), P, overlap=not args.no_overlap, **options)


def tree_setup(args, plan, links_spec=None, ranks_of: str = "the plan"):
    """(tree, binding, links) for --topology/--bind (None, None, None on a plain mesh);
    ``ranks_of`` names whose rank count a tree of another size contradicts ("the job": a run).

    Raises MeshError with one line (listing the valid bindings) when they do not fit."""
    from topology import MeshError
    from topology.links import LinkModel
    from topology.tree import bindings, default_binding, parse_binding, parse_topology

    tree = parse_topology(args.topology)
    if tree is None:
        if args.bind or links_spec:
            raise UsageError(
                "--bind and link models need --topology mncore[:L2B,L1B,MAB,PE] or "
                "cluster:NODES,RANKS_PER_NODE"
            )
        return None, None, None
    if tree.size != plan.P:
        units = "ranks" if args.topology.startswith("cluster") else "PEs"
        raise MeshError(
            f"topology {args.topology} has {tree.size} {units} but {ranks_of} has {plan.P} ranks"
        )
    valid = bindings(plan.mesh, tree)
    if not valid:
        raise MeshError(f"{plan.algo}'s mesh {plan.mesh} cannot be bound onto tree {tree}")
    if args.bind in (None, "default"):
        binding = default_binding(plan.mesh, tree)
    else:
        try:
            binding = parse_binding(args.bind, plan.mesh, tree)
        except MeshError as err:
            raise MeshError(
                f"{err}; valid for mesh {plan.mesh}: {' | '.join(map(str, valid))}"
            ) from None
    if links_spec == "default":
        from topology.hierarchy import kind_of

        links_spec = DEFAULT_LINKS[kind_of(tree)]
    links = LinkModel.load(links_spec, tree) if links_spec else None
    return tree, binding, links


def bound_layouts(plan, binding, tree) -> dict[str, str]:
    """The plan's A, B and C layouts bound onto the tree, as text."""
    from layouts import bind_layout

    return {n: str(bind_layout(getattr(plan, n), binding, tree)) for n in ("A", "B", "C")}


def save_trace(tracer, result: dict, world) -> None:
    """Every rank saves its trace; rank 0 then combines them and writes run.json beside them."""
    from .trace import combine

    os.makedirs(tracer.directory, exist_ok=True)
    tracer.save()
    world.Barrier()
    if world.Get_rank() == 0:
        combine(tracer.directory)
        write_json_atomic(tracer.directory / "run.json", result, indent=1)
    world.Barrier()


def run_plan(
    module,
    plan,
    mesh,
    dtype,
    repeat: int | Repetitions,
    warmup: int,
    verify: str,
    tracer=None,
    links=None,
    fault=None,
    e2e=None,
    world=None,
):
    """Set up, time, measure the compute-only baseline and verify.

    Returns the result record and this rank's blocks {"A", "B", "C"} (held order; in the user's
    layouts for an end-to-end run). ``repeat`` is a count or a :class:`Repetitions` rule.
    ``fault`` (bench/faults.py) makes this rank fail where it says, or (mode=delay) stretches its
    timed repetitions. ``e2e`` (bench/endtoend.EndToEnd) starts A and B in the user's layouts
    and ends C in theirs, timing each phase; ``world`` is then the job's communicator, whose
    ranks the user's layouts number (``mesh.comm`` may be relabelled)."""
    from algorithms.comm import Comm
    from layouts import generate_block

    from .endtoend import PHASES, Pipeline

    world = mesh.comm if world is None else world
    reps = repeat if isinstance(repeat, Repetitions) else Repetitions(count=repeat)
    hit = fault.trigger_for(world.Get_rank()) if fault is not None else None
    delay = fault.delay_for(world.Get_rank(), plan.algo) if fault is not None else 1.0
    end_to_end = e2e is not None and not e2e.native
    blocks = {}
    for name, seed in (("A", SEED_A), ("B", SEED_B)):
        user = e2e.users[name] if end_to_end else None
        if user is None or user.native:
            blocks[name] = generate_block(getattr(plan, name), mesh.coords, seed, dtype)
        else:
            coords = user.mesh.coords(world.Get_rank())
            blocks[name] = generate_block(user.layout, coords, seed, dtype)
    if hit:
        hit("setup")
    comm = Comm(mesh, tracer=tracer, links=links, fault=hit)
    faults: list[int] = []  # this rank's page faults in each timed repetition
    if end_to_end:
        io = Comm(mesh, tracer=tracer, links=links)
        pipeline = Pipeline(module, plan, mesh, world, e2e, io, comm, blocks)
        times, c = _timed(pipeline, [comm, io], world, warmup, reps, tracer, delay, faults)
        state = pipeline.state
        laps = {p: pipeline.laps[p][-len(times) :] for p in PHASES}
        laps["redistribute_out"] = _slowest(laps["redistribute_out"], world)
        redistributed = pipeline.sent
    else:
        state = module.prepare(plan, blocks["A"], blocks["B"], mesh.coords)
        multiply = partial(module.multiply, plan, comm, state)
        times, c = _timed(multiply, [comm], world, warmup, reps, tracer, delay, faults)
        laps = {"redistribute_in": [0.0] * len(times), "multiply": times}
        laps["redistribute_out"] = laps["redistribute_in"]
        redistributed = {"redistribute_in": 0, "redistribute_out": 0}
    compute = Comm(mesh, execute=False)
    compute_times, _ = _timed(
        lambda: module.multiply(plan, compute, state),
        [compute],
        world,
        min(warmup, 1),
        Repetitions(count=len(times)),
    )
    if end_to_end:
        c = pipeline.close(c)
    sent = world.allgather(comm.bytes_sent)
    faults = _slowest(faults, world)  # per repetition, the most any rank took
    phase_sent = world.allgather(redistributed)
    per_level = world.allgather(level_bytes(comm.events))
    messages = world.allreduce(comm.messages)
    peak = world.allreduce(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, op=_max())
    method = method_for(plan.shape) if verify == "auto" else verify
    if hit:
        hit("verify")
    c_layout, c_mesh = None, mesh  # C where the run left it; its mesh rank 0 gathers
    root = e2e.ranks[0] if e2e is not None else 0
    user_c = e2e.users["C"] if end_to_end else None
    if user_c is not None and not user_c.native:
        from topology import Mesh

        c_layout, c_mesh, root = user_c.layout, Mesh(user_c.mesh, world), 0
    if method == "exact":
        err = world.bcast(exact(plan, c_mesh, c, dtype, c_layout), root=root)
    else:
        err = freivalds(plan, c_mesh, world, c, dtype, c_layout)
    if c_mesh is not mesh:
        c_mesh.free()
    tol = tolerance(dtype, plan.shape[1])
    median = statistics.median(times)
    seconds_ci, ci_method = interval(times)
    compute_median = statistics.median(compute_times)
    kernel = statistics.median(laps["multiply"])
    phases = {
        p: {
            "seconds": statistics.median(laps[p]),
            "bytes_sent_per_rank": [
                int(s) for s in (sent if p == "multiply" else [r[p] for r in phase_sent])
            ],
        }
        for p in PHASES
    }
    record = {
        "algo": plan.algo,
        "P": plan.P,
        "grid": list(plan.grid),
        "mesh": {n: s for n, s in plan.mesh.axes},
        "shape": list(plan.shape),
        "dtype": str(dtype),
        "overlap": plan.overlap,
        "params": plan.params,
        "seconds": median,
        "seconds_min": min(times),
        "seconds_max": max(times),
        "seconds_ci": seconds_ci,
        "ci_method": ci_method,
        "samples": times,
        "repeat": len(times),
        "repeat_mode": reps.mode,
        # auto: whether the interval came within --ci-width, or a cap stopped it first
        "ci_width_met": enough(times, reps.ci_width, CONFIDENCE, MIN_SAMPLES)
        if reps.count is None
        else None,
        "gflops": plan.flops / median / 1e9,
        "multiply_seconds": kernel,
        "multiply_samples": laps["multiply"],
        "phases": phases,
        "compute_seconds": compute_median,
        "compute_samples": compute_times,
        "compute_ratio": compute_median / kernel,
        "verified": bool(err <= tol),
        "verify_method": method,
        "max_rel_error": err,
        "tolerance": tol,
        "bytes_sent": int(sum(sent)),
        "bytes_sent_per_rank": [int(s) for s in sent],
        "messages": int(messages),
        "peak_memory_bytes": int(peak),
        # per timed repetition, the most page faults a rank took: 0 once its buffers are warm
        "page_faults": faults,
        "layouts": plan.describe(),
        **({"level_bytes": _sum_levels(per_level, mesh.tree)} if mesh.binding is not None else {}),
    }
    if e2e is not None:
        record.update(e2e.as_dict())
    c_blocks = {"A": blocks["A"], "B": blocks["B"], "C": c}
    return record, c_blocks


def _sum_levels(per_rank: list[dict], tree) -> dict:
    """{level: bytes summed over ranks} in the hierarchy's order (levels nothing crossed: 0)."""
    from topology.hierarchy import levels_of

    return {lv: int(sum(d.get(lv, 0) for d in per_rank)) for lv in levels_of(tree)}


def _max():
    from mpi4py import MPI

    return MPI.MAX


def _slowest(laps: list[float], world) -> list[float]:
    """Per repetition, the longest any rank's lap took: the move out ends with no barrier (the
    repetition's closing one waits for it), so one rank's laps leave out the ranks still moving
    (on an emulated 3 x 2 cluster, tesseract 1x1x6 on 8192x512x512 from block: rank 0's took
    16.2 ms, ranks 2 and 3's 32, as the model prices the busiest rank's). The phases ending in
    a barrier are rank 0's: every rank's ends as the slowest rank's does, and the longest lap
    would add how much earlier than rank 0 some rank left the barrier before (16 ranks on 2
    cores: a repetition's phases then summed to 50 ms, the repetition 44)."""
    every = world.allgather(laps)
    return [max(r[i] for r in every) for i in range(len(laps))]


def _timed(fn, comms, world, warmup: int, reps: Repetitions, tracer=None, delay=1.0, faults=None):
    """Run ``fn`` warmup times, then timed until ``reps`` says stop, with a barrier before and
    after each timed one. Returns (this rank's times, the last output); ``faults`` gets the
    page faults (minor) this rank took in each timed repetition.

    Every rank stops together: rank 0 decides from its times and broadcasts the decision after
    each repetition, outside the timed region. ``delay`` > 1 (DISTMM_FAULT mode=delay) sleeps
    (delay - 1) times the repetition's own duration before the closing barrier. With a tracer,
    warm-ups are not traced, a ``sync`` marker follows the first timed barrier and each
    repetition is one ``multiply`` span, its closing barrier a ``barrier`` span. From here on
    malloc keeps what is freed (machine.keep_freed): the repetitions reuse each other's memory,
    and the blocks made before stay where they were mapped."""
    from mpi4py import MPI

    keep_freed()
    out = None
    for comm in comms:
        comm.tracer = None
    for _ in range(warmup):
        for comm in comms:
            comm.reset()
        out = None  # the last repetition's C is freed for this one, as an application's would be
        world.Barrier()
        out = fn()
    for comm in comms:
        comm.tracer = tracer
    times: list[float] = []
    root = world.Get_rank() == 0
    done = False
    while not done:
        rep = len(times)
        for comm in comms:
            comm.reset()
        out = None
        world.Barrier()
        faulted = page_faults()
        t0 = MPI.Wtime()
        if tracer is not None:
            if rep == 0:
                tracer.marker("sync")
            with tracer.span("multiply", rep=rep):
                out = fn()
        else:
            out = fn()
        if delay > 1:
            time.sleep((delay - 1) * (MPI.Wtime() - t0))
        if tracer is not None:
            with tracer.span("barrier", rep=rep):  # timed, and priced (Walk.close)
                world.Barrier()
        else:
            world.Barrier()
        times.append(MPI.Wtime() - t0)
        if faults is not None:
            faults.append(page_faults() - faulted)
        if reps.count is not None:
            done = reps.done(times)  # the same count on every rank: no broadcast needed
        else:
            done = world.bcast(reps.done(times) if root else None, root=0)
    return times, out


def dump(plan, mesh, blocks: dict, directory: str, e2e=None, world=None) -> None:
    """Gather A, B and C on one rank and write them (each file replaced atomically): from the
    user's layouts where ``e2e`` names them, else from the plan's (bound onto the tree when
    there is one)."""
    from layouts.redistribute import gather
    from topology import Mesh

    for name, block in blocks.items():
        user = e2e.users[name] if e2e is not None else None
        if user is not None and not user.native:
            target = Mesh(user.mesh, world)
            arr = gather(block, user.layout, target)
            target.free()
        elif mesh.binding is not None:  # bound layouts on the tree itself
            from layouts import bind_layout

            layout = bind_layout(getattr(plan, name), mesh.binding, mesh.tree)
            arr = gather(block, layout, mesh.physical)
        else:
            arr = gather(block, getattr(plan, name), mesh)
        if arr is not None:
            os.makedirs(directory, exist_ok=True)
            save_npy_atomic(os.path.join(directory, f"{name}.npy"), arr)
