"""Redistribution between layouts on different meshes over the same ranks (COSTA's general case).

``src`` lives on ``src_mesh`` and ``dst`` on ``dst_mesh``, both meshes of the P ranks of one
communicator: rank r of the communicator is rank r of ``src_mesh`` and, unless ``ranks``
relabels the destination, rank r of ``dst_mesh`` (with ``ranks``, destination mesh rank d runs
on communicator rank ``ranks[d]``). One ``Alltoallv`` moves the data, with no metadata: every
rank computes both sides' counts and orders from the layouts, as ``redistribute`` does.

Who sends an element to a destination holder t: t itself when t already holds it in ``src``
(a local copy, so data in place never moves), else its primary source (the lowest holder).
layouts/counting.py counts the same for every pair of ranks without MPI (``exchange_counts``),
so the model can price a transfer and the relabelling can choose ``ranks``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from topology.mesh import AbstractMesh, MeshError

from . import runs
from .counting import comm_order, held_table, holds, placements
from .redistribute import _check_block, _logical, _mpi_type
from .strided import IndexCopy, copy_between, pairs_directly
from .tensorlayout import TensorLayout


@dataclass(frozen=True, eq=False)
class Transfer:
    """One rank's part of a redistribution, worked out once (COSTA's plan) and run any number
    of times: which elements of its source block go to which other rank, in send order, where
    each element it receives lands in its destination block, and which elements it keeps
    (copied from its source block straight into its destination block, never through MPI:
    MPICH's Alltoallv copies a rank's part to itself several times slower than NumPy does).
    ``local_only``: no rank sends another anything, so running it is that copy alone."""

    send: IndexCopy  # flat positions in the source block, in send order (to other ranks)
    sendcounts: np.ndarray  # elements to each communicator rank (to itself: the kept ones)
    recv: IndexCopy  # flat positions in the destination block, in receive order
    recvcounts: np.ndarray
    keep_from: IndexCopy  # flat positions in the source block of the elements kept
    keep_to: IndexCopy  # and where they land in the destination block, in the same order
    src_shape: tuple[int, ...]
    dst_shape: tuple[int, ...]
    local_only: bool
    moving: int  # elements this rank sends other ranks
    messages: int  # the other ranks it sends any
    # send and receive buffers by dtype, kept: fresh ones would page-fault on every run
    _buffers: dict = field(default_factory=dict, repr=False)

    def __call__(self, block: np.ndarray, comm, reuse: bool = False) -> np.ndarray:
        """This rank's destination block (zeros at padding) from its source ``block``. Where
        every peer's part is one run of the source block in order, the block is the send
        buffer; where every peer's part lands in one run of the destination, that is the
        receive buffer: nothing is packed or unpacked on that side (on one node MPICH copies a
        large message once, so a pass saved is a large share). (The kept elements are copied
        after the Alltoallv, not while it runs: MPICH's nonblocking one progressed only in its
        wait and took longer on our machines.) ``reuse``: see :meth:`start`."""
        if self.keeps_as_is(block):
            return block
        out, whole, flat = self.start(block, reuse)
        if self.local_only:
            self.keep(flat, whole)
            return out
        me = comm.Get_rank()
        sends, recvs = self._through_mpi(me)
        from_block = self._in_place("send", me)
        if from_block is not None and block.flags.c_contiguous:
            sendbuf, sends = flat, (sends[0], from_block)
        else:
            sendbuf = self.send.take(flat, self._buffer(block, 0))
        into_block = self._in_place("recv", me)
        if into_block is not None:
            recvbuf, recvs = whole, (recvs[0], into_block)
        else:
            recvbuf = self._buffer(block, 1)
        mpitype = _mpi_type(block.dtype)
        comm.Alltoallv([sendbuf, sends, mpitype], [recvbuf, recvs, mpitype])
        self.keep(flat, whole)
        if recvbuf is not whole:
            self.recv.put(whole, recvbuf)
        return out

    def start(
        self, block: np.ndarray, reuse: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(destination block, it flat, ``block`` flat), zeroed where padding receives nothing.
        ``reuse``: the block this transfer returned last time for the dtype, overwritten (as
        COSTA writes into the caller's matrix): no page faults for a fresh one (the kept half of
        a 3072^2 block at P = 2: 11.4 ms into a fresh block, 5.7 into one written before)."""
        if block.shape != self.src_shape:
            raise ValueError(f"block of shape {block.shape}, the transfer is from {self.src_shape}")
        if not reuse:
            out = (np.zeros if self.padded else np.empty)(self.dst_shape, dtype=block.dtype)
            return out, out.reshape(-1), block.reshape(-1)
        if (out := self._buffers.get(("out", block.dtype.str))) is None:
            out = self._buffers[("out", block.dtype.str)] = np.empty(self.dst_shape, block.dtype)
        self.clear_padding(out.reshape(-1))  # on the first reuse too: a run's warm-up
        return out, out.reshape(-1), block.reshape(-1)

    def keeps_as_is(self, block: np.ndarray) -> bool:
        """Whether ``block`` is its own destination block: no rank sends another anything and
        this one keeps every element where it is (layouts that differ only in their notation,
        or in how local memory is laid out), so the move returns it as it is, no copy."""
        memo = self.__dict__
        if "_as_is" not in memo:
            n = math.prod(self.dst_shape)
            memo["_as_is"] = (
                self.local_only
                and self.src_shape == self.dst_shape
                and all(_whole(c, n) for c in (self.keep_from, self.keep_to))
            )
        return memo["_as_is"] and block.shape == self.src_shape

    @property
    def padded(self) -> bool:
        """Whether some positions of the destination block receive nothing (padding, kept
        zero)."""
        return self.recv.size + self.keep_to.size < math.prod(self.dst_shape)

    @functools.cached_property
    def padding(self) -> IndexCopy:
        """The positions of the destination block that receive nothing, zeroed before each
        run into a block used before: zeroing the whole block instead was a quarter of the
        moves of 8192 x 1024 into 3 x 3 blocks at 9 ranks on 2 cores, on the ranks of the
        grid's last row and column, which the others then waited for."""
        starts = np.concatenate([self.recv.starts, self.keep_to.starts])
        ends = starts + np.concatenate([self.recv.lengths, self.keep_to.lengths])
        order = np.argsort(starts, kind="stable")
        gap_from = np.concatenate([[0], ends[order]])
        gap_to = np.concatenate([starts[order], [math.prod(self.dst_shape)]])
        gaps = gap_to > gap_from
        return IndexCopy.of_runs(gap_from[gaps], (gap_to - gap_from)[gaps], self.dst_shape[-1])

    def clear_padding(self, whole: np.ndarray) -> None:
        """Zero the padding of the flat destination block ``whole`` (used before: whoever used
        it may have written there); :attr:`padding` is worked out at the first call."""
        if self.padded:
            self.padding.fill(whole, 0)

    def keep(self, flat: np.ndarray, whole: np.ndarray) -> None:
        """Copy the kept elements of the source ``flat`` into the destination ``whole``."""
        direct = pairs_directly(self.keep_from, self.keep_to, flat.itemsize)
        copy_between(
            self.keep_from, flat, self.keep_to, whole, None if direct else self._buffer(flat, 2)
        )

    def _through_mpi(self, me: int) -> tuple:
        """The Alltoallv's (counts, displacements) to send and receive, worked out once."""
        memo = self.__dict__.setdefault("_specs", {})
        if me not in memo:
            memo[me] = (_counts(self.sendcounts, me), _counts(self.recvcounts, me))
        return memo[me]

    def _in_place(self, side: str, me: int) -> list[int] | None:
        """Where each peer's part starts in the block (the Alltoallv's displacements straight
        into it) if every part is one run in order, else None; worked out once."""
        memo = self.__dict__.setdefault("_in_place_at", {})
        if (side, me) not in memo:
            runs_of = getattr(self, side)
            counts, first = self._through_mpi(me)[side == "recv"]
            at = runs.at(runs_of.starts, runs_of.lengths, first, counts).tolist()
            one = runs.one_run_each(runs_of.lengths, first, counts)
            memo[(side, me)] = at if one else None
        return memo[(side, me)]

    def _buffer(self, block: np.ndarray, which: int) -> np.ndarray:
        """The kept send (0), receive (1) or kept-elements (2) buffer for ``block``'s dtype."""
        key = (block.dtype.str, which)  # made when first used
        if key not in self._buffers:
            size = (self.send, self.recv, self.keep_from)[which].size
            self._buffers[key] = np.empty(size, block.dtype)
        return self._buffers[key]


