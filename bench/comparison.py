"""Two results tables compared configuration by configuration (the library of `distmm compare`).

A results table is the CSV `distmm sweep` writes. Its ``samples`` column holds every timed
repetition of a run as a JSON list of seconds (``[0.0123, 0.0119, ...]``); a table without it (or
a row with the cell empty) falls back to ``seconds_min``, ``seconds`` and ``seconds_max`` as three
samples, which no rank test can find significant (see :mod:`bench.stats`). Only rows with status
``ok`` count. Rows are matched on :data:`KEY_COLUMNS` (a run from the user's layouts is another
configuration than the same run from native ones; its samples are end to end). Several ok rows
of one configuration in one table (a sweep's ``jobs``, or sweeps appended to one file) count as
independent jobs: the test sets the jobs' medians against each other, since repetitions inside
one job share its placement on the cores and differ less than jobs do.

Each configuration also keeps what it ran on and with (:data:`CONTEXT_COLUMNS`: the machine,
the MPI library, the BLAS, NumPy and the timing settings of bench.metadata.settings), so that
:func:`context_differences` can say where a change may come from those rather than the code.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from layouts.endpoints import NATIVE

from .metadata import settings_values
from .record import row_samples
from .stats import can_be_significant, median_ci, ratio_ci, significant

KEY_COLUMNS = ("algo", "P", "M", "K", "N", "dtype", "topology", "grid", "params", "layouts_in")
REQUIRED_COLUMNS = ("status", "algo", "P", "M", "K", "N")
SAMPLES_COLUMN = "samples"
# what a run ran on and with, beside the code (bench/metadata.py); a table from before a column
# was written has it blank: nothing is known there, and nothing is said
CONTEXT_COLUMNS = ("cpu_model", "cores", "mpi_library", "blas", "numpy", "settings")

FASTER, SLOWER, SAME = "faster", "slower", "no significant difference"
ONLY_OLD, ONLY_NEW = "only in old", "only in new"
VERDICTS = (SLOWER, FASTER, SAME, ONLY_OLD, ONLY_NEW)


class TableError(ValueError):
    """A file that cannot be read as a results table; the message names the file."""


@dataclass(frozen=True)
class Table:
    path: str
    samples: dict[tuple[str, ...], tuple[float, ...]]  # ok rows' samples by configuration
    fallback: int  # configurations whose samples are seconds_min, seconds, seconds_max
    pooled: int  # configurations with more than one ok row (jobs): their samples are job medians
    # by configuration, {column of CONTEXT_COLUMNS: the distinct values its ok rows hold}
    context: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    config: tuple[str, ...]  # the values of KEY_COLUMNS
    verdict: str
    old: tuple[float, ...] = ()
    new: tuple[float, ...] = ()
    old_median: float | None = None
    new_median: float | None = None
    ratio: float | None = None  # median(new) / median(old)
    low: float | None = None  # the ratio's interval
    high: float | None = None
    p_value: float | None = None
    testable: bool = True  # False: too few samples for any p below alpha

    @property
    def label(self) -> str:
        return config_label(self.config)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["config"] = dict(zip(KEY_COLUMNS, self.config, strict=True))
        out.update(label=self.label, old=list(self.old), new=list(self.new))
        return out


def _normal(column: str, value: str | None) -> str:
    """One spelling per value, so tables written by different versions still match."""
    value = (value or "").strip()
    if column == "layouts_in":  # a table from before layouts were an axis ran native ones
        return value or NATIVE
    if column in ("P", "M", "K", "N"):
        try:
            return str(int(float(value)))
        except ValueError:
            return value
    if column == "params":
        try:
            return json.dumps(json.loads(value or "{}"), sort_keys=True)
        except ValueError:
            return value
    if column == "cores":
        try:
            return str(int(float(value))) if value else ""
        except ValueError:
            return value
    if column in ("blas", "settings") and value:
        try:
            return json.dumps(json.loads(value), sort_keys=True)
        except ValueError:
            return value
    return value


def config_label(config: tuple[str, ...]) -> str:
    """``cannon P=4 1536x1536x1536 float32 2x2 panel=64 @mncore:2,2,2,2 layouts=block`` (empty
    parts and native layouts left out)."""
    c = dict(zip(KEY_COLUMNS, config, strict=True))
    parts = [c["algo"], f"P={c['P']}", f"{c['M']}x{c['K']}x{c['N']}", c["dtype"], c["grid"]]
    try:
        params = json.loads(c["params"])
        parts += [f"{k}={v}" for k, v in params.items()] if isinstance(params, dict) else []
    except ValueError:
        parts.append(c["params"])
    if c["topology"]:
        parts.append(f"@{c['topology']}")
    if c["layouts_in"] != NATIVE:
        parts.append(f"layouts={c['layouts_in']}")
    return " ".join(p for p in parts if p)


def _row_samples(row: dict, where: str) -> tuple[list[float], bool]:
    """(samples, fell back to the three summary times) by the results schema's one reader."""
    try:
        return row_samples(row)
    except ValueError as err:
        raise TableError(f"{where}: {err}") from None


