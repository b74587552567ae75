"""The measurements behind `distmm calibrate`, OSU-style: warm-up iterations untimed, a barrier
before each timed batch, many iterations per size, times per operation. Ranks not being measured
wait in a sleeping barrier (:func:`sleep_until_all`) so that they leave the cores alone."""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from algorithms.events import COMM_KINDS
from bench.model.profile import fit_alltoallv
from topology.costs import EAGER_LIMIT, collective_seconds

P2P_SIZES = [1 << s for s in range(0, 25, 2)]  # 1 B .. 16 MiB
COLL_SIZES = [1 << s for s in range(10, 25, 2)]  # 1 KiB .. 16 MiB
GEMM_GRID = (96, 320, 1024, 3072)  # m, k and n of the GEMM shapes timed (a 4 x 4 x 4 grid)


def _iters(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) iterations for a message size, OSU-like."""
    if quick:
        return 2, 5 if nbytes > 1 << 20 else 20
    if nbytes <= 1 << 13:
        return 100, 1000
    if nbytes <= 1 << 20:
        return 20, 100
    return 5, 20


def pingpong(world, quick: bool, sizes=None, iters=_iters, wait=None) -> list[tuple[int, float]]:
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
                    t0 = _now()
                if rank == 0:
                    world.Send(buf, dest=other, tag=1)
                    world.Recv(buf, source=other, tag=1)
                else:
                    world.Recv(buf, source=other, tag=1)
                    world.Send(buf, dest=other, tag=1)
            elapsed = (_now() - t0) / timed / 2
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


def _now() -> float:
    from mpi4py import MPI

    return MPI.Wtime()


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares alpha + beta * n over (n, t) points; both clamped to be non-negative."""
    n = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    beta, alpha = np.polyfit(n, t, 1) if len(points) > 1 else (0.0, t[0])
    return max(float(alpha), 1e-9), max(float(beta), 1e-15)


def collectives(world, quick: bool, sizes=None, iters=_iters) -> dict[str, list[list[float]]]:
    """{kind: [[bytes, avg s, min s, max s], ...]} on ``world``; bytes as Event.nbytes means;
    ``iters(nbytes, quick)`` gives the (warm-up, timed) iterations."""
    out: dict[str, list] = {k: [] for k in COMM_KINDS}
    if world.Get_size() < 2:
        return out
    if sizes is None:
        sizes = COLL_SIZES[::2] if quick else COLL_SIZES
    for n in sizes:
        nbytes, ops = _collective_ops(world, n)
        warm, timed = iters(nbytes, quick)
        for kind, op in ops.items():
            for _ in range(warm):
                op()
            world.Barrier()
            t0 = _now()
            for _ in range(timed):
                op()
            t = (_now() - t0) / timed
            ts = world.allgather(t)
            out[kind].append([nbytes, float(np.mean(ts)), min(ts), max(ts)])
    return out


