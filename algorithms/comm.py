"""The communication layer: the only place that moves data, counts bytes and records the schedule.

Algorithms are plain SPMD loops over a :class:`Comm`. Every collective, shift and GEMM goes
through it, so the schedule it records (:class:`Event`, algorithms/events.py with the byte
convention) is exactly what ran, and the cost model reads that schedule instead of a second
description of the algorithm.

Modes: ``execute=True`` moves data over MPI. ``execute=False`` ("compute-only") runs the same
loop with every communication a no-op that returns buffers of the right shape, so timing it
measures the local GEMMs alone on the same ranks. ``execute=False, compute=False`` ("symbolic")
skips the GEMMs too: the loop only records its schedule, with no MPI at all, for the cost model.
A symbolic Comm touches no buffer memory: its buffers and results are placeholders
(algorithms/symbolic.py) and it skips ``add`` (local arithmetic): its cost is size-independent.

Non-blocking operations return a :class:`Pending`; its ``wait()`` appends a ``wait`` event naming
the operation. On a machine hierarchy (a mesh with a binding, topology/tree.py) events carry
their levels; with emulated ``links`` (LinkModel.emulated) operations are held to the links' time.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence

import numpy as np

from topology import Mesh

from .events import COMM_KINDS, Event, make_event
from .levels import LinkClock, TreeLevels, hold_until
from .local_gemm import polled_gemm
from .pending import Pending
from .symbolic import placeholder, reshaped


class Comm:
    """Communication (and GEMM) for one rank on a mesh; see the module docstring."""

    def __init__(
        self,
        mesh: Mesh,
        *,
        execute: bool = True,
        compute: bool = True,
        tracer=None,
        links=None,
        fault=None,
    ):
        self.mesh = mesh
        self.fault = fault  # called with each event kind before it is recorded (bench/faults.py)
        self.observer = None  # called with each event once recorded (the model's pricing walk)
        self.binding = getattr(mesh, "binding", None)
        self.tree = getattr(mesh, "tree", None)
        self.links = links  # topology.links.LinkModel
        self.levels = TreeLevels(mesh) if self.binding is not None else None
        emulate = links is not None and links.emulated and execute
        self.clock = LinkClock(self.levels, links) if emulate else None
        self.execute = execute
        self.compute = compute  # False with execute=False: record the schedule only (the model)
        self.tracer = tracer
        self.events: list[Event] = []
        self.step: int | None = None
        self.symbolic = not execute and not compute
        self._scratch: dict = {}
        self._groups: dict = {}  # axes -> (axes tuple, group size, this rank's rank in the group)

    # -- bookkeeping ------------------------------------------------------------------------
    def scratch(self, name: str, like: np.ndarray) -> np.ndarray:
        """A work buffer shaped like ``like``, allocated once per (name, shape, dtype) and
        reused by later multiplications: fresh buffers would page-fault on every run."""
        key = (name, like.shape, like.dtype.str)
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = self.zeros(like.shape, like.dtype)
        return buf

    def empty(self, shape, dtype) -> np.ndarray:
        """A buffer whose contents the loop overwrites (a placeholder when symbolic)."""
        return placeholder(shape, dtype) if self.symbolic else np.empty(shape, dtype=dtype)

    def zeros(self, shape, dtype) -> np.ndarray:
        """A zeroed buffer (a placeholder when symbolic) in pages of its own: np.zeros maps
        the kernel's one zero page until written, and a compute-only run, where no message
        writes its receive buffers, multiplied from that one page (4096x2048 @ 2048x64 float32,
        one thread: 12.1-12.5 ms so, 15.0-16.0 in pages of its own or with random data), so
        its compute time, and what the report says a run spent outside its GEMMs, were short."""
        if self.symbolic:
            return placeholder(shape, dtype)
        out = np.empty(shape, dtype=dtype)
        out.fill(0)
        return out

    def add(self, out: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``out += x``, local arithmetic between operations: skipped when nothing is computed
        (it records no event; the schedules have always left it out)."""
        if self.compute:
            out += x
        return out

    def copy(self, out: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``out[...] = x``, a local copy between operations, recorded (the model prices it)."""
        with self._copying(x.nbytes):
            if self.compute:
                out[...] = x
        return out

    def _copying(self, nbytes: int):
        """Record a local copy of ``nbytes`` and open its trace span (so a trace times it)."""
        self._record(kind="copy", nbytes=nbytes)
        return self.span("copy", bytes=nbytes)

    def reset(self) -> None:
        self.events = []
        self.step = None
        if self.clock is not None:
            self.clock.reset()

    @property
    def bytes_sent(self) -> int:
        return sum(e.sent for e in self.events)

    @property
    def messages(self) -> int:
        return sum(e.messages for e in self.events)

    def _record(self, **kw) -> Event:
        if self.fault is not None:
            self.fault(kw["kind"])
        if self.binding is not None and kw["kind"] in COMM_KINDS:
            kw.update(
                self.levels.annotate(
                    kw["kind"], kw["axes"], kw["group"], kw["sent"], kw.pop("disp", 0)
                )
            )
        kw.pop("disp", None)
        kw["step"] = self.step
        ev = make_event(kw)
        self.events.append(ev)
        if self.observer is not None:
            self.observer(ev)
        return ev

    def _hold(self, ev: Event, started: float, disp: int = 0) -> float:
        """Link emulation: the perf_counter time the operation may not complete before (or 0)."""
        return self.clock.hold(ev, started, disp) if self.clock is not None else 0.0

    def redistribute(self, block, transfer, comm, matrix: str = "", peers=None, reuse=False):
        """``block`` moved by a layouts.transfer.Transfer over ``comm``, or a tuple of blocks
        by a layouts.batch.Batch (all in one Alltoallv): one alltoallv event, held to the links'
        time under emulation (``peers``: see LinkClock.exchange); ``reuse``: into the
        destination the transfer returned last time (layouts.transfer.Transfer.start)."""
        itemsize = (block[0] if isinstance(block, tuple) else block).itemsize
        with self.span("redistribute", matrix=matrix):
            started = time.perf_counter()
            out = transfer(block, comm, reuse)
            if self.clock is not None:
                hold_until(started + self.clock.exchange(transfer, comm, peers, itemsize))
        nbytes = sum(o.nbytes for o in out) if isinstance(out, tuple) else out.nbytes
        g, sent, n = comm.Get_size(), transfer.moving * itemsize, transfer.messages
        self._record(kind="alltoallv", group=g, nbytes=nbytes, sent=sent, messages=n)
        return out

    def span(self, name: str, **args):
        """A trace span (no-op without a tracer)."""
        if self.tracer is None:
            return contextlib.nullcontext()
        return self.tracer.span(name, step=self.step, **args)

    def _pending(self, requests: list, result) -> Pending:
        """A Pending for the event just recorded; its wait() records a "wait" event."""
        issued = self.tracer.now() if self.tracer is not None else 0.0
        return Pending(requests, result, comm=self, event=len(self.events) - 1, issued=issued)

    def _waited(self, pending: Pending, start: float) -> None:
        ev = make_event({"kind": "wait", "step": self.step, "waits": (pending.event,)})
        self.events.append(ev)
        if self.observer is not None:
            self.observer(ev)
        if self.tracer is not None:
            issued = self.events[pending.event]
            end = self.tracer.now()
            self.tracer.add("wait", start, end, step=self.step, op=issued.kind)
            axes, nbytes = ",".join(issued.axes), issued.nbytes
            args = {"lane": 1, "step": issued.step, "bytes": nbytes, "axes": axes}
            self.tracer.add(issued.kind, pending.issued, end, **args)

    def _group_of(self, axes) -> tuple[tuple[str, ...], int, int]:
        """(axes, group size, this rank's rank in the group), computed once per axes."""
        key = axes if isinstance(axes, str) else tuple(axes)
        found = self._groups.get(key)
        if found is None:
            names = (key,) if isinstance(key, str) else key
            g = math.prod(self.mesh.sizes[a] for a in names)
            found = self._groups[key] = (names, g, self.mesh.sub_rank(names))
        return found

    # -- point to point ---------------------------------------------------------------------
    def _shift_event(self, buf: np.ndarray, axis: str, disp: int, overlapped: bool):
        """Record a ring shift of ``buf`` by ``disp`` along ``axis``; None when nothing moves
        (a ring of one, or a whole turn)."""
        (axis,), g, _ = self._group_of(axis)
        if g == 1 or disp % g == 0:
            return None
        return self._record(
            kind="shift",
            axes=(axis,),
            group=g,
            nbytes=buf.nbytes,
            sent=buf.nbytes,
            messages=1,
            overlapped=overlapped,
            disp=disp,
        )

    def ishift(self, buf: np.ndarray, axis: str, disp: int, out: np.ndarray) -> Pending:
        """Send ``buf`` ``disp`` places along the ring ``axis``; receive into ``out`` from the
        rank ``disp`` places behind. Returns a Pending whose result is ``out``."""
        ev = self._shift_event(buf, axis, disp, overlapped=True)
        if ev is None:
            return Pending(result=buf)
        if not self.execute:
            return self._pending([], buf)
        started = time.perf_counter()
        comm = self.mesh.sub(axis)
        src, dst = self.mesh.ring(axis, disp)
        reqs = [comm.Irecv(out, source=src, tag=7), comm.Isend(buf, dest=dst, tag=7)]
        pending = self._pending(reqs, out)
        pending.hold = self._hold(ev, started, disp)
        return pending

    def shift(self, buf: np.ndarray, axis: str, disp: int, out: np.ndarray) -> np.ndarray:
        """Blocking ring shift (Sendrecv); returns the array now holding the received data."""
        ev = self._shift_event(buf, axis, disp, overlapped=False)
        if ev is None:
            return buf
        if not self.execute:
            return buf
        src, dst = self.mesh.ring(axis, disp)
        with self.span("shift", axis=axis, bytes=buf.nbytes):
            started = time.perf_counter()
            self.mesh.sub(axis).Sendrecv(
                buf, dest=dst, sendtag=7, recvbuf=out, source=src, recvtag=7
            )
            hold_until(self._hold(ev, started, disp))
        return out

    # -- collectives ------------------------------------------------------------------------
    def ibcast(self, buf: np.ndarray, root: int, axes, blocking: bool = False) -> Pending:
        """Broadcast ``buf`` (in place) from ``root`` (rank within the sub-communicator)."""
        axes, g, me = self._group_of(axes)
        if g == 1:
            return Pending(result=buf)
        is_root = me == root
        ev = self._record(
            kind="bcast",
            axes=axes,
            group=g,
            nbytes=buf.nbytes,
            sent=buf.nbytes * (g - 1) if is_root else 0,
            messages=(g - 1) if is_root else 0,
            overlapped=not blocking,
        )
        if not self.execute:
            return Pending(result=buf) if blocking else self._pending([], buf)
        started = time.perf_counter()
        comm = self.mesh.sub(*axes)
        if blocking:
            with self.span("bcast", axes=",".join(axes), bytes=buf.nbytes, root=root):
                comm.Bcast(buf, root=root)
                hold_until(self._hold(ev, started))
            return Pending(result=buf)
        pending = self._pending([comm.Ibcast(buf, root=root)], buf)
        pending.hold = self._hold(ev, started)
        return pending

    def allgather(self, buf: np.ndarray, axes, dim: int = 0) -> np.ndarray:
        """Concatenate every rank's ``buf`` along ``dim`` (in sub-communicator rank order)."""
        axes, g, _ = self._group_of(axes)
        if g == 1:
            return buf
        ev = self._record(
            kind="allgather",
            axes=axes,
            group=g,
            nbytes=buf.nbytes,
            sent=buf.nbytes * (g - 1),
            messages=g - 1,
        )
        out = (np.empty if self.execute else self.zeros)((g,) + buf.shape, dtype=buf.dtype)
        if self.execute:
            with self.span("allgather", axes=",".join(axes), bytes=buf.nbytes):
                started = time.perf_counter()
                self.mesh.sub(*axes).Allgather(np.ascontiguousarray(buf), out)
                hold_until(self._hold(ev, started))
        if dim == 0:
            return reshaped(out, (g * buf.shape[0],) + buf.shape[1:])
        with self._copying(out.nbytes):  # concatenating along dim is a local copy
            if self.execute:
                return np.concatenate(list(out), axis=dim)
        shape = list(buf.shape)
        shape[dim] *= g
        return self.zeros(shape, buf.dtype)

    def reduce_scatter(self, buf: np.ndarray, axes, dim: int = 0, out=None) -> np.ndarray:
        """Blocking :meth:`ireduce_scatter`: returns the array holding this rank's part."""
        return self.ireduce_scatter(buf, axes, dim, out, blocking=True).result

    def ireduce_scatter(self, buf, axes, dim: int = 0, out=None, blocking=False) -> Pending:
        """Sum ``buf`` over the group and leave rank r with the r-th of g equal parts along
        ``dim`` (``buf.shape[dim]`` must divide by g), in ``out`` if given (contiguous). Posted
        unless ``blocking``: then ``buf`` (along dim 0) and ``out`` are MPI's until the wait."""
        axes, g, _ = self._group_of(axes)
        if g == 1:
            return Pending(result=buf)
        split = buf.shape[:dim] + (g, buf.shape[dim] // g) + buf.shape[dim + 1 :]
        pieces = None  # g parts along dim, contiguous one after another: packed if dim != 0
        with self._copying(buf.nbytes) if dim else contextlib.nullcontext():
            if self.execute:
                pieces = np.ascontiguousarray(np.moveaxis(buf.reshape(split), dim, 0))
        ev = self._record(
            kind="reduce_scatter",
            axes=axes,
            group=g,
            nbytes=buf.nbytes,
            sent=buf.nbytes // g * (g - 1),
            messages=g - 1,
            overlapped=not blocking,
        )
        if not self.execute:
            out = self.zeros(split[:dim] + split[dim + 1 :], buf.dtype) if out is None else out
            return Pending(result=out) if blocking else self._pending([], out)
        out = np.empty(pieces.shape[1:], dtype=buf.dtype) if out is None else out
        from mpi4py import MPI

        sub, started = self.mesh.sub(*axes), time.perf_counter()
        if blocking:
            with self.span("reduce_scatter", axes=",".join(axes), bytes=buf.nbytes):
                sub.Reduce_scatter_block(pieces, out, op=MPI.SUM)
                hold_until(self._hold(ev, started))
            return Pending(result=out)
        pending = self._pending([sub.Ireduce_scatter_block(pieces, out, op=MPI.SUM)], out)
        pending.hold, pending.keep = self._hold(ev, started), pieces
        return pending

    def allreduce(self, buf: np.ndarray, axes) -> np.ndarray:
        axes, g, _ = self._group_of(axes)
        if g == 1:
            return buf
        ev = self._record(
            kind="allreduce",
            axes=axes,
            group=g,
            nbytes=buf.nbytes,
            sent=2 * (buf.nbytes // g) * (g - 1),
            messages=2 * (g - 1),
        )
        if self.execute:
            from mpi4py import MPI

            with self.span("allreduce", axes=",".join(axes), bytes=buf.nbytes):
                started = time.perf_counter()
                self.mesh.sub(*axes).Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
                hold_until(self._hold(ev, started))
        return buf

    # -- computation ------------------------------------------------------------------------
    def gemm(
        self,
        a: np.ndarray,
        b: np.ndarray,
        c: np.ndarray,
        *,
        accumulate: bool = True,
        tmp: np.ndarray | None = None,
        progress: Sequence[Pending] = (),
    ) -> np.ndarray:
        """``c (+)= a @ b``. With ``progress``, the GEMM polls those messages between row chunks
        (algorithms/local_gemm.py), so they advance while this rank computes."""
        m, k = a.shape
        n = b.shape[1]
        self._record(kind="gemm", flops=2 * m * k * n, shape=(m, k, n), accumulate=accumulate)
        if not self.compute:
            return c
        reqs = [r for p in progress for r in p.requests] if self.execute else []
        if self.tracer is None or not reqs:
            with self.span("gemm", m=m, k=k, n=n):
                polled_gemm(a, b, c, accumulate, tmp, reqs)
            return c
        marks = polled_gemm(a, b, c, accumulate, tmp, reqs, clock=self.tracer.now)
        # traced: each chunk a gemm span, each poll a span of what it progressed (with CMA the
        # bytes move inside the poll), so a trace's phases set message time against its price
        kinds = {self.events[p.event].kind for p in progress if p.event is not None}
        polled = kinds.pop() if len(kinds) == 1 else "progress"
        for i in range(0, len(marks) - 1, 2):
            self.tracer.add("gemm", marks[i], marks[i + 1], step=self.step, m=m, k=k, n=n)
            if i + 2 < len(marks):  # (none after a GEMM in one call)
                self.tracer.add(polled, marks[i + 1], marks[i + 2], step=self.step, poll=True)
        return c
