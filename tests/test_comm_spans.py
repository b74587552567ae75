"""What a traced Comm (algorithms/comm.py) spans, so that a trace times what the model prices:
a GEMM with messages in flight is a gemm span per row chunk and a span per poll between them of
what it progresses, or one gemm span where it is too thin to chunk (once none, so a trace missed
an overlapped run's thin GEMMs); a recorded copy is a copy span (once none)."""

import contextlib
import time

import numpy as np
import pytest
from mpi4py import MPI

from algorithms.comm import Comm
from algorithms.local_gemm import CHUNK_ROWS
from algorithms.pending import Pending
from topology import AbstractMesh, Mesh


class Spans:
    """What a Tracer is to a Comm, keeping the spans' names and whether each is a poll."""

    def __init__(self):
        self.spans = []
        self.now = time.perf_counter

    def add(self, name, start, end, lane=0, **args):
        assert end >= start
        self.spans.append((name, bool(args.get("poll"))))

    @contextlib.contextmanager
    def span(self, name, **args):
        yield
        self.spans.append((name, False))


def _traced():
    mesh = Mesh(AbstractMesh.of(x=1), MPI.COMM_SELF)
    tracer = Spans()
    return mesh, tracer, Comm(mesh, tracer=tracer)


@pytest.mark.parametrize(("rows", "gemms"), [(CHUNK_ROWS - 1, 1), (3 * CHUNK_ROWS, 3)])
def test_a_gemm_with_messages_in_flight_is_traced_whole_or_chunk_by_chunk(rows, gemms):
    mesh, tracer, comm = _traced()
    a, b = np.ones((rows, 8)), np.ones((8, 5))
    c = np.empty((rows, 5))
    try:
        comm.gemm(a, b, c, accumulate=False, progress=(Pending([MPI.COMM_SELF.Ibarrier()]),))
    finally:
        mesh.free()
    assert np.array_equal(c, np.full((rows, 5), 8.0))
    polls = [("progress", True)] * gemms if gemms > 1 else []
    want = [("gemm", False)] * gemms + polls
    assert sorted(tracer.spans) == sorted(want)


def test_a_copy_is_traced():
    mesh, tracer, comm = _traced()
    out, x = np.zeros((4, 3)), np.arange(12.0).reshape(4, 3)
    try:
        comm.copy(out, x)
    finally:
        mesh.free()
    assert np.array_equal(out, x) and tracer.spans == [("copy", False)]
    assert [(e.kind, e.nbytes) for e in comm.events] == [("copy", x.nbytes)]


def test_analyze_rows_add_up_to_the_end_to_end_prediction():
    """An end-to-end run's moves are one "redistribute" phase in its traces: `distmm analyze`
    predicts it from the moves in and out, and adds the barrier closing the repetition to the
    kernel's, so the predicted rows sum to the predicted total."""
    import pandas as pd

    from bench.spans import COLUMNS, phase_summary

    rows = [
        (rank, 0, phase, 0, 0.0, duration, 0, "rank")
        for rank in range(2)
        for phase, duration in (("redistribute", 0.002), ("gemm", 0.003), ("barrier", 0.001))
    ]
    run = {
        "seconds": 0.0065,
        "predicted_phases": {"gemm": 0.003, "barrier": 0.001},
        "predicted_redistribute_in_seconds": 0.0015,
        "predicted_redistribute_out_seconds": 0.0005,
        "predicted_closing_barrier_seconds": 0.0002,
        "predicted_seconds": 0.0062,
    }
    out = phase_summary(pd.DataFrame(rows, columns=COLUMNS), run)
    assert out["redistribute"]["predicted"] == pytest.approx(0.002)
    assert out["barrier"]["predicted"] == pytest.approx(0.0012)
    parts = sum(row["predicted"] for phase, row in out.items() if phase != "total")
    assert parts == pytest.approx(out["total"]["predicted"])
    native = phase_summary(
        pd.DataFrame(rows, columns=COLUMNS),
        {
            **run,
            "predicted_redistribute_in_seconds": 0.0,
            "predicted_redistribute_out_seconds": 0.0,
            "predicted_closing_barrier_seconds": 0.0,
        },
    )
    assert native["redistribute"]["predicted"] is None and native["barrier"]["predicted"] == 0.001
