"""Redistribution between layouts on different meshes over the same ranks (COSTA's general case).

``src`` lives on ``src_mesh`` and ``dst`` on ``dst_mesh``, both meshes of the P ranks of one
communicator: rank r of the communicator is rank r of ``src_mesh`` and, unless ``ranks``
relabels the destination, rank r of ``dst_mesh`` (with ``ranks``, destination mesh rank d runs
on communicator rank ``ranks[d]``). One ``Alltoallv`` moves the data, with no metadata: every
rank computes both sides' counts and orders from the layouts, as ``redistribute`` does.

Who sends an element to a destination holder t: t itself when t already holds it in ``src``
(a local copy, so data in place never moves), else its primary source (the lowest holder).
``exchange_counts`` computes the same counts for every pair of ranks without MPI, per
dimension (a rank is a sum of per-dimension parts), so the model can price a transfer and the
relabelling can choose ``ranks``; ``overlap_counts`` gives what each rank already holds of what
each destination rank needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from topology.mesh import AbstractMesh, MeshError

from .redistribute import (
    Placement,
    _check_block,
    _logical,
    _mpi_type,
    check_pair,
    placement,
)
from .strided import IndexCopy, copy_between
from .tensorlayout import TensorLayout

_CHUNK = 1 << 20  # key combinations handled at once by the counting (bounds its memory)


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
        the send order is the block itself, or the receive order the destination block, that
        block is the buffer and nothing is copied. (The kept elements are copied after the
        Alltoallv, not while it runs: MPICH's nonblocking one progressed only in its wait and
        took longer on our machines.) ``reuse``: see :meth:`start`."""
        out, whole, flat = self.start(block, reuse)
        if self.local_only:
            self.keep(flat, whole)
            return out
        if self.send.is_whole(block.size) and block.flags.c_contiguous:
            sendbuf = flat
        else:
            sendbuf = self.send.take(flat, self._buffer(block, 0))
        recvbuf = whole if self.recv.is_whole(whole.size) else self._buffer(block, 1)
        mpitype = _mpi_type(block.dtype)
        sends, recvs = self._through_mpi(comm.Get_rank())
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
        full = self.recv.size + self.keep_to.size == math.prod(self.dst_shape)
        if not reuse:
            out = (np.empty if full else np.zeros)(self.dst_shape, dtype=block.dtype)
        elif (out := self._buffers.get(("out", block.dtype.str))) is None:
            out = self._buffers[("out", block.dtype.str)] = np.zeros(self.dst_shape, block.dtype)
        elif not full:
            out.fill(0)  # the padding, which whoever used the block may have written
        return out, out.reshape(-1), block.reshape(-1)

    def keep(self, flat: np.ndarray, whole: np.ndarray) -> None:
        """Copy the kept elements of the source ``flat`` into the destination ``whole``."""
        copy_between(self.keep_from, flat, self.keep_to, whole, self._buffer(flat, 2))

    def _through_mpi(self, me: int) -> tuple:
        """The Alltoallv's (counts, displacements) to send and receive, worked out once."""
        memo = self.__dict__.setdefault("_specs", {})
        if me not in memo:
            memo[me] = (_counts(self.sendcounts, me), _counts(self.recvcounts, me))
        return memo[me]

    def _buffer(self, block: np.ndarray, which: int) -> np.ndarray:
        """The kept send (0), receive (1) or kept-elements (2) buffer for ``block``'s dtype."""
        key = block.dtype.str
        if key not in self._buffers:
            sizes = (self.send.size, self.recv.size, self.keep_from.size)
            self._buffers[key] = tuple(np.empty(n, block.dtype) for n in sizes)
        return self._buffers[key][which]


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
    to_comm, from_comm = _relabelling(ranks, size)
    splace, dplace = _check_pair(src, src_mesh, dst, dst_mesh)
    held = _held_table(splace, size)

    # send: every destination holder of my elements that gets them from me
    idx, keep = _logical(src, src_mesh.coords(me))
    pos = _positions(keep, src.block_shape)
    flat = np.ravel_multi_index(np.meshgrid(*idx, indexing="ij"), src.logical_shape).ravel()
    sbase, sres = splace.locate(idx)
    primary = sbase + splace.primary[sres]
    dest, real = dplace.holder_ranks(idx)
    dest = to_comm[np.where(real, dest, 0)]
    has = _holds(held, sbase[:, None], sres[:, None], dest)
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
    mine = _holds(held, rbase, rres, np.full(rbase.shape, me))
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