def transfer(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    comm,
    ranks: Sequence[int] | None = None,
) -> Transfer:
    """This rank's :class:`Transfer` from ``src`` on ``src_mesh`` to ``dst`` on ``dst_mesh``
    (a collective: the ranks agree whether any data moves between them). Who sends what is
    decided once per stretch of a block row that lives on the same ranks in both layouts
    (:class:`_Stretches`), not per element, and the positions are kept as runs, a stretch each
    (layouts/runs.py), not listed element by element. Per element, one rank's part of
    calibrate's 16 MiB moves at 16 ranks took 1.2-2.1 s and grew its peak RSS by 560-570 MiB;
    by stretches 0.14-0.17 s and 145-176 MiB (all 16 ranks' parts on 2 cores: 9.6-18 s against
    1.2-1.4 on one VM); as runs, on a slower VM, 0.005-0.05 s against 0.09-0.76 by stretches
    with positions listed (all 16 ranks: 0.06-0.52 s against 2.5-6.7)."""
    size, me = comm.Get_size(), comm.Get_rank()
    if src_mesh.size != size:
        raise MeshError(
            f"source mesh {src_mesh} has {src_mesh.size} ranks, the communicator {size}"
        )
    to_comm, from_comm = comm_order(ranks, size)
    splace, dplace = placements(src, src_mesh, dst, dst_mesh)
    held = held_table(splace, size)

    # send: every destination holder of my elements that gets them from me, by destination
    # (stable: each in row-major order, which held indices being increasing is the global one)
    out = _Stretches.of(src, src_mesh.coords(me), (splace, dplace))
    (sbase, sres), (dbase, dres) = out.located()
    primary = sbase + splace.primary[sres]
    off = dplace.holders[dres]
    real = off >= 0
    dest = to_comm[np.where(real, dbase[..., None] + off, 0)]
    has = holds(held, sbase[..., None], sres[..., None], dest)
    send = real & ((dest == me) | (~has & (primary == me)[..., None]))
    row, col, _ = np.nonzero(send)
    dest = dest[send]
    order = np.argsort(dest, kind="stable")
    sendcounts = np.bincount(dest, out.length[col], minlength=size).astype(np.int64)
    sent = out.as_runs(row[order], col[order])
    to_me = dest[order] == me

    # receive: the elements my destination block needs, by source, in row-major order
    dcoords = dst_mesh.coords(int(from_comm[me]))
    into = _Stretches.of(dst, dcoords, (splace,))
    if any(dcoords[lv] != 0 for lv in dst.partial):  # a partial-sum copy off 0 stays zero
        into = into.empty()
    ((rbase, rres),) = into.located()
    mine = holds(held, rbase, rres, np.full(rbase.shape, me))
    source = np.where(mine, me, rbase + splace.primary[rres]).ravel()
    order = np.argsort(source, kind="stable")
    row, col = np.divmod(order, into.length.size)
    weights = np.tile(into.length, len(into.row_at))  # each (row, stretch) pair's elements
    recvcounts = np.bincount(source, weights, minlength=size).astype(np.int64)
    got = into.as_runs(row, col)
    from_me = source[order] == me

    moving = int(sendcounts.sum() - sendcounts[me])
    # the same elements in the same order, once in send order and once in receive order
    src_row, dst_row = src.block_shape[-1], dst.block_shape[-1]
    return Transfer(
        send=IndexCopy.of_runs(*(r[~to_me] for r in sent), src_row),
        sendcounts=sendcounts,
        recv=IndexCopy.of_runs(*(r[~from_me] for r in got), dst_row),
        recvcounts=recvcounts,
        keep_from=IndexCopy.of_runs(*(r[to_me] for r in sent), src_row),
        keep_to=IndexCopy.of_runs(*(r[from_me] for r in got), dst_row),
        src_shape=tuple(src.block_shape),
        dst_shape=tuple(dst.block_shape),
        local_only=comm.allreduce(moving) == 0,
        moving=moving,
        messages=int(np.count_nonzero(sendcounts)) - int(sendcounts[me] > 0),
    )


