"""End-to-end runs from the user's layouts: A and B redistributed into the algorithm's native
layouts (``redistribute_in``: one Alltoallv for both, layouts/batch.py, and the algorithm's
local set-up), the multiplication (``multiply``), C redistributed into the user's layout
(``redistribute_out``), each phase timed between barriers (the move out until its last rank is
done: bench.runner._slowest). With every layout native there is
no move and no extra barrier: the repetition is the multiplication alone, as before.

The algorithm's mesh is laid onto the job's ranks in the order that moves the fewest bytes
(layouts/endpoints.relabelling) unless relabelling is off: the mesh is built on a communicator
whose rank d is job rank ``ranks[d]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from layouts.endpoints import (
    Move,
    UserLayout,
    label,
    move_counts,
    moves,
    relabelling,
    user_layouts,
)
from layouts.relabel import Relabelling
from layouts.tensorlayout import LayoutError
from topology.hierarchy import subtrees_of

from .units import format_bytes

PHASES = ("redistribute_in", "multiply", "redistribute_out")


@dataclass(frozen=True)
class EndToEnd:
    """The user's layouts of a run, the moves they need and the rank order chosen."""

    users: Mapping[str, UserLayout]
    moves: tuple[Move, ...]
    relabelling: Relabelling
    relabel: bool  # whether the order was chosen (False: --no-relabel, mesh rank d on rank d)

    @property
    def native(self) -> bool:
        return not self.moves

    @property
    def ranks(self) -> tuple[int, ...]:
        return self.relabelling.ranks

    def move(self, matrix: str) -> Move | None:
        return next((m for m in self.moves if m.matrix == matrix), None)

    def bytes_sent(self, itemsize: int) -> dict[str, list[int]]:
        """{redistribute_in, redistribute_out: the bytes each job rank sends other ranks} by the
        model's counts (layouts.endpoints.move_counts, in this order): what a run's phases
        should count."""
        out = {p: np.zeros(len(self.ranks), np.int64) for p in (PHASES[0], PHASES[2])}
        for m in self.moves:
            counts = move_counts(m, self.ranks)
            out[PHASES[0] if m.into else PHASES[2]] += counts.sum(1) - np.diag(counts)
        return {p: (v * itemsize).tolist() for p, v in out.items()}

    def as_dict(self) -> dict:
        r = self.relabelling
        return {
            "layouts_given": {n: u.spec for n, u in self.users.items()},
            "layouts_user": {n: str(u) for n, u in self.users.items()},
            "layout_label": label(self.users),
            "relabel": {
                "enabled": self.relabel,
                "ranks": list(r.ranks),
                "bytes_before": r.bytes_before,
                "bytes_after": r.bytes_after,
                "bytes_saved": r.bytes_saved,
                "counted": r.counted,  # False: too many rank pairs to match, the order laid
                # set: no order could save more (too little to match: the order laid)
                "saved_at_most": r.saved_at_most,
            },
        }


def end_to_end(
    specs: Mapping[str, str],
    plan,
    itemsize: int,
    relabel: bool = True,
    tree=None,
    binding=None,
    comm=None,
) -> EndToEnd:
    """The end-to-end set-up for layout ``specs`` {"A", "B", "C": spec}; bad specs raise
    LayoutError or MeshError (one line). On a machine hierarchy ``tree`` (job rank t is tree
    rank t) the mesh starts where ``binding`` lays it (on the MN-Core tree a level binding; a
    cluster's RankOrder: mesh rank d on rank d) and the relabelling moves only whole subtrees
    (layouts/relabel.py), so the kernel's messages cross the levels they crossed. Every rank
    computes the same; given the job's communicator ``comm`` (every rank calls this, before
    any other collective), the relabelling, which counts what every pair of ranks exchanges,
    is worked out on its rank 0 alone and broadcast (:func:`_relabelling`)."""
    users = user_layouts(specs, plan.shape, plan.P)
    needed = tuple(moves(users, {n: (getattr(plan, n), plan.mesh) for n in "ABC"}))
    placed = None if binding is None else binding.tree_ranks(plan.mesh, tree)
    groups = subtrees_of(tree)
    chosen = _relabelling(needed, plan.P, itemsize, groups, placed, comm)
    if not relabel:  # keep the binding's order, but still say what it moves
        start = tuple(range(plan.P)) if placed is None else tuple(placed.tolist())
        chosen = Relabelling(start, chosen.bytes_before, chosen.bytes_before)
    return EndToEnd(users, needed, chosen, relabel)


def _relabelling(needed, P: int, itemsize: int, groups, placed, comm) -> Relabelling:
    """layouts.endpoints.relabelling of the moves ``needed``, on ``comm``'s rank 0 only where
    given, the others receiving it (or the LayoutError it raised, raised on every rank): on
    every rank it held, from `cols` at P = 4096 (65536^3, SUMMA 512x8), 1.0-1.6 s and 614 MiB
    of RSS per rank, a node's cores times that in all."""
    if comm is None or comm.Get_size() == 1:
        return relabelling(needed, P, itemsize, groups, placed=placed)
    found = None
    if comm.Get_rank() == 0:
        try:
            found = relabelling(needed, P, itemsize, groups, placed=placed)
        except LayoutError as err:  # too many rank pairs to count: every rank says so
            found = err
    found = comm.bcast(found, root=0)
    if isinstance(found, LayoutError):
        raise found
    return found


