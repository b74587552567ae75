"""redistribute_between run by P threads over an in-memory Alltoallv (serial, no mpiexec): the
MPI test's checks at rank counts this small machine does not launch (6, 8, 9)."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from test_redistribute_between_mpi import SEED, layouts_for

from layouts import generate_block, strided
from layouts.counting import exchange_counts
from layouts.relabel import relabel_layouts
from layouts.transfer import transfer


class ThreadComm:
    """Rank ``rank`` of ``size`` threads; Alltoallv through a shared table and a barrier."""

    def __init__(self, rank: int, size: int, table: list, barrier: threading.Barrier):
        self.rank, self.size, self.table, self.barrier = rank, size, table, barrier
        self.sent: list[list[int]] = []

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def Alltoallv(self, send, recv):
        sbuf, (scounts, sdispls), _ = send
        rbuf, (rcounts, rdispls), _ = recv
        self.sent.append(list(scounts))
        self.table[self.rank] = (sbuf, scounts, sdispls)
        self.barrier.wait()
        for s, (buf, counts, displs) in enumerate(self.table):
            n = counts[self.rank]
            assert n == rcounts[s], f"rank {self.rank} expects {rcounts[s]} from {s}, gets {n}"
            rbuf[rdispls[s] : rdispls[s] + n] = buf[displs[self.rank] : displs[self.rank] + n]
        self.barrier.wait()

    def allreduce(self, value):
        self.barrier.wait()  # everyone has read the table's last use
        self.table[self.rank] = value
        self.barrier.wait()
        total = sum(self.table)
        self.barrier.wait()
        return total


def run_ranks(P: int, job) -> list:
    """job(comm) on P threads; their results in rank order (the first error re-raised)."""
    table, barrier = [None] * P, threading.Barrier(P, timeout=60)
    out, errors = [None] * P, []

    def main(rank):
        try:
            out[rank] = job(ThreadComm(rank, P, table, barrier))
        except Exception as err:
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=main, args=(r,)) for r in range(P)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


@pytest.mark.parametrize("P", [4, 6, 8, 9])
@pytest.mark.parametrize("pieces", ["default", "every"])
def test_threaded_transfers_exact_and_counted(P, pieces, monkeypatch):
    if pieces == "every":  # strided copies however short (these blocks are too small for them)
        monkeypatch.setattr(strided, "MIN_PIECE", 1)
        monkeypatch.setattr(strided, "MIN_RUN", 1)
    shape = (13, 7)
    lays = layouts_for(shape, P)
    shuffled = tuple(int(r) for r in np.random.default_rng(P).permutation(P))
    for (sn, (s, sm)), (dn, (d, dm)) in itertools.product(lays.items(), lays.items()):
        best = relabel_layouts(s, sm, d, dm).ranks
        for ranks in (None, best, shuffled):

            def job(comm, s=s, sm=sm, d=d, dm=dm, ranks=ranks):
                block = generate_block(s, sm.coords(comm.rank), SEED)
                plan = transfer(s, sm, d, dm, comm, ranks)
                return plan(block, comm), plan, comm.sent

            counts = exchange_counts(s, sm, d, dm, ranks)
            local = not (counts - np.diag(np.diag(counts))).any()
            order = range(P) if ranks is None else ranks
            for me, (out, plan, sent) in enumerate(run_ranks(P, job)):
                want = generate_block(d, dm.coords(list(order).index(me)), SEED)
                assert np.array_equal(out, want), (sn, dn, ranks, me)
                assert plan.sendcounts.tolist() == counts[me].tolist(), (sn, dn, ranks, me)
                assert plan.local_only == local
                # what a rank keeps is copied, never sent to itself through MPI
                through_mpi = [n if t != me else 0 for t, n in enumerate(counts[me].tolist())]
                assert sent == ([] if local else [through_mpi]), (sn, dn, ranks, me)


@pytest.mark.parametrize("P", [4, 6, 9])
def test_a_batch_moves_what_its_transfers_move_in_one_exchange(P):
    """layouts.batch.Batch: every pair of layouts' transfer run together with another (and
    with itself) in one Alltoallv gives each part's block exactly, sending each peer the sum of
    the parts' elements in one message."""
    from layouts.batch import Batch

    shape = (13, 7)
    lays = list(layouts_for(shape, P).items())
    shuffled = tuple(int(r) for r in np.random.default_rng(P).permutation(P))
    for (an, (a, am)), (bn, (b, bm)) in itertools.product(lays, lays[:3]):
        # the two moves share one order of the destination ranks, as an end-to-end run's do
        moves = [(a, am, b, bm), (b, bm, a, am), (a, am, a, am)]

        def job(comm, moves=moves):
            parts = [transfer(s, sm, d, dm, comm, shuffled) for s, sm, d, dm in moves]
            batch = Batch.of(parts, comm.rank)
            blocks = tuple(generate_block(s, sm.coords(comm.rank), SEED) for s, sm, _, _ in moves)
            return batch(blocks, comm), batch, comm.sent

        for me, (outs, batch, sent) in enumerate(run_ranks(P, job)):
            native = shuffled.index(me)
            for (_, _, d, dm), out in zip(moves, outs, strict=True):
                assert np.array_equal(out, generate_block(d, dm.coords(native), SEED)), (an, bn)
            counts = sum(exchange_counts(*m, shuffled)[me] for m in moves)
            assert batch.sendcounts.tolist() == counts.tolist(), (an, bn, me)
            through_mpi = [n if t != me else 0 for t, n in enumerate(counts.tolist())]
            assert sent == ([] if batch.local_only else [through_mpi]), (an, bn, me)
            assert batch.messages == sum(1 for n in through_mpi if n)