@dataclass(frozen=True)
class _Stretches:
    """A rank's block (its non-padding elements) as block rows (every index of the leading
    dimensions, in row-major order) by stretches of the last dimension: runs of consecutive
    indices, consecutive in the block, over which no placement's rank or residue part
    changes, so that every element of one row's stretch lives on the same ranks in each."""

    row_at: np.ndarray  # (R,): each row's first position in the block
    start: np.ndarray  # (C,): each stretch's first position in its row
    length: np.ndarray  # (C,): its elements
    # per placement: the rows' and the stretches' (rank part, residue part)
    parts: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...]
    n_time: tuple[int, ...]

    @classmethod
    def of(cls, layout: TensorLayout, coords, places: tuple) -> _Stretches:
        idx, keep = _logical(layout, coords)
        at = [np.nonzero(k)[0] for k in keep]
        *lead, last = idx
        change = (np.diff(last) != 1) | (np.diff(at[-1]) != 1)
        for place in places:
            for part in (place.rank_part[-1], place.residue_part[-1]):
                change |= np.diff(part[last]) != 0
        first = np.concatenate(([0], np.flatnonzero(change) + 1)) if len(last) else last[:0]
        length = np.diff(np.append(first, len(last)))
        shape = layout.block_shape
        row_at = _product([a * math.prod(shape[d + 1 :]) for d, a in enumerate(at[:-1])])
        parts = tuple(
            (
                _product([p.rank_part[d][ix] for d, ix in enumerate(lead)]),
                _product([p.residue_part[d][ix] for d, ix in enumerate(lead)]),
                p.rank_part[-1][last[first]],
                p.residue_part[-1][last[first]],
            )
            for p in places
        )
        n_time = tuple(p.n_time for p in places)
        return cls(row_at, at[-1][first], length, parts, n_time)

    def empty(self) -> _Stretches:
        """No rows (what a rank that receives nothing lists)."""
        none = self.row_at[:0]
        parts = tuple((none, none, c, r) for _, _, c, r in self.parts)
        return replace(self, row_at=none, parts=parts)

    def located(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per placement, (R, C) base ranks and residues of every row's stretches."""
        return [
            (rb[:, None] + cb, (rr[:, None] + cr) % n)
            for (rb, rr, cb, cr), n in zip(self.parts, self.n_time, strict=True)
        ]

    def as_runs(self, row: np.ndarray, col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(starts, lengths) in the block of the stretches ``col`` of the rows ``row``, in
        that order (layouts/runs.py)."""
        return self.row_at[row] + self.start[col], self.length[col]


def _product(columns: list[np.ndarray]) -> np.ndarray:
    """Sum over every combination of one entry per array, flattened in C order (one entry,
    0, for no arrays: a 1-D block is one row)."""
    out = np.zeros((), np.int64)
    for c in columns:
        out = np.add.outer(out, c)
    return out.ravel()


def redistribute_between(
    block: np.ndarray,
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    comm,
    ranks: Sequence[int] | None = None,
) -> np.ndarray:
    """This rank's block in ``dst`` (zeros at padding) from its block in ``src`` (step 0):
    :func:`transfer` worked out and run once."""
    block = _check_block(block, src)
    return transfer(src, src_mesh, dst, dst_mesh, comm, ranks)(block, comm)


# -- checks ----------------------------------------------------------------------------------
def _whole(index: IndexCopy, n: int) -> bool:
    """Whether ``index`` lists positions 0 .. n - 1 in order."""
    return index.size == n and (n == 0 or (index.starts.size == 1 and index.starts[0] == 0))


def _counts(counts: np.ndarray, me: int) -> tuple[list[int], list[int]]:
    """(counts, displacements) as Alltoallv takes them, none to or from rank ``me`` itself
    (its elements are copied, not sent: Transfer.keep_from)."""
    counts = counts.copy()
    counts[me] = 0
    return counts.tolist(), np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()


__all__ = ["Transfer", "redistribute_between", "transfer"]
