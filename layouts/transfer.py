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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from topology.mesh import AbstractMesh, MeshError

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
        elif (out := self._buffers.get(("out", block.dtype.str))) is None:
            out = self._buffers[("out", block.dtype.str)] = np.zeros(self.dst_shape, block.dtype)
        elif self.padded:
            out.fill(0)  # the padding, which whoever used the block may have written
        return out, out.reshape(-1), block.reshape(-1)

    def keeps_as_is(self, block: np.ndarray) -> bool:
        """Whether ``block`` is its own destination block: no rank sends another anything and
        this one keeps every element where it is (layouts that differ only in their notation,
        or in how local memory is laid out), so the move returns it as it is, no copy."""
        memo = self.__dict__
        if "_as_is" not in memo:
            whole = np.arange(math.prod(self.dst_shape))
            memo["_as_is"] = (
                self.local_only
                and self.src_shape == self.dst_shape
                and np.array_equal(self.keep_from.index, whole)
                and np.array_equal(self.keep_to.index, whole)
            )
        return memo["_as_is"] and block.shape == self.src_shape

    @property
    def padded(self) -> bool:
        """Whether some positions of the destination block receive nothing (padding, kept
        zero)."""
        return self.recv.size + self.keep_to.size < math.prod(self.dst_shape)

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
            index = getattr(self, side).index
            counts, first = self._through_mpi(me)[side == "recv"]
            steps = np.diff(index) == 1
            steps[[f - 1 for f, n in zip(first, counts, strict=True) if n and f]] = True  # seams
            at = [int(index[f]) if n else 0 for f, n in zip(first, counts, strict=True)]
            memo[(side, me)] = at if steps.all() else None
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
    (a collective: the ranks agree whether any data moves between them)."""
    size, me = comm.Get_size(), comm.Get_rank()
    if src_mesh.size != size:
        raise MeshError(
            f"source mesh {src_mesh} has {src_mesh.size} ranks, the communicator {size}"
        )
    to_comm, from_comm = comm_order(ranks, size)
    splace, dplace = placements(src, src_mesh, dst, dst_mesh)
    held = held_table(splace, size)

    # send: every destination holder of my elements that gets them from me
    idx, keep = _logical(src, src_mesh.coords(me))
    pos = _positions(keep, src.block_shape)
    flat = np.ravel_multi_index(np.meshgrid(*idx, indexing="ij"), src.logical_shape).ravel()
    sbase, sres = splace.locate(idx)
    primary = sbase + splace.primary[sres]
    dest, real = dplace.holder_ranks(idx)
    dest = to_comm[np.where(real, dest, 0)]
    has = holds(held, sbase[:, None], sres[:, None], dest)
    send = real & ((dest == me) | (~has & (primary == me)[:, None]))
    rows = np.nonzero(send)[0]
    dest = dest[send]
    order = np.lexsort((flat[rows], dest))

    # receive: the elements my destination block needs, by source
    dcoords = dst_mesh.coords(int(from_comm[me]))
    ridx, rkeep = _logical(dst, dcoords)
    if any(dcoords[lv] != 0 for lv in dst.partial):  # a partial-sum copy off 0 stays zero
        ridx = tuple(ix[:0] for ix in ridx)
        rkeep = tuple(np.zeros_like(m) for m in rkeep)
    rbase, rres = splace.locate(ridx)
    mine = holds(held, rbase, rres, np.full(rbase.shape, me))
    source = np.where(mine, me, rbase + splace.primary[rres])

    sendcounts = np.bincount(dest, minlength=size)
    recvcounts = np.bincount(source, minlength=size)
    moving = int(sendcounts.sum() - sendcounts[me])
    # the same elements in the same order, once in send order and once in receive order
    sending, kept_from = _split(pos[rows][order], sendcounts, me)
    receiving, kept_to = _split(
        _positions(rkeep, dst.block_shape)[np.argsort(source, kind="stable")], recvcounts, me
    )
    src_row, dst_row = src.block_shape[-1], dst.block_shape[-1]
    return Transfer(
        send=IndexCopy.of(sending, src_row),
        sendcounts=sendcounts,
        recv=IndexCopy.of(receiving, dst_row),
        recvcounts=recvcounts,
        keep_from=IndexCopy.of(kept_from, src_row),
        keep_to=IndexCopy.of(kept_to, dst_row),
        src_shape=tuple(src.block_shape),
        dst_shape=tuple(dst.block_shape),
        local_only=comm.allreduce(moving) == 0,
        moving=moving,
        messages=int(np.count_nonzero(sendcounts)) - int(sendcounts[me] > 0),
    )


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
def _positions(keep: tuple[np.ndarray, ...], shape) -> np.ndarray:
    """Flat positions in a block of ``shape`` of the elements the per-dim masks select, in
    row-major order (the order ``block[np.ix_(*keep)].ravel()`` lists them)."""
    picked = [np.nonzero(k)[0] for k in keep]
    return np.ravel_multi_index(np.meshgrid(*picked, indexing="ij"), shape).ravel()


def _counts(counts: np.ndarray, me: int) -> tuple[list[int], list[int]]:
    """(counts, displacements) as Alltoallv takes them, none to or from rank ``me`` itself
    (its elements are copied, not sent: Transfer.keep_from)."""
    counts = counts.copy()
    counts[me] = 0
    return counts.tolist(), np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()


def _split(index: np.ndarray, counts: np.ndarray, me: int) -> tuple[np.ndarray, np.ndarray]:
    """(the positions for the other ranks, those for rank ``me``) of ``index``, laid out by
    rank with ``counts[r]`` positions for rank r."""
    start = int(counts[:me].sum())
    end = start + int(counts[me])
    return np.concatenate([index[:start], index[end:]]), index[start:end]


__all__ = ["Transfer", "redistribute_between", "transfer"]
