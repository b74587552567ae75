"""Fault injection, to check that a failing rank ends the whole job cleanly.

``DISTMM_FAULT="rank=R,phase=PHASE[,after=N][,mode=raise|exit]"`` makes rank R fail at its
(N+1)-th PHASE of a run: PHASE is a schedule event kind (gemm, shift, bcast, allgather,
reduce_scatter, allreduce, copy), ``setup`` (after the blocks are generated, before any
collective of the multiplication) or ``verify``. ``raise`` raises :class:`InjectedFault` (the
abort hook then ends the job); ``exit`` kills the process without any MPI clean-up, as a crash
would (the launcher then ends the job).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

ENV = "DISTMM_FAULT"
PHASES = (
    "setup",
    "verify",
    "gemm",
    "shift",
    "bcast",
    "allgather",
    "reduce_scatter",
    "allreduce",
    "copy",
)


class InjectedFault(RuntimeError):
    """The failure DISTMM_FAULT asked for."""


@dataclass(frozen=True)
class Fault:
    rank: int
    phase: str
    after: int = 0
    mode: str = "raise"

    def trigger_for(self, rank: int):
        """A callable ``hit(phase)`` for this rank (None when the fault is not on it)."""
        if rank != self.rank:
            return None
        seen = {"n": 0}

        def hit(phase: str) -> None:
            if phase != self.phase:
                return
            seen["n"] += 1
            if seen["n"] <= self.after:
                return
            message = f"injected fault on rank {rank} at {phase} #{seen['n']} ({ENV})"
            if self.mode == "exit":
                print(
                    f"[rank {rank}] {message}: exiting without MPI clean-up",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(3)
            raise InjectedFault(message)

        return hit


def fault_from_env(environ: Mapping[str, str] = os.environ) -> Fault | None:
    """The fault DISTMM_FAULT describes, or None; a malformed value raises ValueError."""
    text = environ.get(ENV, "").strip()
    if not text:
        return None
    fields = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("rank", "phase", "after", "mode"):
            raise ValueError(
                f"{ENV}={text!r}: expected rank=R,phase=P[,after=N][,mode=M], not {part!r}"
            )
        fields[key.strip()] = value.strip()
    try:
        fault = Fault(
            rank=int(fields["rank"]),
            phase=fields["phase"],
            after=int(fields.get("after", 0)),
            mode=fields.get("mode", "raise"),
        )
    except (KeyError, ValueError):
        raise ValueError(
            f"{ENV}={text!r}: rank and phase are required, rank and after are integers"
        ) from None
    if fault.phase not in PHASES:
        raise ValueError(f"{ENV}: unknown phase {fault.phase!r} (one of {', '.join(PHASES)})")
    if fault.mode not in ("raise", "exit"):
        raise ValueError(f"{ENV}: mode must be raise or exit, not {fault.mode!r}")
    return fault
