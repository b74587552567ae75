"""A traced run as a table: every span of every rank (rank, rep, phase, step, start, duration,
bytes, lane) and, per phase, the measured critical path beside the model's prediction. Used by
`distmm analyze` and `distmm report`."""

from __future__ import annotations

import json
from pathlib import Path

from .errors import UsageError
from .files import save_csv_atomic
from .trace import COMM_LANE, load_rank_events

COLUMNS = ["rank", "rep", "phase", "step", "start", "duration", "bytes", "lane"]


def load_run(directory: Path) -> dict:
    """The run.json of a `distmm run --trace` directory; UsageError saying what is wrong."""
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory (write one with distmm run --trace)")
    run_file = directory / "run.json"
    try:
        return json.loads(run_file.read_text())
    except FileNotFoundError:
        raise UsageError(
            f"{run_file} is missing: is {directory} a distmm run --trace directory?"
        ) from None
    except ValueError as err:
        raise UsageError(f"{run_file} is not readable JSON ({err})") from None


def spans_table(directory: Path):
    """All spans of all ranks as a DataFrame with COLUMNS (times in seconds, aligned)."""
    import pandas as pd

    rows = []
    for rank, events in load_rank_events(directory).items():
        reps = sorted(
            (e["ts"], e["ts"] + e["dur"], e["args"].get("rep", 0))
            for e in events
            if e.get("name") == "multiply" and e.get("ph") == "X"
        )
        for e in events:
            if e.get("ph") != "X" or e["name"] == "multiply":
                continue
            args = e.get("args", {})
            rep = next((r for lo, hi, r in reps if lo <= e["ts"] <= hi), args.get("rep"))
            phase = args.get("op", e["name"]) if e["name"] == "wait" else e["name"]
            rows.append(
                (
                    rank,
                    rep,
                    phase,
                    args.get("step"),
                    e["ts"] / 1e6,
                    e["dur"] / 1e6,
                    args.get("bytes", 0),
                    "comm" if e["tid"] == COMM_LANE else "rank",
                )
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def write_spans(table, path: Path) -> Path:
    return save_csv_atomic(path, table)


def phase_summary(table, run: dict) -> dict:
    """{phase: {"predicted": s | None, "measured": s, "ratio": measured/predicted | None}}."""
    on_rank = table[table["lane"] == "rank"]
    per = on_rank.groupby(["rep", "rank", "phase"])["duration"].sum()
    measured = per.groupby(["rep", "phase"]).max().groupby("phase").median()
    predicted = dict(run.get("predicted_phases", {}))
    # an end-to-end run's moves: one "redistribute" phase in its traces, in and out together;
    # the barrier closing its repetition with the kernel's (the rows then add up to the total)
    moves = [run.get(f"predicted_redistribute_{side}_seconds") or 0.0 for side in ("in", "out")]
    if any(moves):
        predicted["redistribute"] = sum(moves)
    if run.get("predicted_closing_barrier_seconds"):
        closing = run["predicted_closing_barrier_seconds"]
        predicted["barrier"] = predicted.get("barrier", 0.0) + closing
    out = {}
    for phase in sorted(set(measured.index) | set(predicted)):
        m = float(measured.get(phase, 0.0))
        p = predicted.get(phase)
        out[phase] = {"predicted": p, "measured": m, "ratio": m / p if p else None}
    total_p = run.get("predicted_seconds")
    out["total"] = {
        "predicted": total_p,
        "measured": run["seconds"],
        "ratio": run["seconds"] / total_p if total_p else None,
    }
    return out
