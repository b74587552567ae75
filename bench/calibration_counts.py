"""`distmm calibrate`'s measurements at every rank count up to the launched one (the others
asleep, as if not launched): messages, collectives, time slicing and whole layout changes, what
bench/model/profile.Profile.at prices a run of that many ranks with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple

import numpy as np

from bench.model.fits import fit_alltoallv
from topology.costs import EAGER_LIMIT

from .calibration import (
    busy_gemm,
    collective_factors,
    collective_ops,
    collectives,
    fit,
    iters,
    now,
    oversubscription,
    pingpong,
    sleep_until_all,
    speed_probe,
)
from .calibration_overlap import exposure, exposure_above, gemm_lap

# per rank count (where the ranks fit the cores): the ping-pong's points and the collectives
# timed (their factors over its fits price messages: Profile.at), up to a block's size beyond
# the caches: up to 4 MiB, timed warm, 2 ranks on 2 cores priced large messages at 25 GB/s
# where 16-64 MiB moved at 8-10, and the model put 0.13 of the time runs spent outside their
# GEMMs there (0.38-0.67 now, with what a posted message costs: scripts/messages_accuracy.py)
COUNT_P2P_SIZES = (8, 1 << 10, 1 << 16, 1 << 20, 1 << 22, 1 << 24)
COUNT_COLL_SIZES = (1 << 16, 1 << 20, 1 << 22, 1 << 24)
SLICED_COLL_SIZES = (1 << 12, 1 << 18, 1 << 21)  # collectives timed above the cores
# a count measured while the machine ran this much slower than its fastest (its speed probes
# before or after, against the fastest of the pass) is measured again: on a VM sharing its host,
# counts 11 to 15 of one calibration ran 1.7-2.8x slower than the rest
RETRY_SLOW = 1.25
# ... unless more than this part of the counts were: then the machine swings all the time (the
# same VM alternated between 0.32 and 0.6-1.0 ms for the probe's GEMM from one count to the
# next, 12 of 15 counts were measured again and the calibration took 458 s, not 362), and a
# second measurement is no steadier than the first: calibrate warns instead
RETRY_MOST = 1 / 3


def counts_measured(P: int) -> list[int]:
    """The rank counts :func:`at_each_count` measures: every one from 2 to P up to 16, then
    about 1.5x apart, P included."""
    counts = set(range(2, min(P, 16) + 1))
    g = 16
    while g < P:
        counts.add(g)
        g = int(g * 1.5)
    return sorted(counts | ({P} if P >= 2 else set()))


@contextmanager
def alone(world, g: int) -> Iterator:
    """The first ``g`` ranks of ``world`` as a communicator of their own (None on the others,
    which sleep, as if not launched, until the measurement in the block is done everywhere)."""
    from mpi4py import MPI

    rank = world.Get_rank()
    sub = world.Split(0 if rank < g else MPI.UNDEFINED, rank)
    try:
        yield None if sub == MPI.COMM_NULL else sub
    finally:
        if sub != MPI.COMM_NULL:
            sub.Free()
    sleep_until_all(world)


def at_each_count(world, quick: bool, cores: int, least: int = 2) -> list[dict]:
    """For each rank count g (:func:`counts_measured`), the first g ranks alone (the others
    asleep, as if not launched): the alpha-beta fits of a ping-pong between ranks 0 and 1 while
    the other g - 2 wait in MPI (polling or yielding, as a run's idle ranks do), each
    collective's measured / formula factor on the g ranks with those fits (large messages),
    the GEMM time slicing when g exceeds the cores (bench.calibration.oversubscription:
    "efficiency"), "gemm_shared" (the n and seconds of a GEMM with every rank working at
    once, bench.calibration.busy_gemm; at every count: up to the cores the model takes it
    against its rates, Profile.busy_at), whole layout changes (:func:`alltoallv_costs`) and
    how much of a message posted before a GEMM the rank still pays ("exposed",
    bench.calibration_overlap). [{"ranks": g, "alpha", "beta", "alpha_large", "beta_large",
    "collective_factor": {kind: f}, "exposed": {kind: f}, "efficiency", "gemm_shared",
    "alltoallv", "yielding", "probes"}]. Where MPI yields (the job has more ranks than cores)
    the ping-pong and factors give way to each collective timed on all g ranks and on the rows
    and columns of a grid of them, after GEMMs of two lengths (:func:`stepped_collectives`):
    the model fits those of every count above the cores together (Profile.at).
    "probes": the machine's speed (bench.calibration.speed_probe) before and after the count
    was measured; a count whose probes were RETRY_SLOW times the fastest of the pass or more
    (measured in a slow spell of the machine) is measured once more at the end and the
    measurement with the faster probes kept (the other's probes: "dropped_probes"), where at
    most RETRY_MOST of the counts were."""
    measured = [g for g in counts_measured(world.Get_size()) if g >= least]
    if quick:
        measured = sorted(set(measured[::3]) | set(measured[-1:]))

    def measure(g: int, before: float) -> dict:
        entry = None
        with alone(world, g) as sub:
            if sub is not None:
                yielding = world.Get_size() > cores  # bench/machine.py's MPI settings
                entry = _one_count(sub, quick, cores, messages=not yielding)
                entry["yielding"] = yielding
        entry = world.bcast(entry, root=0)  # every rank decides alike from rank 0's
        entry["probes"] = [before, speed_probe(world)]
        return entry

    out, probe = [], speed_probe(world)
    for g in measured:
        out.append(measure(g, probe))
        probe = out[-1]["probes"][-1]  # after one count, before the next
    for i in to_measure_again([e["probes"] for e in out]):
        again = measure(measured[i], speed_probe(world))
        out[i], dropped = sorted((out[i], again), key=lambda e: max(e["probes"]))
        out[i]["dropped_probes"] = dropped["probes"]
    return out


def to_measure_again(probes: list[list[float]]) -> list[int]:
    """Which counts (by their speed probes, before and after each) :func:`at_each_count`
    measures again: those probed RETRY_SLOW times the fastest probe or more, unless more than
    RETRY_MOST of them were (a machine that is always unsteady: none)."""
    fastest = min((p for pair in probes for p in pair), default=0.0)
    slow = [i for i, pair in enumerate(probes) if max(pair) >= RETRY_SLOW * fastest]
    return [] if len(slow) > len(probes) * RETRY_MOST else slow


def _count_iters(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) ping-pong iterations at each count: fewer than :func:`iters`'s."""
    if quick:
        return iters(nbytes, True)
    return 10, 200 if nbytes < 1 << 16 else 20


def _cold_iters(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) iterations of the collectives timed out of the caches at each count."""
    return (1, 3) if quick else (2, 10)


def _evicting(comm):
    """What the ranks of ``comm`` call to put their data out of the caches:
    each writes its part of twice the largest cache (bench.machine.cache_bytes)."""
    from .machine import cache_bytes

    scratch = np.zeros(max(2 * cache_bytes() // comm.Get_size(), 1 << 20) // 4, np.float32)
    return partial(np.add, scratch, 1.0, out=scratch)


def _one_count(comm, quick: bool, cores: int, messages: bool = True) -> dict:
    shared = oversubscription(comm, cores, quick)
    efficiency = shared["efficiency"] if shared else 1.0
    # every rank computing at once: time slicing above the cores, below them what the cores
    # (and the memory they share) give a run's GEMMs against the rates timed shape by shape
    busy = [shared["n"], shared["shared"]] if shared else busy_gemm(comm, cores, quick)
    alltoallv = alltoallv_costs(comm, quick, cores)
    if not messages:
        return {
            "ranks": comm.Get_size(),
            "efficiency": efficiency,
            "gemm_shared": busy,
            "alltoallv": alltoallv,
            **stepped_collectives(comm, quick),
        }
    # the other ranks wait in MPI (polling or yielding), as a run's idle ranks do
    points = pingpong(comm, quick, COUNT_P2P_SIZES, _count_iters, lambda c: c.Barrier())
    small = fit([p for p in points if p[0] < EAGER_LIMIT])
    large = fit([p for p in points if p[0] >= 1 << 16])
    # out of the caches before each, as a run's messages leave after its GEMMs: timed warm, a
    # shift of 4 MiB on 2 ranks took 0.21 ms and one of 16 MiB 1.9 (the caches hold the first),
    # cold 0.64 and 1.9, on a line
    coll = collectives(comm, quick, COUNT_COLL_SIZES, _cold_iters, _evicting(comm))
    return {
        "ranks": comm.Get_size(),
        "alpha": small[0],
        "beta": small[1],
        "alpha_large": large[0],
        "beta_large": large[1],
        "collective_factor": collective_factors(coll, comm.Get_size(), small, large),
        "exposed": exposure(comm, cores, quick),
        "efficiency": efficiency,
        "gemm_shared": busy,
        "alltoallv": alltoallv,
    }


SLICED_GEMM = 512  # the square GEMM each rank does before each collective timed above the cores
SHORT_GEMM, SHORT_REPS = 128, 16  # ... and again after shorter ones, more steps a lap


def stepped_collectives(comm, quick: bool) -> dict:
    """Each collective timed on all of ``comm``'s ranks (:func:`sliced_collectives`) and on a
    grid of them (:func:`grid_collectives`) in loops of SLICED_GEMM^3 GEMMs ("step": the
    loop's seconds per step alone), and so in loops of SHORT_GEMM^3 ones ("short"): what a
    collective adds grows with the computation before it (bench/model/steps.py); in each loop
    what a message posted before the GEMM costs ("exposed": calibration_overlap.py)."""
    long = gemm_lap(comm, quick, SLICED_GEMM)
    short = gemm_lap(comm, quick, SHORT_GEMM, SHORT_REPS)
    out = {"collectives": sliced_collectives(comm, quick, long), "step": long[1]}
    out["exposed"] = exposure_above(comm, quick, long)
    out["short"] = {"gemm": SHORT_GEMM, "step": short[1]}
    out["short"]["exposed"] = exposure_above(comm, quick, short)
    out["short"]["collectives"] = sliced_collectives(comm, quick, short)
    out["short"].update(grid_collectives(comm, quick, short))
    return out | grid_collectives(comm, quick, long)


def sliced_collectives(comm, quick: bool, timer=None) -> dict[str, list[list[float]]]:
    """{kind: [[bytes, seconds], ...]}: what each collective (algorithms/events.COMM_KINDS, and
    a barrier) on all of ``comm``'s ranks, more than the cores, adds to a loop in which every
    rank does a GEMM before it, as a run's steps do: the loop's time with the collective less
    without, per iteration, barrier to barrier (bytes as Event.nbytes means, SLICED_COLL_SIZES:
    none for the barrier). A rank that reaches a collective waits for partners the scheduler
    has given a GEMM to, which collectives timed back to back (all ranks in MPI, yielding to
    each other) do not show: those priced runs' communication at a fifth of what it took.
    ``timer``: :func:`gemm_lap`'s (lap, its time alone), of SLICED_GEMM^3 GEMMs if None."""
    lap, alone = timer or gemm_lap(comm, quick, SLICED_GEMM)
    # the barrier every run closes a repetition with (bench/runner.py), as the model prices it
    out: dict[str, list] = {"barrier": [[0, max(lap(lambda _: comm.Barrier()) - alone, 0.0)]]}
    for n in SLICED_COLL_SIZES[1:] if quick else SLICED_COLL_SIZES:
        nbytes, ops = collective_ops(comm, n)
        for kind, op in ops.items():
            op()  # warm-up
            out.setdefault(kind, []).append([nbytes, max(lap(lambda _, op=op: op()) - alone, 0.0)])
    return out


GRID_KINDS = ("shift", "bcast", "allgather", "reduce_scatter", "allreduce")


def grid_collectives(comm, quick: bool, timer=None) -> dict:
    """{"grid": [p, q], "grid_collectives": {kind: [[bytes, seconds], ...]}} where ``comm``'s
    ranks form a p x q grid with p >= 2 (layouts.named.grid), else {}: what each collective
    adds to a loop of GEMMs when, as 2-D and 3-D algorithms issue it, every rank runs it on its
    row of q ranks and then on its column of p, all rows (then columns) at once, a broadcast's
    root moving along with the step (SUMMA's). Seconds for the two together; bytes as on the
    whole communicator (:func:`sliced_collectives`). After 512^3 GEMMs at 8, 9, 12 and 16
    ranks on 2 cores, broadcasts so took 1.1-3.2 times what the whole job's fit priced them
    at and shifts 0.6-1.2 times (the whole job's own broadcasts 0.5-1.5): priced from the
    whole job alone, SUMMA looked as cheap as Cannon where it ran 13-18% slower (``timer``:
    :func:`sliced_collectives`)."""
    from layouts.named import grid

    p, q = grid(comm.Get_size())
    if p < 2:
        return {}
    me = comm.Get_rank()
    rows, cols = comm.Split(me // q, me), comm.Split(me % q, me)
    lap, alone = timer or gemm_lap(comm, quick, SLICED_GEMM)
    out: dict[str, list] = {}
    try:
        for n in SLICED_COLL_SIZES[1:] if quick else SLICED_COLL_SIZES:
            nbytes, ops = grid_ops(rows, cols, n)
            for kind in GRID_KINDS:
                ops[kind](0)  # warm-up
                out.setdefault(kind, []).append([nbytes, max(lap(ops[kind]) - alone, 0.0)])
    finally:
        rows.Free()
        cols.Free()
    return {"grid": [p, q], "grid_collectives": out}


def grid_ops(rows, cols, n: int) -> tuple[int, dict]:
    """(bytes as on the whole communicator, {kind: op(step)}): each collective of
    bench.calibration.collective_ops of about ``n`` bytes on this rank's row communicator
    ``rows`` and then on its column ``cols``, a broadcast's root moving with the step."""
    nbytes, on_rows = collective_ops(rows, n, rooted=True)
    _, on_cols = collective_ops(cols, nbytes, rooted=True)
    return nbytes, {k: partial(_both, row=on_rows[k], col=on_cols[k]) for k in on_rows}


def _both(step: int, row, col) -> None:
    row(step)
    col(step)


# bytes of the matrix each rank holds in the timed moves, the largest beyond a server's caches:
# with the two smaller alone, a 16-core machine's fit at 4 ranks had no per-byte cost and copies
# at 18.6 GB/s, and its redistributions of 3072^3 at 4 ranks took 8.6x what they were priced
# at; on a 2-core VM, end-to-end runs moving 9-20 MiB per rank at 4-16 ranks were priced 44-48%
# off with the largest left out above the cores, 15-17% with it (results/vm-2c-amx, stop 57)
A2AV_BYTES = (1 << 18, 1 << 22, 1 << 24)
# layout changes timed: 1-D to 2-D (few messages, half kept), block-cyclic to block (many
# pieces), rows to columns (every rank to every other)
A2AV_MOVES = (("cols", "block"), ("block-cyclic:64", "block"), ("rows", "cols"))


def alltoallv_costs(comm, quick: bool, cores: int) -> dict:
    """{"start", "message", "byte", "copy", "piece", "timed", "per_core"}: a redistribution
    at this rank count, fitted (bench.model.fits.fit_alltoallv) to whole layout changes as runs
    make them (layouts.direct's writes into shared memory on one node, else layouts.transfer's
    packing, Alltoallv and unpacking; the kept part's copy) timed barrier to barrier as a run's
    phase is, for each of A2AV_MOVES on a square float32 matrix of A2AV_BYTES per rank (the
    largest included above the cores too) (:func:`timed_move`). "timed" holds each as
    [messages, bytes, copied bytes, pieces, seconds], the loads the model prices
    (bench.model.redistribution.loads, with ``per_core`` ranks per core, at least 1: below
    the cores it was once g / cores, which multiplied the loads by cores / g and priced a
    16-core machine's moves at 4 ranks a fifth of what they took). A move that moves nothing
    (cols to block on a 1 x g grid) is left out: a run returns the block itself there and the
    model prices it at nothing, where its copied bytes timed at microseconds fitted copies as
    free. The ranks write twice the largest cache between them before each lap, so that every
    lap starts with the blocks out of the caches, as a run's moves do after the
    multiplication (timed warm, runs' moves at 2 ranks on 2 cores were priced a median 0.38 of
    what they took, 0.66-0.76 so, before the pieces were counted). Above the cores too, now
    that the largest moves are timed there: on a 2-core VM (480 MiB of cache), two sets of 96
    end-to-end runs at 4-16 ranks were priced 15.3-17.3% off by two calibrations so and
    19.9-29.5% by two timed warm (when above the cores only the two smaller sizes were timed,
    eviction there priced moves at 4 ranks 1.32x what they took). Many ranks sharing cores make
    single Alltoallvs swing with the scheduler; the model fits the counts above the cores
    together."""
    from layouts.direct import direct, release
    from layouts.transfer import transfer

    g = comm.Get_size()
    per_core = max(g / cores, 1.0)  # as the model's loads take it (redistribution.ranks_seconds)
    evict = _evicting(comm)  # written before each lap: together twice the largest cache
    rows = []
    sizes = A2AV_BYTES[:1] if quick else A2AV_BYTES
    for nbytes in sizes:
        for names in A2AV_MOVES:
            found = timed_move(names, nbytes, g, per_core)
            if found is None:  # cols and block on a 1 x g grid: the block itself, no move
                continue
            move = transfer(found.src, found.src_mesh, found.dst, found.dst_mesh, comm)
            move = direct(move, comm, np.float32)
            block = np.ones(found.src.block_shape, np.float32)
            laps = []
            for _ in range(3 if quick else 8):
                evict()  # out of the caches, as a run's multiplication leaves them
                comm.Barrier()
                t0 = now()
                move(block, comm, True)  # as a run's phases move
                comm.Barrier()
                laps.append(now() - t0)
            release(move)
            rows.append([*found.loads, comm.bcast(float(np.median(laps[1:])), root=0)])
    return {**fit_alltoallv(rows), "timed": rows, "per_core": per_core}


class TimedMove(NamedTuple):
    """One of calibrate's layout changes (:func:`timed_move`): the layouts and meshes, the pairs
    (sources, destinations, elements) it moves, each rank's pieces and its loads as the model
    prices them (bench.model.redistribution.loads)."""

    src: object
    src_mesh: object
    dst: object
    dst_mesh: object
    pairs: tuple
    pieces: np.ndarray
    loads: tuple


def timed_move(names: tuple[str, str], nbytes: int, g: int, per_core: float) -> TimedMove | None:
    """The layout change ``names`` of a square float32 matrix of ``nbytes`` per rank on g
    ranks, as :func:`alltoallv_costs` times it (its pieces: layouts.counting.piece_counts);
    None where it moves nothing."""
    from bench.model.redistribution import loads
    from layouts.counting import exchange_counts, piece_counts
    from layouts.endpoints import user_layout

    n = int((nbytes * g / 4) ** 0.5)
    (src, smesh), (dst, dmesh) = (user_layout(x, (n, n), g) for x in names)
    counts = exchange_counts(src, smesh, dst, dmesh)
    s, d = np.nonzero(counts)
    if (s == d).all():
        return None
    pairs = (s, d, counts[s, d])
    pieces = sum(piece_counts(src, smesh, dst, dmesh))  # sent and received, on rank r alike
    load = loads(*pairs, g, 4, per_core, pieces=pieces)
    return TimedMove(src, smesh, dst, dmesh, pairs, pieces, load)
