"""`mpiexec -n P distmm calibrate [--out profile.json]`: measure this machine for the cost model.

OSU-style: warm-up iterations are not timed, a barrier precedes each timed batch, many iterations
per size, times are per operation, min / avg / max across ranks, rank 0 prints. Measured:
point-to-point latency and bandwidth (ping-pong between ranks 0 and 1, separate fits below and
above the eager limit), the collectives the algorithms use on the whole job, single-core GEMM
rates over a grid of tile shapes (through the kernel path the algorithms use), and, when there
are more ranks than cores, how efficiently the cores time-slice GEMMs of several ranks. Ranks
not being measured wait in a sleeping barrier so that they leave the cores alone. Point-to-point
and GEMM numbers are then clean at any rank count; collectives on an oversubscribed job measure
time slicing too (which is what runs of that size see).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
from pathlib import Path

import numpy as np

from algorithms.events import COMM_KINDS
from topology.costs import EAGER_LIMIT, collective_seconds

from .model import Profile

P2P_SIZES = [1 << s for s in range(0, 25, 2)]  # 1 B .. 16 MiB
COLL_SIZES = [1 << s for s in range(10, 25, 2)]  # 1 KiB .. 16 MiB
GEMM_GRID = (96, 320, 1024, 3072)  # m, k and n of the GEMM shapes timed (a 4 x 4 x 4 grid)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="profile.json", help="machine profile to write "
                   "(default profile.json)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and iterations (tests)")


def _iters(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) iterations for a message size, OSU-like."""
    if quick:
        return 2, 5 if nbytes > 1 << 20 else 20
    if nbytes <= 1 << 13:
        return 100, 1000
    if nbytes <= 1 << 20:
        return 20, 100
    return 5, 20


def pingpong(world, quick: bool) -> list[tuple[int, float]]:
    """[(bytes, one-way seconds)] between ranks 0 and 1 (others wait at the barrier)."""
    rank = world.Get_rank()
    out = []
    for n in (P2P_SIZES[::2] if quick else P2P_SIZES):
        buf = np.zeros(n, dtype=np.uint8)
        warm, iters = _iters(n, quick)
        elapsed = 0.0
        sleep_until_all(world)
        if rank < 2:
            other = 1 - rank
            for i in range(warm + iters):
                if i == warm:
                    t0 = _now()
                if rank == 0:
                    world.Send(buf, dest=other, tag=1)
                    world.Recv(buf, source=other, tag=1)
                else:
                    world.Recv(buf, source=other, tag=1)
                    world.Send(buf, dest=other, tag=1)
            elapsed = (_now() - t0) / iters / 2
        sleep_until_all(world)
        out.append((n, world.bcast(elapsed, root=0)))
    return out


