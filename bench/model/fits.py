"""The least-squares fits a machine profile's prices come from: collectives above the cores
and whole layout changes, all non-negative."""

from __future__ import annotations

import itertools
import math

import numpy as np

from topology.costs import collective_seconds

# a redistribution's coefficients: seconds to start, per message, per byte sent, per byte
# copied, and per piece copied (a run of elements contiguous in both blocks, the inner loop of a
# copy call: block-cyclic tiles of 64 make one of every 64 elements). Without pieces calibrate's
# moves from block-cyclic:64 were priced a median 0.6x what they took and the others 1.1-1.3x,
# on a 2-core VM and a 16-core machine alike; with them all within 0.8-1.2x (their rows at 2-16
# ranks refitted: results/*/profile*.json)
A2AV_TERMS = ("start", "message", "byte", "copy", "piece")


def fit_alltoallv(rows, scale=None) -> dict[str, float]:
    """{term: coefficient} of start + message x M + byte x B + copy x C + piece x N fitted
    (:func:`fit_nonnegative`) to [M, B, C, N, seconds] rows (with ``scale``, one per row: to
    seconds / scale); rows of profiles from before pieces were counted, [M, B, C, seconds],
    fit without them (piece 0)."""
    x = np.array([[1.0, *_loads(r)] for r in rows], float)
    if scale is not None:
        x = x * np.asarray(scale, float)[:, None]
    coef = fit_nonnegative(x, [r[-1] for r in rows])
    return dict(zip(A2AV_TERMS, map(float, coef), strict=True))


def count_alltoallv(count: dict, cores: int) -> dict[str, float]:
    """A count's layout-change coefficients (calibrate's "alltoallv" at that count), refitted
    from its timed moves (where there are enough) without those that moved nothing between
    ranks, which runs and the model take for free (calibrations before they were left out
    fitted copies as free from them); in profiles from before calibrate recorded its
    ``per_core``, with the loads of a count below the cores taken back from the cores / g
    times theirs they were recorded at (bench.calibration_counts.alltoallv_costs)."""
    a2av, g = count["alltoallv"], count["ranks"]
    scale = 1.0 if "per_core" in a2av or g >= cores else g / cores
    rows = [[*(x * scale for x in r[:-1]), r[-1]] for r in a2av.get("timed", []) if r[1] > 0]
    terms = len(A2AV_TERMS) - (not rows or len(rows[0]) < len(A2AV_TERMS))  # pieces or not
    if len(rows) < terms:
        return {k: a2av.get(k, 0.0) for k in A2AV_TERMS}
    return fit_alltoallv(rows)


def checked_counts(counts: list) -> list:
    """``counts`` (a profile's), raising ValueError (worded for "profile ... lacks") where a
    count's timed layout changes are not rows this code reads (another version's calibrate)."""
    for c in counts:
        for row in c.get("alltoallv", {}).get("timed", []):
            if len(row) not in (len(A2AV_TERMS) - 1, len(A2AV_TERMS)):
                raise ValueError(
                    f"layout changes at {c['ranks']} ranks timed in rows of "
                    f"{len(A2AV_TERMS) - 1} or {len(A2AV_TERMS)} numbers (not {len(row)})"
                )
    return counts


def exposed_at(counts, g: int, trend: bool = False) -> dict[str, float]:
    """{kind: the part of a message's price a rank pays when it posts it before a GEMM} at g
    ranks (bench/calibration_overlap.py), from the ``counts`` that measured each kind: linear
    between them, the nearest one's outside them. ``trend`` (the counts above the cores, each
    swinging with the scheduler: at 12 and 13 ranks on 2 cores a shift's 0.26 and 1.45 between
    0.61 and 0.51): from three counts on, a line in log(ranks) through them all, fitted by
    Theil-Sen (the median of the slopes between pairs), within 0 and the dearest measured."""
    out = {}
    for k in set().union(*(c.get("exposed", {}) for c in counts)):
        has = [c for c in counts if k in c.get("exposed", ())]
        gs, fs = np.array([c["ranks"] for c in has]), np.array([c["exposed"][k] for c in has])
        x = np.log(gs)
        i, j = np.triu_indices(len(x), 1)
        apart = x[j] != x[i]  # a count measured twice (a merged profile) gives no slope
        if trend and len(has) >= 3 and apart.any():
            i, j = i[apart], j[apart]
            slope = float(np.median((fs[j] - fs[i]) / (x[j] - x[i])))
            at = math.log(min(max(g, gs.min()), gs.max()))
            out[k] = float(np.clip(np.median(fs - slope * x) + slope * at, 0.0, fs.max()))
        else:
            out[k] = float(np.interp(g, gs, fs))
    return out


def _loads(row) -> list:
    """A timed row's loads (M, B, C, N), N = 0 in rows from before pieces were counted."""
    loads = list(row[:-1])
    return loads + [0.0] * (len(A2AV_TERMS) - 1 - len(loads))


