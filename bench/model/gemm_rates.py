"""GEMM prices from `distmm calibrate`'s tables: seconds per flop on one core over the measured
m x k x n grid (:class:`GemmRates`), and the share of that time a rank's GEMM takes with t BLAS
threads (:class:`Threading`): a run with fewer ranks than cores gives each rank several
(bench/machine.py's blas_threads), 8 per rank at P = 2 on 16 cores."""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GemmRates:
    """A value over a measured m x k x n grid (seconds per flop, or a share of the one-thread
    time), linear in the logs of the sizes (what scipy's RegularGridInterpolator computes; written
    out: importing scipy.interpolate takes most of a second, more than a whole `distmm plan`)."""

    logs: tuple[tuple[float, ...], ...]  # log of each axis's measured sizes
    varying: tuple[int, ...]  # the axes measured at more than one size
    table: np.ndarray  # the values over the varying axes (a 0-d array if none)

    @classmethod
    def of(cls, rows) -> GemmRates:
        """From calibrate's [[m, k, n, seconds], ...]: seconds per flop."""
        return cls.of_values([(m, k, n, sec / (2.0 * m * k * n)) for m, k, n, sec in rows])

    @classmethod
    def of_values(cls, points) -> GemmRates:
        """From [(m, k, n, value), ...] over a full m x k x n grid."""
        if not points:
            raise ValueError("profile has no GEMM rates")
        axes = [sorted({r[i] for r in points}) for i in range(3)]
        table = np.full([len(a) for a in axes], np.nan)
        for m, k, n, value in points:
            table[axes[0].index(m), axes[1].index(k), axes[2].index(n)] = value
        if np.isnan(table).any():
            raise ValueError(
                "profile's GEMM table is not a full m x k x n grid (re-run distmm calibrate)"
            )
        logs = tuple(tuple(math.log(x) for x in a) for a in axes)
        # an axis measured at one size does not vary the value: interpolate over the others
        varying = tuple(i for i, a in enumerate(axes) if len(a) > 1)
        return cls(logs, varying, table.reshape([len(axes[i]) for i in varying]))

    def value(self, mkn: tuple[int, int, int]) -> float:
        if not self.varying:
            return float(self.table)
        cell, weights = [], []
        for i in self.varying:
            grid = self.logs[i]
            # clamped to the grid's edges: no extrapolation beyond the measured sizes
            x = min(max(math.log(max(mkn[i], 1)), grid[0]), grid[-1])
            j = min(max(bisect.bisect_left(grid, x) - 1, 0), len(grid) - 2)
            cell.append(j)
            weights.append((x - grid[j]) / (grid[j + 1] - grid[j]))
        out = 0.0
        for corner in itertools.product((0, 1), repeat=len(cell)):
            w = 1.0
            for c, t in zip(corner, weights, strict=True):
                w *= t if c else 1.0 - t
            out += w * float(self.table[tuple(j + c for j, c in zip(cell, corner, strict=True))])
        return out

    def around(self, mkn: tuple[int, int, int]) -> list[tuple[int, int, int]]:
        """``mkn`` and the shapes one grid step from it: along each measured axis, its size
        replaced by the grid's sizes either side of it."""
        out = [tuple(mkn)]
        for i in self.varying:
            sizes = [round(math.exp(x)) for x in self.logs[i]]
            either = [s for s in sizes if s < mkn[i]][-1:] + [s for s in sizes if s > mkn[i]][:1]
            out += [tuple(s if j == i else mkn[j] for j in range(3)) for s in either]
        return out

    def least(self) -> float:
        """No point of the grid is priced lower: the interpolation is linear between the
        measured values and clamped at the grid's edges."""
        return float(np.min(self.table))


def typical_seconds(price, rates: GemmRates, mkn: tuple[int, int, int], *args) -> float:
    """``price(m, k, n, *args)`` of ``mkn`` at its pace per flop median-filtered: along each
    measured axis the median of it and the grid's shapes either side (:meth:`GemmRates.around`),
    then the median over the axes. A pace between its neighbours' (a trend) is kept as it is;
    one beyond both on most axes (one timing's luck) is taken back to theirs. What calibrate's
    GEMMs timed with every rank working are compared with, and the comparison scales every
    GEMM: on results/vm-2c-zen4's VM the table put 1024^3 at 116 GFLOP/s and its six neighbours
    at 93-106, so every GEMM was priced 1.22 times long where 2 ranks computed at once (99 runs a
    median 20.9% off, 8.2% so)."""
    flops = 2.0 * math.prod(mkn)
    center = price(*mkn, *args) / flops
    per_axis, neighbours = [], rates.around(mkn)[1:]
    for i in rates.varying:
        side = [s for s in neighbours if s[i] != mkn[i]]
        paces = [price(*s, *args) / (2.0 * math.prod(s)) for s in side]
        per_axis.append(np.median([center, *paces]))
    return float(np.median(per_axis)) * flops if per_axis else center * flops


