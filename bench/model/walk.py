"""The prediction: one rank's schedule walked in order and priced with a machine profile.

The walk keeps one message channel per rank: a blocking operation occupies the rank; a
non-blocking one starts when the channel is free and must be complete at its ``wait``; a GEMM
occupies the rank. With more ranks than cores every rank gets cores/ranks of a core, so its
computation and copies slow down by that factor and non-blocking messages no longer hide behind
computation (there is no idle core to progress them on).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from algorithms.events import Event, level_bytes

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
    events: list[Event], profile: Profile, dtype: str, ranks_per_node: int, links=None
) -> Prediction:
    """Walk one rank's schedule; see the module docstring for the rules.

    With ``links`` (topology.links.LinkModel) a communication event on a tree costs the link
    model's price at its ``phase_level`` (the highest level any member's message crosses) and is
    not slowed by oversubscription: it models the tree's links (or their emulation, which
    sleeps and so overlaps computation even with more ranks than cores). A level the link model
    leaves out (a cluster's ``local`` under a network preset) is priced by the profile."""
    slow = profile.slowdown(ranks_per_node)
    overlap = slow <= 1.0
    t = channel = 0.0
    done: dict[int, float] = {}
    phases: dict[str, float] = defaultdict(float)
    prices: dict = {}  # one price per distinct operation: schedules repeat a few many times
    flops = sent = messages = 0
    for i, e in enumerate(events):
        kind = e.kind
        flops += e.flops
        sent += e.sent
        messages += e.messages
        if kind == "wait":
            end = max(done.get(j, t) for j in e.waits)
            if end > t:
                phases[events[e.waits[0]].kind] += end - t
                t = end
            continue
        key = (kind, e.shape, e.nbytes, e.group, e.phase_level)
        price = prices.get(key)
        if price is None:
            price = prices[key] = _price(e, profile, dtype, slow, overlap, links)
        d, hides = price
        if kind == "gemm" or kind == "copy":
            t += d
            phases[kind] += d
        elif e.overlapped and hides:
            start = max(t, channel)
            channel = done[i] = start + d
        else:
            start = max(t, channel)
            phases[kind] += start + d - t
            t = channel = done[i] = start + d
    return Prediction(t, dict(phases), flops, sent, messages, slow, level_bytes(events))


def communication_seconds(
    events: list[Event], profile: Profile, dtype: str, ranks_per_node: int, links=None
) -> dict[str, float]:
    """{kind: seconds} of every communication event priced in full, hidden or not (what a
    closed form that ignores overlap counts)."""
    slow = profile.slowdown(ranks_per_node)
    out: dict[str, float] = defaultdict(float)
    for e in events:
        if e.kind not in ("gemm", "copy", "wait"):
            out[e.kind] += _price(e, profile, dtype, slow, slow <= 1.0, links)[0]
    return dict(out)


def _price(e: Event, profile: Profile, dtype: str, slow: float, overlap: bool, links):
    """(seconds, whether it can hide behind computation when issued non-blocking)."""
    if e.kind == "gemm":
        return profile.gemm_seconds(*e.shape, dtype) * slow, False
    if e.kind == "copy":
        return e.nbytes / profile.copy_bandwidth * slow, False
    if links is not None and links.models(e.phase_level):
        return links.collective(e.kind, e.nbytes, e.group, e.phase_level), True
    return profile.collective(e.kind, e.nbytes, e.group) * slow, overlap


__all__ = ["Prediction", "communication_seconds", "predict"]
