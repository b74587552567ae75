"""What a report reads off the results table beyond one number per run: every repetition's
samples, the median with its interval, whether the fastest algorithm is told apart from the
runner-up, and the cores the ranks really had (for efficiencies)."""

from __future__ import annotations

import math

from layouts.endpoints import NATIVE

from . import stats
from .record import row_samples


def _number(v) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def samples(row) -> list[float]:
    """A row's timed repetitions: its ``samples`` column, or for a table without it the
    [seconds_min, seconds, seconds_max] it kept (bench.record.row_samples; a row with neither,
    or a malformed cell, has none)."""
    try:
        return row_samples(row)[0]
    except ValueError:
        return []


def has_samples(row) -> bool:
    text = row.get("samples")
    return isinstance(text, str) and text.strip().startswith("[") and len(samples(row)) > 0


def median_text(row, fmt) -> str:
    """``median [low, high]`` (the 95% order-statistic interval) where the row kept its samples,
    else the median alone; ``fmt`` formats one number."""
    if not has_samples(row):
        return fmt(row["seconds"])
    median, low, high = stats.median_ci(samples(row))
    return f"{fmt(median)} [{fmt(low)}, {fmt(high)}]"


def verdict(best, runner) -> tuple[bool, str]:
    """(separable, the words after the fastest): whether ``best`` beats ``runner`` by the
    Mann-Whitney U test on their samples, and how the report says it."""
    a, b = samples(best), samples(runner)
    ratio = f"{runner['seconds'] / best['seconds']:.2f}x"
    if min(len(a), len(b)) < stats.MIN_SAMPLES:
        return False, (
            f"{runner['algo']} {ratio} slower, but too few samples to separate them "
            f"({len(a)} and {len(b)}; at least {stats.MIN_SAMPLES} each)"
        )
    p, separate = stats.significant(a, b)
    if not separate:
        return False, (
            f"no significant difference between {best['algo']} and {runner['algo']} "
            f"(Mann-Whitney p = {p:.2g})"
        )
    return True, f"{runner['algo']} {ratio} slower (Mann-Whitney p = {p:.2g})"


def usable_cores(P, cores, nodes) -> int:
    """c(P) = min(P, cores x nodes): ranks beyond the machine's cores add none. ``cores`` is per
    node; unknown (NaN, None) cores count every rank as a core."""
    c, n = _number(cores), _number(nodes)
    if c is None or c < 1:
        return int(P)
    return int(min(P, c * (n if n and n >= 1 else 1)))


def core_counts(df) -> list[int]:
    """c(P) for each row of ``df`` (its ``cores`` column, ``nodes`` if present else 1)."""
    cores = df["cores"] if "cores" in df else [None] * len(df)
    nodes = df["nodes"] if "nodes" in df else [1] * len(df)
    return [usable_cores(P, c, n) for P, c, n in zip(df["P"], cores, nodes, strict=True)]


def has_layouts(df) -> bool:
    """Whether any run of ``df`` started from layouts other than the algorithm's own."""
    return "layouts_in" in df and bool((df["layouts_in"] != NATIVE).any())


def layout_order(values) -> list[str]:
    """The layouts of a table, native first, the others as they sort."""
    values = set(values)
    return ([NATIVE] if NATIVE in values else []) + sorted(values - {NATIVE})


def by_layouts(groups) -> list:
    """``(key, group)`` pairs of a groupby whose last key is ``layouts_in``, native first within
    the same other keys (a groupby sorts the layouts by name)."""
    groups = list(groups)
    order = layout_order(k[-1] for k, _ in groups)
    return sorted(groups, key=lambda kg: (kg[0][:-1], order.index(kg[0][-1])))


def group_keys(df, keys: list[str]) -> list[str]:
    """``keys``, and ``layouts_in`` where the table has layouts: a run from block layouts is a
    different problem from the same run from native ones, not a competitor."""
    return keys + ["layouts_in"] if has_layouts(df) else keys
