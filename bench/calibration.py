"""The measurements behind `distmm calibrate`, OSU-style: warm-up iterations untimed, a barrier
before each timed batch, many iterations per size, times per operation. Ranks not being measured
wait in a sleeping barrier (:func:`sleep_until_all`) so that they leave the cores alone."""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from algorithms.events import COMM_KINDS
from topology.costs import collective_seconds

P2P_SIZES = [1 << s for s in range(0, 25, 2)]  # 1 B .. 16 MiB
COLL_SIZES = [1 << s for s in range(10, 25, 2)]  # 1 KiB .. 16 MiB


def iters(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) iterations for a message size, OSU-like."""
    if quick:
        return 2, 5 if nbytes > 1 << 20 else 20
    if nbytes <= 1 << 13:
        return 100, 1000
    if nbytes <= 1 << 20:
        return 20, 100
    return 5, 20


def pingpong(world, quick: bool, sizes=None, iters=iters, wait=None) -> list[tuple[int, float]]:
    """[(bytes, one-way seconds)] between ranks 0 and 1, ``iters(n, quick)`` giving the
    (warm-up, timed) iterations; the others wait in ``wait(world)`` (default: asleep)."""
    wait = wait or sleep_until_all
    rank = world.Get_rank()
    out = []
    if sizes is None:
        sizes = P2P_SIZES[::2] if quick else P2P_SIZES
    for n in sizes:
        buf = np.zeros(n, dtype=np.uint8)
        warm, timed = iters(n, quick)
        elapsed = 0.0
        wait(world)
        if rank < 2:
            other = 1 - rank
            for i in range(warm + timed):
                if i == warm:
                    t0 = now()
                if rank == 0:
                    world.Send(buf, dest=other, tag=1)
                    world.Recv(buf, source=other, tag=1)
                else:
                    world.Recv(buf, source=other, tag=1)
                    world.Send(buf, dest=other, tag=1)
            elapsed = (now() - t0) / timed / 2
        wait(world)
        out.append((n, world.bcast(elapsed, root=0)))
    return out


def collective_factors(coll: dict, g: int, small, large) -> dict[str, float]:
    """{kind: median measured / formula over the large messages (>= 64 KiB)} of
    :func:`collectives`' rows on ``g`` ranks, the formula with the ping-pong fits ``small`` and
    ``large`` (alpha, beta)."""
    factors = {}
    for kind, rows in coll.items():
        ratios = [
            avg / model
            for n, avg, _, _ in rows
            if n >= 1 << 16 and (model := collective_seconds(kind, n, g, *small, *large)) > 0
        ]
        if ratios:
            factors[kind] = float(np.median(ratios))
    return factors


def now() -> float:
    from mpi4py import MPI

    return MPI.Wtime()


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """alpha + beta * n over (n, t) points, least squares of the relative error (sizes span
    orders of magnitude: in absolute terms the largest decides, and a fit from 64 KiB to 16 MiB
    had a 190 us start that priced 1 MiB at twice its time); both clamped to be positive."""
    n = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    beta, alpha = (
        np.polyfit(n, t, 1, w=1 / np.maximum(t, 1e-12)) if len(points) > 1 else (0.0, t[0])
    )
    return max(float(alpha), 1e-9), max(float(beta), 1e-15)


def collectives(
    world, quick: bool, sizes=None, iters=iters, before=None
) -> dict[str, list[list[float]]]:
    """{kind: [[bytes, avg s, min s, max s], ...]} on ``world``; bytes as Event.nbytes means;
    ``iters(nbytes, quick)`` gives the (warm-up, timed) iterations, back to back, or with
    ``before`` (say, evicting the caches) each after it and a barrier, timed alone."""
    out: dict[str, list] = {k: [] for k in COMM_KINDS}
    if world.Get_size() < 2:
        return out
    if sizes is None:
        sizes = COLL_SIZES[::2] if quick else COLL_SIZES
    for n in sizes:
        nbytes, ops = collective_ops(world, n)
        warm, timed = iters(nbytes, quick)
        for kind, op in ops.items():
            for _ in range(warm):
                op()
            if before is None:
                world.Barrier()
                t0 = now()
                for _ in range(timed):
                    op()
                t = (now() - t0) / timed
            else:
                t = 0.0
                for _ in range(timed):
                    before()
                    world.Barrier()
                    t0 = now()
                    op()
                    t += (now() - t0) / timed
            ts = world.allgather(t)
            out[kind].append([nbytes, float(np.mean(ts)), min(ts), max(ts)])
    return out


def collective_ops(world, n: int, rooted: bool = False) -> tuple[int, dict]:
    """(bytes as Event.nbytes means, {kind: a call of that collective}) for about ``n`` bytes
    of float32 on ``world``; ``rooted``: each call takes the step, a broadcast's root moving
    along with it (as SUMMA's do)."""
    from mpi4py import MPI

    g, rank = world.Get_size(), world.Get_rank()
    right, left = (rank + 1) % g, (rank - 1) % g
    count = max(g, n // 4 // g * g)  # float32 elements, divisible by g
    a = np.ones(count, dtype=np.float32)
    b = np.empty_like(a)
    gathered = np.empty(count * g, dtype=np.float32)
    part = np.empty(count // g, dtype=np.float32)
    ops = {
        "shift": partial(world.Sendrecv, a, dest=right, recvbuf=b, source=left),
        "bcast": partial(world.Bcast, a, root=0),
        "allgather": partial(world.Allgather, a, gathered),
        "reduce_scatter": partial(world.Reduce_scatter_block, a, part, op=MPI.SUM),
        "allreduce": partial(world.Allreduce, a, b, op=MPI.SUM),
        "alltoall": partial(world.Alltoall, a, b),
    }
    if rooted:
        ops = {kind: (lambda _step, op=op: op()) for kind, op in ops.items()}
        ops["bcast"] = lambda step: world.Bcast(a, root=step % g)
    return a.nbytes, ops


def copy_bandwidth(world, cores: int) -> float:
    """Bytes per second one core copies between two 16 MiB arrays (one rank per core)."""
    src = np.ones(1 << 22, np.float32)
    dst = np.empty_like(src)
    return src.nbytes / _every_core(world, cores, lambda: np.copyto(dst, src))


def reduce_bandwidth(world, cores: int) -> dict[str, float]:
    """{dtype: bytes per second one core combines with MPI's SUM (``Reduce_local``) of one
    16 MiB array into another}, a rank per core at once, as every rank of a reduction combines:
    the gamma of a reduction whose bytes a network moves (bench.model.walk.combine_seconds)."""
    from mpi4py import MPI

    out = {}
    for dtype in ("float32", "float64"):
        src = np.ones((1 << 24) // np.dtype(dtype).itemsize, dtype)
        dst = np.ones_like(src)
        combine = partial(MPI.SUM.Reduce_local, src, dst)
        out[dtype] = src.nbytes / _every_core(world, cores, combine)
    return out


def _every_core(world, cores: int, op, laps: int = 10) -> float:
    """Seconds ``op()`` takes, the median over the ranks below ``cores`` running it at once
    (after one untimed call), the other ranks asleep."""
    op()
    t = 0.0
    sleep_until_all(world)
    if world.Get_rank() < cores:
        t0 = now()
        for _ in range(laps):
            op()
        t = (now() - t0) / laps
    sleep_until_all(world)
    return float(np.median([x for x in world.allgather(t) if x > 0]))


def sleep_until_all(world) -> None:
    """A barrier that sleeps instead of polling, so waiting ranks leave the cores to the
    ranks being measured (MPI's own barrier spins, or yields, which still takes cycles)."""
    req = world.Ibarrier()
    while not req.Test():
        time.sleep(0.005)


PROBE_GEMM = 256  # the square GEMM rank 0 times alone at points through the calibration
UNSTEADY = 1.2  # the slowest probe over the fastest beyond which calibrate warns


def speed_probe(world) -> float:
    """Seconds of one PROBE_GEMM^3 GEMM (the median of five) on rank 0 while the other ranks
    sleep: a sample of the machine's speed now. Taken at points through the calibration, they
    show whether it held still: on a VM sharing its host, 512^3 took 2.5 ms in some seconds
    and 5.2 in others, and of two calibrations ten minutes apart one priced 15 runs at P = 9-16
    a median 46% off, the other 12% (results/vm-2c-xeon)."""
    from algorithms.local_gemm import gemm_rows

    sleep_until_all(world)
    seconds = 0.0
    if world.Get_rank() == 0:
        a, b, c, tmp = _square_operands(0, PROBE_GEMM)
        gemm_rows(a, b, c, True, tmp)  # warm
        laps = []
        for _ in range(5):
            t0 = now()
            gemm_rows(a, b, c, True, tmp)
            laps.append(now() - t0)
        seconds = float(np.median(laps))
    sleep_until_all(world)
    return world.bcast(seconds, root=0)


def steadiness_text(probes: list[float]) -> str:
    """calibrate's line on its probes (:func:`speed_probe`), with a warning where the slowest
    is UNSTEADY times the fastest or more."""
    lo, hi = min(probes), max(probes)
    text = (
        f"# steadiness: a {PROBE_GEMM}^3 GEMM on one core, the others asleep, timed at "
        f"{len(probes)} points of the calibration: {lo * 1e3:.3f} to {hi * 1e3:.3f} ms "
        f"({hi / lo:.2f}x)"
    )
    if _spread(probes) >= UNSTEADY:
        text += (
            f"\n# warning: this machine's speed varied {hi / lo:.1f}x while calibrating (other "
            "work on it, or a host sharing its cores): the profile's timings carry that noise, "
            "and so do the predictions made with it; calibrate again when it is quiet"
        )
    return text


def unsteady_note(meta: dict) -> str | None:
    """A line for `distmm predict` and `plan` where the profile's machine (its "machine" facts,
    Profile.meta) varied UNSTEADY times or more in speed while calibrate timed it, else None."""
    spread = _spread(meta.get("steadiness", {}).get("seconds") or [])
    if spread < UNSTEADY:
        return None
    return (
        f"note: the profile's machine varied {spread:.1f}x in speed while it was calibrated: "
        "its timings, and these predictions, carry that noise"
    )


def cpu_facts() -> dict:
    """What a profile records of the CPU it timed: the model name and the BLAS kernels chosen
    for it (two VMs both named "AMD EPYC", one given AVX-512 kernels and one AVX2 ones, ran a
    1024^3 GEMM on one core at 99.5 and 71 GFLOP/s)."""
    from .metadata import blas, cpu_model

    kernels = {k: v for k, v in blas().items() if k != "num_threads"}
    return {"cpu_model": cpu_model(), "blas": kernels}


def other_machine_note(meta: dict) -> str | None:
    """A line for runs here priced by a profile (`distmm run --profile`, the accuracy scripts)
    where it (its "machine" facts, Profile.meta) was made on another CPU or BLAS than this
    one's, else None (also where it does not say)."""
    theirs, here = {k: meta.get(k) for k in ("cpu_model", "blas")}, cpu_facts()
    if not theirs["cpu_model"] or not theirs["blas"]:
        return None
    if theirs == here:
        return None

    def text(f: dict) -> str:
        b = f["blas"] or {}
        kernels = " ".join(x for x in (b.get("architecture"), "kernels") if x)
        return f"{f['cpu_model']} ({b.get('internal_api', '?')} {b.get('version', '')} {kernels})"

    return (
        f"note: the profile was made on {text(theirs)}, this run is on {text(here)}: "
        "its predictions are for that machine (calibrate here to compare them with this run)"
    )


def _spread(probes: list[float]) -> float:
    """The slowest of calibrate's speed probes over the fastest (1 where fewer than two)."""
    if len(probes) < 2 or min(probes) <= 0:
        return 1.0
    return max(probes) / min(probes)


BUSY_GEMM = 1024  # the square GEMM every rank does at once (busy_gemm, oversubscription)


def busy_gemm(
    comm, cores: int, quick: bool, n: int | None = None, shape=None, accumulate: bool = True
) -> list:
    """[n, seconds per n x n x n GEMM + accumulate] (n default BUSY_GEMM; quick: 512; with
    ``shape`` (m, k, n), [shape, seconds] of that GEMM) with every rank of ``comm`` doing the
    same on random operands, with the BLAS threads a run of that many ranks on the node gives
    each (bench.machine.blas_threads), timed barrier to barrier as a run's steps are (the
    slowest rank's time), the least of two laps. Against the GEMM rates (each shape timed
    alone, each rank at its own pace) this is what the node's ranks computing at once and
    keeping pace cost: on a 16-core machine 1024^3 took 1.4-1.6 times the rates' price at 16
    ranks, 1.35-1.45 at 8 (2 threads each), 0.8-0.9 at 1. Not ``accumulate``: C = A @ B."""
    from threadpoolctl import threadpool_limits

    from algorithms.local_gemm import gemm_rows
    from bench.machine import blas_threads

    n = n or _busy_n(quick)
    a, b, c, tmp = _operands(comm.Get_rank(), *(shape or (n, n, n)))
    reps = 2 if quick else 6
    with threadpool_limits(limits=blas_threads(cores, comm.Get_size()), user_api="blas"):
        gemm_rows(a, b, c, accumulate, tmp)
        laps = []
        for _ in range(2):
            comm.Barrier()
            t0 = now()
            for _ in range(reps):
                gemm_rows(a, b, c, accumulate, tmp)
            comm.Barrier()
            laps.append(comm.bcast((now() - t0) / reps, root=0))
    return [shape or n, min(laps)]


def _busy_n(quick: bool) -> int:
    return 512 if quick else BUSY_GEMM


def _square_operands(seed: int, n: int) -> tuple:
    """:func:`_operands` of an n x n x n GEMM."""
    return _operands(seed, n, n, n)


def _operands(seed: int, m: int, k: int, n: int) -> tuple:
    """A (m x k) and B (k x n) random (ones or zeros draw less power), C and the scratch tile
    (m x n) zero."""
    data = np.random.default_rng(seed).standard_normal(m * k + k * n, dtype=np.float32)
    zeros = np.zeros((2, m, n), np.float32)
    return data[: m * k].reshape(m, k), data[m * k :].reshape(k, n), zeros[0], zeros[1]


def oversubscription(world, cores: int, quick: bool) -> dict | None:
    """GEMM time slicing as a run sees it: every rank does the same n x n x n GEMMs between
    MPI barriers (waiting ranks poll or yield in MPI, taking cycles from working ones), timed
    barrier to barrier (:func:`busy_gemm`). {"n", "shared": seconds per GEMM so, "efficiency":
    time with one rank per core x ranks per core / that time}; None when the job has no more
    ranks than cores. The model takes the efficiency against its own GEMM rate of that shape
    (Profile.with_own_time_slicing): the ranks asleep here slow the one-per-core GEMMs, and
    the rates may come from another job (calibrate --up-to)."""
    from algorithms.local_gemm import gemm_rows

    P, rank = world.Get_size(), world.Get_rank()
    if P <= cores:
        return None
    n = _busy_n(quick)
    a, b, c, tmp = _square_operands(rank, n)
    gemm_rows(a, b, c, True, tmp)
    reps = 2 if quick else 6

    def alone() -> float:
        """One rank per core working, the others asleep (not polling)."""
        sleep_until_all(world)
        span = None
        if rank < cores:
            t0 = now()
            for _ in range(reps):
                gemm_rows(a, b, c, True, tmp)
            span = (t0, now())
        sleep_until_all(world)
        spans = [x for x in world.allgather(span) if x is not None]
        return (max(e for _, e in spans) - min(s for s, _ in spans)) / reps

    alone_s = min(alone() for _ in range(2))
    _, shared_s = busy_gemm(world, cores, quick, n)
    per_core = P / cores
    return {"n": n, "shared": shared_s, "efficiency": alone_s * per_core / shared_s}
