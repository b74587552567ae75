"""Above the cores, what a collective costs by the computation before it.

With more ranks than cores the scheduler time-slices the ranks, and they drift apart while they
compute: a rank that reaches a collective waits for partners still in their GEMMs, the longer
the GEMMs the longer. `distmm calibrate` times each collective in loops of 512^3 GEMMs and
again of 128^3 ones (bench/calibration_counts.py: stepped_collectives), steps (seconds per
iteration without the collective) some 50 times apart, and the model fits each collective's
alpha and beta to each loop's timings over every count above the cores (fits.fit_collectives).
The two fits differ mostly in alpha, the wait: on a 2-core VM what a 4 KiB collective added
fell as the step to a power of 0.44-0.81 by kind, a 256 KiB-2 MiB one's 0.05-0.36 (the bytes
take about as long whatever the step). A collective a run issues ``step`` seconds of
computation after its last message costs its price after the short GEMMs, or the long ones' if
less, plus the rest of the long ones' price in proportion to log(step / short step) / log(long
step / short step), within the two steps (beyond them, the nearer one's: nothing was timed
there). Where no computation came before it in the run, its step is unknown and it costs the
long loop's price (at the short step, the 99 runs of results/vm-2c-zen4/model_accuracy_6.csv
were priced a median 6.6% and 5.7% off with two calibrations, 5.4% and 4.5% so). At 12 ranks on
2 cores SUMMA 3x4's steps of 0.9-4 ms were priced as calibrate's 19 ms ones, 1.3-1.6 times what
the runs took on every VM kind; so, 0.98-1.15.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from topology.costs import collective_seconds

from .fits import exposed_at, fit_collectives


@dataclass(frozen=True)
class Steps:
    """The short and long loops' steps at one run's ranks per node, each collective's fit
    after the short GEMMs on all the node's ranks (``sliced``) and on a grid (``grouped``),
    and the part of a message's price a rank pays when it posts it before the short GEMMs
    (``exposed``; before the long ones: Profile.exposed)."""

    short: float
    long: float
    sliced: dict
    grouped: dict
    exposed: dict = field(default_factory=dict)

    def price(self, kind: str, nbytes: int, g: int, long: float, grid: bool, step) -> float:
        """The collective's seconds after ``step`` seconds of computation (None: unknown), its
        price fitted after the long GEMMs being ``long`` (on a grid if ``grid``)."""
        fitted = (self.grouped if grid else self.sliced).get(kind)
        if step is None or fitted is None:
            return long
        least = min(collective_seconds(kind, nbytes, g, *fitted), long)
        return least + (long - least) * self._toward_long(step)

    def exposed_part(self, kind: str, long: float, step) -> float:
        """The part of a posted message's price the rank pays ``step`` seconds after its last
        message (None: unknown), ``long`` after the long GEMMs: between the short loop's and
        that, as :meth:`price` goes between the prices."""
        short = self.exposed.get(kind)
        if step is None or short is None:
            return long
        return short + (long - short) * self._toward_long(step)

    def _toward_long(self, step: float) -> float:
        """log(step / short) / log(long / short), ``step`` held between the two."""
        within = min(max(step, self.short), self.long)
        return math.log(within / self.short) / math.log(self.long / self.short)


@dataclass(frozen=True)
class StepLaw:
    ranks: tuple[int, ...]  # the counts above the cores timed after both GEMMs
    short: tuple[float, ...]  # their short loops' step per rank per core [s]
    long: tuple[float, ...]  # their long loops'
    sliced: dict  # {kind: (alpha, beta)} fitted after the short GEMMs, on all the ranks
    grouped: dict  # ... and on the rows and columns of a grid of them
    posted: tuple = ()  # ({"ranks", "exposed"}, ...): a posted message's part, short GEMMs

    @classmethod
    def fit(cls, counts, cores: int) -> StepLaw | None:
        """From a profile's counts above the cores timed after both GEMMs; None if none was."""
        timed = [
            c
            for c in counts
            if c["ranks"] > cores and c.get("short") and 0 < c["short"]["step"] < c.get("step", 0)
        ]
        if not timed:
            return None
        short = [{"ranks": c["ranks"], **c["short"]} for c in timed]
        return cls(
            tuple(c["ranks"] for c in timed),
            tuple(c["short"]["step"] * cores / c["ranks"] for c in timed),
            tuple(c["step"] * cores / c["ranks"] for c in timed),
            fit_collectives(short, cores),
            fit_collectives(short, cores, grid=True),
            tuple(c for c in short if c.get("exposed")),
        )

    def at(self, ranks_per_node: int, cores: int) -> Steps:
        """For a run with ``ranks_per_node`` ranks on the node's ``cores``: the steps per rank
        per core linear between the counts timed (the nearest one's outside them), times ranks
        per core."""
        per_core = ranks_per_node / cores
        return Steps(
            float(np.interp(ranks_per_node, self.ranks, self.short)) * per_core,
            float(np.interp(ranks_per_node, self.ranks, self.long)) * per_core,
            self.sliced,
            self.grouped,
            exposed_at(self.posted, ranks_per_node, trend=True),
        )


__all__ = ["StepLaw", "Steps"]
