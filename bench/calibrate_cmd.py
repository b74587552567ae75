"""`mpiexec -n P distmm calibrate [--out profile.json]`: measure this machine for the cost model.

OSU-style: warm-up iterations are not timed, a barrier precedes each timed batch, many iterations
per size, times are per operation, min / avg / max across ranks, rank 0 prints. Measured:
point-to-point latency and bandwidth (ping-pong between ranks 0 and 1, separate fits below and
above the eager limit), the collectives the algorithms use on the whole job, single-core GEMM
rates over a grid of tile shapes (through the kernel path the algorithms use), and then, for
every rank count up to the launched one (the others asleep, as if not launched), the messages'
and collectives' prices with that many ranks on the node, how efficiently the cores time-slice
GEMMs when they outnumber the cores, and whole layout changes timed barrier to barrier as a
run's redistribution is (what the model prices redistributions with). Ranks not being measured
wait in a sleeping barrier so that they leave the cores alone. One calibration at the largest
count you will use covers every smaller one (bench/model/profile.Profile.at): a run that fits
the cores is priced with the messages measured at its count; an oversubscribed one with each
collective's alpha and bandwidth fitted over every count above the cores. ``--up-to N`` covers
the counts above the launched one too, in a job of N ranks calibrate starts itself, and where
the launch leaves cores idle the GEMMs are timed in that job too (with every core busy, as a run
of that many has them): `mpiexec -n 2 distmm calibrate --up-to 16` is as good as calibrating at
16. A job across nodes also times the network between them, last; `--network-into PROFILE`
times only that, into a profile made on one node (bench/calibration_network.py).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from topology.costs import EAGER_LIMIT, collective_seconds

from .calibration import (
    PROBE_GEMM,
    collective_factors,
    collectives,
    copy_bandwidth,
    cpu_facts,
    fit,
    pingpong,
    reduce_bandwidth,
    sleep_until_all,
    speed_probe,
    steadiness_text,
)
from .calibration_counts import at_each_count
from .calibration_gemm import adding_seconds, gemm_tables
from .calibration_network import (
    ACROSS_NODES,
    across_nodes,
    add_network_arguments,
    network_into,
    network_nodes,
    network_options,
    nodes_of,
)
from .calibration_refresh import read_profile, refresh
from .calibration_report import say_above_cores, say_threads
from .errors import UsageError
from .files import write_json_atomic
from .launch import find_mpiexec, mpi_flavour, mpiexec_command
from .metadata import launch_cpus

HEADERS = ("Size [B]", "Avg [us]", "Min [us]", "Max [us]", "Model [us]")  # collective tables


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        help="machine profile to write (default profile.json; with --refresh-gemm, that profile)",
    )
    p.add_argument("--quick", action="store_true", help="fewer sizes and iterations (tests)")
    p.add_argument(
        "--up-to",
        type=int,
        metavar="N",
        help="also measure every rank count above the launched one up to N (and, launched with "
        "fewer ranks than cores, the GEMMs), in a job of N ranks calibrate starts with mpiexec "
        "(the one beside this Python, else PATH's)",
    )
    p.add_argument(
        "--refresh-gemm",
        metavar="PROFILE",
        help="time only the GEMM tables again (about 90 s on 2 cores; launch as many ranks as "
        "cores) into PROFILE, everything else kept, written to --out (default: PROFILE "
        "itself): for a machine whose speed has drifted since it was calibrated "
        "(bench/calibration_refresh.py)",
    )
    add_network_arguments(p)
    # the jobs calibrate starts for other rank counts (see _counts_in_job)
    p.add_argument("--counts-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--counts-from", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--with-gemm", action="store_true", help=argparse.SUPPRESS)


def main(args) -> int:
    from .machine import start_mpi, validated

    base = read_profile(args.refresh_gemm) if args.refresh_gemm else None
    into, tree, links = network_options(args)
    if base is not None and into is not None:
        raise UsageError("--refresh-gemm and --network-into: give one of them")
    out = Path(args.out or args.refresh_gemm or args.network_into or "profile.json")
    if not out.parent.exists():
        raise UsageError(f"--out {args.out}: directory {out.parent} does not exist")
    if args.up_to is not None and args.up_to < 1:
        raise UsageError(f"--up-to {args.up_to}: give the largest rank count to measure (>= 1)")
    MPI, facts = start_mpi()
    world = MPI.COMM_WORLD
    if into is not None:  # (checked alike on every rank: one line, exit 2)
        comm, tree = network_nodes(world, tree)
    validated()  # an error from here on ends every rank
    P, rank = world.Get_size(), world.Get_rank()
    say = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    if base is not None:
        return refresh(world, args.quick, facts, base, out)
    if into is not None:
        return network_into(world, comm, args.quick, into, out, tree, links)
    if args.counts_only:
        found: dict = {}
        if args.with_gemm:
            found = gemm_tables(world, args.quick, facts["cores"])
        found["counts"] = _counts(world, args.quick, facts, args.counts_from)
        if rank == 0:
            write_json_atomic(out, found)
        return 0
    say(f"# distmm calibrate: {P} ranks, {facts['cores']} cores, {facts['mpi_library']}")
    nodes, per_node = nodes_of(world)
    if nodes > 1:
        say(f"# {nodes} nodes: {ACROSS_NODES}")
    if P > facts["cores"]:
        say(f"# warning: {P} ranks on {facts['cores']} cores: timings include time slicing")

    first_probe = speed_probe(world)
    pp = pingpong(world, args.quick) if P >= 2 else []
    if pp:
        say("\n# point-to-point ping-pong, ranks 0 and 1 (one-way)")
        say(f"{'Size [B]':>12} {'Latency [us]':>14} {'Bandwidth [MB/s]':>18}")
        for n, t in pp:
            say(f"{n:>12} {t * 1e6:>14.2f} {n / t / 1e6:>18.1f}")
    small = fit([p for p in pp if p[0] < EAGER_LIMIT]) if pp else (2e-6, 1e-10)
    large = fit([p for p in pp if p[0] >= 1 << 16]) if pp else (2e-6, 1e-10)
    say(
        f"\n# fits: small messages alpha {small[0] * 1e6:.2f} us, {1 / small[1] / 1e9:.2f} GB/s; "
        f"large messages alpha {large[0] * 1e6:.2f} us, {1 / large[1] / 1e9:.2f} GB/s"
    )

    coll = collectives(world, args.quick)
    for kind, rows in coll.items():
        if not rows:
            continue
        say(f"\n# {kind} on {P} ranks (message size as the model counts it)")
        say(" ".join(f"{h:>12}" for h in HEADERS))
        for n, avg, lo, hi in rows:
            model = collective_seconds(kind, n, P, *small, *large)  # n is Event.nbytes
            micro = (f"{t * 1e6:>12.1f}" for t in (avg, lo, hi, model))
            say(f"{n:>12} " + " ".join(micro))
    factors = collective_factors(coll, P, small, large)
    if factors:
        say(
            "\n# measured / formula (large messages): "
            + ", ".join(f"{k} {v:.2f}" for k, v in factors.items())
        )

    cores = facts["cores"]
    above, where = None, ""  # the job of --up-to ranks' measurements, once it has run
    if args.up_to is not None and args.up_to > P and P < cores:
        # this job leaves cores idle where a run of more ranks does not, and a node with every
        # core busy computes slower (memory bandwidth, clocks): time the GEMMs in that job
        say(f"\n# GEMMs and rank counts {P + 1} to {args.up_to}: in a job of {args.up_to} ranks")
        above = _counts_in_job(world, args.quick, cores, args.up_to, P + 1, gemm=True)
        where = f", {min(args.up_to, cores)} ranks at once (in the job of {args.up_to})"
    if above and "gemm" in above:
        tables = above
    else:  # not asked for, or that job could not start
        tables, where = gemm_tables(world, args.quick, cores), ""
    gemm, threaded = tables["gemm"], tables["gemm_threads"]
    say(f"\n# GEMM + accumulate (C += A @ B), one core per rank{where}")
    say(f"{'m':>6} {'k':>6} {'n':>6} {'float32 [GFLOP/s]':>18} {'float64 [GFLOP/s]':>18}")
    for r32, r64 in zip(gemm["float32"], gemm["float64"], strict=True):
        m, k, n = r32[:3]
        fl = 2 * m * k * n / 1e9
        say(f"{m:>6} {k:>6} {n:>6} {fl / r32[3]:>18.1f} {fl / r64[3]:>18.1f}")

    if threaded:
        say_threads(say, threaded, gemm["float32"])

    copy_bw = copy_bandwidth(world, facts["cores"])
    say(f"\n# local copy: {copy_bw / 1e9:.2f} GB/s per core (16 MiB arrays)")
    combine = reduce_bandwidth(world, facts["cores"])
    say(
        "# local reduction (MPI's SUM, a rank per core at once): "
        + ", ".join(f"{dt} {bw / 1e9:.2f} GB/s" for dt, bw in combine.items())
    )
    adding = adding_seconds(world, facts["cores"])
    sizes = ", ".join(f"{b >> 10}" for b, _ in adding["float32"])
    say(f"# adding C += T (a GEMM's accumulation, a rank per core at once), {sizes} KiB:")
    for dtype, rows in adding.items():
        say(f"#   {dtype}: " + ", ".join(f"{b / t / 1e9:.1f}" for b, t in rows) + " GB/s")
    if facts["oversubscribed"]:
        say(f"\n# rank counts up to {cores}: measured in a job of {cores} ranks (no yielding)")
    counts = _counts(world, args.quick, facts)
    if args.up_to is not None and args.up_to > P:
        if above is None:
            say(f"\n# rank counts {P + 1} to {args.up_to}: in a job of {args.up_to} ranks")
            above = _counts_in_job(world, args.quick, cores, args.up_to, P + 1)
        counts += above.get("counts", [])
    kinds = sorted(set().union(*(c.get("collective_factor", {}) for c in counts)))
    say(
        "\n# at each rank count, the others asleep: ping-pong fits with the rest waiting in MPI, "
        "measured / formula per collective (above the cores: each collective timed, fitted "
        "below), GEMM time-slicing efficiency (against the GEMM timed one rank per core in "
        "the same job), and a layout change: "
        "seconds to start, per message, rates per byte sent and per byte copied, and seconds "
        "per piece copied (a run of elements contiguous in both blocks)"
    )
    say(
        f"{'ranks':>5} {'alpha [us]':>10} {'large [us]':>10} {'GB/s':>6} "
        + " ".join(f"{k[:9]:>9}" for k in kinds)
        + f" {'efficiency':>10} {'move [us]':>9} {'/msg [us]':>9} {'sent GB/s':>9} {'copy GB/s':>9}"
        + f" {'piece [ns]':>10}"
    )
    for c in counts:
        if "alpha" in c:
            msgs = (
                f"{c['alpha'] * 1e6:>10.1f} {c['alpha_large'] * 1e6:>10.1f} "
                f"{1 / c['beta_large'] / 1e9:>6.2f} "
                + " ".join(f"{c['collective_factor'].get(k, float('nan')):>9.2f}" for k in kinds)
            )
        else:
            msgs = " ".join(f"{'-':>{w}}" for w in [10, 10, 6] + [9] * len(kinds))
        v = c["alltoallv"]
        rates = (f"{1 / x / 1e9:>9.2f}" if x > 0 else f"{'-':>9}" for x in (v["byte"], v["copy"]))
        a2av = f"{v['start'] * 1e6:>9.0f} {v['message'] * 1e6:>9.1f} " + " ".join(rates)
        a2av += f" {v.get('piece', 0.0) * 1e9:>10.1f}"
        say(f"{c['ranks']:>5} {msgs} {c['efficiency']:>10.3f} {a2av}")
    shared = [[1.0, 1.0]] + [
        [c["ranks"] / cores, c["efficiency"]] for c in counts if c["ranks"] > cores
    ]
    if len(shared) == 1:
        shared = []
        say(
            f"\n# (run with more ranks than the {cores} cores to also measure time slicing; "
            f"the model assumes perfect time slicing until then)"
        )

    timed = (c.get(k, ()) for c in counts for k in ("probes", "dropped_probes"))
    # one count's probe after it is the next one's before, the same object: each sample once
    # (by value, two samples that took the same nanoseconds were one: 3 probes, not 4, once)
    samples = [first_probe, *(p for t in timed for p in t), speed_probe(world)]
    probes = list({id(p): p for p in samples}.values())
    profile = {
        "machine": {
            "host": platform.node(),
            "processor": platform.processor() or platform.machine(),
            **cpu_facts(),
            "cores": facts["cores"],
            "ranks": P,
            "mpi_library": facts["mpi_library"],
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "steadiness": {"gemm_n": PROBE_GEMM, "seconds": probes},
        },
        "p2p": {
            "small": {"alpha": small[0], "beta": small[1]},
            "large": {"alpha": large[0], "beta": large[1]},
            "eager_limit": EAGER_LIMIT,
            "table": [[n, t] for n, t in pp],
        },
        "collectives": coll,
        "collective_factor": factors,
        "gemm": gemm,
        "gemm_threads": threaded,
        "oversubscription": shared,
        "copy_bandwidth": copy_bw,
        "reduce_bandwidth": combine,
        "adding": adding,
        "counts": counts,
    }
    if nodes > 1:
        profile["network"] = across_nodes(world, nodes, per_node, args.quick, say)
    if rank == 0:
        write_json_atomic(out, profile, indent=1)
        say_above_cores(say, counts, cores, gemm, threaded)
        say("\n" + steadiness_text(probes))
        again = [str(c["ranks"]) for c in counts if "dropped_probes" in c]
        if again:
            say(
                "# measured again, having run in a slow spell (the measurement with the faster "
                f"probes kept): rank counts {', '.join(again)}"
            )
        say(f"\nwrote {out}")
    world.Barrier()
    return 0


LAUNCH_VARS = ("PMI_", "PMIX_", "HYDRA_", "MPI_LOCAL", "OMPI_", "MPIR_CVAR_")


def _counts(world, quick: bool, facts: dict, least: int = 2) -> list[dict]:
    """at_each_count's entries for the counts from ``least`` up to this job's size. MPI yields
    in a job with more ranks than cores (bench/machine.py) and a run that fits the cores does
    not, so the counts that fit are measured in a job of that size (:func:`_counts_in_job`)."""
    cores = facts["cores"]
    if not facts["oversubscribed"]:
        return at_each_count(world, quick, cores, least)
    below = []
    if least <= cores:
        below = _counts_in_job(world, quick, cores, cores, least).get("counts", [])
    return below + at_each_count(world, quick, cores, least=max(least, cores + 1))


@contextlib.contextmanager
def _on_the_node_cpus():
    """This process, and what it starts meanwhile, on all the CPUs the node's launcher may use
    (bench.metadata.launch_cpus), then back on its own. A job started from a rank its launcher
    bound to one core (Open MPI's default with no more ranks than cores, ``-bind-to core``)
    inherits that core alone: the 3 ranks `mpiexec -n 1 distmm calibrate --up-to 3` launched
    under Open MPI shared one core of two, and timed no GEMMs of two threads. Off Linux,
    nothing changes."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, launch_cpus())
    try:
        yield
    finally:
        os.sched_setaffinity(0, own)


def _counts_in_job(
    world, quick: bool, cores: int, ranks: int, least: int, gemm: bool = False
) -> dict:
    """{"counts": the count entries from ``least`` to ``ranks``} (with ``gemm``, also
    :func:`gemm_tables`'s) from a job of ``ranks`` ranks on this node's ``cores`` that rank 0
    launches (`calibrate --counts-only`, with the flags its MPI needs: Open MPI's to run more
    ranks than cores, or as root), the others asleep meanwhile; {} (those counts left to the
    model's fallback) if that job cannot be started."""
    entries: dict = {}
    if world.Get_rank() == 0:
        try:
            mpiexec = find_mpiexec(None)  # the one beside this Python first, as runs use
        except UsageError:
            mpiexec = None
        env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARS)}
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "counts.json"
            cmd = [sys.executable, "-m", "bench.cli", "calibrate", "--counts-only"]
            cmd += ["--counts-from", str(least), "--out", str(out)]
            cmd += ["--quick"] * quick + ["--with-gemm"] * gemm
            try:
                if mpiexec is None:
                    raise OSError("no mpiexec beside this Python or on PATH")
                flavour = mpi_flavour(mpiexec)[0]
                cmd = mpiexec_command(mpiexec, flavour, ranks, cores) + cmd
                with _on_the_node_cpus():
                    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=900)
                entries = json.loads(out.read_text())
                if "counts" not in entries:
                    raise ValueError(f"{out.name} holds no counts")
            except (OSError, ValueError, KeyError, subprocess.SubprocessError) as err:
                print(f"# warning: counts {least} to {ranks} not measured ({err})", flush=True)
    sleep_until_all(world)
    return world.bcast(entries, root=0)