def read_table(path: str | Path) -> Table:
    """The ok rows of a results table, as samples by configuration. Raises TableError."""
    path = Path(path)
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            if not header or missing:
                raise TableError(f"{path} is not a results table (no column {', '.join(missing)})")
            if SAMPLES_COLUMN not in header and "seconds" not in header:
                raise TableError(f"{path} is not a results table (no samples or seconds column)")
            rows = list(reader)
    except FileNotFoundError:
        raise TableError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise TableError(f"{path} is a directory, not a results table") from None
    except (UnicodeDecodeError, csv.Error) as err:
        raise TableError(f"{path} is not a results table ({err})") from None
    jobs: dict[tuple[str, ...], list[list[float]]] = {}
    fallback: set[tuple[str, ...]] = set()
    context: dict[tuple[str, ...], dict[str, set[str]]] = {}
    for line, row in enumerate(rows, start=2):
        if (row.get("status") or "").strip() != "ok":
            continue
        config = tuple(_normal(c, row.get(c)) for c in KEY_COLUMNS)
        values, fell_back = _row_samples(row, f"{path} line {line}")
        jobs.setdefault(config, []).append(values)
        if fell_back:
            fallback.add(config)
        ran = context.setdefault(config, {})
        for c in CONTEXT_COLUMNS:
            if value := _normal(c, row.get(c)):
                ran.setdefault(c, set()).add(value)
    return Table(
        path=str(path),
        samples={k: _job_samples(v) for k, v in jobs.items()},
        fallback=len(fallback),
        pooled=sum(1 for v in jobs.values() if len(v) > 1),
        context={k: {c: frozenset(v) for c, v in ran.items()} for k, ran in context.items()},
    )


def _job_samples(jobs: list[list[float]]) -> tuple[float, ...]:
    """One job's repetitions, or with several jobs (rows) each job's median: repetitions in
    one job share its placement on the cores and are not independent, jobs are."""
    if len(jobs) == 1:
        return tuple(jobs[0])
    return tuple(statistics.median(v) for v in jobs)


def compare_samples(
    config: tuple[str, ...],
    old: tuple[float, ...],
    new: tuple[float, ...],
    alpha: float = 0.05,
    confidence: float = 0.95,
    min_effect: float = 0.0,
) -> Change:
    """One configuration's change: medians, ratio with its interval, Mann-Whitney p, verdict.

    A change is faster or slower only when it is significant and the medians differ by more
    than ``min_effect`` (a fraction): on shared machines load drifts between two sweeps by a
    few percent, a real but uninteresting difference (asv flags only changes above a factor
    for the same reason)."""
    if not new:
        return Change(config, ONLY_OLD, old=old, old_median=median_ci(old, confidence)[0])
    if not old:
        return Change(config, ONLY_NEW, new=new, new_median=median_ci(new, confidence)[0])
    ratio, low, high = ratio_ci(old, new, confidence)
    p, is_significant = significant(old, new, alpha)
    large = abs(ratio - 1) > min_effect
    verdict = (SLOWER if ratio > 1 else FASTER) if is_significant and large else SAME
    return Change(
        config,
        verdict,
        old=old,
        new=new,
        old_median=median_ci(old, confidence)[0],
        new_median=median_ci(new, confidence)[0],
        ratio=ratio,
        low=low,
        high=high,
        p_value=p,
        testable=can_be_significant(len(old), len(new), alpha),
    )


