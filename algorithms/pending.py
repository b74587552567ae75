"""A non-blocking operation in flight (what the communication layer's ``i*`` calls return)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .levels import hold_until


@dataclass
class Pending:
    """Non-blocking operation(s) in flight; ``wait()`` completes them and returns the result."""

    requests: list = field(default_factory=list)
    result: object = None
    finish: object = None  # callable run after completion (e.g. a local reduction)
    comm: object = None  # the Comm that issued it (its wait() records a "wait" event)
    event: int | None = None  # index of the issuing event in comm.events
    issued: float = 0.0  # trace time of issue
    hold: float = 0.0  # link emulation: the op may not complete before this perf_counter time
    keep: object = None  # a buffer MPI reads until the wait (a packed send buffer)

    def wait(self):
        comm, self.comm = self.comm, None
        start = comm.tracer.now() if comm is not None and comm.tracer is not None else 0.0
        if self.requests:  # (Request.Waitall, a class method: no import of MPI per message)
            self.requests[0].Waitall(self.requests)
            self.requests = []
        if self.finish is not None:
            self.result = self.finish()
            self.finish = None
        hold_until(self.hold)
        self.hold, self.keep = 0.0, None
        if comm is not None:
            comm._waited(self, start)
        return self.result


__all__ = ["Pending"]
