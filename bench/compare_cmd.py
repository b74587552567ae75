"""`distmm compare OLD.csv NEW.csv`: is NEW faster, slower, or the same as OLD, per configuration?

Reads two results tables (CSV from `distmm sweep`) and, for every configuration (algo, P, M, K, N,
dtype, topology, grid, params, layouts_in) with an ok row in both, prints the median time of
each (end to end where the layouts are not native), the ratio of medians NEW / OLD with a 95%
percentile-bootstrap interval, the two-sided Mann-Whitney U p value over the per-repetition
samples, and a verdict: faster, slower (p < alpha), or no significant
difference; configurations in one table only are listed as such.

    distmm compare results/before.csv results/after.csv
    distmm compare before.csv after.csv --fail-above 10 --plot change.png   # for CI

``--fail-above PCT`` exits with status 1 if any configuration is significantly slower and its
ratio of medians exceeds 1 + PCT/100. A rank test needs enough repetitions: with 3 per run the
smallest possible p value is 0.1 (nothing is ever significant at 0.05); sweep with
``repeat = 5`` or more (see bench/stats.py).
"""

from __future__ import annotations

import argparse
import json
import sys

from .cli import UsageError
from .comparison import (
    SAME,
    Change,
    Table,
    TableError,
    compare,
    context_differences,
    drift,
    plot_changes,
    read_table,
    slower_above,
    summarize,
)
from .stats import MIN_SAMPLES, min_p_value

CONFIDENCE = 0.95


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("old", metavar="OLD.csv", help="results table before the change")
    p.add_argument("new", metavar="NEW.csv", help="results table after the change")
    p.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="significance level of the Mann-Whitney U test (default 0.05)",
    )
    p.add_argument(
        "--fail-above",
        type=float,
        metavar="PCT",
        help="exit 1 if a configuration is significantly slower by more than PCT%%",
    )
    p.add_argument(
        "--min-effect",
        type=float,
        default=5.0,
        metavar="PCT",
        help="smallest change reported as faster or slower, in percent of the old median "
        "(default 5: load drifts that much between sweeps on a shared machine)",
    )
    p.add_argument(
        "--relative",
        action="store_true",
        help="test each configuration against the tables' common drift (NEW divided by the "
        "median ratio of medians) rather than against 1: for sweeps run at different times on "
        "a shared machine; it cannot see a change that slows everything alike",
    )
    p.add_argument("--plot", metavar="FILE.png", help="draw the ratios with their intervals")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _say(text: str) -> None:
    print(f"distmm compare: {text}", file=sys.stderr, flush=True)


def _load(path: str) -> Table:
    try:
        return read_table(path)
    except TableError as err:
        raise UsageError(str(err)) from None


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


HEADERS = ("configuration", "old [s]", "new [s]", "new/old", f"{CONFIDENCE:.0%} interval", "p",
           "n old/new", "verdict")  # fmt: skip


def _row(c: Change) -> tuple[str, ...]:
    interval = f"[{c.low:.3f}, {c.high:.3f}]" if c.ratio is not None else ""
    counts = f"{len(c.old)}/{len(c.new)}" + ("" if c.testable else "*")
    return (c.label, _fmt(c.old_median, ".4g"), _fmt(c.new_median, ".4g"), _fmt(c.ratio, ".3f"),
            interval, _fmt(c.p_value, ".3g"), counts, c.verdict)  # fmt: skip


def _table(changes: list[Change], relative: bool = False) -> str:
    """The table; ``relative``: the new times are divided by the common drift, and say so."""
    from tabulate import tabulate

    headers = (*HEADERS[:2], "new/drift [s]", *HEADERS[3:]) if relative else HEADERS
    return tabulate([_row(c) for c in changes], headers=headers, disable_numparse=True)