def compare(
    old: Table,
    new: Table,
    alpha: float = 0.05,
    confidence: float = 0.95,
    min_effect: float = 0.0,
    relative: bool = False,
) -> list[Change]:
    """Every configuration of either table: OLD's order first, then those only in NEW.

    ``relative``: NEW's samples are first divided by the median over the configurations in
    both of the ratio of medians (:func:`drift`), so a change is one relative to the rest of
    the table. Two sweeps run at different times on a shared machine can differ by several
    percent everywhere; this tests each configuration against that common drift (and so
    cannot see a change that slows every configuration alike)."""
    configs = list(old.samples) + [c for c in new.samples if c not in old.samples]
    scale = drift(old, new) if relative else 1.0
    return [
        compare_samples(
            c,
            old.samples.get(c, ()),
            tuple(x / scale for x in new.samples.get(c, ())),
            alpha,
            confidence,
            min_effect,
        )
        for c in configs
    ]


def drift(old: Table, new: Table) -> float:
    """The median over configurations in both tables of median(new) / median(old) (1 if none)."""
    ratios = [
        statistics.median(new.samples[c]) / statistics.median(v)
        for c, v in old.samples.items()
        if new.samples.get(c)
    ]
    return statistics.median(ratios) if ratios else 1.0


def context_differences(old: Table, new: Table) -> list[str]:
    """One line per :data:`CONTEXT_COLUMNS` column that differs between the tables in some
    configuration in both (where both record it), saying in how many and the values; for
    ``settings`` by variable (a variable in one table only is "unset" in the other)."""
    both = [c for c in old.samples if c in new.samples]
    out = []
    for column in CONTEXT_COLUMNS:
        differ, seen = 0, {}  # seen: name (column, or variable) -> (old values, new values)
        for config in both:
            was, now = old.context.get(config, {}), new.context.get(config, {})
            if column not in was or column not in now or was[column] == now[column]:
                continue
            differ += 1
            if column != "settings":
                olds, news = seen.setdefault(column, (set(), set()))
                olds.update(was[column])
                news.update(now[column])
                continue
            a, b = settings_values(was[column]), settings_values(now[column])
            for name in sorted(a.keys() | b.keys()):
                if a.get(name, {"unset"}) != b.get(name, {"unset"}):
                    olds, news = seen.setdefault(name, (set(), set()))
                    olds.update(a.get(name, {"unset"}))
                    news.update(b.get(name, {"unset"}))
        if differ:
            what = "; ".join(
                f"{name}: {' / '.join(sorted(o))} in old, {' / '.join(sorted(n))} in new"
                for name, (o, n) in seen.items()
            )
            out.append(f"{column} differs in {differ} of the {len(both)} configurations in both "
                       f"({what}): a change there may come from it, not from the code")  # fmt: skip
    return out


def summarize(changes: list[Change]) -> dict:
    """Counts per verdict, configurations in both, untestable ones, geometric mean of ratios."""
    both = [c for c in changes if c.ratio is not None]
    counts = {v: sum(1 for c in changes if c.verdict == v) for v in VERDICTS}
    geomean = math.exp(sum(math.log(c.ratio) for c in both) / len(both)) if both else None
    return {
        "in_both": len(both),
        "counts": counts,
        "untestable": sum(1 for c in both if not c.testable),
        "geometric_mean_ratio": geomean,
    }


def slower_above(changes: list[Change], percent: float) -> list[Change]:
    """Configurations significantly slower with a ratio of medians above 1 + percent / 100."""
    return [c for c in changes if c.verdict == SLOWER and (c.ratio - 1) * 100 > percent]


_COLOURS = {SLOWER: "tab:red", FASTER: "tab:green", SAME: "tab:gray"}


def plot_changes(changes: list[Change], path: str | Path, title: str = "") -> None:
    """One point per configuration in both tables: ratio of medians with its interval, line at 1.

    Written to a temporary name and renamed, so an interrupted plot never leaves half a file.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    both = [c for c in changes if c.ratio is not None]
    fig = Figure(figsize=(10, 1.2 + 0.32 * max(1, len(both))), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for y, c in enumerate(reversed(both)):
        err = [[c.ratio - c.low], [c.high - c.ratio]]
        ax.errorbar(c.ratio, y, xerr=err, fmt="o", capsize=3, color=_COLOURS[c.verdict])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(both)), [c.label for c in reversed(both)], fontsize=8)
    ax.set_ylim(-0.7, len(both) - 0.3)
    ax.set_xlabel("median new / median old (bootstrap interval); right of 1 = slower")
    handles = [ax.scatter([], [], color=col, label=v) for v, col in _COLOURS.items()]
    ax.legend(handles=handles, fontsize=8, loc="best")
    ax.set_title(title, fontsize=9)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", dpi=120)
    os.replace(tmp, path)