# what a GEMM priced without its adding pass keeps of its price at least: a guard against an
# adding time measured in a slow spell (here the pass was 1-3% of a 1024^3 GEMM + accumulate,
# 5-8% at k = 256 and 11-16% at k = 64-96, with one or two ranks a core)
KEPT_AT_LEAST = 0.5


def without_adding(seconds: float, nbytes: int, profile, dtype: str) -> float:
    """``seconds`` of a GEMM as calibrate times it (C += A @ B: the product into a scratch
    tile, then a pass adding it into C's ``nbytes``) less that pass, as ``profile`` measured
    adding one array into another (``adding``: seconds per byte linear in log(bytes) between
    the sizes timed, clamped at their ends; none measured: nothing taken off), slowed by its
    ``busy`` as the GEMM is; at least KEPT_AT_LEAST of ``seconds``. What a GEMM that writes
    its product straight into C costs (the first of SUMMA's and Cannon's, every one of the
    stationary and 3-D loops')."""
    rows = profile.adding.get(dtype)
    if not rows:
        return seconds
    sizes = [math.log(b) for b, _ in rows]
    per_byte = float(np.interp(math.log(nbytes), sizes, [t / b for b, t in rows]))
    return max(seconds - nbytes * per_byte * profile.busy, KEPT_AT_LEAST * seconds)


@dataclass(frozen=True)
class Threading:
    """For t BLAS threads per rank, a GEMM's time as a share of its time on one thread, over
    the shapes calibrate timed with t threads (bench.calibration.gemm_threads: cores // t
    ranks at once, each with t threads, as a run of that many ranks has them). Between
    measured thread counts the share is linear in t (one thread: 1); past the largest, the
    largest's. Empty (every share 1) for profiles from before calibrate measured it."""

    shares: tuple[tuple[int, GemmRates], ...] = ()  # (t, share of the one-thread time), by t

    @classmethod
    def of(cls, one_thread_rows, by_threads: dict) -> Threading:
        """From the one-thread float32 rows and calibrate's {t: [[m, k, n, seconds], ...]}
        with t threads, timed at shapes of the one-thread grid."""
        one = {(m, k, n): sec for m, k, n, sec in one_thread_rows}
        shares = []
        for t, rows in sorted((int(t), rows) for t, rows in by_threads.items()):
            try:
                points = [(m, k, n, sec / one[(m, k, n)]) for m, k, n, sec in rows]
            except KeyError as missing:
                raise ValueError(
                    f"profile's GEMM with {t} threads was timed at {missing}, not on the "
                    "one-thread grid (re-run distmm calibrate)"
                ) from None
            shares.append((t, GemmRates.of_values(points)))
        return cls(tuple(shares))

    def _around(self, t: int) -> tuple[tuple[int, GemmRates | None], tuple[int, GemmRates]]:
        """The measured thread counts either side of t (one thread below the first)."""
        below: tuple[int, GemmRates | None] = (1, None)
        for measured in self.shares:
            if measured[0] >= t:
                return below, measured
            below = measured
        return below, below  # past the largest measured: its share

    def share(self, t: int, mkn: tuple[int, int, int]) -> float:
        if t <= 1 or not self.shares:
            return 1.0
        (t0, lo), (t1, hi) = self._around(t)
        s0 = lo.value(mkn) if lo is not None else 1.0
        if t1 == t0:
            return s0
        s1 = hi.value(mkn)
        return s0 + (s1 - s0) * (t - t0) / (t1 - t0)

    def least_share(self, t: int) -> float:
        """No GEMM with t threads is priced at a smaller share (:meth:`share` is a mix of at
        most two measured tables, each at least its least value)."""
        if t <= 1 or not self.shares:
            return 1.0
        (_, lo), (_, hi) = self._around(t)
        return min(lo.least() if lo is not None else 1.0, hi.least())


__all__ = ["KEPT_AT_LEAST", "GemmRates", "Threading", "typical_seconds", "without_adding"]
