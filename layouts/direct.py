"""Redistributions among the ranks of one node, written straight into the destination blocks.

On one node MPICH 5 moves a large message in a single copy (cross-memory attach), so MPI's own
all-to-all passes over the bytes once, while a move by ``Alltoallv`` packs, exchanges and
unpacks them: three or four passes, 0.33 of the all-to-all's speed on our VM
(scripts/redistribution_throughput.py). Here every rank's destination blocks live in a window
of MPI-3 shared memory (``MPI_Win_allocate_shared``) and each rank writes the elements it sends
straight into its peers' blocks by the same strided copies that pack them: one pass, like the
kept part's copy. Where in a peer's block each element lands is exchanged once, when the move
is set up (the runs of positions each receiver lists for each sender: layouts/runs.py), so a
repetition exchanges no metadata. Two fences bracket the writes: MPI's barrier, or where the
ranks outnumber the cores a barrier whose waiting ranks sleep (:class:`SemaphoreFence`).

Only where every rank of the communicator shares one node's memory, with room for the blocks in
its /dev/shm, and the blocks are reused (the end-to-end pipeline and calibrate: a returned block
is overwritten by the next call); elsewhere the Transfer (or Batch) runs its ``Alltoallv``.
``DISTMM_DIRECT=0`` switches it off.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from .strided import IndexCopy, copy_between, pairs_directly
from .transfer import Transfer

ALIGN = 64  # bytes: each destination block starts on a cache line of the window
SHM = "/dev/shm"
SEM_BYTES = 64  # room for one POSIX semaphore (glibc's sem_t: 32 bytes), a cache line each


class SemaphoreFence:
    """A barrier of one node's ranks on three process-shared POSIX semaphores held in the
    window: the ranks post their arrival to rank 0, which, once all have, releases them through
    one of two semaphores taken in turn (a rank that is through cannot take a release meant
    for a rank still waiting). A waiting rank sleeps in the kernel until the post it waits for
    wakes it, leaving its core to the ranks still copying. MPI's barrier polls and yields
    instead, and with more ranks than cores, in some jobs and then in all of their barriers,
    the scheduler goes on running the yielding rank: each barrier takes milliseconds. Polling
    MPI's Ibarrier asleep between tests was no cure (stop 71): a sleeping rank does not move
    the barrier's rounds on. On the 2-core VM (results/vm-2c-zen3/fences_s72_*.txt, jobs taking
    turns) tesseract's moves in and out from block took a median 11.7 and 4.8 ms at 16 ranks
    with this fence, none of 12 jobs slow, against 27.6 and 13.0 with MPI's, 3 and 4 of 12
    jobs over twice that; at 8 ranks 5.9 and 2.7 against 7.3 and 3.6; at 4 alike (2.5 and 0.8
    ms), 2 of 12 jobs slow with MPI's and 1 with this (the first, its GEMMs slow too). Idle
    (scripts/fence_latency.py) it crosses in 24-45 us at 4 ranks and 151-167 at 16, MPI's
    barrier in 42-44 and 411-478."""

    def __init__(self, libc, address: int, me: int, size: int):
        self.libc, self.me, self.size = libc, me, size
        self.arrived, *self.released = (ctypes.c_void_p(address + i * SEM_BYTES) for i in range(3))
        self.turn = 0

    @classmethod
    def of(cls, win, comm):
        """The fence in the SEM_BYTES * 3 bytes at the end of rank 0's part of ``win`` (which
        holds them), initialised there, where the node's ranks outnumber the cores they may
        run on (``DISTMM_FENCE=sem``: always; ``mpi``: never; else that rule) and glibc's
        semaphores are at hand; else None: MPI's barrier, 4.6 us idle against 15.8 with a
        core per rank (2 ranks on the 2-core VM: scripts/fence_latency.py). A collective."""
        from mpi4py import MPI

        libc = _libc()
        if not comm.allreduce(libc is not None, op=MPI.LAND):
            return None
        me, size = comm.Get_rank(), comm.Get_size()
        oversubscribed = size > node_cpus(comm)
        wanted = {"sem": True, "mpi": False}.get(os.environ.get("DISTMM_FENCE"), oversubscribed)
        if not comm.allreduce(wanted, op=MPI.LAND):
            return None
        memory, _ = win.Shared_query(0)
        address = np.frombuffer(memory, np.uint8).ctypes.data + len(memory) - 3 * SEM_BYTES
        fence = cls(libc, address, me, size)
        ok = me != 0 or all(libc.sem_init(s, 1, 0) == 0 for s in (fence.arrived, *fence.released))
        return fence if comm.allreduce(ok, op=MPI.LAND) else None

    def __call__(self) -> None:
        release = self.released[self.turn]
        self.turn ^= 1
        if self.me == 0:
            for _ in range(self.size - 1):
                self._wait(self.arrived)
            for _ in range(self.size - 1):
                self.libc.sem_post(release)
        else:
            self.libc.sem_post(self.arrived)
            self._wait(release)

    def _wait(self, sem) -> None:
        while self.libc.sem_wait(sem) != 0:  # EINTR: a signal woke it
            if ctypes.get_errno() != errno.EINTR:
                raise OSError(ctypes.get_errno(), "sem_wait")


def node_cpus(comm) -> int:
    """How many CPUs the ranks of ``comm`` may run on together (their affinities' union; Linux).
    A collective."""
    return len(set().union(*comm.allgather(os.sched_getaffinity(0))))


@functools.cache
def _libc():
    """The C library, where it has process-shared semaphores (glibc on Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sem_init, libc.sem_wait, libc.sem_post  # noqa: B018
    except (OSError, AttributeError):
        return None
    for f in (libc.sem_wait, libc.sem_post):
        f.argtypes = [ctypes.c_void_p]
    libc.sem_init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint]
    return libc


@dataclass(frozen=True, eq=False)
class Direct:
    """``parts`` (Transfers over one communicator) run by writing into shared memory; reads
    like the Transfer or Batch it stands for (``single``: it stands for one Transfer), so the
    communication layer counts and emulates it alike."""

    parts: tuple[Transfer, ...]
    single: bool
    win: object  # the MPI.Win holding every rank's destination blocks
    mine: tuple[np.ndarray, ...]  # this rank's destination block of each part (in the window)
    # per part: (peer's flat block, positions in my source block, positions in the peer's)
    pushes: tuple[tuple[tuple[np.ndarray, IndexCopy, IndexCopy], ...], ...]
    sendcounts: np.ndarray
    recvcounts: np.ndarray
    moving: int
    messages: int
    fence: SemaphoreFence | None  # None: MPI's barrier
    _buffer: dict = field(default_factory=dict, repr=False)

    def __call__(self, blocks, comm, reuse: bool = True):
        """Each part's destination block from its source block in ``blocks`` (one array where
        ``single``). The blocks are in the window, so the next call overwrites them whatever
        ``reuse`` says (it is there to be called as a Transfer is)."""
        blocks = (blocks,) if self.single else tuple(blocks)
        for part, block, out in zip(self.parts, blocks, self.mine, strict=True):
            if block.shape != part.src_shape or block.dtype != out.dtype:
                raise ValueError(
                    f"block of {block.dtype} {block.shape}: the move is of {out.dtype} "
                    f"{part.src_shape}"
                )
            part.clear_padding(out.reshape(-1))
        self._fence(comm)  # every peer's block is free to be written
        for part, block, out, pushes in zip(
            self.parts, blocks, self.mine, self.pushes, strict=True
        ):
            flat, buf = block.reshape(-1), self._scratch(block.dtype)
            for target, src, dst in pushes:
                copy_between(src, flat, dst, target, buf[: src.size] if buf.size else None)
            part.keep(flat, out.reshape(-1))
        self._fence(comm)  # every element has landed
        return self.mine[0] if self.single else self.mine

    def free(self) -> None:
        """Release the window (collective); the blocks returned are invalid afterwards. The
        fence's semaphores go with it (glibc's sem_destroy does nothing)."""
        self.win.Unlock_all()
        self.win.Free()

    def _fence(self, comm) -> None:
        self.win.Sync()
        if self.fence is None:
            comm.Barrier()
        else:
            self.fence()
        self.win.Sync()

    def _scratch(self, dtype) -> np.ndarray:
        """A buffer for the pushes whose two sides are not one strided copy per stretch
        (layouts.strided.pairs_directly); empty where there are none."""
        if dtype.str not in self._buffer:
            size = max(
                (
                    src.size
                    for pushes in self.pushes
                    for _, src, dst in pushes
                    if not pairs_directly(src, dst, dtype.itemsize)
                ),
                default=0,
            )
            self._buffer[dtype.str] = np.empty(size, dtype)
        return self._buffer[dtype.str]


def release(move) -> None:
    """Free what :func:`direct` made for ``move`` (a collective; a no-op for anything else)."""
    if isinstance(move, Direct):
        move.free()


def _room_for(nbytes: int, where: str | None = None) -> bool:
    """Whether the node's shared memory (``where``, a tmpfs: 64 MiB in a default Docker
    container) has twice ``nbytes`` free. MPICH maps its windows there, and a window larger
    than what is free is not refused: it kills the job with SIGBUS when first written."""
    try:
        st = os.statvfs(where or SHM)
    except OSError:  # no such file system: MPICH allocates elsewhere
        return True
    return 2 * nbytes <= st.f_bavail * st.f_frsize


def on_one_node(comm) -> bool:
    """Whether every rank of ``comm`` shares this node's memory (a collective)."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    alone = node.Get_size() == comm.Get_size()
    node.Free()
    return alone


def direct(move, comm, dtype):
    """``move`` (a Transfer, or a Batch of them) as a :class:`Direct` move of ``dtype`` blocks
    where one can run, else ``move`` itself (ranks on several nodes, ``DISTMM_DIRECT=0``, or
    nothing to send). A collective; :func:`release` frees what it made."""
    from mpi4py import MPI

    single = isinstance(move, Transfer)
    parts = (move,) if single else tuple(move.parts)
    if move.local_only or os.environ.get("DISTMM_DIRECT", "1") == "0" or not on_one_node(comm):
        return move
    itemsize = np.dtype(dtype).itemsize
    sizes = [math.prod(p.dst_shape) * itemsize for p in parts]
    offsets = np.concatenate(([0], np.cumsum([-(-s // ALIGN) * ALIGN for s in sizes])))
    if not comm.allreduce(_room_for(comm.allreduce(int(offsets[-1]))), op=MPI.LAND):
        return move
    me = comm.Get_rank()
    extra = 3 * SEM_BYTES if me == 0 else 0
    win = MPI.Win.Allocate_shared(int(offsets[-1]) + extra, 1, comm=comm)
    win.Lock_all(MPI.MODE_NOCHECK)
    segments = [np.frombuffer(win.Shared_query(r)[0], np.uint8) for r in range(comm.Get_size())]

    def block(rank: int, i: int) -> np.ndarray:
        raw = segments[rank][offsets[i] : offsets[i] + sizes[i]]
        return raw.view(dtype).reshape(parts[i].dst_shape)

    mine = tuple(block(me, i) for i in range(len(parts)))
    for out in mine:
        out.fill(0)  # touched once here, not in the first timed repetition
    pushes = []
    for i, part in enumerate(parts):
        (scounts, sdispl), (rcounts, rdispl) = part._through_mpi(me)
        # where the elements each peer sends me land in my block (runs, in its send order)
        parts_for = zip(rdispl, rcounts, strict=True)
        landing = comm.alltoall([part.recv.runs_in(d, d + n) if n else None for d, n in parts_for])
        rows = part.src_shape[-1], part.dst_shape[-1]
        after_me = sorted(range(len(scounts)), key=lambda r: (r - me) % len(scounts))
        pushes.append(
            tuple(
                (
                    block(r, i).reshape(-1),
                    part.send.part(sdispl[r], sdispl[r] + scounts[r], rows[0]),
                    IndexCopy.of_runs(*landing[r], rows[1]),
                )
                for r in after_me
                if scounts[r]
            )
        )
    return Direct(
        parts=parts,
        single=single,
        win=win,
        mine=mine,
        pushes=tuple(pushes),
        sendcounts=move.sendcounts,
        recvcounts=move.recvcounts,
        moving=move.moving,
        messages=move.messages,
        fence=SemaphoreFence.of(win, comm),
    )


__all__ = ["Direct", "SemaphoreFence", "direct", "node_cpus", "on_one_node", "release"]