def _summary_line(summary: dict, alpha: float) -> str:
    n = summary["counts"]
    line = (
        f"{summary['in_both']} configurations in both: {n['slower']} slower, "
        f"{n['faster']} faster, {n[SAME]} {SAME} (Mann-Whitney U, alpha {alpha:g})"
    )
    if summary["geometric_mean_ratio"] is not None:
        line += f"; geometric mean of new/old {summary['geometric_mean_ratio']:.3f}"
    return line + f"; {n['only in old']} only in old, {n['only in new']} only in new"


def _too_few_note(changes: list[Change], alpha: float, pooled: bool) -> str | None:
    """Why the configurations marked * cannot differ significantly, and what to run instead;
    ``pooled``: some configuration ran in several jobs (then each job is one sample)."""
    few = [c for c in changes if c.ratio is not None and not c.testable]
    if not few:
        return None
    lowest = min(min_p_value(len(c.old), len(c.new)) for c in few)
    fix = (
        f"run each configuration in at least {MIN_SAMPLES} jobs (sweep jobs = {MIN_SAMPLES}: "
        "with several jobs each job's median is one sample)"
        if pooled
        else f"repeat each run at least {MIN_SAMPLES} times (sweep repeat = {MIN_SAMPLES})"
    )
    return (
        f"{len(few)} configuration(s) marked * have too few samples: the smallest p value "
        f"they can give is {lowest:.3g}, not below alpha {alpha:g}, so no difference there can "
        f"be significant; {fix}; 5 vs 5 can reach p = 0.0079"
    )


def _warnings(old: Table, new: Table) -> list[str]:
    out = []
    if fell_back := [t.path for t in (old, new) if t.fallback]:
        verb = "has" if len(fell_back) == 1 else "have"
        out.append(f"{' and '.join(fell_back)} {verb} no per-repetition samples (no samples "
                   "column): using seconds_min, seconds, seconds_max as three samples")  # fmt: skip
    if pooled := [t.path for t in (old, new) if t.pooled]:
        out.append(f"several ok rows (jobs) of one configuration in {' and '.join(pooled)}: "
                   "each job's median is one sample")  # fmt: skip
    return out + context_differences(old, new)


def main(args) -> int:
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, not {args.alpha:g}")
    if args.fail_above is not None and args.fail_above < 0:
        raise UsageError(f"--fail-above must be a percentage >= 0, not {args.fail_above:g}")
    old, new = _load(args.old), _load(args.new)
    if args.min_effect < 0:
        raise UsageError(f"--min-effect must be a percentage >= 0, not {args.min_effect:g}")
    changes = compare(old, new, args.alpha, CONFIDENCE, args.min_effect / 100, args.relative)
    summary = summarize(changes)
    if summary["in_both"] == 0:
        raise UsageError(f"no configuration with an ok row in both {args.old} and {args.new}")
    warnings = _warnings(old, new)
    note = _too_few_note(changes, args.alpha, old.pooled > 0 or new.pooled > 0)
    failing = slower_above(changes, args.fail_above) if args.fail_above is not None else []

    for text in warnings:
        _say(f"warning: {text}")
    if args.json:
        record = {"old": old.path, "new": new.path, "alpha": args.alpha, "confidence": CONFIDENCE,
                  "fail_above": args.fail_above, "failed": bool(failing), "summary": summary,
                  "notes": [note] if note else [], "warnings": warnings,
                  "configurations": [c.as_dict() for c in changes]}  # fmt: skip
        print(json.dumps(record, indent=1))
    else:
        print(f"# distmm compare: old {old.path}, new {new.path}")
        print(_table(changes, args.relative))
        print(_summary_line(summary, args.alpha))
        if args.relative:
            print(f"relative: new divided by the common drift {drift(old, new):.3f}")
        if note:
            print(f"note: {note}")
    if args.plot:
        plot_changes(changes, args.plot, f"{new.path} against {old.path}")
        if not args.json:
            print(f"plot: {args.plot}")
    if failing:
        worst = max(failing, key=lambda c: c.ratio)
        _say(f"{len(failing)} configuration(s) significantly slower by more than "
             f"{args.fail_above:g}% (worst: {worst.label}, {worst.ratio:.3f}x)")  # fmt: skip
        return 1
    return 0
