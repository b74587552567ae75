"""Direct moves (layouts/direct.py): writes into the peers' blocks in shared memory give the same
blocks as the Transfer's Alltoallv, batched or not, repetition after repetition.

Run under mpiexec with ``--only-mpi`` (any size). Failures are collected per rank and combined
at the end, so one failing rank never leaves the others waiting in a collective.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from mpi4py import MPI
from test_redistribute_between_mpi import _failures, layouts_for

from layouts import generate_block
from layouts.batch import Batch
from layouts.direct import Direct, SemaphoreFence, _room_for, direct, release
from layouts.transfer import transfer

SEED = 29


@pytest.mark.mpi
@pytest.mark.parametrize("fence", ["auto", "sem", "mpi"])
@pytest.mark.parametrize("shape", [(13, 7), (8, 12)])
def test_direct_moves_equal_the_transfers(shape, fence, monkeypatch):
    monkeypatch.setenv("DISTMM_FENCE", fence)
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    lays = layouts_for(shape, P)
    shuffled = tuple(int(r) for r in np.random.default_rng(3).permutation(P))
    failures = []
    for (sn, (s, sm)), (dn, (d, dm)) in itertools.product(lays.items(), lays.items()):
        plan = transfer(s, sm, d, dm, comm, shuffled)
        move = direct(plan, comm, np.float64)
        for seed in (SEED, SEED + 1, SEED):  # repetitions overwrite the blocks of the one before
            out = move(generate_block(s, sm.coords(me), seed), comm, True)
            if not np.array_equal(out, generate_block(d, dm.coords(shuffled.index(me)), seed)):
                failures.append(f"rank {me} {sn}->{dn} seed {seed}: wrong values")
        if isinstance(move, Direct) != (P > 1 and not plan.local_only):
            failures.append(f"rank {me} {sn}->{dn}: direct={isinstance(move, Direct)}")
        counts = (move.moving, move.messages)
        if isinstance(move, Direct) and counts != (plan.moving, plan.messages):
            failures.append(f"rank {me} {sn}->{dn}: counts differ from the transfer's")
        release(move)
    assert _failures(comm, failures) == []


@pytest.mark.mpi
def test_a_batch_moves_directly_with_padding_zeroed():
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    lays = layouts_for((13, 7), P)
    pairs = [(lays["rows"], lays["block-cyclic:2"]), (lays["cols"], lays["block"])]
    parts = [transfer(s, sm, d, dm, comm) for (s, sm), (d, dm) in pairs]
    batch = Batch.of(parts, me)
    move = direct(batch, comm, np.float64)
    failures = []
    for rep in range(3):
        blocks = tuple(generate_block(s, sm.coords(me), SEED + rep) for (s, sm), _ in pairs)
        got = move(blocks, comm, True)
        for i, ((_, (d, dm)), out) in enumerate(zip(pairs, got, strict=True)):
            if not np.array_equal(out, generate_block(d, dm.coords(me), SEED + rep)):
                failures.append(f"rank {me} part {i} repetition {rep}: wrong values")
            out.fill(np.nan)  # whoever uses a block may write it, padding included
    if move.messages != batch.messages or not np.array_equal(move.sendcounts, batch.sendcounts):
        failures.append(f"rank {me}: counts differ from the batch's")
    release(move)
    assert _failures(comm, failures) == []


@pytest.mark.mpi
def test_the_fence_sleeps_where_the_ranks_outnumber_their_cores(monkeypatch):
    comm = MPI.COMM_WORLD
    cpus = set().union(*comm.allgather(sorted(os.sched_getaffinity(0))))
    lays = layouts_for((8, 8), comm.Get_size())
    plan = transfer(*lays["rows"], *lays["cols"], comm)
    for setting, sleeps in (("auto", comm.Get_size() > len(cpus)), ("sem", True), ("mpi", False)):
        monkeypatch.setenv("DISTMM_FENCE", setting)
        move = direct(plan, comm, np.float64)
        if isinstance(move, Direct):
            assert isinstance(move.fence, SemaphoreFence) == sleeps, setting
        release(move)


@pytest.mark.mpi
def test_no_rank_passes_the_semaphore_fence_before_every_rank_reached_it(monkeypatch):
    """Each round every rank writes the round into its slot of a shared window, crosses the
    fence, reads every slot and crosses it again, arriving in a shuffled order: a rank let
    through early (or a release taken by the wrong round) reads a stale slot."""
    monkeypatch.setenv("DISTMM_FENCE", "sem")
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    lays = layouts_for((8, 8), P)
    move = direct(transfer(*lays["rows"], *lays["cols"], comm), comm, np.float64)
    if not isinstance(move, Direct):  # nothing moves at one rank
        return
    win = MPI.Win.Allocate_shared(8, 8, comm=comm)
    slots = [np.frombuffer(win.Shared_query(r)[0], np.int64) for r in range(P)]
    rng, failures = np.random.default_rng(me), []
    for round_ in range(1, 201):
        if rng.random() < 0.3:
            time.sleep(rng.random() * 1e-4)
        slots[me][0] = round_
        move.fence()
        seen = [int(s[0]) for s in slots]
        if seen != [round_] * P:
            failures.append(f"rank {me} round {round_}: slots {seen}")
        move.fence()
    win.Free()
    release(move)
    assert _failures(comm, failures) == []


@pytest.mark.mpi
def test_switched_off_by_the_environment(monkeypatch):
    comm = MPI.COMM_WORLD
    lays = layouts_for((8, 8), comm.Get_size())
    plan = transfer(*lays["rows"], *lays["cols"], comm)
    monkeypatch.setenv("DISTMM_DIRECT", "0")
    assert direct(plan, comm, np.float64) is plan


def test_no_window_larger_than_the_shared_memory_free():
    assert _room_for(0)
    assert _room_for(1, "/no/such/file/system")  # MPICH then allocates elsewhere
    assert not _room_for(1 << 62, "/")  # whatever holds the root, not 4 EiB


_FAILS_BETWEEN_MOVES = """
import sys
sys.path[:0] = [{root!r}, {tests!r}]
from bench.machine import start_mpi
MPI, _ = start_mpi()
import numpy as np
from test_redistribute_between_mpi import layouts_for
from layouts import generate_block
from layouts.direct import direct
from layouts.transfer import transfer
comm = MPI.COMM_WORLD
(s, sm), (d, dm) = (layouts_for((64, 64), comm.Get_size())[k] for k in ("rows", "cols"))
move = direct(transfer(s, sm, d, dm, comm), comm, np.float64)
assert move.fence is not None
block = generate_block(s, sm.coords(comm.Get_rank()), 1)
for i in range(5):
    if i == 2 and comm.Get_rank() == 1:
        raise RuntimeError("rank 1 fails between moves")
    move(block, comm, True)
"""


def test_a_rank_failing_while_the_others_sleep_in_the_fence_ends_the_job():
    """The ranks that reached the semaphore fence sleep there; the one that fails aborts the
    job (bench.machine's hook), so none is left asleep."""
    from launch import mpirun

    tests = os.path.dirname(os.path.abspath(__file__))
    code = _FAILS_BETWEEN_MOVES.format(root=os.path.dirname(tests), tests=tests)
    started = time.perf_counter()
    done = subprocess.run(
        [*mpirun(3), sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ, DISTMM_FENCE="sem", MPIEXEC_TIMEOUT="60"),
    )
    assert done.returncode != 0
    assert "rank 1 fails between moves" in done.stderr, done.stderr[-2000:]
    assert time.perf_counter() - started < 30, "the job waited for its timeout"
