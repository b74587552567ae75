"""A redistribution's price from its per-rank loads, and the barriers around an end-to-end run's
phases: what bench/model/redistribution.py (from the rank pairs held) and bench/model/
dense_moves.py (from pairs counted as they come) both price moves with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from layouts.counting import piece_counts
from layouts.endpoints import Move

from .profile import Profile
from .walk import barrier_seconds, copy_seconds


@dataclass(frozen=True)
class MovePrice:
    """An end-to-end run's moves priced: seconds in (A, B, and the barrier ending the phase)
    and out (C), the elements the busiest rank sends or receives in each move (summed over
    moves), the relabelling used, and the barrier closing the repetition after the moves out
    (bench/runner.py), which the end-to-end time holds but no phase."""

    redistribute_in: float
    redistribute_out: float
    words: int
    ranks: tuple[int, ...] | None  # native mesh rank d runs on job rank ranks[d]
    bytes_saved: int  # by the relabelling, against the identity order
    closing: float = 0.0
    has_moves: bool = True  # False: every layout native, nothing timed but the multiplication
    # set where the relabelling kept the order laid unmatched: no order saves more bytes
    # (layouts.relabel.Relabelling.saved_at_most)
    saved_at_most: int | None = None

    @property
    def seconds(self) -> float:
        return self.redistribute_in + self.redistribute_out + self.closing

    def with_setup(self, seconds: float) -> MovePrice:
        """This price with the algorithm's prepare (bench.model.schedule.setup_seconds) in the
        phase in, where a run with moves prepares; without moves nothing is timed before the
        multiplication."""
        if not self.has_moves:
            return self
        return replace(self, redistribute_in=self.redistribute_in + seconds)


def ranks_seconds(
    per_rank: tuple,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    linked=None,
    pieces=None,
) -> float:
    """:func:`pairs_seconds` from the per-rank (messages, elements, copied) of the messages
    priced on this machine (:func:`_per_rank`) and ``linked``, each rank's seconds of those
    the links price (None: none), and ``pieces`` per rank (None: none counted)."""
    messages, elements, copied = per_rank
    at = profile.at(ranks_per_node)
    if at.alltoallv is not None:
        per_core = max(ranks_per_node / profile.cores, 1.0)
        load = _reduced(messages, elements, copied, itemsize, per_core, pieces)
        seconds = at.alltoallv_seconds(load)
        return seconds if linked is None else max(seconds, float(linked.max()))
    per_rank = np.where(elements > 0, at.exchange(messages, elements * itemsize), 0.0)
    per_rank = per_rank * at.comm_scale
    if linked is not None:
        per_rank = np.maximum(per_rank, linked)
    slow = profile.slowdown(ranks_per_node)
    return float(np.max(per_rank + copy_seconds(copied * itemsize, profile, slow)))


def held_start(links, profile: Profile, ranks_per_node: int) -> float:
    """What emulated links add to a layout change's time on them: the start calibrate measured
    for a layout change on this machine (the held messages really move here, and the phase ends
    in an idle barrier; 0.9 ms at 16 ranks on 2 cores); nothing for links not emulated or a
    profile without layout changes."""
    if not links.emulated:
        return 0.0
    a2av = profile.at(ranks_per_node).alltoallv
    return a2av["start"] if a2av else 0.0


def _reduced(messages, elements, copied, itemsize: int, per_core: float, pieces=None) -> tuple:
    """:func:`loads` from the per-rank figures."""
    out = []
    pieces = np.zeros(1) if pieces is None else pieces
    for x in (messages, elements * itemsize, copied * itemsize, pieces):
        x = np.asarray(x, float)
        out.append(max(float(x.mean()), float(x.max()) / per_core))
    return tuple(out)


def phase_pieces(
    all_moves: Sequence[Move], into: bool, ranks, P: int, at=None
) -> np.ndarray | None:
    """The pieces (layouts.counting.piece_counts) each job rank copies in the phase in
    (``into``) or out of ``all_moves``, native mesh rank x on job rank ``ranks[x]`` (None: on
    rank x); None where ``at`` (a Profile.at) prices no piece (a calibration from before they
    were counted, or one without layout changes): counting them costs a tenth of pricing the
    moves, so callers count them only for a phase that moves something between ranks."""
    if at is not None and not (at.alltoallv or {}).get("piece", 0.0) > 0:
        return None
    hosted = np.arange(P)  # job rank q hosts native rank hosted[q]
    if ranks is not None:
        hosted[np.asarray(ranks, np.int64)] = np.arange(P)
    out = np.zeros(P, np.int64)
    for m in (m for m in all_moves if m.into == into):
        sent, got = piece_counts(m.src, m.src_mesh, m.dst, m.dst_mesh)
        out += sent + got[hosted] if m.into else sent[hosted] + got
    return out


def phase_barrier(P: int, profile: Profile, ranks_per_node: int, links=None) -> float:
    """The barrier closing a run's timed region (bench.model.walk.barrier_seconds)."""
    return barrier_seconds(profile.at(ranks_per_node), P, links)


def phase_end(P: int, profile: Profile, ranks_per_node: int, links=None) -> tuple[float, bool]:
    """(seconds, held) of the barriers ending an end-to-end run's phase in (after the moves in
    and the set-up, bench/endtoend.py) and closing its repetition (after the moves out), and
    whether the moves' price holds them. Calibrate times layout changes barrier to barrier, as
    the phases are timed: where its coefficients price the moves (Profile.alltoallv), the
    barrier after moves is in their price (the fit's start), one after none a start too: a
    barrier after no GEMMs (priced as the one closing a multiplication, which waits for GEMMs
    the ranks time-slice, the phases in of 96 runs from block at 4-16 ranks were a median 1.65x
    what they took). Emulated links hold ranks asleep, not in GEMMs: :func:`pairs_seconds` adds
    the start to their time (Cannon 4x4's barrier after its moves in on an emulated 8 x 2
    cluster took about 1 ms, the closing barrier's price 7.6). Without those coefficients, or
    on real links: the closing barrier's price."""
    at = profile.at(ranks_per_node)
    if P <= 1:
        return 0.0, False
    if (links is None or links.emulated) and at.alltoallv is not None:
        return at.alltoallv["start"], True
    return phase_barrier(P, profile, ranks_per_node, links), False


def ending_barriers(
    t_in: float, t_out: float, P: int, profile, ranks_per_node: int, links
) -> tuple[float, float]:
    """Seconds of the barriers ending the phase in and the repetition after moves in and out
    taking ``t_in`` and ``t_out`` (:func:`phase_end`: none where those moves' price holds it;
    the rule is the same for both, so the bounds, bench/model/move_bound.py, may pass the
    phases in either order)."""
    end, held = phase_end(P, profile, ranks_per_node, links)
    return tuple(0.0 if held and t > 0 else end for t in (t_in, t_out))


__all__ = [
    "MovePrice",
    "ending_barriers",
    "phase_barrier",
    "phase_end",
    "phase_pieces",
    "ranks_seconds",
]