def unmatched_text(saved_at_most: int) -> str:
    """What `distmm run` and `predict` say where the relabelling kept the order laid unmatched
    (layouts.relabel.Relabelling.saved_at_most)."""
    return f"not relabelled: no order saves more than {format_bytes(saved_at_most)}"


def placed_binding(mesh, e2e):
    """The binding of an end-to-end run's ``mesh`` (an AbstractMesh) on a machine hierarchy:
    the RankOrder that puts native mesh rank d on job rank ``e2e.ranks[d]``, the order the
    relabelling chose from the tree binding's (its kernel's messages cross the levels the tree
    binding's do: the relabelling moves whole subtrees). The mesh's communicator is then
    :func:`job_comm`'s, rank d being native mesh rank d, as the moves out expect."""
    from topology.tree import RankOrder

    return RankOrder(mesh, None if e2e.relabelling.is_identity else tuple(e2e.ranks))


def job_comm(world, e2e: EndToEnd):
    """The communicator the algorithm's mesh is built on (rank d is job rank ranks[d])."""
    if e2e.relabelling.is_identity:
        return world
    return world.Split(0, e2e.ranks.index(world.Get_rank()))


class Pipeline:
    """One end-to-end repetition as a callable returning C in the user's layout; ``laps``
    keeps each phase's seconds per repetition and ``sent`` the bytes this rank sent in each
    redistribution phase (the same every repetition). Every repetition moves into the
    blocks the one before moved into (Transfer.start's ``reuse``): that one's state is dead."""

    def __init__(self, module, plan, mesh, world, e2e: EndToEnd, io, kernel, blocks: dict):
        self.module, self.plan, self.mesh, self.world = module, plan, mesh, world
        self.e2e, self.io, self.kernel, self.blocks = e2e, io, kernel, blocks
        from layouts.batch import Batch
        from layouts.direct import direct
        from layouts.transfer import transfer

        # worked out once, before the timed repetitions: A and B in over the job (rank t: tree
        # rank t), as one batch when both move; C out over the mesh's communicator (rank d: job
        # rank ranks[d])
        ins = [m for m in e2e.moves if m.into]
        self.inputs = "".join(m.matrix for m in ins)
        # (as Direct moves through shared memory where the ranks share one node: direct.py)
        dtype = blocks["A"].dtype
        parts = [transfer(m.src, m.src_mesh, m.dst, m.dst_mesh, world, e2e.ranks) for m in ins]
        self.batch = direct(Batch.of(parts, world.Get_rank()), world, dtype) if parts[1:] else None
        self.transfers = {
            m.matrix: (direct(t, world, dtype) if self.batch is None else t, world, None)
            for m, t in zip(ins, parts, strict=True)
        }
        inverse = [int(t) for t in np.argsort(e2e.ranks)]  # job rank -> native mesh rank
        for m in e2e.moves:
            if not m.into:
                out = transfer(m.src, m.src_mesh, m.dst, m.dst_mesh, mesh.comm, inverse)
                self.transfers[m.matrix] = (direct(out, mesh.comm, dtype), mesh.comm, e2e.ranks)
        self.laps: dict[str, list[float]] = {p: [] for p in PHASES}
        self.sent = dict.fromkeys(PHASES, 0)
        self.state = None

    def __call__(self):
        from mpi4py import MPI

        self.io.reset()
        t0 = MPI.Wtime()
        native = {name: self.blocks[name] for name in "AB"}
        if self.batch is not None:
            moved = tuple(native[name] for name in self.inputs)
            moved = self.io.redistribute(moved, self.batch, self.world, self.inputs, reuse=True)
            native.update(zip(self.inputs, moved, strict=True))
        else:
            native = {name: self._move(name, block) for name, block in native.items()}
        self.state = self.module.prepare(self.plan, native["A"], native["B"], self.mesh.coords)
        self.world.Barrier()
        t1 = MPI.Wtime()
        sent_in = self.io.bytes_sent
        c = self.module.multiply(self.plan, self.kernel, self.state)
        self.world.Barrier()
        t2 = MPI.Wtime()
        c = self._move("C", c)
        t3 = MPI.Wtime()
        for phase, seconds in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            self.laps[phase].append(seconds)
        self.sent["redistribute_in"] = sent_in
        self.sent["redistribute_out"] = self.io.bytes_sent - sent_in
        return c

    def close(self, c):
        """``c`` (the C a repetition returned) where it stays valid, and the shared memory the
        moves write into freed (a collective): every other block they returned, the
        algorithm's state included, is invalid afterwards."""
        from layouts.direct import Direct, release

        if isinstance(self.transfers.get("C", (None,))[0], Direct):
            c = c.copy()  # C moved out into the window
        release(self.batch)
        for move, _, _ in self.transfers.values():
            release(move)
        self.state = None
        return c

    def _move(self, matrix: str, block):
        if matrix not in self.transfers:
            return block
        plan, comm, peers = self.transfers[matrix]
        return self.io.redistribute(block, plan, comm, matrix, peers, reuse=True)


__all__ = [
    "PHASES",
    "EndToEnd",
    "Pipeline",
    "end_to_end",
    "job_comm",
    "placed_binding",
    "unmatched_text",
]
