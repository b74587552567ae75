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
    sleeps and so overlaps computation even with more ranks than cores)."""
    slow = profile.slowdown(ranks_per_node)
    overlap = slow <= 1.0
    t = channel = 0.0
    done: dict[int, float] = {}
    phases: dict[str, float] = defaultdict(float)
    for i, e in enumerate(events):
        if e.kind == "gemm":
            d = profile.gemm_seconds(*e.shape, dtype) * slow
            t += d
            phases["gemm"] += d
        elif e.kind == "copy":
            d = e.nbytes / profile.copy_bandwidth * slow
            t += d
            phases["copy"] += d
        elif e.kind == "wait":
            end = max(done.get(j, t) for j in e.waits)
            if end > t:
                phases[events[e.waits[0]].kind] += end - t
                t = end
        else:
            if links is not None and e.phase_level is not None:
                cost = links.collective(e.kind, e.nbytes, e.group, e.phase_level)
                hides = True
            else:
                cost = profile.collective(e.kind, e.nbytes, e.group) * slow
                hides = overlap
            if e.overlapped and hides:
                start = max(t, channel)
                channel = done[i] = start + cost
            else:
                start = max(t, channel)
                phases[e.kind] += start + cost - t
                t = channel = done[i] = start + cost
    return Prediction(
        t,
        dict(phases),
        sum(e.flops for e in events),
        sum(e.sent for e in events),
        sum(e.messages for e in events),
        slow,
        level_bytes(events),
    )


__all__ = ["Prediction", "predict"]
