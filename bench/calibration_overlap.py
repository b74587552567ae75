"""How much of a message posted before a GEMM the rank still pays: where the ranks fit the cores
(:func:`exposure`) and where they outnumber them (:func:`exposure_above`).

The model once took a non-blocking message below the cores as hidden behind the GEMMs that
follow it (a core per rank, the GEMM polling MPI between row chunks: algorithms/local_gemm.py).
Measured, it is not: on 2 ranks of this 2-core VM a 16-32 MiB shift posted before a polled
GEMM added 1.1-2.1 times its own time to the GEMM's, a broadcast 0.9-1.6 times (MPICH's
shared-memory transport moves a large message in pieces, each only when both sides are in MPI,
and the copies then compete with the GEMM for memory); on a 16-core machine runs' time outside
their GEMMs was 1-3 times their messages' full price. :func:`exposure` measures that fraction
at each rank count for the kinds algorithms post non-blocking, and the model charges the rank
that fraction of each overlapped message's price (Profile.exposed, bench/model/walk.py).
"""

from __future__ import annotations

import numpy as np

from .calibration import _square_operands, now

EXPOSED_GEMM = 768  # square, so polled in 3 row chunks (local_gemm.CHUNK_ROWS), as runs' blocks
EXPOSED_BYTES = 1 << 24  # a large block's message: rendezvous, and beyond most caches
MOST_EXPOSED = 3.0  # a fraction above this is noise (a lap's GEMM slowed by something else)
# the kinds algorithms issue non-blocking (comm.ishift, ibcast, ireduce_scatter)
POSTED = ("shift", "bcast", "reduce_scatter")


