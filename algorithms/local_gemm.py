"""The local GEMM every rank runs, in one place: the communication layer calls it for an
algorithm's multiplications and calibrate times it, so a calibrated rate is the rate of the code
that runs.

With messages in flight, :func:`polled_gemm` runs it in row chunks and polls the messages
between chunks (MPI progresses messages only inside its calls), so they advance while the rank
computes.
"""

from __future__ import annotations

import itertools

import numpy as np

CHUNKS = 8  # row chunks between progress polls when messages are in flight
# rows per chunk at least: each call repacks all of B, so thinner chunks cost more than the polls
# buy (256x256x4096 in 8 chunks of 32 rows took 1.4-1.5x the whole GEMM on one core; cannon 2x2
# on 512x512x8192 with 4 ranks multiplied in 39-42 ms in chunks of 32 rows, 30 ms in one)
CHUNK_ROWS = 256


def gemm_rows(a, b, c, accumulate: bool, tmp=None) -> None:
    """``c (+)= a @ b``; accumulating, through ``tmp`` (c's shape) when given, not a new array."""
    if not accumulate:
        np.matmul(a, b, out=c)
    elif tmp is None:
        c += a @ b
    else:
        c += np.matmul(a, b, out=tmp)


def polled_gemm(a, b, c, accumulate: bool, tmp, requests: list, clock=None) -> list:
    """:func:`gemm_rows` in up to CHUNKS row chunks of at least CHUNK_ROWS rows, testing the MPI
    ``requests`` between chunks (one call where there are none or the block is too thin).

    With ``clock`` (a callable giving the time), the times that split the call: its start, then
    after each chunk the end of that chunk and the end of the poll after it (in one call: its
    start and end; [] without)."""
    chunks = min(CHUNKS, a.shape[0] // CHUNK_ROWS)
    if not requests or chunks < 2:
        start = clock() if clock is not None else None
        gemm_rows(a, b, c, accumulate, tmp)
        return [start, clock()] if clock is not None else []
    from mpi4py import MPI

    marks = [clock()] if clock is not None else None
    bounds = np.linspace(0, a.shape[0], chunks + 1).astype(int)
    for lo, hi in itertools.pairwise(bounds):
        gemm_rows(a[lo:hi], b, c[lo:hi], accumulate, None if tmp is None else tmp[lo:hi])
        if marks is not None:
            marks.append(clock())
        MPI.Request.Testall(requests)
        if marks is not None:
            marks.append(clock())
    return marks or []
