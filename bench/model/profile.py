"""A machine profile: the calibrated prices of messages, collectives, GEMMs and copies.

`distmm calibrate` writes it. Message and collective prices use the alpha-beta formulas of
topology/costs.py with the fitted parameters, scaled by a measured factor per collective; with
more ranks than cores, each collective's own alpha and beta fitted to its timings there
(fits.py), by the computation before it (steps.py). Redistributions are priced with
coefficients fitted to whole layout changes timed at each rank count (:meth:`Profile.
alltoallv_seconds`). GEMM rates are interpolated in log(m), log(k), log(n) over the grid.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from bench.machine import blas_threads
from topology.costs import collective_seconds, exchange_seconds

from .fits import (
    A2AV_TERMS,
    checked_counts,
    count_alltoallv,
    exposed_at,
    fit_collectives,
    sharing_moves,
    sharing_scale,
)
from .gemm_rates import KEPT_AT_LEAST, GemmRates, Threading, typical_seconds, without_adding
from .steps import StepLaw, Steps


class ProfileError(ValueError):
    """A machine profile that is missing, unreadable or incomplete."""


@dataclass(frozen=True)
class Profile:
    """Calibrated machine parameters (what `distmm calibrate` writes)."""

    alpha: float  # s per message, small-message fit
    beta: float  # s per byte, small-message fit
    alpha_large: float  # large-message fit
    beta_large: float
    gemm: dict = field(default_factory=dict)  # dtype -> [[m, k, n, seconds], ...], one thread
    # BLAS threads per rank t -> [[m, k, n, seconds], ...] (float32), cores // t ranks at once
    gemm_threads: dict = field(default_factory=dict)
    collective_factor: dict = field(default_factory=dict)  # kind -> measured / formula
    shared_efficiency: tuple = ()  # ((ranks per core, efficiency), ...) from calibration
    copy_bandwidth: float = 5e9  # bytes/s one core copies (read + write counted once)
    reduce_bandwidth: dict = field(default_factory=dict)  # dtype -> B/s MPI's SUM (calibrate)
    adding: dict = field(default_factory=dict)  # dtype -> [[bytes, seconds], ...] of C += T
    cores: int = 1
    meta: dict = field(default_factory=dict)
    # What was measured with g ranks of the node running (calibration_counts.at_each_count):
    # ({"ranks": g, "alpha", "beta", "alpha_large", "beta_large", "collective_factor": {kind:
    # f}, "efficiency", "alltoallv", "yielding": bool} or, above the cores, "collectives" (and
    # "grid", "grid_collectives") instead of the messages, ...) by g. Empty in old profiles.
    counts: tuple = ()
    comm_scale: float = 1.0  # what messages are multiplied by (see :meth:`at`)
    # set by :meth:`at`: a redistribution's coefficients (calibration_counts.alltoallv_costs)
    alltoallv: dict | None = None
    # above the cores, set by :meth:`at`: {kind: (alpha, beta)} of each collective's formula
    # with one rank per core (:meth:`sliced_fit`), times ``comm_scale`` = ranks per core
    sliced: dict | None = None
    # likewise, of a collective on groups of fewer ranks than the node's, all groups at once
    # (:meth:`grid_fit`); None: priced as :attr:`sliced`
    grouped: dict | None = None
    # above the cores, set by :meth:`at`: collectives by the computation before them (steps.py)
    steps: Steps | None = None
    ranks_per_node: int | None = None  # set by :meth:`at`
    threads: int = 1  # BLAS threads per rank, set by :meth:`at` (bench.machine.blas_threads)
    busy: float = 1.0  # what GEMMs cost over the rates with the node's ranks all computing (at)
    # set by :meth:`at`: {kind: the part of a message's price the rank still pays when it
    # posts it before a GEMM} (bench/calibration_overlap.py). A kind not measured is hidden
    # below the cores and paid in full above them
    exposed: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            make = f"`mpiexec -n 2 distmm calibrate --out {path}`"
            raise ProfileError(f"profile {path} does not exist (make one with {make})") from None
        except (OSError, ValueError) as err:
            raise ProfileError(f"profile {path} is not readable JSON ({err})") from None
        try:
            p2p = data["p2p"]
            counts = sorted(checked_counts(data.get("counts", [])), key=lambda c: c["ranks"])
            profile = cls(
                alpha=p2p["small"]["alpha"],
                beta=p2p["small"]["beta"],
                alpha_large=p2p["large"]["alpha"],
                beta_large=p2p["large"]["beta"],
                gemm=data["gemm"],
                gemm_threads=data.get("gemm_threads", {}),
                collective_factor=data.get("collective_factor", {}),
                shared_efficiency=tuple(map(tuple, data.get("oversubscription", []))),
                copy_bandwidth=float(data.get("copy_bandwidth", 5e9)),
                reduce_bandwidth=data.get("reduce_bandwidth", {}),
                adding=data.get("adding", {}),
                cores=int(data["machine"]["cores"]),
                meta=data.get("machine", {}),
                counts=tuple(counts),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            what = f"lacks {err}" if isinstance(err, KeyError) else f"is not a profile ({err})"
            raise ProfileError(f"profile {path} {what} (re-run distmm calibrate)") from None
        return profile.with_own_time_slicing()

    def with_own_time_slicing(self) -> Profile:
        """This profile with each count's time-slicing efficiency taken against its own GEMM
        rates where calibrate kept the GEMM it timed there with every rank working
        ("gemm_shared": n and seconds): ranks per core x the rates' price of it
        (:meth:`_alone_seconds`) / those, so that :meth:`slowdown` x the rate is what was
        measured (calibrate's own efficiency is against that GEMM timed alone)."""
        timed = [
            (c["ranks"] / self.cores, *c["gemm_shared"])
            for c in self.counts
            if c["ranks"] > self.cores and c.get("gemm_shared")
        ]
        if not timed:
            return self
        own = tuple(
            (per_core, per_core * self._alone_seconds(n, self.cores) / seconds)
            for per_core, n, seconds in timed
        )
        return replace(self, shared_efficiency=((1.0, 1.0), *own))

    def slowdown(self, ranks_per_node: int) -> float:
        """How much longer a rank's work takes when ranks share cores: ranks per core divided by
        the time-slicing efficiency (1 rank per core or fewer: 1): one value for every count
        above the cores, the median of those measured there and at most 1 (each count's own
        swings with the scheduler, and put GEMMs 15-30% off at P = 4, 6 and 12)."""
        per_core = ranks_per_node / self.cores
        if per_core <= 1:
            return 1.0
        return per_core / self.efficiency()

    def efficiency(self) -> float:
        """GEMMs' time-slicing efficiency with more ranks than cores (see :meth:`slowdown`)."""

        def median() -> float:  # once per profile: a plan asks for every candidate it prices
            sharing = [e for per_core, e in self.shared_efficiency if per_core > 1]
            return min(float(np.median(sharing)), 1.0) if sharing else 1.0

        return self._once("efficiency", median)

    def at(self, ranks_per_node: int) -> Profile:
        """This profile as a run with ``ranks_per_node`` ranks on the node sees it. Up to the
        largest count measured without time slicing (the ranks fit the cores), messages and
        collectives are priced with the parameters measured at that many ranks (linear between
        counts) and ``comm_scale`` is 1. Beyond, each collective's formula with the alpha and
        beta fitted to it over every count timed above the cores (:meth:`sliced_fit`; on groups
        of fewer ranks, :meth:`grid_fit`; by the step before it, :meth:`step_law`), times
        ``comm_scale`` = ranks per core: the cores time-slice every rank's part of it (without
        those timings: the launched job's parameters slowed as GEMMs are). GEMMs with the BLAS
        threads a rank has there (``threads``); callers slow GEMMs and copies (:meth:`slowdown`)."""
        if self.ranks_per_node is not None:
            if ranks_per_node != self.ranks_per_node:
                raise ValueError(
                    f"a profile at {self.ranks_per_node} ranks per node, asked for {ranks_per_node}"
                )
            return self
        memo = self.__dict__.setdefault("_at_memo", {})
        if ranks_per_node in memo:
            return memo[ranks_per_node]
        fitting = [c for c in self.counts if not c.get("yielding", False)]
        alltoallv = self._alltoallv_at(ranks_per_node)
        sliced = self.sliced_fit()
        if sliced and ranks_per_node > self.cores:
            out = replace(
                self,
                alltoallv=alltoallv,
                counts=(),
                sliced=sliced,
                grouped=self.grid_fit() or None,
                steps=law.at(ranks_per_node, self.cores) if (law := self.step_law()) else None,
                exposed=exposed_at(
                    [c for c in self.counts if c["ranks"] > self.cores], ranks_per_node, True
                ),
                comm_scale=ranks_per_node / self.cores,
                ranks_per_node=ranks_per_node,
            )
        elif not fitting or ranks_per_node > fitting[-1]["ranks"]:
            out = replace(
                self,
                alltoallv=alltoallv,
                counts=(),
                comm_scale=self.slowdown(ranks_per_node),
                ranks_per_node=ranks_per_node,
            )
        else:
            gs = [c["ranks"] for c in fitting]
            g = max(ranks_per_node, gs[0])

            def at_g(values) -> float:
                return float(np.interp(g, gs, values))

            kinds = set().union(*(c["collective_factor"] for c in fitting))
            factors = {
                k: at_g([c["collective_factor"].get(k, 1.0) for c in fitting]) for k in kinds
            }
            out = replace(
                self,
                alpha=at_g([c["alpha"] for c in fitting]),
                beta=at_g([c["beta"] for c in fitting]),
                alpha_large=at_g([c["alpha_large"] for c in fitting]),
                beta_large=at_g([c["beta_large"] for c in fitting]),
                collective_factor=factors,
                exposed=exposed_at(fitting, g),
                alltoallv=alltoallv,
                counts=(),
                ranks_per_node=ranks_per_node,
            )
        out = replace(
            out,
            threads=blas_threads(self.cores, ranks_per_node),
            busy=self.busy_at(ranks_per_node),
        )
        memo[ranks_per_node] = out
        return out

    def busy_at(self, ranks_per_node: int) -> float:
        """What GEMMs take with ``ranks_per_node`` ranks (up to the cores) computing at once,
        over what the rates say: at each count calibrate measured, the GEMM every rank did at
        once ("gemm_shared", bench.calibration.busy_gemm) against the rates' price of it with
        that count's BLAS threads (:meth:`_alone_seconds`); linear between counts, the nearest
        count's outside them (the rates, each shape timed alone, priced a 16-core machine's
        GEMMs at 16 ranks 1.3-1.6 times short). 1 above the cores and without such counts."""
        if ranks_per_node > self.cores:
            return 1.0

        def ratios() -> tuple:
            return tuple(
                (c["ranks"], seconds / self._alone_seconds(n, c["ranks"]))
                for c in self.counts
                if c["ranks"] <= self.cores and c.get("gemm_shared")
                for n, seconds in [c["gemm_shared"]]
            )

        points = self._once("busy", ratios)
        if not points:
            return 1.0
        gs, rs = zip(*points, strict=True)
        return float(np.interp(ranks_per_node, gs, rs))

    def _alone_seconds(self, n: int, g: int) -> float:
        """The rates' price of an n^3 float32 GEMM with g ranks on the node's BLAS threads, at
        their typical pace there (gemm_rates.typical_seconds)."""
        alone = replace(self, threads=blas_threads(self.cores, g), busy=1.0)
        return typical_seconds(alone.gemm_seconds, self._rates("float32"), (n, n, n), "float32")

    def _alltoallv_at(self, g: int) -> dict | None:
        """A redistribution's coefficients at g ranks (bench.calibration_counts.alltoallv_costs).
        Up to the cores: those fitted at g (linear between counts). Beyond, the cores
        time-slice every rank's part: the costs grow with g / cores (fits.sharing_scale) up
        to the largest count measured, and as g past it (squared, 8192 ranks on 16 cores
        priced a move's start 262 144 units), from one fit over every count measured there at
        each count's own level (fits.sharing_levels; one measured in a spell at its
        neighbour's, fits.steady_levels); with none measured there, the largest count's times
        g / cores (else a `-n 2` profile priced B copied to 4 ranks at 19 ms where it took
        91-126, and the planner sent B to all 8192 ranks)."""
        measured = [c for c in self.counts if "alltoallv" in c]
        if not measured:
            return None
        sharing = [c for c in measured if c["ranks"] > self.cores]
        # the square law holds where it was measured; beyond, every term grows as g
        top = max([self.cores, *(c["ranks"] for c in sharing)])
        scale = sharing_scale(min(g, top) / self.cores) * max(g / top, 1.0)
        if g > self.cores and sharing:
            unit, gs, levels, _ = self._once("a2av", lambda: sharing_moves(measured, self.cores))
            scale = scale * (float(np.interp(g, gs, levels)) if gs else 1.0)
            return {k: unit[k] * float(x) for k, x in zip(A2AV_TERMS, scale, strict=True)}
        fitting = [c for c in measured if c["ranks"] <= self.cores] or measured
        gs = [c["ranks"] for c in fitting]
        fits = self._once("a2av_counts", lambda: [count_alltoallv(c, self.cores) for c in fitting])
        # none measured above the cores: the cores' own, grown as g
        return {
            k: float(np.interp(g, gs, [f[k] for f in fits])) * float(x)
            for k, x in zip(A2AV_TERMS, scale, strict=True)
        }

    def sliced_fit(self) -> dict:
        """{kind: (alpha, beta)}: each collective fitted to its times on all g ranks for every
        count g measured above the cores (fits.fit_collectives); {} if none was."""
        return self._once("sliced", lambda: fit_collectives(self.counts, self.cores))

    def grid_fit(self) -> dict:
        """{kind: (alpha, beta)} as :meth:`sliced_fit`, from the rows and columns of a grid of
        the g ranks, every row (column) at once (fits.fit_collectives)."""
        return self._once("grid", lambda: fit_collectives(self.counts, self.cores, grid=True))

    def step_law(self) -> StepLaw | None:  # collectives above the cores by their step (steps.py)
        return self._once("steps", lambda: StepLaw.fit(self.counts, self.cores))

    def _once(self, key: str, make):  # make(), once per profile (beside the frozen fields)
        memo = self.__dict__.setdefault("_memo", {})
        if key not in memo:
            memo[key] = make()
        return memo[key]

    def alltoallv_seconds(self, loads) -> float:
        """A redistribution with ``loads`` (messages, bytes, copied bytes, pieces:
        bench.model.redistribution.loads) priced with :meth:`at`'s measured coefficients."""
        c = self.alltoallv
        return c["start"] + sum(c[k] * x for k, x in zip(A2AV_TERMS[1:], loads, strict=True))

    def collective(self, kind: str, nbytes: int, g: int, step: float | None = None) -> float:
        """Seconds of one collective on g ranks, before ``comm_scale``: above the cores, on fewer
        ranks than the node's as all groups run it at once, ``step`` s after computing (steps)."""
        grouped = (self.grouped or {}).get(kind) if g < (self.ranks_per_node or 0) else None
        if fitted := grouped or (self.sliced or {}).get(kind):
            long, at = collective_seconds(kind, nbytes, g, *fitted), self.steps
            return at.price(kind, nbytes, g, long, bool(grouped), step) if at else long
        base = collective_seconds(
            kind, nbytes, g, self.alpha, self.beta, self.alpha_large, self.beta_large
        )
        return base * self.collective_factor.get(kind, 1.0)

    def exchange(self, messages, nbytes):
        """One rank's part of an all-to-all exchange (``messages`` messages, ``nbytes`` sent):
        the pairwise-exchange price scaled by the calibrated all-to-all factor; ``collective(
        "alltoall", n, g)`` is this with g - 1 messages and (g - 1)/g n bytes. Arrays work."""
        if self.sliced and "alltoall" in self.sliced:
            return exchange_seconds(messages, nbytes, *self.sliced["alltoall"])
        base = exchange_seconds(
            messages, nbytes, self.alpha, self.beta, self.alpha_large, self.beta_large
        )
        return base * self.collective_factor.get("alltoall", 1.0)

    def byte_seconds(self) -> float:
        """At :meth:`at`'s count, what no redistribution beats per byte a rank receives: the
        layout changes' rates per byte sent and copied (a received byte is both), or without
        them the all-to-all's (``comm_scale`` in)."""
        if self.alltoallv is not None:
            return self.alltoallv["byte"] + self.alltoallv["copy"]
        if self.sliced and "alltoall" in self.sliced:
            return self.sliced["alltoall"][1] * self.comm_scale
        factor = self.collective_factor.get("alltoall", 1.0)
        return min(self.beta, self.beta_large) * factor * self.comm_scale

    def gemm_seconds(self, m: int, k: int, n: int, dtype: str, accumulate: bool = True) -> float:
        """Seconds for one C += A @ B of shape (m, k, n) on one rank: the calibrated seconds per
        flop on one core, interpolated linearly in log(m), log(k), log(n) over the measured
        grid (clamped at its edges), times the share of that a rank's ``threads`` BLAS threads
        take (:class:`~bench.model.gemm_rates.Threading`) and, at :meth:`at`'s count, ``busy``
        (:meth:`busy_at`). Not ``accumulate`` (C = A @ B), less the pass adding the product
        into C that calibrate's GEMMs make (:func:`~bench.model.gemm_rates.without_adding`)."""
        memo = self.__dict__.setdefault("_gemm_memo", {})
        key = (m, k, n, dtype, accumulate)
        if key not in memo:
            share = self.threading().share(self.threads, (m, k, n))
            d = 2.0 * m * k * n * self._rates(dtype).value((m, k, n)) * share * self.busy
            if not accumulate:
                d = without_adding(d, m * n * np.dtype(dtype).itemsize, self, dtype)
            memo[key] = d
        return memo[key]

    def least_seconds_per_flop(self, dtype: str, shapes=None) -> float:
        """No GEMM of ``dtype`` (with ``shapes``, (m, k, n) tuples: none of another shape) is
        priced at less per flop (with ``threads`` BLAS threads)."""
        if shapes:  # (a GEMM that does not accumulate is the cheaper)
            return min(self.gemm_seconds(*s, dtype, False) / (2 * math.prod(s)) for s in shapes)
        least = self._rates(dtype).least() * self.threading().least_share(self.threads)
        return least * self.busy * (KEPT_AT_LEAST if self.adding else 1.0)

    def threading(self) -> Threading:
        """How BLAS threads speed up a rank's GEMMs on this node (calibrate's float32 timings,
        for every dtype)."""
        return self._table("threading", Threading.of, self._rows("float32"), self.gemm_threads)

    def _rates(self, dtype: str) -> GemmRates:
        return self._table(("rates", dtype), GemmRates.of, self._rows(dtype))

    def _table(self, key, build, *rows):
        """``build(*rows)`` once per profile (:meth:`_once`); a table it refuses is this
        profile's error."""

        def make():
            try:
                return build(*rows)
            except ValueError as err:
                raise ProfileError(str(err)) from None

        return self._once(key, make)

    def _rows(self, dtype: str) -> list:
        rows = self.gemm.get(dtype) or self.gemm.get("float32")
        if not rows:
            raise ProfileError(f"profile has no GEMM rates for {dtype}")
        return rows


__all__ = ["Profile", "ProfileError"]