def exposure(comm, cores: int, quick: bool) -> dict[str, float]:
    """{kind: f} for each of POSTED on all of ``comm``'s ranks (at least 2, no more than the
    cores): every rank posts the message (a ring shift of EXPOSED_BYTES to the previous rank,
    a broadcast of them from rank 0, or a reduce-scatter of them), runs an EXPOSED_GEMM^3 GEMM
    polling it between row chunks as comm.gemm does, then waits; f = (that - the GEMM alone) /
    the message alone, the median over laps of the three in turn, each timed barrier to
    barrier (the slowest rank's), between 0 (hidden) and MOST_EXPOSED (a lap's three share the
    machine's spell; six probes here on 2 ranks: shift 1.38-1.67, broadcast 1.27-1.63). With
    the BLAS threads a run of that many ranks has."""
    from mpi4py import MPI
    from threadpoolctl import threadpool_limits

    from algorithms.local_gemm import polled_gemm

    from .machine import blas_threads

    g, rank = comm.Get_size(), comm.Get_rank()
    if g < 2:
        return {}
    a, b, c, tmp = _square_operands(rank, EXPOSED_GEMM)
    buf, out = np.ones(EXPOSED_BYTES // 4, np.float32), np.empty(EXPOSED_BYTES // 4, np.float32)
    part = out[: out.size // g]

    posts = {  # each kind of POSTED, posted: its requests
        "shift": lambda: [
            comm.Irecv(out, source=(rank + 1) % g, tag=9),
            comm.Isend(buf, dest=(rank - 1) % g, tag=9),
        ],
        "bcast": lambda: [comm.Ibcast(buf, root=0)],
        "reduce_scatter": lambda: [comm.Ireduce_scatter_block(buf[: part.size * g], part)],
    }

    def lap(post=None, gemm: bool = True) -> float:
        comm.Barrier()
        t0 = now()
        requests = post() if post is not None else []
        if gemm:
            polled_gemm(a, b, c, True, tmp, requests)
        MPI.Request.Waitall(requests)
        comm.Barrier()
        return comm.bcast(now() - t0, root=0)

    found = {}
    with threadpool_limits(limits=blas_threads(cores, g), user_api="blas"):
        for kind in POSTED:
            post = posts[kind]
            lap(post)  # warm-up
            laps = np.array(
                [[lap(), lap(post, False), lap(post)] for _ in range(3 if quick else 11)]
            )
            alone, message, both = laps.T
            found[kind] = float(np.clip(np.median((both - alone) / message), 0.0, MOST_EXPOSED))
    return found


ABOVE_BYTES = (1 << 18, 1 << 21)  # above the cores: calibrate's larger collectives' sizes


def gemm_lap(comm, quick: bool, gemm: int, steps: int = 4) -> tuple:
    """(lap, its time alone): lap(op=None, posted=None) is the seconds per step, barrier to
    barrier, of a loop of ``steps`` (half if ``quick``) in which every rank of ``comm`` does a
    ``gemm``^3 GEMM and then ``op(step)``, as a run's steps do, or first posts ``posted(step)``
    (its requests), polls them between the GEMM's row chunks and waits for them after it, as
    the algorithms overlap; alone, the median of three laps without either (after a warm-up)."""
    from mpi4py import MPI

    from algorithms.local_gemm import polled_gemm

    x = np.ones((gemm, gemm), np.float32)
    c, tmp = np.zeros_like(x), np.zeros_like(x)
    reps = max(steps // 2, 1) if quick else steps

    def lap(op=None, posted=None) -> float:
        comm.Barrier()
        t0 = now()
        for step in range(reps):
            requests = posted(step) if posted is not None else []
            polled_gemm(x, x, c, True, tmp, requests)  # without requests: one plain GEMM
            if requests:
                MPI.Request.Waitall(requests)
            if op is not None:
                op(step)
        comm.Barrier()
        return comm.bcast(now() - t0, root=0) / reps

    lap()  # warm-up
    return lap, float(np.median([lap() for _ in range(3)]))


def exposure_above(comm, quick: bool, timer) -> dict[str, float]:
    """{kind: f} for each of POSTED where ``comm``'s ranks outnumber the cores, in the loop of
    ``timer`` (:func:`gemm_lap`'s; calibrate's two: 4 steps of 512^3 GEMMs, 16 of 128^3): every
    rank issues the message on its row and then its column of the most square grid of the
    ranks (all of them where there is none, layouts.named.grid), a broadcast's root moving
    with the step, either blocking after its GEMM (bench.calibration.collective_ops, as
    calibrate times collectives there) or posted before it, polled in it and waited after it,
    as the algorithms do; f = what the posted one adds to the loop / what the blocking one
    adds, laps of the three in turn, median over ABOVE_BYTES, between 0 and MOST_EXPOSED. A
    rank that posts its messages before computing does not wait in MPI for partners the
    scheduler has computing: at 8-16 ranks on 2 cores f was 0.4-0.9 after 512^3 GEMMs, 0.7-1.0
    after 128^3 (at 4 ranks 0.8-1.9); runs with overlap took 0.70-0.87 of their time without,
    at 16 ranks."""
    from layouts.named import grid

    from .calibration import collective_ops

    lap, _ = timer
    g, me = comm.Get_size(), comm.Get_rank()
    p, q = grid(g)
    rings = [comm.Split(me // q, me), comm.Split(me % q, me)] if p > 1 else [comm.Dup()]
    found = {}
    try:
        for kind in POSTED:
            ratios = []
            for n in ABOVE_BYTES[-1:] if quick else ABOVE_BYTES:
                blocking = [collective_ops(ring, n, rooted=True)[1][kind] for ring in rings]
                posted = [_posted(kind, ring, n) for ring in rings]

                def block(step, ops=blocking) -> None:
                    for op in ops:
                        op(step)

                def post(step, ops=posted) -> list:
                    return [r for op in ops for r in op(step)]

                lap(posted=post)  # warm-up
                laps = [[lap(), lap(block), lap(posted=post)] for _ in range(2 if quick else 3)]
                alone, blocked, overlapped = np.median(laps, axis=0)
                if blocked > alone:
                    ratios.append((overlapped - alone) / (blocked - alone))
            if ratios:
                found[kind] = float(np.clip(np.median(ratios), 0.0, MOST_EXPOSED))
    finally:
        for ring in rings:
            ring.Free()
    return found


def _posted(kind: str, ring, n: int):
    """``kind`` (a shift to the next rank, a broadcast from rank ``step`` mod the size, or a
    reduce-scatter) of ``n`` bytes on ``ring``, posted: step -> its requests, into buffers of
    its own."""
    size, me = ring.Get_size(), ring.Get_rank()
    out, got = np.ones(n // 4, np.float32), np.empty(n // 4, np.float32)
    if kind == "bcast":
        return lambda step: [ring.Ibcast(out, root=step % size)]
    if kind == "reduce_scatter":  # as collective_ops': a whole multiple of the ring's ranks
        count = max(size, out.size // size * size)
        summed, part = np.ones(count, np.float32), np.empty(count // size, np.float32)
        return lambda _: [ring.Ireduce_scatter_block(summed, part)]
    return lambda _: [
        ring.Irecv(got, source=(me - 1) % size),
        ring.Isend(out, dest=(me + 1) % size),
    ]


__all__ = ["EXPOSED_BYTES", "EXPOSED_GEMM", "POSTED", "exposure", "exposure_above", "gemm_lap"]