def fit_sharing_alltoallv(sharing: list[dict], cores: int) -> dict[str, float]:
    """One fit over the counts above the cores of the unit coefficients :func:`sharing_scale`
    multiplies back, without the moves that moved nothing (:func:`count_alltoallv`)."""
    timed = [(r, c["ranks"] / cores) for c in sharing for r in c["alltoallv"]["timed"]]
    timed = [(r, s) for r, s in timed if r[1] > 0]
    x = np.array([[1.0, *_loads(r)] for r, _ in timed]) * [sharing_scale(s) for _, s in timed]
    coef = fit_nonnegative(x, [r[-1] for r, _ in timed])
    return dict(zip(A2AV_TERMS, map(float, coef), strict=True))


def sharing_levels(sharing: list[dict], cores: int, unit: dict) -> tuple[list, list]:
    """(counts, level of each): above the cores, how much slower each count's own moves ran
    than the one fit over them all (``unit``, :func:`fit_sharing_alltoallv`) prices them, the
    median over its rows. The fit gives how the terms grow with the ranks per core, each
    count's level what that count measured: on a 2-core VM whose speed swung 2.8x during a
    calibration, the fit alone priced the moves of 96 end-to-end runs at 4, 8, 9 and 16 ranks
    a median 0.75, 1.13, 0.83 and 1.42x what they took (24.1% off); with the levels 0.84,
    1.17, 0.91 and 1.25x (18.3%; results/vm-2c-xeon, profile_7 and end_to_end_7), and 96 runs
    measured afterwards 1.03, 1.12, 0.95 and 0.98x (11.4%; 21.1% with the fit alone)."""
    counts, levels = [], []
    for c in sorted(sharing, key=lambda c: c["ranks"]):
        coef = np.array([unit[k] for k in A2AV_TERMS]) * sharing_scale(c["ranks"] / cores)
        rows = [r for r in c["alltoallv"]["timed"] if r[1] > 0]
        priced = [float(np.dot(coef, [1.0, *_loads(r)])) for r in rows]
        ratios = [r[-1] / p for r, p in zip(rows, priced, strict=True) if p > 0]
        if ratios:
            counts.append(c["ranks"])
            levels.append(float(np.median(ratios)))
    return counts, levels


# a count's level more than this many times, or less than 1 / this, the nearer of its two
# neighbours' (steady_levels) is taken for a slow or fast spell of the machine. Over the 2-core
# VMs' 39 stored profiles, 384 of 390 levels sit within 1.60x of the nearer neighbour's, the
# other six at 1.88-2.34x; the three of those with stored runs priced the moves at their count
# 2-3x what the runs took
SPELL = 1.75


def steady_levels(counts: list, levels: list, cores: int) -> list:
    """``levels`` (:func:`sharing_levels`) with each one above both of its count's neighbours
    ``cores`` ranks either side, or below both (counts that share the cores alike: on 2 cores
    the odd counts run unevenly, above the even ones), by more than SPELL times the nearer of
    them, replaced by that one (the median of the three); the first and last counts of each
    such chain are kept. A spell of the machine during one count's moves is then not priced
    as that count's cost: results/vm-2c-zen3/profile_s67.json measured 3.52 at 8 ranks where
    6 and 10 measured 1.55 and 1.38, and priced the moves of that stop's 63 runs at 8 ranks
    2-3x what they took (1.55 instead: its planner sweep's runs 17.7% off, 7 over 30%, against
    21.0% and 23; results/vm-2c-amx/profile_s61.json's 2.97 at 6: 6.4% and 2 against 7.9% and
    8, replayed with scripts/replan.py)."""
    at = dict(zip(counts, levels, strict=True))
    out = []
    for g, level in zip(counts, levels, strict=True):
        below, above = at.get(g - cores), at.get(g + cores)
        near = level if below is None or above is None else sorted((below, level, above))[1]
        out.append(near if max(level, near) > SPELL * min(level, near) else level)
    return out


def sharing_moves(counts: list[dict], cores: int) -> tuple[dict, list, list, list] | None:
    """How calibrate's ``counts`` price layout changes above the ``cores``: (the one fit,
    :func:`fit_sharing_alltoallv`; the counts, their levels as priced (:func:`steady_levels`)
    and as measured (:func:`sharing_levels`)), None where no count there timed any (what
    Profile._alltoallv_at prices with and calibrate prints)."""
    sharing = [c for c in counts if "alltoallv" in c and c["ranks"] > cores]
    if not sharing:
        return None
    unit = fit_sharing_alltoallv(sharing, cores)
    gs, measured = sharing_levels(sharing, cores, unit)
    return unit, gs, steady_levels(gs, measured, cores), measured