def exchange_counts(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    ranks: Sequence[int] | None = None,
) -> np.ndarray:
    """(P, P) elements: [s, t] = what communicator rank s sends rank t in
    ``redistribute_between`` with the same arguments (the diagonal is copied locally)."""
    P = src_mesh.size
    to_comm, _ = _relabelling(ranks, P)
    splace, dplace = _check_pair(src, src_mesh, dst, dst_mesh)
    held = _held_table(splace, P)
    out = np.zeros(P * P, np.int64)
    for sbase, sres, dbase, dres, count in _keys(src, splace, dplace):
        dh = dplace.holders[dres]
        real = dh >= 0
        t = to_comm[np.where(real, dbase[:, None] + dh, 0)]
        has = _holds(held, sbase[:, None], sres[:, None], t)
        source = np.where(has, t, (sbase + splace.primary[sres])[:, None])
        np.add.at(out, (source * P + t)[real], np.broadcast_to(count[:, None], t.shape)[real])
    return out.reshape(P, P)


def overlap_counts(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> tuple[np.ndarray, np.ndarray]:
    """(H, needed): H[s, d] elements source rank s holds in ``src`` that destination mesh rank
    d needs in ``dst``; needed[d] the elements rank d needs (padding and P@ copies off
    coordinate 0 need nothing). Laid on communicator ranks ``ranks``, the transfer moves
    ``needed.sum() - sum_d H[ranks[d], d]`` elements."""
    P = src_mesh.size
    s, d, count, needed = overlap_pairs(src, src_mesh, dst, dst_mesh)
    H = np.zeros((P, P), np.int64)
    H[s, d] = count
    return H, needed


def overlap_pairs(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`overlap_counts` sparse: (s, d, count, needed), the nonzero entries of H (each
    pair once, sorted by s * P + d) and needed; no P x P array, for large P."""
    P = src_mesh.size
    splace, dplace = _check_pair(src, src_mesh, dst, dst_mesh)
    pairs, counts = [], []
    needed = np.zeros(P, np.int64)
    for sbase, sres, dbase, dres, count in _keys(src, splace, dplace):
        sh, dh = splace.holders[sres], dplace.holders[dres]
        d = dbase[:, None] + dh
        w = np.broadcast_to(count[:, None], d.shape)
        needed += np.bincount(d[dh >= 0], w[dh >= 0], minlength=P).astype(np.int64)
        for k in range(sh.shape[1]):
            real = (sh[:, k] >= 0)[:, None] & (dh >= 0)
            pairs.append(((sbase + sh[:, k])[:, None] * P + d)[real])
            counts.append(w[real])
    return (*summed_pairs(pairs, counts, P), needed)


def summed_pairs(keys: list, counts: list, P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sources, destinations, counts) of the pairs ``src * P + dst`` in the arrays ``keys``,
    each pair once, in order, with its ``counts`` summed (int64)."""
    pair, inverse = unique_inverse(np.concatenate(keys))
    total = np.bincount(inverse, np.concatenate(counts), minlength=pair.size)
    return pair // P, pair % P, np.rint(total).astype(np.int64)


# -- checks ----------------------------------------------------------------------------------
def _relabelling(ranks: Sequence[int] | None, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(to_comm, from_comm): destination mesh rank -> communicator rank, and back."""
    if ranks is None:
        ident = np.arange(size, dtype=np.int64)
        return ident, ident
    to_comm = np.asarray(ranks, dtype=np.int64).ravel()
    if to_comm.size != size or not np.array_equal(np.sort(to_comm), np.arange(size)):
        raise MeshError(f"ranks {list(map(int, to_comm))} is not a permutation of 0..{size - 1}")
    return to_comm, np.argsort(to_comm)


def _check_pair(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> tuple[Placement, Placement]:
    return check_pair(src, src_mesh, dst, dst_mesh), placement(dst, dst_mesh)


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


# -- who holds what --------------------------------------------------------------------------
def _held_table(place: Placement, size: int) -> np.ndarray:
    """(n_time, P) bool: [residue, offset] whether base + offset holds an element of residue."""
    table = np.zeros((place.n_time, size), dtype=bool)
    for r, row in enumerate(place.holders):
        table[r, row[row >= 0]] = True
    return table


def _holds(table: np.ndarray, base, res, rank) -> np.ndarray:
    """Whether ``rank`` holds (in the source) the elements at ``base``/``res`` (broadcast)."""
    off = rank - base
    ok = (off >= 0) & (off < table.shape[1])
    return ok & table[res, np.where(ok, off, 0)]


def unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(keys, return_inverse=True) for 1-D ``keys``, by a stable sort: the keys come
    in sorted runs (pairs by block, moves one after another), which it merges where np.unique's
    quicksort does not notice them (overlaps at P = 8192: 1.75 times faster)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    first = np.empty(ordered.size, bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(ordered.size, np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


def _unique_rows(parts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(parts, axis=0) for non-negative int rows, with each one's summed ``weights``
    (int64): each row packed into one integer first (a 1-D unique sorts many times faster)."""
    radix = parts.max(axis=0) + 1
    if float(np.prod(radix.astype(float))) >= 2**62:
        keys, inverse = np.unique(parts, axis=0, return_inverse=True)
    else:
        packed, inverse = unique_inverse(np.ravel_multi_index(parts.T, radix))
        keys = np.stack(np.unravel_index(packed, radix), axis=1)
    counts = np.bincount(inverse.ravel(), weights, minlength=len(keys))
    return keys.astype(np.int64), np.rint(counts).astype(np.int64)


def _runs(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, lengths): the equal columns' values as (n, len(columns)) rows, run-length
    encoded (layouts are blocks: a dimension of 65536 elements is a few hundred runs)."""
    change = np.zeros(len(columns[0]) - 1, bool)
    for c in columns:
        change |= c[1:] != c[:-1]
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    lengths = np.diff(np.append(starts, len(columns[0])))
    return np.stack([c[starts] for c in columns], axis=1), lengths


def _keys(src: TensorLayout, splace: Placement, dplace: Placement):
    """Yield (src base rank, src residue, dst base rank, dst residue, element count) arrays
    over the logical elements, grouped: per dimension the distinct (src rank part, src
    residue part, dst rank part, dst residue part) tuples, combined across dimensions."""
    per_dim = []
    for d, n in enumerate(src.logical_shape):
        parts = [p[d][:n] for p in (splace.rank_part, splace.residue_part)]
        parts += [p[d][:n] for p in (dplace.rank_part, dplace.residue_part)]
        per_dim.append(_unique_rows(*_runs(parts)))
    keys, counts = per_dim[-1]
    for k, c in reversed(per_dim[1:-1]):  # the inner dimensions, fully combined
        keys = (k[:, None, :] + keys[None, :, :]).reshape(-1, 4)
        counts = np.outer(c, counts).ravel()
    first, first_counts = (
        per_dim[0] if len(per_dim) > 1 else (np.zeros((1, 4), np.int64), np.ones(1, np.int64))
    )
    step = max(1, _CHUNK // max(1, len(keys)))
    for lo in range(0, len(first), step):
        k = (first[lo : lo + step, None, :] + keys[None, :, :]).reshape(-1, 4)
        c = np.outer(first_counts[lo : lo + step], counts).ravel()
        yield k[:, 0], k[:, 1] % splace.n_time, k[:, 2], k[:, 3] % dplace.n_time, c


__all__ = [
    "Transfer",
    "exchange_counts",
    "overlap_counts",
    "overlap_pairs",
    "summed_pairs",
    "redistribute_between",
    "transfer",
]