def _now() -> float:
    from mpi4py import MPI

    return MPI.Wtime()


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares alpha + beta * n over (n, t) points; both clamped to be non-negative."""
    n = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    beta, alpha = np.polyfit(n, t, 1) if len(points) > 1 else (0.0, t[0])
    return max(float(alpha), 1e-9), max(float(beta), 1e-15)


def collectives(world, quick: bool) -> dict[str, list[list[float]]]:
    """{kind: [[bytes, avg s, min s, max s], ...]} on COMM_WORLD; bytes as Event.nbytes means."""
    from mpi4py import MPI

    g, rank = world.Get_size(), world.Get_rank()
    out: dict[str, list] = {k: [] for k in COMM_KINDS}
    if g < 2:
        return out
    right, left = (rank + 1) % g, (rank - 1) % g
    for n in (COLL_SIZES[::2] if quick else COLL_SIZES):
        count = max(g, n // 4 // g * g)  # float32 elements, divisible by g
        a = np.ones(count, dtype=np.float32)
        b = np.empty_like(a)
        gathered = np.empty(count * g, dtype=np.float32)
        part = np.empty(count // g, dtype=np.float32)
        ops = {
            "shift": lambda: world.Sendrecv(a, dest=right, recvbuf=b, source=left),
            "bcast": lambda: world.Bcast(a, root=0),
            "allgather": lambda: world.Allgather(a, gathered),
            "reduce_scatter": lambda: world.Reduce_scatter_block(a, part, op=MPI.SUM),
            "allreduce": lambda: world.Allreduce(a, b, op=MPI.SUM),
        }
        warm, iters = _iters(a.nbytes, quick)
        for kind, op in ops.items():
            for _ in range(warm):
                op()
            world.Barrier()
            t0 = _now()
            for _ in range(iters):
                op()
            t = (_now() - t0) / iters
            ts = world.allgather(t)
            out[kind].append([a.nbytes, float(np.mean(ts)), min(ts), max(ts)])
    return out


def gemm_rates(world, quick: bool, cores: int) -> dict[str, list[list[float]]]:
    """{dtype: [[m, k, n, seconds]]} over the GEMM_GRID shapes, timed through the same kernel
    path the communication layer uses (GEMM into a scratch tile, then accumulate): one core per
    rank, at most `cores` ranks at once, each shape repeated for about 20 ms."""
    from algorithms.comm import _gemm_rows

    rank = world.Get_rank()
    grid = GEMM_GRID[::2] if quick else GEMM_GRID
    out: dict[str, list] = {}
    for dtype in ("float32", "float64"):
        rows = []
        for m in grid:
            for k in grid:
                for n in grid:
                    t = 0.0
                    sleep_until_all(world)
                    if rank < cores:
                        a, b = np.ones((m, k), dtype), np.ones((k, n), dtype)
                        c, tmp = np.zeros((m, n), dtype), np.zeros((m, n), dtype)
                        _gemm_rows(a, b, c, True, tmp)  # warm-up
                        reps = 1 if quick else max(2, min(50, int(2e9 / (2 * m * k * n))))
                        t0 = _now()
                        for _ in range(reps):
                            _gemm_rows(a, b, c, True, tmp)
                        t = (_now() - t0) / reps
                    sleep_until_all(world)
                    ts = [x for x in world.allgather(t) if x > 0]
                    rows.append([m, k, n, float(np.median(ts))])
        out[dtype] = rows
    return out


def copy_bandwidth(world, cores: int) -> float:
    """Bytes per second one core copies between two 16 MiB arrays (one rank per core)."""
    src = np.ones(1 << 22, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    t = 0.0
    sleep_until_all(world)
    if world.Get_rank() < cores:
        t0 = _now()
        for _ in range(10):
            np.copyto(dst, src)
        t = (_now() - t0) / 10
    sleep_until_all(world)
    return src.nbytes / float(np.median([x for x in world.allgather(t) if x > 0]))


def sleep_until_all(world) -> None:
    """A barrier that sleeps instead of polling, so waiting ranks leave the cores to the
    ranks being measured (MPI's own barrier spins, or yields, which still takes cycles)."""
    import time

    req = world.Ibarrier()
    while not req.Test():
        time.sleep(0.005)


def oversubscription(world, cores: int, quick: bool) -> list[list[float]]:
    """[[ranks per core, efficiency]] as a run sees it: every rank does the same GEMMs between
    MPI barriers (waiting ranks poll or yield in MPI, taking cycles from working ones), timed
    barrier to barrier; efficiency = time with one rank per core x ranks per core / that time.
    Empty when the job has no more ranks than cores."""
    from algorithms.comm import _gemm_rows

    P, rank = world.Get_size(), world.Get_rank()
    if P <= cores:
        return []
    n = 512 if quick else 1024
    a, b = np.ones((n, n), np.float32), np.ones((n, n), np.float32)
    c, tmp = np.zeros((n, n), np.float32), np.zeros((n, n), np.float32)
    _gemm_rows(a, b, c, True, tmp)
    reps = 2 if quick else 6

    def alone() -> float:
        """One rank per core working, the others asleep (not polling)."""
        sleep_until_all(world)
        span = None
        if rank < cores:
            t0 = _now()
            for _ in range(reps):
                _gemm_rows(a, b, c, True, tmp)
            span = (t0, _now())
        sleep_until_all(world)
        spans = [x for x in world.allgather(span) if x is not None]
        return (max(e for _, e in spans) - min(s for s, _ in spans)) / reps

    def shared() -> float:
        """Every rank working, between MPI barriers, as in a run."""
        world.Barrier()
        t0 = _now()
        for _ in range(reps):
            _gemm_rows(a, b, c, True, tmp)
        world.Barrier()
        return world.bcast((_now() - t0) / reps, root=0)

    alone_s = min(alone() for _ in range(2))
    shared_s = min(shared() for _ in range(2))
    per_core = P / cores
    return [[1.0, 1.0], [per_core, alone_s * per_core / shared_s]]


def main(args) -> int:
    from .machine import start_mpi

    out = Path(args.out)
    if not out.parent.exists():
        from .cli import UsageError

        raise UsageError(f"--out {args.out}: directory {out.parent} does not exist")
    MPI, facts = start_mpi()
    world = MPI.COMM_WORLD
    P, rank = world.Get_size(), world.Get_rank()
    say = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    say(f"# distmm calibrate: {P} ranks, {facts['cores']} cores, {facts['mpi_library']}")
    if P > facts["cores"]:
        say(f"# warning: {P} ranks on {facts['cores']} cores: timings include time slicing")

    pp = pingpong(world, args.quick) if P >= 2 else []
    if pp:
        say("\n# point-to-point ping-pong, ranks 0 and 1 (one-way)")
        say(f"{'Size [B]':>12} {'Latency [us]':>14} {'Bandwidth [MB/s]':>18}")
        for n, t in pp:
            say(f"{n:>12} {t * 1e6:>14.2f} {n / t / 1e6:>18.1f}")
    small = fit([p for p in pp if p[0] < EAGER_LIMIT]) if pp else (2e-6, 1e-10)
    large = fit([p for p in pp if p[0] >= 1 << 16]) if pp else (2e-6, 1e-10)
    say(f"\n# fits: small messages alpha {small[0] * 1e6:.2f} us, {1 / small[1] / 1e9:.2f} GB/s; "
        f"large messages alpha {large[0] * 1e6:.2f} us, {1 / large[1] / 1e9:.2f} GB/s")

    coll = collectives(world, args.quick)
    base = Profile(alpha=small[0], beta=small[1], alpha_large=large[0], beta_large=large[1],
                   cores=facts["cores"])
    factors = {}
    for kind, rows in coll.items():
        if not rows:
            continue
        say(f"\n# {kind} on {P} ranks (message size as the model counts it)")
        say(f"{'Size [B]':>12} {'Avg [us]':>12} {'Min [us]':>12} {'Max [us]':>12} {'Model [us]':>12}")
        ratios = []
        for n, avg, lo, hi in rows:
            model = collective_seconds(kind, n, P, base.alpha, base.beta, base.alpha_large,
                                       base.beta_large)  # n is Event.nbytes for every kind
            say(f"{n:>12} {avg * 1e6:>12.1f} {lo * 1e6:>12.1f} {hi * 1e6:>12.1f} {model * 1e6:>12.1f}")
            if n >= 1 << 16 and model > 0:
                ratios.append(avg / model)
        if ratios:
            factors[kind] = float(np.median(ratios))
    if factors:
        say("\n# measured / formula (large messages): "
            + ", ".join(f"{k} {v:.2f}" for k, v in factors.items()))

    gemm = gemm_rates(world, args.quick, facts["cores"])
    say("\n# GEMM + accumulate (C += A @ B), one core per rank")
    say(f"{'m':>6} {'k':>6} {'n':>6} {'float32 [GFLOP/s]':>18} {'float64 [GFLOP/s]':>18}")
    for r32, r64 in zip(gemm["float32"], gemm["float64"]):
        m, k, n = r32[:3]
        fl = 2 * m * k * n / 1e9
        say(f"{m:>6} {k:>6} {n:>6} {fl / r32[3]:>18.1f} {fl / r64[3]:>18.1f}")

    copy_bw = copy_bandwidth(world, facts["cores"])
    say(f"\n# local copy: {copy_bw / 1e9:.2f} GB/s per core (16 MiB arrays)")
    shared = oversubscription(world, facts["cores"], args.quick)
    if shared:
        say("\n# GEMM with several ranks per core, barrier to barrier (time slicing)")
        say(f"{'ranks/core':>10} {'efficiency':>11}")
        for per_core, eff in shared:
            say(f"{per_core:>10.0f} {eff:>11.3f}")
    else:
        say(f"\n# (run with more ranks than the {facts['cores']} cores to also measure time "
            f"slicing; the model assumes perfect time slicing until then)")

    profile = {
        "machine": {"host": platform.node(), "processor": platform.processor() or platform.machine(),
                    "cores": facts["cores"], "ranks": P, "mpi_library": facts["mpi_library"],
                    "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")},
        "p2p": {"small": {"alpha": small[0], "beta": small[1]},
                "large": {"alpha": large[0], "beta": large[1]},
                "eager_limit": EAGER_LIMIT, "table": [[n, t] for n, t in pp]},
        "collectives": coll, "collective_factor": factors, "gemm": gemm,
        "oversubscription": shared, "copy_bandwidth": copy_bw,
    }
    if rank == 0:
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(json.dumps(profile, indent=1))
        os.replace(tmp, out)
        say(f"\nwrote {out}")
    world.Barrier()
    return 0