def sharing_scale(per_core: float) -> np.ndarray:
    """What a redistribution's coefficients (A2AV_TERMS) are multiplied by with ``per_core``
    ranks on each core (at least 1): its messages by per_core (the cores time-slice every
    rank's), its start (the exchange's set-up and the barrier ending it: each rank waits for
    every rank on its core to be scheduled once for each of the others), its bytes sent and
    copied and its pieces by per_core squared (every rank's copies are time-sliced, and each
    piece waits for
    its partner to be scheduled; the ranks' blocks together leave the caches). On two
    calibrations on 2 cores a layout change moving 4 MiB per rank took 0.47, 1.1, 1.45 and 2.0
    ms per rank per core at 4, 6, 8 and 16 ranks, and the starts fitted per count were 117-122
    us at 4 ranks, 223-626 at 8 and 1731-2131 at 16. With bytes grown as per_core, one fit
    over the counts priced 16 ranks' moves of 4 MiB per rank at 0.6-0.8x what they took and
    tesseract's moves from block at 16 ranks at half, and the planner from block, on four
    measured sweeps priced again with one calibration (scripts/replan.py, results/vm-2c),
    chose the fastest in 92 of 128 cases, 116 within 10% (so: 102 and 122)."""
    s = max(per_core, 1.0)
    return np.array([s * s, s, s * s, s * s, s * s])


def fit_nonnegative(x, t, relative: bool = True) -> list[float]:
    """Coefficients c >= 0 of t ~ x @ c with the least squared relative (or absolute) error:
    the best of the least-squares fits over every subset of the columns whose coefficients are
    all non-negative (the exact non-negative least squares for so few columns, without
    importing scipy.optimize)."""
    t = np.asarray(t, float)
    weight = t if relative else np.ones_like(t)
    x = np.asarray(x, float) / weight[:, None]
    t = t / weight
    best, coef = math.inf, np.zeros(x.shape[1])
    for keep in itertools.product((True, False), repeat=x.shape[1]):
        cols = np.array(keep)
        if not cols.any():
            continue
        c = np.zeros(x.shape[1])
        c[cols] = np.linalg.lstsq(x[:, cols], t, rcond=None)[0]
        err = float(np.sum((x @ c - t) ** 2))
        if (c >= 0).all() and err < best:
            best, coef = err, c
    return [float(v) for v in coef]


def fit_collectives(counts, cores: int, grid: bool = False) -> dict:
    """{kind: (alpha, beta)}: each collective's formula (topology/costs.py) with one alpha and
    one beta for all message sizes, fitted (:func:`_trimmed_fit`, least absolute squares: the
    times are differences of two loops, near zero or noise for small messages, which a
    relative fit would let lead) to what calibrate timed on all g ranks for every count g
    above the cores (bench/calibration_counts.py: "collectives", [[bytes, seconds]]), each
    divided by g / cores: the cores share out every rank's part. With ``grid``, to what it
    timed on the rows and then the columns of a p x q grid of them, every row (column) at
    once ("grid", "grid_collectives"): the formula on q ranks plus that on p. {} if none was
    timed."""
    rows: dict[str, list] = {}
    for c in counts:
        g = c["ranks"]
        if g <= cores:
            continue
        sizes = c.get("grid", ()) if grid else (g,)
        for kind, timed in c.get("grid_collectives" if grid else "collectives", {}).items():
            for n, sec in timed:
                unit = [
                    sum(collective_seconds(kind, n, s, *ab) for s in sizes)
                    for ab in ((1.0, 0.0), (0.0, 1.0))
                ]
                rows.setdefault(kind, []).append(([u * g / cores for u in unit], sec))
    return {kind: _trimmed_fit(r) for kind, r in rows.items()}


OUTLIER = 4.0  # a timing this many times the median residual off the first fit is dropped


def _trimmed_fit(rows) -> tuple[float, ...]:
    """:func:`fit_nonnegative` (absolute) to [(x, seconds)] rows, then again without the rows
    more than OUTLIER x the median residual off it. A slow spell of the machine during one
    timing (a shift on 15 ranks on 2 cores: 9 ms per rank per core where the other counts took
    0.1-2 ms) priced every 1 MiB shift 2.3x what the other timings' fit does, and a profile
    with such spells predicted runs at P = 2 ... 16 a median 22% off (7% with this trim)."""
    x = np.array([x for x, _ in rows], float)
    t = np.array([t for _, t in rows], float)
    coef = fit_nonnegative(x, t, relative=False)
    off = np.abs(x @ coef - t)
    keep = off <= OUTLIER * np.median(off)
    if keep.sum() >= max(3, x.shape[1]) and not keep.all():
        coef = fit_nonnegative(x[keep], t[keep], relative=False)
    return tuple(coef)


__all__ = [
    "A2AV_TERMS",
    "checked_counts",
    "count_alltoallv",
    "exposed_at",
    "fit_alltoallv",
    "fit_collectives",
    "fit_nonnegative",
    "fit_sharing_alltoallv",
    "sharing_scale",
]
