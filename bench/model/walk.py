"""The prediction: one rank's schedule walked in order and priced with a machine profile.

The walk keeps one message channel per rank: a blocking operation occupies the rank; a
non-blocking one starts when the channel is free and must be complete at its ``wait``, and
occupies the rank for the part of its price calibrate measured a rank paying for a message
posted before a GEMM (Profile.exposed); a GEMM occupies the rank. With more ranks than cores
every rank gets cores/ranks of a core, so its computation and copies slow down by that factor
and a non-blocking message occupies the rank for the part of its price calibrate measured
there (a rank that posts it before computing does not wait for partners the scheduler has
computing: 0.4-0.9 of a blocking one's at 8-16 ranks on 2 cores); there a collective costs
by the computation before it (bench/model/steps.py: the seconds of GEMMs and copies since the
rank's last message, the first message after them setting the step for those that follow it
without computation between).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from algorithms.events import Event, make_event
from topology.costs import own_block_bytes

from .profile import Profile


@dataclass
class Prediction:
    seconds: float
    phases: dict  # kind -> seconds on the critical path (gemm, and exposed communication)
    flops: int
    bytes_sent: int  # by the modelled rank
    messages: int
    oversubscription: float
    level_bytes: dict = field(default_factory=dict)  # on a tree: the modelled rank's bytes

    def as_dict(self) -> dict:
        out = {
            "predicted_seconds": self.seconds,
            "predicted_phases": self.phases,
            "model_rank_bytes_sent": self.bytes_sent,
            "oversubscription": self.oversubscription,
        }
        if self.level_bytes:
            out["model_rank_level_bytes"] = self.level_bytes
        return out


def predict(
    events: list[Event],
    profile: Profile,
    dtype: str,
    ranks_per_node: int,
    links=None,
    P: int | None = None,
) -> Prediction:
    """Walk one rank's schedule; see the module docstring for the rules. With ``P`` (the
    run's ranks) the walk ends with the barrier that closes a run's timed region
    (:meth:`Walk.close`), as a run's measured seconds do.

    With ``links`` (topology.links.LinkModel) a communication event on a tree costs the link
    model's price at its ``phase_level`` (the highest level any member's message crosses) and is
    not slowed by oversubscription: it models the tree's links (or their emulation, which
    sleeps and so overlaps computation even with more ranks than cores). Links that only move
    bytes add what the ranks' cores do: a reduction's sums (:func:`combine_seconds`) and a
    rank's own block copied into place (:func:`own_copy_seconds`), slowed as computation is.
    Emulated links (``links.emulated``) hold a message that really moved on this machine: it
    costs the dearer of the profile's price and the link's, and with more ranks than cores the
    profile's part occupies the rank (only the rest of the hold hides behind computation). That
    part is paid when the message is posted: only the links' holds queue one after another (a
    second message posted before a GEMM moves before it, as algorithms/levels.py's LinkClock
    holds). A level the link model leaves out (a cluster's ``local`` under a network preset) is
    priced by the profile."""
    walk = Walk(profile, dtype, ranks_per_node, links)
    push = walk.push
    for e in events:
        push(e)
    if P is not None:
        walk.close(P)
    return walk.prediction()


class Stop(Exception):
    """Raised by :meth:`Walk.push` once the walk has gone far enough (see :class:`Walk`)."""


class Walk:
    """:func:`predict` one event at a time, as the schedule is issued.

    ``t`` (the rank's time so far) never decreases, nor does :meth:`bound`, the time so far
    plus the GEMMs still to come (at least ``share`` flops in all at ``per_flop`` seconds each)
    and the blocking operations :meth:`promise` was told of; or the channel's time so far plus
    the messages still to come, at least those promised (it carries one message at a time).
    Once the bound passes ``limit`` (``by_limit``), or ``max_events`` have been walked,
    :meth:`push` raises :class:`Stop`: a search stops the loop there (bench/model/search.py).

    ``prices`` may be shared by walks with the same profile, dtype, ranks per node and links:
    an operation's price depends on nothing else."""

    def __init__(
        self,
        profile: Profile,
        dtype: str,
        ranks_per_node: int,
        links=None,
        prices=None,
        *,
        limit: float = math.inf,
        share: float = 0.0,
        per_flop: float = 0.0,
        max_events: float = math.inf,
        least_events: int = 0,
        pause=None,
        closing: float = 0.0,
    ):
        self.profile, self.dtype, self.links = profile.at(ranks_per_node), dtype, links
        self.slow = profile.slowdown(ranks_per_node)
        self.overlap = self.slow <= 1.0
        self.t = self.channel = 0.0
        self.done: dict[int, float] = {}
        self.kinds: list[str] = []  # of every event so far, by index (what a wait names)
        self.phases: dict[str, float] = defaultdict(float)
        # one price per distinct operation: schedules repeat a few many times
        self.prices: dict = {} if prices is None else prices
        self.flops = self.sent = self.messages = 0
        self.level_bytes: dict[str, int] = defaultdict(int)
        self.limit, self.share, self.per_flop = limit, share, per_flop
        self.max_events, self.least_events, self.pause = max_events, least_events, pause
        self.by_limit = False
        self.closing = closing  # the barrier close() ends with, where a bound counts it
        # seconds promised and not yet issued (either may go below 0): the rank's (blocking
        # operations) and the channel's (every message)
        self.owed_rank = self.owed_channel = 0.0
        # above the cores a collective is priced by the computation before it (Profile.steps):
        # the GEMMs' and copies' seconds before the last message; None (calibrate's long step)
        # until the rank first computes
        self.stepped = self.profile.steps is not None
        self.since, self.step = 0.0, None

    def bound(self) -> float:
        """The prediction is at least this (given the ``share``, ``per_flop`` and
        :meth:`promise` told): the time so far, the GEMMs and promised blocking operations still
        to come, or the messages in flight and promised ending, whichever is later, then the
        closing barrier (``closing``: :meth:`close` waits for both)."""
        rank = self.t + max(self.share - self.flops, 0) * self.per_flop + max(self.owed_rank, 0.0)
        return max(rank, self.channel + max(self.owed_channel, 0.0)) + self.closing

    def promise(self, operations) -> None:
        """The loop will issue at least these operations besides GEMMs ((kind, bytes, group,
        count, blocking), priced as its own events are; Algorithm.promised). What each costs
        the rank (a blocking one all of its price, a non-blocking message its exposed part) and
        the channel (a message all of it) is owed until issued, and every operation issued is
        taken off both as it is charged: whatever the loop issues, if these are among it, the
        rest to come costs at least what is left, on the rank and on the channel."""
        shave = 1 - 1e-9  # (summing the prices of those issued may round up)
        for kind, nbytes, group, count, blocking in operations:
            e = make_event({"kind": kind, "nbytes": nbytes, "group": group})
            d, exposed, _ = self._priced(e, 0.0)  # at the least a message costs (shortest step)
            if self.stepped:  # a price and a part both linear in log(step): least at an end
                exposed = min(exposed, self._priced(e, None)[1])
            self.owed_rank += count * (d if blocking else exposed) * shave
            if kind != "copy":
                self.owed_channel += count * d * shave

    def _priced(self, e: Event, step: float | None = None) -> tuple[float, float]:
        key = (e.kind, e.shape, e.accumulate, e.nbytes, e.group, e.phase_level)
        if self.stepped and e.kind not in ("gemm", "copy"):
            key = (*key, step)
        price = self.prices.get(key)
        if price is None:
            price = self.prices[key] = _price(
                e, self.profile, self.dtype, self.slow, self.overlap, self.links, step
            )
        return price

    def push(self, e: Event) -> None:
        kinds = self.kinds
        i = len(kinds)
        kind = e.kind
        kinds.append(kind)
        t = self.t
        if kind == "wait":  # moves nothing, counts nothing
            done, waits = self.done, e.waits
            end = done.get(waits[0], t) if len(waits) == 1 else max(done.get(j, t) for j in waits)
            if end > t:
                self.phases[kinds[waits[0]]] += end - t
                self.t = end
        else:
            self.flops += e.flops
            self.sent += e.sent
            self.messages += e.messages
            for lv, n in e.level_bytes:
                self.level_bytes[lv] += n
            key = (kind, e.shape, e.accumulate, e.nbytes, e.group, e.phase_level)
            if self.stepped and kind not in ("gemm", "copy"):
                if self.since:  # the first message after computation: its step
                    self.step, self.since = self.since, 0.0
                key = (*key, self.step)
            price = self.prices.get(key)
            if price is None:
                price = self._priced(e, self.step)
            d, exposed, held = price
            if kind == "gemm":
                self.t = t + d
                self.phases[kind] += d
                self.since += d
            elif kind == "copy":
                self.t = t + d
                self.phases[kind] += d
                self.owed_rank -= d
                self.since += d
            elif e.overlapped:  # on the channel; the rank pays the exposed part (may exceed d)
                start = max(t, self.channel)
                self.channel = self.done[i] = start + d
                self.owed_rank -= exposed
                self.owed_channel -= d
                if exposed:
                    # an emulated link's message moves here at once; only its hold waits for
                    # the link (algorithms/levels.py: LinkClock)
                    paid = t if held else start
                    self.phases[kind] += paid + exposed - t
                    self.t = paid + exposed
            else:
                start = max(t, self.channel)
                self.phases[kind] += start + d - t
                self.t = self.channel = self.done[i] = start + d
                self.owed_rank -= d
                self.owed_channel -= d
        if (
            self.t != t
            and max(
                self.t + max(self.share - self.flops, 0) * self.per_flop + max(self.owed_rank, 0.0),
                self.channel + max(self.owed_channel, 0.0),
            )
            + self.closing
            > self.limit
            and i >= self.least_events - 1
        ):
            self.by_limit = True  # (the bound, inlined: this runs once per event)
            self._stop()
        elif i >= self.max_events - 1:
            self._stop()

    def _stop(self) -> None:
        if self.pause is None:
            raise Stop
        self.pause(self)
        self.by_limit = False

    def close(self, P: int) -> None:
        """End with the barrier a run closes each repetition with (bench/runner.py: the timed
        region ends once every rank reaches it), on all P ranks: the profile's price (with more
        ranks than cores, what calibrate measured a barrier to add after GEMMs, 12 ms at 16
        ranks on 2 cores), or where ``links`` price the outermost level theirs (a cluster's
        barrier crosses its network; an emulated cluster's runs on this machine: the dearer,
        :func:`barrier_seconds`)."""
        if P <= 1:
            return
        d = barrier_seconds(self.profile, P, self.links)
        start = max(self.t, self.channel)
        self.phases["barrier"] += start + d - self.t
        self.t = self.channel = start + d

    def prediction(self) -> Prediction:
        return Prediction(
            self.t,
            dict(self.phases),
            self.flops,
            self.sent,
            self.messages,
            self.slow,
            dict(self.level_bytes),
        )


def barrier_seconds(at: Profile, P: int, links=None) -> float:
    """A barrier on all P ranks: ``at`` (a profile at the run's ranks per node, Profile.at)
    prices it as a collective; with ``links`` pricing the outermost level, as the kernel's
    collectives across it are priced (:func:`_price`): by the links alone, or where they are
    emulated (the messages really move on this machine) the dearer of the two. (The
    calibration machine's barrier over P ranks, time-sliced on its cores, priced a one-rank-
    per-node barrier at 4096 ranks 0.45 times a whole SUMMA kernel.)"""
    if P <= 1:
        return 0.0
    d = at.collective("barrier", 0, P) * at.comm_scale
    if links is not None:
        from topology.hierarchy import levels_of

        outermost = levels_of(links.tree)[0]
        if links.models(outermost):
            net = links.collective("barrier", 0, P, outermost)
            d = max(d, net) if links.emulated else net
    return d


def communication_seconds(
    events: list[Event], profile: Profile, dtype: str, ranks_per_node: int, links=None
) -> dict[str, float]:
    """{kind: seconds} of every communication event priced in full, hidden or not (what a
    closed form that ignores overlap counts)."""
    slow = profile.slowdown(ranks_per_node)
    profile = profile.at(ranks_per_node)
    out: dict[str, float] = defaultdict(float)
    for e in events:
        if e.kind not in ("gemm", "copy", "wait"):
            out[e.kind] += _price(e, profile, dtype, slow, slow <= 1.0, links)[0]
    return dict(out)


def _price(e: Event, profile: Profile, dtype: str, slow: float, overlap: bool, links, step=None):
    """(seconds, the part of them that occupies the rank even when issued non-blocking: all
    of a GEMM or copy; of a message with a core per rank the part calibrate measured a rank
    paying for one posted before a polled GEMM (Profile.exposed: shifts 1.2-2.1 and broadcasts
    0.9-1.6 on 2 ranks here, none in profiles from before it was measured), with more ranks
    than cores likewise (0.4-0.9 at 8-16 ranks on 2 cores), all of it where not measured
    there (older profiles); whether it is held to an emulated link: then the rank pays its
    part when it posts it, not when the link is free); ``profile`` at the run's ranks per node
    (Profile.at), ``slow`` its GEMMs' slowdown, ``step`` the computation before a message
    (Profile.collective)."""
    if e.kind == "gemm":
        d = profile.gemm_seconds(*e.shape, dtype, e.accumulate) * slow
        return d, d, False
    if e.kind == "copy":
        d = copy_seconds(e.nbytes, profile, slow)
        return d, d, False
    here = profile.collective(e.kind, e.nbytes, e.group, step) * profile.comm_scale
    part = profile.exposed.get(e.kind, 0.0 if overlap else 1.0)
    if profile.steps is not None:  # above the cores: by the computation before it, as ``here``
        part = profile.steps.exposed_part(e.kind, part, step)
    exposed = part * here
    if links is not None and links.models(e.phase_level):
        if not links.emulated:  # the links move the bytes, the ranks' cores combine them
            gamma = combine_seconds(profile, dtype, slow)
            d = links.collective(e.kind, e.nbytes, e.group, e.phase_level, gamma)
            return d + own_copy_seconds(e.kind, e.nbytes, e.group, profile, slow), 0.0, False
        d = links.collective(e.kind, e.nbytes, e.group, e.phase_level)
        # emulated links hold a message that really moves on this machine: the dearer counts,
        # and with no core spare the move here occupies the rank while the hold can hide
        return max(d, here), exposed, True
    return here, exposed, False


def copy_seconds(nbytes, profile: Profile, slow: float):
    """Seconds a rank takes to copy ``nbytes`` (a number or an array of them) at the profile's
    copy bandwidth, slowed by ``slow`` (Profile.slowdown) where ranks share cores."""
    return nbytes / profile.copy_bandwidth * slow


def own_copy_seconds(kind: str, nbytes: int, g: int, profile: Profile, slow: float) -> float:
    """Seconds a rank's core takes to copy its own block into place in a collective whose
    messages cross links that move bytes only (topology.costs.own_block_bytes): a copy
    (:func:`copy_seconds`). Inside a node the measured collectives hold it (their factors)."""
    return copy_seconds(own_block_bytes(kind, nbytes, g), profile, slow)


def combine_seconds(profile: Profile, dtype: str, slow: float) -> float:
    """Seconds a rank's cores take to combine one byte of a reduction whose messages cross
    links that move bytes only (gamma of topology.costs): MPI's SUM on ``dtype`` at the
    profile's measured rate (Profile.reduce_bandwidth), slowed by ``slow`` as computation is;
    0 where not measured. Inside a node the measured collectives hold it (their factors)."""
    rate = profile.reduce_bandwidth.get(str(dtype))
    return slow / rate if rate else 0.0


__all__ = [
    "Prediction",
    "Stop",
    "Walk",
    "barrier_seconds",
    "combine_seconds",
    "communication_seconds",
    "copy_seconds",
    "own_copy_seconds",
    "predict",
]
