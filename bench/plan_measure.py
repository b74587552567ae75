"""`distmm plan --run`: the top candidates run under mpiexec, in turn, round after round."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .launch import Launcher


class Measured(NamedTuple):
    """A candidate's runs: the median over rounds of each run's ``seconds`` (None: a run
    failed, ``note`` says how), and each round's."""

    seconds: float | None
    note: str
    rounds: tuple[float, ...] = ()


def measure(
    cands: list,
    shape,
    P: int,
    dtype: str,
    repeat: int,
    topology: str = "mesh",
    mpiexec: str | None = None,
    timeout: float = 300,
    launcher: Launcher | None = None,
    emulate_links: str | None = None,
    rounds: int = 1,
) -> list[Measured]:
    """Run each candidate with `distmm run --json` under ``launcher`` (default: mpiexec, the
    given one or the environment's), its links emulated with ``emulate_links`` if given. With
    ``rounds`` > 1 each runs once per round, in turn, and keeps its median: a slow spell of the
    machine then hits every candidate alike."""
    launcher = launcher or Launcher.find(mpiexec)
    runs: list[list[float] | None] = [[] for _ in cands]  # None: a run failed, not run again
    notes = [""] * len(cands)
    for _ in range(max(rounds, 1)):
        for i, c in enumerate(cands):
            if runs[i] is None:
                continue
            argv = c.run_args(shape, dtype, topology, emulate_links)
            rec, why = launcher.run_json(P, [*argv, "--json", "--repeat", str(repeat)], timeout)
            if rec is None:
                runs[i], notes[i] = None, why
            else:
                runs[i].append(rec["seconds"])
                notes[i] = notes[i] or ("" if rec["verified"] else "NOT VERIFIED")
    return [
        Measured(None, note) if t is None else Measured(float(np.median(t)), note, tuple(t))
        for t, note in zip(runs, notes, strict=True)
    ]


__all__ = ["Measured", "measure"]
