"""`distmm analyze DIR [--json]`: a traced run, phase by phase, against the model's prediction.

Loads every rank's trace into one pandas table (rank, rep, phase, step, start, duration, bytes),
writes it to ``DIR/spans.csv``, and prints per phase the predicted time (from ``run.json``, when
the run had ``--profile``) and the measured time on the critical path: for each repetition the
largest per-rank total of that phase, then the median over repetitions. A wait on a non-blocking
operation counts towards that operation's phase: it is the part of the communication that
computation did not hide, which is what the model's phases hold too.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from .cli import UsageError

COLUMNS = ["rank", "rep", "phase", "step", "start", "duration", "bytes", "lane"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", metavar="DIR", help="a directory written by distmm run --trace")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def spans_table(directory: Path):
    """All spans of all ranks as a DataFrame with COLUMNS (times in seconds, aligned)."""
    import pandas as pd

    from .trace import COMM_LANE, load_rank_events

    rows = []
    for rank, events in load_rank_events(directory).items():
        reps = sorted((e["ts"], e["ts"] + e["dur"], e["args"].get("rep", 0))
                      for e in events if e.get("name") == "multiply" and e.get("ph") == "X")
        for e in events:
            if e.get("ph") != "X" or e["name"] == "multiply":
                continue
            args = e.get("args", {})
            rep = next((r for lo, hi, r in reps if lo <= e["ts"] <= hi), None)
            phase = args.get("op", e["name"]) if e["name"] == "wait" else e["name"]
            rows.append((rank, rep, phase, args.get("step"), e["ts"] / 1e6, e["dur"] / 1e6,
                         args.get("bytes", 0), "comm" if e["tid"] == COMM_LANE else "rank"))
    return pd.DataFrame(rows, columns=COLUMNS)


def phase_summary(table, run: dict) -> dict:
    """{phase: {"predicted": s | None, "measured": s, "ratio": measured/predicted | None}}."""
    on_rank = table[table["lane"] == "rank"]
    per = on_rank.groupby(["rep", "rank", "phase"])["duration"].sum()
    measured = per.groupby(["rep", "phase"]).max().groupby("phase").median()
    predicted = run.get("predicted_phases", {})
    out = {}
    for phase in sorted(set(measured.index) | set(predicted)):
        m = float(measured.get(phase, 0.0))
        p = predicted.get(phase)
        out[phase] = {"predicted": p, "measured": m, "ratio": m / p if p else None}
    total_p = run.get("predicted_seconds")
    out["total"] = {"predicted": total_p, "measured": run["seconds"],
                    "ratio": run["seconds"] / total_p if total_p else None}
    return out


def main(args) -> int:
    directory = Path(args.directory)
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory (write one with distmm run --trace)")
    run_file = directory / "run.json"
    try:
        run = json.loads(run_file.read_text())
    except FileNotFoundError:
        raise UsageError(f"{run_file} is missing: is {directory} a distmm run --trace "
                         f"directory?") from None
    except ValueError as err:
        raise UsageError(f"{run_file} is not readable JSON ({err})") from None
    table = spans_table(directory)
    csv = directory / "spans.csv"
    tmp = directory / ".spans.csv.tmp"
    table.to_csv(tmp, index=False)
    os.replace(tmp, csv)
    summary = phase_summary(table, run)
    if args.json:
        print(json.dumps({"run": {k: run[k] for k in ("algo", "P", "grid", "shape", "dtype")},
                          "phases": summary, "spans_csv": str(csv)}))
        return 0
    M, K, N = run["shape"]
    print(f"{run['algo']}: P={run['P']} grid={'x'.join(map(str, run['grid']))} "
          f"shape={M}x{K}x{N} {run['dtype']}, {table['rank'].nunique()} rank traces, "
          f"{len(table)} spans")
    print(f"{'phase':<16}{'predicted [s]':>14}{'measured [s]':>14}{'meas/pred':>11}")
    for phase, row in summary.items():
        pred = "-" if row["predicted"] is None else f"{row['predicted']:.5f}"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(f"{phase:<16}{pred:>14}{row['measured']:>14.5f}{ratio:>11}")
    if "predicted_seconds" not in run:
        print("(no prediction: run with --profile FILE to add the model's numbers)")
    print(f"measured: per phase the slowest rank, median over repetitions; total is the timed "
          f"median.\nspans table: {csv}; timeline: {directory / 'combined.json'} "
          f"(vizviewer or https://ui.perfetto.dev)")
    return 0
