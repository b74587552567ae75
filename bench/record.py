"""The results table a sweep writes and a report reads: its columns, one row per `distmm run`
(built from the run's JSON record), and both directions of the CSV file from this one
definition. The table is rewritten whole and atomically after every run."""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
import json
import math
from pathlib import Path

from layouts.endpoints import NATIVE

from .errors import UsageError
from .files import write_atomic
from .job_output import last_json
from .metadata import as_row, clean

DONE = ("ok", "wrong", "failed", "timeout")  # a row with one of these is not run again
RETRYABLE = ("failed", "timeout")  # ... unless --retry-failed
COLUMNS = (
    "key status sweep scaling algo P M K N dtype repeat warmup topology trace grid params "
    "seconds seconds_min seconds_max gflops compute_seconds compute_ratio verified max_rel_error "
    "bytes_sent bytes_sent_per_rank_max messages peak_memory_bytes predicted_seconds "
    "predicted_phases trace_dir layouts host cores mpi_library git_commit timestamp wall_seconds "
    "error samples seconds_ci_low seconds_ci_high cpu_model memory_bytes blas numpy mpi4py python "
    "hosts nodes ranks_per_node git_dirty command launcher layouts_in multiply_seconds "
    "redistribute_in_seconds redistribute_out_seconds redistribute_bytes_per_rank_max "
    "relabel_bytes_saved predicted_multiply_seconds job settings"
).split()
REQUIRED = "key status algo P M K N dtype seconds".split()  # what makes a file a results table
TEXT = ("key", "git_commit")  # read as text even when they look like numbers
# NaN when an older table lacks them
NUMBERS = "predicted_seconds bytes_sent_per_rank_max gflops seconds_min seconds_max bytes_sent "
NUMBERS += "seconds_ci_low seconds_ci_high"
# end to end (issue 12): an older table ran native layouts, its seconds are the kernel's
REDISTRIBUTION = "redistribute_in_seconds redistribute_out_seconds redistribute_bytes_per_rank_max"
REDISTRIBUTION += " relabel_bytes_saved"
NUMBERS += " " + REDISTRIBUTION
# copied from the run's JSON record as they are
FROM_RESULT = (
    "seconds seconds_min seconds_max gflops compute_seconds compute_ratio verified max_rel_error "
    "bytes_sent messages peak_memory_bytes predicted_seconds"
).split()
# the run's metadata (bench/metadata.py), as CSV cells (blas and hosts as JSON)
METADATA = "cpu_model memory_bytes blas numpy mpi4py python hosts nodes ranks_per_node".split()
METADATA += "git_dirty command settings".split()


