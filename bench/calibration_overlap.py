"""How much of a message posted before a GEMM the rank still pays, where the ranks fit the cores.

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
POSTED = ("shift", "bcast")  # the kinds algorithms issue non-blocking (comm.ishift, ibcast)


def exposure(comm, cores: int, quick: bool) -> dict[str, float]:
    """{kind: f} for each of POSTED on all of ``comm``'s ranks (at least 2, no more than the
    cores): every rank posts the message (a ring shift of EXPOSED_BYTES to the previous rank,
    or a broadcast of them from rank 0), runs an EXPOSED_GEMM^3 GEMM polling it between row
    chunks as comm.gemm does, then waits; f = (that - the GEMM alone) / the message alone, the
    median over laps of the three in turn, each timed barrier to barrier (the slowest rank's),
    between 0 (hidden) and MOST_EXPOSED (a lap's three share the machine's spell; six probes
    here on 2 ranks: shift 1.38-1.67, broadcast 1.27-1.63). With the BLAS threads a run of
    that many ranks has."""
    from mpi4py import MPI
    from threadpoolctl import threadpool_limits

    from algorithms.local_gemm import polled_gemm

    from .machine import blas_threads

    g, rank = comm.Get_size(), comm.Get_rank()
    if g < 2:
        return {}
    a, b, c, tmp = _square_operands(rank, EXPOSED_GEMM)
    buf, out = np.ones(EXPOSED_BYTES, np.uint8), np.empty(EXPOSED_BYTES, np.uint8)

    posts = {  # each kind of POSTED, posted: its requests
        "shift": lambda: [
            comm.Irecv(out, source=(rank + 1) % g, tag=9),
            comm.Isend(buf, dest=(rank - 1) % g, tag=9),
        ],
        "bcast": lambda: [comm.Ibcast(buf, root=0)],
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


__all__ = ["EXPOSED_BYTES", "EXPOSED_GEMM", "POSTED", "exposure"]
