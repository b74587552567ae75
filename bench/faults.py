"""Fault injection, to check that a failing rank ends the whole job cleanly.

``DISTMM_FAULT="rank=R,phase=PHASE[,after=N][,mode=raise|exit|oserror]"`` makes rank R fail at its
(N+1)-th PHASE of a run: PHASE is a schedule event kind (gemm, shift, bcast, allgather,
reduce_scatter, allreduce, copy), ``setup`` (after the blocks are generated, before any
collective of the multiplication) or ``verify``. ``raise`` raises :class:`InjectedFault` (the
abort hook then ends the job); ``exit`` kills the process without any MPI clean-up, as a crash
would (the launcher then ends the job); ``oserror`` raises an OSError, as a rank's failing
write would (one line, then the job is aborted: bench/cli.py).

``DISTMM_FAULT="mode=delay,factor=F[,algo=ALGO][,rank=R]"`` slows a run on purpose instead, so
that the significance machinery (``distmm compare``) can be tested: every timed repetition of
ALGO's multiplication (every algorithm when ``algo`` is absent) sleeps, on rank R (every rank
when ``rank`` is absent), (F - 1) times the repetition's own duration inside the timed region,
before the closing barrier. The measured time grows by the factor F (>= 1) and nothing else
changes: warm-ups, the compute-only baseline, the data and the verification are untouched.
"""

from __future__ import annotations

import errno
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


MODES = ("raise", "exit", "oserror", "delay")


@dataclass(frozen=True)
class Fault:
    rank: int | None  # None: every rank (delay only)
    phase: str = ""  # "" for delay
    after: int = 0
    mode: str = "raise"
    factor: float = 1.0  # delay: measured time multiplied by this
    algo: str | None = None  # delay: only this algorithm (None: every one)

    def trigger_for(self, rank: int):
        """A callable ``hit(phase)`` for this rank (None when the fault is not on it)."""
        if self.mode == "delay" or rank != self.rank:
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
            if self.mode == "oserror":
                raise OSError(errno.EIO, message)
            raise InjectedFault(message)

        return hit

    def delay_for(self, rank: int, algo: str) -> float:
        """The factor this rank's timed repetitions of ``algo`` are stretched by (1.0: none)."""
        if self.mode != "delay" or self.rank not in (None, rank) or self.algo not in (None, algo):
            return 1.0
        return self.factor


def fault_from_env(environ: Mapping[str, str] = os.environ) -> Fault | None:
    """The fault DISTMM_FAULT describes, or None; a malformed value raises ValueError."""
    text = environ.get(ENV, "").strip()
    if not text:
        return None
    fields = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("rank", "phase", "after", "mode", "factor", "algo"):
            raise ValueError(
                f"{ENV}={text!r}: expected rank=R,phase=P[,after=N][,mode=raise|exit|oserror] or "
                f"mode=delay,factor=F[,algo=A][,rank=R], not {part!r}"
            )
        fields[key.strip()] = value.strip()
    mode = fields.get("mode", "raise")
    if mode not in MODES:
        raise ValueError(f"{ENV}: mode must be raise, exit, oserror or delay, not {mode!r}")
    if mode == "delay":
        return _delay(text, fields)
    if "factor" in fields or "algo" in fields:
        raise ValueError(f"{ENV}={text!r}: factor and algo are for mode=delay")
    try:
        fault = Fault(
            rank=int(fields["rank"]),
            phase=fields["phase"],
            after=int(fields.get("after", 0)),
            mode=mode,
        )
    except (KeyError, ValueError):
        raise ValueError(
            f"{ENV}={text!r}: rank and phase are required, rank and after are integers"
        ) from None
    if fault.phase not in PHASES:
        raise ValueError(f"{ENV}: unknown phase {fault.phase!r} (one of {', '.join(PHASES)})")
    return fault


def _delay(text: str, fields: dict[str, str]) -> Fault:
    from algorithms import ALGORITHMS

    if "phase" in fields or "after" in fields:
        raise ValueError(f"{ENV}={text!r}: mode=delay takes factor, algo and rank, not phase/after")
    try:
        factor = float(fields["factor"])
        rank = int(fields["rank"]) if "rank" in fields else None
    except (KeyError, ValueError):
        raise ValueError(
            f"{ENV}={text!r}: mode=delay needs factor=F (a number), rank is an integer"
        ) from None
    if not factor >= 1 or factor == float("inf"):
        raise ValueError(f"{ENV}: factor must be a finite number >= 1, not {fields['factor']!r}")
    algo = fields.get("algo") or None
    if algo is not None and algo not in ALGORITHMS:
        raise ValueError(f"{ENV}: unknown algo {algo!r} (one of {', '.join(ALGORITHMS)})")
    return Fault(rank=rank, mode="delay", factor=factor, algo=algo)
