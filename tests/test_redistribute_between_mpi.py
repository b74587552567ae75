"""redistribute_between: layouts on different meshes over the world's ranks, relabelled or not.

Run under mpiexec with ``--only-mpi`` (any size; the algorithm-like 2 x 2 layouts join at 4).
As in test_redistribute_mpi.py, failures are collected per rank and combined at the end, so one
failing rank never leaves the others waiting in a collective.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from mpi4py import MPI

from layouts import LayoutError, generate_block, parse_layout
from layouts.batch import Batch
from layouts.counting import exchange_counts
from layouts.named import grid, user_layout
from layouts.relabel import relabel_layouts
from layouts.transfer import redistribute_between, transfer
from topology import AbstractMesh, MeshError

SEED = 23
NAMED = ["rows", "cols", "block", "block-cyclic:2"]


class _Recorder:
    """Forwards to a communicator; records the send and receive counts of every Alltoallv."""

    def __init__(self, comm):
        self._comm = comm
        self.sent: list[list[int]] = []
        self.received: list[list[int]] = []

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def Alltoallv(self, send, recv):
        self.sent.append(list(send[1][0]))
        self.received.append(list(recv[1][0]))
        return self._comm.Alltoallv(send, recv)


def layouts_for(shape: tuple[int, int], P: int) -> dict[str, tuple]:
    """name -> (layout, mesh): the named layouts, and at 4 ranks algorithm-like 2 x 2 ones."""
    out = {name: user_layout(name, shape, P) for name in NAMED}
    m, n = shape
    p, q = grid(P)
    # the algorithms' 2-D blocks on a mesh whose ranks run the other way (x fastest)
    out["blocks_yx"] = (
        parse_layout(f"(({p}_x, {-(-m // p)}), ({q}_y, {-(-n // q)}))").with_shape(shape),
        AbstractMesh.of(y=q, x=p),
    )
    if P == 4:
        xy = AbstractMesh.of(x=2, y=2)
        h, w = -(-m // 2), -(-n // 2)
        for name, text in [
            ("cannon_a", f"((2_x, {h}), (2_Time, {w}); R@[x + y])"),
            ("cannon_b", f"((2_Time, {h}), (2_y, {w}); R@[x + y])"),
            ("summa_panels", f"((2_x, {h}), ({-(-n // 4)}, 2_y, 2))"),
            ("rows_repl_y", f"((2_x, {h}), ({n}))"),
        ]:
            out[name] = (parse_layout(text).with_shape(shape), xy)
    return out


def _failures(comm, failures: list[str]) -> list[str]:
    return [f for fs in comm.allgather(failures[:5]) for f in fs]


def _transfer(comm, block, s, sm, d, dm, ranks, failures, label):
    """Move ``block``; check its counts against exchange_counts; return the block received."""
    spy = _Recorder(comm)
    out = redistribute_between(block, s, sm, d, dm, spy, ranks)
    counts = exchange_counts(s, sm, d, dm, ranks)
    me = comm.Get_rank()
    if not (counts - np.diag(np.diag(counts))).any():  # nothing moves: a local copy, no MPI
        want_sent = want_received = []
    else:  # what a rank keeps is copied, never sent to itself through MPI
        off = counts - np.diag(np.diag(counts))
        want_sent, want_received = [off[me].tolist()], [off[:, me].tolist()]
    if spy.sent != want_sent or spy.received != want_received:
        failures.append(
            f"rank {me} {label}: sent {spy.sent} received {spy.received}, "
            f"exchange_counts {counts[me].tolist()} / {counts[:, me].tolist()}"
        )
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("shape", [(13, 7), (8, 12)])
def test_every_pair_is_exact_and_counted(shape):
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    lays = layouts_for(shape, P)
    failures = []
    for (sn, (s, sm)), (dn, (d, dm)) in itertools.product(lays.items(), lays.items()):
        block = generate_block(s, sm.coords(me), SEED)
        out = _transfer(comm, block, s, sm, d, dm, None, failures, f"{sn}->{dn}")
        if out.shape != d.block_shape or not np.array_equal(
            out, generate_block(d, dm.coords(me), SEED)
        ):
            failures.append(f"rank {me} {sn}->{dn} {shape}: wrong values")
    assert _failures(comm, failures) == []


@pytest.mark.mpi
def test_a_reused_block_gets_its_padding_zeroed():
    """Into the block it returned before, which its user may have written everywhere, padding
    included, a transfer writes every element and zeroes only the positions that receive
    nothing (Transfer.padding)."""
    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    lays = layouts_for((13, 7), comm.Get_size())
    failures = []
    for (sn, (s, sm)), (dn, (d, dm)) in itertools.product(lays.items(), lays.items()):
        plan = transfer(s, sm, d, dm, comm)
        for seed in (SEED, SEED + 1):
            out = plan(generate_block(s, sm.coords(me), seed), comm, True)
            if not np.array_equal(out, generate_block(d, dm.coords(me), seed)):
                failures.append(f"rank {me} {sn}->{dn} seed {seed}: wrong values")
            out.fill(np.nan)
        if plan.padded != (plan.padding.size > 0):
            failures.append(f"rank {me} {sn}->{dn}: padded={plan.padded}, padding size differs")
    assert _failures(comm, failures) == []


@pytest.mark.mpi
def test_relabelled_transfers_are_exact():
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    shape = (11, 9)
    lays = layouts_for(shape, P)
    shuffled = tuple(int(r) for r in np.random.default_rng(5).permutation(P))
    failures = []
    for (sn, (s, sm)), (dn, (d, dm)) in itertools.product(lays.items(), lays.items()):
        best = relabel_layouts(s, sm, d, dm, itemsize=8)
        for ranks in (best.ranks, shuffled):
            block = generate_block(s, sm.coords(me), SEED)
            spy = _Recorder(comm)
            out = _transfer(spy, block, s, sm, d, dm, ranks, failures, f"{sn}->{dn} {ranks}")
            mine = ranks.index(me)  # the destination mesh rank this rank plays
            if not np.array_equal(out, generate_block(d, dm.coords(mine), SEED)):
                failures.append(f"rank {me} {sn}->{dn} ranks {ranks}: wrong values")
            if ranks == best.ranks:
                counts = exchange_counts(s, sm, d, dm, ranks)
                moved = 8 * int(counts.sum() - np.trace(counts))
                if moved != best.bytes_after:
                    failures.append(f"{sn}->{dn}: moved {moved} B, relabel said {best.bytes_after}")
    assert _failures(comm, failures) == []


@pytest.mark.mpi
def test_native_up_to_a_permutation_sends_nothing():
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    lays = layouts_for((13, 7), P)
    (s, sm), (d, dm) = lays["block"], lays["blocks_yx"]
    best = relabel_layouts(s, sm, d, dm)
    spy = _Recorder(comm)
    out = redistribute_between(
        generate_block(s, sm.coords(me), SEED), s, sm, d, dm, spy, best.ranks
    )
    ok = (
        spy.sent == []  # no Alltoallv at all: every rank copies locally
        and best.bytes_after == 0
        and np.array_equal(out, generate_block(d, dm.coords(best.ranks.index(me)), SEED))
    )
    assert comm.allreduce(int(not ok)) == 0


@pytest.mark.mpi
def test_a_move_that_changes_nothing_returns_the_block_itself():
    """Layouts that differ in notation only (block, and the 2-D blocks on a mesh that runs the
    other way, relabelled): every rank's block is its destination block as it is, so the move
    copies nothing, alone or batched with a move that does move (rows to cols). (With
    padding it copies: the destination's padding must be zero.)"""
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    lays = layouts_for((72, 72), P)  # divides on every grid of 1-9 ranks
    (s, sm), (d, dm) = lays["block"], lays["blocks_yx"]
    ranks = relabel_layouts(s, sm, d, dm).ranks
    same = transfer(s, sm, d, dm, comm, ranks)
    (r, rm), (c, cm) = lays["rows"], lays["cols"]
    moving = transfer(r, rm, c, cm, comm, ranks)
    block = generate_block(s, sm.coords(me), SEED)
    rows = generate_block(r, rm.coords(me), SEED + 1)
    want = generate_block(c, cm.coords(ranks.index(me)), SEED + 1)
    failures = []
    if same(block, comm) is not block:
        failures.append("a move that changes nothing copied the block")
    kept, moved = Batch.of([same, moving], me)((block, rows), comm)
    if kept is not block:
        failures.append("batched, a move that changes nothing copied the block")
    if not np.array_equal(moved, want):
        failures.append("batched beside one that changes nothing, rows -> cols is wrong")
    if P > 1 and moving.keeps_as_is(rows):
        failures.append("rows -> cols taken for a move that changes nothing")
    assert _failures(comm, failures) == []


@pytest.mark.mpi
def test_bad_input_raises_everywhere():
    comm = MPI.COMM_WORLD
    me, P = comm.Get_rank(), comm.Get_size()
    s, sm = user_layout("block", (8, 8), P)
    block = generate_block(s, sm.coords(me), SEED)
    d, dm = user_layout("rows", (8, 8), P)
    with pytest.raises(MeshError, match="not a permutation"):
        redistribute_between(block, s, sm, d, dm, comm, ranks=range(1, P + 1))
    other, om = user_layout("rows", (8, 8), P + 1)
    with pytest.raises(MeshError, match="the communicator"):
        redistribute_between(generate_block(other, om.coords(me), SEED), other, om, d, dm, comm)
    with pytest.raises(MeshError, match="must be the same ranks"):
        redistribute_between(block, s, sm, other, om, comm)
    with pytest.raises(LayoutError, match="differs from the source"):
        redistribute_between(block, s, sm, *user_layout("rows", (8, 9), P), comm)
    with pytest.raises(ValueError, match="does not match layout"):
        redistribute_between(block[:0], s, sm, d, dm, comm)
    assert comm.allreduce(1) == P  # nobody is stuck in a collective