@pytest.mark.parametrize("reuse", [False, True])
def test_reuse_moves_into_the_block_returned_last_time(reuse):
    """With ``reuse`` a transfer and a batch write into the destinations they returned the
    time before, their padding zeroed again (whoever used the block may have written it);
    without, every call returns new blocks."""
    from layouts.batch import Batch

    P, lays = 4, layouts_for((13, 7), 4)
    (s, sm), (d, dm) = lays["rows"], lays["block"]

    def job(comm):
        one = transfer(s, sm, d, dm, comm)
        batch = Batch.of([transfer(s, sm, d, dm, comm), transfer(d, dm, s, sm, comm)], comm.rank)
        blocks = tuple(generate_block(x, m.coords(comm.rank), SEED) for x, m in ((s, sm), (d, dm)))
        first = (one(blocks[0], comm, reuse), *batch(blocks, comm, reuse))
        for out in first:
            out.fill(7.0)  # a user of the blocks writes everywhere, padding included
        again = (one(blocks[0], comm, reuse), *batch(blocks, comm, reuse))
        return first, again

    for me, (first, again) in enumerate(run_ranks(P, job)):
        want = (
            generate_block(d, dm.coords(me), SEED),
            generate_block(d, dm.coords(me), SEED),
            generate_block(s, sm.coords(me), SEED),
        )
        for a, b, w in zip(first, again, want, strict=True):
            assert (a is b) == reuse
            assert np.array_equal(b, w)


def test_parts_in_one_run_move_straight_from_and_into_the_blocks():
    """Column blocks into 2 x 2 blocks: each rank's part for a peer is a run of its block (rows
    of a column block), so the block is the send buffer; back, each part lands in one run of the
    destination, so that is the receive buffer; both exact, and the other sides still packed."""
    from layouts.named import user_layout

    P, shape = 4, (16, 16)
    (cols, cm), (blocks, bm) = user_layout("cols", shape, P), user_layout("block", shape, P)

    def job(comm):
        there = transfer(cols, cm, blocks, bm, comm)
        back = transfer(blocks, bm, cols, cm, comm)
        a = there(generate_block(cols, cm.coords(comm.rank), SEED), comm)
        b = back(generate_block(blocks, bm.coords(comm.rank), SEED), comm)
        me = comm.rank
        ways = [
            t._in_place(side, me) is not None for t in (there, back) for side in ("send", "recv")
        ]
        return a, b, ways

    for me, (a, b, ways) in enumerate(run_ranks(P, job)):
        assert np.array_equal(a, generate_block(blocks, bm.coords(me), SEED))
        assert np.array_equal(b, generate_block(cols, cm.coords(me), SEED))
        assert ways == [True, False, False, True], me


@pytest.mark.parametrize(
    "shape, texts",
    [
        (
            (11,),
            [
                "((2_x, 2_y, 3))",
                "((12))",
                "((2_Time, 2_x, 3); R@[x + y])",
                "((2_x, 2_Time, 3); R@[x + y])",
            ],
        ),
        (
            (4, 3, 5),
            ["((2_x, 2), (3), (2_y, 3))", "((4), (2_y, 2), (2_x, 3))", "((4), (3), (2_y, 3))"],
        ),
    ],
)
def test_transfers_of_other_than_matrices_are_exact_and_counted(shape, texts):
    """A vector and a 3-D tensor (padded, replicated, rotated): a transfer decides by stretches
    of the last dimension under every combination of the leading ones' indices."""
    from layouts import parse_layout
    from topology import AbstractMesh

    mesh = AbstractMesh.of(x=2, y=2)
    lays = [parse_layout(t).with_shape(shape) for t in texts]
    for s, d in itertools.product(lays, lays):

        def job(comm, s=s, d=d):
            plan = transfer(s, mesh, d, mesh, comm)
            return plan(generate_block(s, mesh.coords(comm.rank), SEED), comm), plan

        counts = exchange_counts(s, mesh, d, mesh)
        for me, (out, plan) in enumerate(run_ranks(4, job)):
            assert np.array_equal(out, generate_block(d, mesh.coords(me), SEED)), (s, d, me)
            assert plan.sendcounts.tolist() == counts[me].tolist(), (s, d, me)