def _collective_ops(world, n: int) -> tuple[int, dict]:
    """(bytes as Event.nbytes means, {kind: a call of that collective}) for about ``n`` bytes
    of float32 on ``world``."""
    from mpi4py import MPI

    g, rank = world.Get_size(), world.Get_rank()
    right, left = (rank + 1) % g, (rank - 1) % g
    count = max(g, n // 4 // g * g)  # float32 elements, divisible by g
    a = np.ones(count, dtype=np.float32)
    b = np.empty_like(a)
    gathered = np.empty(count * g, dtype=np.float32)
    part = np.empty(count // g, dtype=np.float32)
    return a.nbytes, {
        "shift": partial(world.Sendrecv, a, dest=right, recvbuf=b, source=left),
        "bcast": partial(world.Bcast, a, root=0),
        "allgather": partial(world.Allgather, a, gathered),
        "reduce_scatter": partial(world.Reduce_scatter_block, a, part, op=MPI.SUM),
        "allreduce": partial(world.Allreduce, a, b, op=MPI.SUM),
        "alltoall": partial(world.Alltoall, a, b),
    }


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


COUNT_P2P_SIZES = (8, 1 << 10, 1 << 16, 1 << 20, 1 << 22)  # per rank count: fits' points
COUNT_COLL_SIZES = (1 << 16, 1 << 20, 1 << 22)  # the large messages the factors come from
SLICED_COLL_SIZES = (1 << 12, 1 << 18, 1 << 21)  # collectives timed above the cores


def counts_measured(P: int) -> list[int]:
    """The rank counts :func:`at_each_count` measures: every one from 2 to P up to 16, then
    about 1.5x apart, P included."""
    counts = set(range(2, min(P, 16) + 1))
    g = 16
    while g < P:
        counts.add(g)
        g = int(g * 1.5)
    return sorted(counts | ({P} if P >= 2 else set()))


def at_each_count(world, quick: bool, cores: int, least: int = 2) -> list[dict]:
    """For each rank count g (:func:`counts_measured`), the first g ranks alone (the others
    asleep, as if not launched): the alpha-beta fits of a ping-pong between ranks 0 and 1 while
    the other g - 2 wait in MPI (polling or yielding, as a run's idle ranks do), each
    collective's measured / formula factor on the g ranks with those fits (large messages),
    the GEMM time-slicing efficiency when g exceeds the cores, and whole layout changes
    (:func:`alltoallv_costs`). [{"ranks": g, "alpha", "beta", "alpha_large",
    "beta_large", "collective_factor": {kind: f}, "efficiency", "alltoallv", "yielding"}].
    Where MPI yields (the job has more ranks than cores) the ping-pong and factors give way to
    each collective timed on all g ranks (:func:`sliced_collectives`, "collectives"): the
    model fits those of every count above the cores together (Profile.at)."""
    from mpi4py import MPI

    rank = world.Get_rank()
    measured = [g for g in counts_measured(world.Get_size()) if g >= least]
    if quick:
        measured = sorted(set(measured[::3]) | set(measured[-1:]))
    out = []
    for g in measured:
        sub = world.Split(0 if rank < g else MPI.UNDEFINED, rank)
        entry = None
        if sub != MPI.COMM_NULL:
            yielding = world.Get_size() > cores  # bench/machine.py's MPI settings
            entry = _one_count(sub, quick, cores, messages=not yielding)
            entry["yielding"] = yielding
            sub.Free()
        sleep_until_all(world)
        out.append(world.bcast(entry, root=0))
    return out


def _count_iters(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) ping-pong iterations at each rank count: fewer than :func:`_iters`,
    since every count is measured."""
    if quick:
        return _iters(nbytes, True)
    return 10, 200 if nbytes < 1 << 16 else 20


def _one_count(comm, quick: bool, cores: int, messages: bool = True) -> dict:
    shared = oversubscription(comm, cores, quick)
    efficiency = shared[-1][1] if shared else 1.0
    alltoallv = alltoallv_costs(comm, quick, cores)
    if not messages:
        return {
            "ranks": comm.Get_size(),
            "efficiency": efficiency,
            "alltoallv": alltoallv,
            "collectives": sliced_collectives(comm, quick),
        }
    # the other ranks wait in MPI (polling or yielding), as a run's idle ranks do
    points = pingpong(comm, quick, COUNT_P2P_SIZES, _count_iters, lambda c: c.Barrier())
    small = fit([p for p in points if p[0] < EAGER_LIMIT])
    large = fit([p for p in points if p[0] >= 1 << 16])
    coll = collectives(comm, quick, COUNT_COLL_SIZES)
    return {
        "ranks": comm.Get_size(),
        "alpha": small[0],
        "beta": small[1],
        "alpha_large": large[0],
        "beta_large": large[1],
        "collective_factor": collective_factors(coll, comm.Get_size(), small, large),
        "efficiency": efficiency,
        "alltoallv": alltoallv,
    }


SLICED_GEMM = 512  # the square GEMM each rank does before each collective timed above the cores


def sliced_collectives(comm, quick: bool) -> dict[str, list[list[float]]]:
    """{kind: [[bytes, seconds], ...]}: what each collective (algorithms/events.COMM_KINDS) on
    all of ``comm``'s ranks, more than the cores, adds to a loop in which every rank does a
    GEMM before it, as a run's steps do: the loop's time with the collective less without,
    per iteration, barrier to barrier (bytes as Event.nbytes means, SLICED_COLL_SIZES). A rank
    that reaches a collective waits for partners the scheduler has given a GEMM to, which
    collectives timed back to back (all ranks in MPI, yielding to each other) do not show:
    those priced runs' communication at a fifth of what it took."""
    from algorithms.comm import _gemm_rows

    x = np.ones((SLICED_GEMM, SLICED_GEMM), np.float32)
    c, tmp = np.zeros_like(x), np.zeros_like(x)
    reps = 2 if quick else 4

    def lap(op=None) -> float:
        comm.Barrier()
        t0 = _now()
        for _ in range(reps):
            _gemm_rows(x, x, c, True, tmp)
            if op is not None:
                op()
        comm.Barrier()
        return comm.bcast(_now() - t0, root=0) / reps

    lap()  # warm-up
    alone = float(np.median([lap() for _ in range(3)]))
    out: dict[str, list] = {}
    for n in SLICED_COLL_SIZES[1:] if quick else SLICED_COLL_SIZES:
        nbytes, ops = _collective_ops(comm, n)
        for kind, op in ops.items():
            op()  # warm-up
            out.setdefault(kind, []).append([nbytes, max(lap(op) - alone, 0.0)])
    return out


A2AV_BYTES = (1 << 18, 1 << 22)  # bytes of the matrix each rank holds in the timed moves
# layout changes timed: 1-D to 2-D (few messages, half kept), block-cyclic to block (many
# pieces), rows to columns (every rank to every other)
A2AV_MOVES = (("cols", "block"), ("block-cyclic:64", "block"), ("rows", "cols"))


def alltoallv_costs(comm, quick: bool, cores: int) -> dict:
    """{"start", "message", "byte", "copy", "timed"}: a redistribution at this rank count,
    fitted (Profile.fit_alltoallv) to whole layout changes (layouts.transfer: packing,
    Alltoallv, unpacking and the kept part's copy) timed barrier to barrier as a run's phase
    is, for each of A2AV_MOVES on a square float32 matrix of A2AV_BYTES per rank. "timed" holds
    each as [messages, bytes, copied bytes, seconds], the loads the model prices
    (bench.model.redistribution.loads). Many ranks sharing cores make single Alltoallvs swing
    with the scheduler; the model fits the counts above the cores together."""
    from bench.model.redistribution import loads
    from layouts.endpoints import user_layout
    from layouts.transfer import exchange_counts, transfer

    g = comm.Get_size()
    rows = []
    for nbytes in A2AV_BYTES[:1] if quick else A2AV_BYTES:
        n = int((nbytes * g / 4) ** 0.5)
        for src_name, dst_name in A2AV_MOVES:
            (src, smesh), (dst, dmesh) = (user_layout(x, (n, n), g) for x in (src_name, dst_name))
            plan = transfer(src, smesh, dst, dmesh, comm)
            block = np.ones(src.block_shape, np.float32)
            laps = []
            for _ in range(3 if quick else 8):
                comm.Barrier()
                t0 = _now()
                plan(block, comm)
                comm.Barrier()
                laps.append(_now() - t0)
            counts = exchange_counts(src, smesh, dst, dmesh)
            s, d = np.nonzero(counts)
            load = loads(s, d, counts[s, d], g, 4, g / cores)
            rows.append([*load, comm.bcast(float(np.median(laps[1:])), root=0)])
    return {**fit_alltoallv(rows), "timed": rows}


def sleep_until_all(world) -> None:
    """A barrier that sleeps instead of polling, so waiting ranks leave the cores to the
    ranks being measured (MPI's own barrier spins, or yields, which still takes cycles)."""
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