def row_from_result(
    point: dict, state: str, rc, out: str, err: str, wall: float, trace_dir: str, facts: dict
) -> dict:
    """The row of one run: the sweep's point, the job's outcome (launch()'s state, exit status,
    output) and the machine facts."""
    row = dict(point)
    row.update(
        trace_dir=trace_dir,
        wall_seconds=f"{wall:.2f}",
        **facts,
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    result = last_json(out)
    if state == "timeout":
        row.update(status="timeout", error=f"timed out after {wall:.0f} s", trace_dir="")
        return row
    if result is None:
        lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
        useful = [ln for ln in lines if "error" in ln.lower()] or lines
        row.update(
            status="failed",
            trace_dir="",
            error=(useful[0] if useful else f"exit status {rc}, no output")[:500],
        )
        return row
    per = result.get("bytes_sent_per_rank") or [0]
    ok = rc == 0 and result.get("verified")
    row.update(
        status="ok" if ok else ("wrong" if rc in (0, 1) else "failed"),
        grid="x".join(map(str, result.get("grid", []))),
        params=json.dumps(result.get("params", {}), sort_keys=True),
        **{k: result.get(k) for k in FROM_RESULT},
        bytes_sent_per_rank_max=max(per),
        predicted_phases=json.dumps(result["predicted_phases"], sort_keys=True)
        if "predicted_phases" in result
        else "",
        layouts=json.dumps(result.get("layouts", {})),
        mpi_library=clean(result.get("mpi_library", facts["mpi_library"])),
        samples=json.dumps(result["samples"]) if "samples" in result else "",
        seconds_ci_low=(result.get("seconds_ci") or ["", ""])[0],
        seconds_ci_high=(result.get("seconds_ci") or ["", ""])[1],
        **as_row({k: result[k] for k in METADATA if k in result}),
        **_end_to_end(result),
        error="" if rc == 0 else (err.strip().splitlines() or [f"exit status {rc}"])[-1][:500],
    )
    return row


def _end_to_end(result: dict) -> dict:
    """The end-to-end cells of a run record: its layouts, the kernel's median (the record's
    ``seconds`` where it has no ``multiply_seconds``), each redistribution's median, the most
    bytes one rank sent redistributing (in and out together) and the bytes relabelling saved."""
    phases = result.get("phases") or {}
    per_rank = [0]
    for phase in ("redistribute_in", "redistribute_out"):
        sent = (phases.get(phase) or {}).get("bytes_sent_per_rank") or []
        per_rank = [a + b for a, b in itertools.zip_longest(per_rank, sent, fillvalue=0)]
    return {
        "layouts_in": result.get("layout_label") or NATIVE,
        "multiply_seconds": result.get("multiply_seconds", result.get("seconds")),
        "redistribute_in_seconds": (phases.get("redistribute_in") or {}).get("seconds", 0.0),
        "redistribute_out_seconds": (phases.get("redistribute_out") or {}).get("seconds", 0.0),
        "redistribute_bytes_per_rank_max": max(per_rank),
        "relabel_bytes_saved": (result.get("relabel") or {}).get("bytes_saved", 0),
        "predicted_multiply_seconds": result.get(
            "predicted_multiply_seconds", result.get("predicted_seconds")
        ),
    }


FALLBACK_COLUMNS = ("seconds_min", "seconds", "seconds_max")


def row_samples(row) -> tuple[list[float], bool]:
    """A results row's timed repetitions (its ``samples`` cell, a JSON list), and whether they
    are instead the [seconds_min, seconds, seconds_max] that tables written before every sample
    was kept hold. ``row`` is a dict of cells or a pandas row (missing cells: "" or NaN).
    Raises ValueError naming what is wrong (not a list of positive seconds, no times at all)."""

    def cell(name):
        v = row.get(name)
        return "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else str(v)

    text = cell("samples").strip()
    if text:
        try:
            values = json.loads(text)
            samples = [float(v) for v in values] if isinstance(values, list) else []
        except (ValueError, TypeError):
            samples = []
        if not samples or not all(math.isfinite(v) and v > 0 for v in samples):
            raise ValueError("samples is not a JSON list of positive seconds")
        return samples, False
    try:
        samples = [float(cell(c)) for c in FALLBACK_COLUMNS if cell(c).strip()]
    except ValueError:
        raise ValueError("a seconds column is not a number") from None
    if not samples:
        raise ValueError("a row without samples or seconds")
    if not all(math.isfinite(v) and v > 0 for v in samples):
        raise ValueError("seconds must be positive numbers")
    return samples, True


def read_table(path: Path) -> list[dict]:
    """The rows as the file holds them (text), for a sweep to extend; [] if there is none."""
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def write_table(path: Path, rows: list[dict]) -> None:
    """Rewrite the whole table atomically: COLUMNS first, then any others, sorted. Every cell is
    :func:`~bench.metadata.clean` (no NUL byte, one line)."""
    extra = sorted({k for r in rows for k in r} - set(COLUMNS))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS + extra, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else clean(v)) for k, v in row.items()})
    write_atomic(path, buf.getvalue())


def read_frame(path: Path):
    """The table as a pandas DataFrame for a report, with a ``shape`` column (MxKxN) and the
    columns an older table may lack; UsageError if it is missing or not a results table."""
    import pandas as pd

    if not path.exists():
        raise UsageError(f"{path} does not exist (write one with distmm sweep)")
    try:
        df = pd.read_csv(path, dtype=dict.fromkeys(TEXT, str))
    except Exception as err:
        raise UsageError(f"{path} is not a readable results table ({err})") from None
    missing = set(REQUIRED) - set(df.columns)
    if missing:
        raise UsageError(f"{path} lacks columns {', '.join(sorted(missing))}: not a sweep table")
    if df.empty:
        raise UsageError(f"{path} holds no runs (only its header)")
    for col in NUMBERS.split():
        if col not in df:
            df[col] = float("nan")
    if "layouts_in" not in df:
        df["layouts_in"] = NATIVE
    df["layouts_in"] = df["layouts_in"].fillna(NATIVE).astype(str)
    for kernel, total in (
        ("multiply_seconds", "seconds"),
        ("predicted_multiply_seconds", "predicted_seconds"),
    ):  # a run from native layouts (every run of an older table) is the kernel alone
        if kernel not in df:
            df[kernel] = float("nan")
        df[kernel] = df[kernel].fillna(df[total].where(df["layouts_in"] == NATIVE))
    native = df["layouts_in"] == NATIVE
    for col in REDISTRIBUTION.split():  # native layouts move nothing
        df.loc[native & df[col].isna(), col] = 0.0
    df["shape"] = [f"{int(r['M'])}x{int(r['K'])}x{int(r['N'])}" for _, r in df.iterrows()]
    if "scaling" not in df:
        df["scaling"] = "strong"
    return df
