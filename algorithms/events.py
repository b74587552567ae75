"""The schedule a rank executes: one :class:`Event` per operation, and how bytes are counted.

Byte counting convention ("direct" delivery, stated once here): a rank is charged for the bytes
it would send if every piece of data went straight from a holder to each rank that needs it.
Shift: the buffer. Broadcast: the root sends the buffer to each of the other g-1 ranks.
Allgather: each rank sends its piece to the g-1 others. Reduce-scatter and all-to-all: each rank
sends the (g-1)/g of its buffer that belongs to others. Allreduce: twice that (reduce-scatter then
allgather). Reduce: each non-root sends its buffer. Totals over ranks are then the bytes that must
cross between ranks, whatever algorithm the MPI library picks internally.

On an MN-Core tree or a cluster (a mesh with a binding, or a cluster's RankOrder placement: see
topology/tree.py and topology/hierarchy.py) every communication event also gets ``level``: the
highest level its messages from this rank cross (a shift: the crossing level of (me,
destination); a collective: the highest level among its axes' levels), and ``level_bytes``:
``sent`` split by the level each piece crosses under the direct convention above (a shift: all
at its level; a collective: ``sent / (g - 1)`` to each other member, at the crossing level of
(me, that member)). ``phase_level`` is the highest level any member's message crosses in the
operation (for a shift, the top level of its axis: the ring's wrap-around; on a cluster, over
this rank's group), which bounds the synchronised phase; the model prices events at it
(algorithms/levels.py computes these fields).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import MISSING, dataclass, fields

# the kinds that move data (the model and calibration use the same list); no algorithm's
# schedule has an alltoall: calibration measures it to price redistributions
COMM_KINDS = ("shift", "bcast", "allgather", "reduce_scatter", "allreduce", "alltoall")


@dataclass(frozen=True)
class Event:
    """One entry of the schedule a rank executed."""

    kind: str  # shift | bcast | allgather | reduce_scatter | allreduce | gemm | copy | wait
    # | alltoallv (a redistribution between layouts, outside the multiplication)
    axes: tuple[str, ...] = ()
    group: int = 1  # ranks taking part (1 for a GEMM)
    nbytes: int = 0  # payload: the buffer (for allgather: this rank's piece)
    sent: int = 0  # bytes this rank sends, by the convention above
    messages: int = 0
    flops: int = 0
    shape: tuple[int, ...] = ()  # GEMM (m, k, n)
    accumulate: bool = True  # GEMM: C += A @ B (False: C = A @ B, no pass over C to add)
    step: int | None = None
    overlapped: bool = False  # issued non-blocking, meant to overlap computation
    waits: tuple[int, ...] = ()  # kind "wait": indices (in the schedule) of the events waited for
    level: str | None = None  # on a tree: highest level this rank's messages cross
    phase_level: str | None = None  # on a tree: highest level any member's messages cross
    level_bytes: tuple[tuple[str, int], ...] = ()  # on a tree: ``sent`` split by level


# every field but ``kind`` has a plain default, which the dataclass leaves as a class attribute
assert all(f.default is not MISSING for f in fields(Event) if f.name != "kind")


def make_event(fields: dict) -> Event:
    """``Event(**fields)``, made seven times as fast: a frozen dataclass's ``__init__`` sets
    each of the 15 fields through ``object.__setattr__``, and a symbolic schedule of thousands
    of ranks makes hundreds of thousands of events, a run one or two per message. Only the
    fields given are set: the others read their defaults from the class
    (tests/test_plan_speed.py checks the two are equal)."""
    e = object.__new__(Event)
    e.__dict__.update(fields)
    return e


def level_bytes(events: Iterable[Event]) -> dict[str, int]:
    """{tree level: bytes} of a schedule's events (empty off a tree)."""
    out: dict[str, int] = defaultdict(int)
    for e in events:
        for lv, n in e.level_bytes:
            out[lv] += n
    return dict(out)


__all__ = ["COMM_KINDS", "Event", "level_bytes", "make_event"]
