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
from pathlib import Path

from .errors import UsageError
from .options import add_json
from .spans import load_run, phase_summary, spans_table, write_spans


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", metavar="DIR", help="a directory written by distmm run --trace")
    add_json(p)


def main(args) -> int:
    directory = Path(args.directory)
    run = load_run(directory)
    table = spans_table(directory)
    found = {f.stem[4:] for f in directory.glob("rank*.json")}
    missing = [r for r in range(run["P"]) if str(r) not in found]
    if missing:  # per phase the slowest rank: not from some of them
        raise UsageError(
            f"{directory} lacks the traces of rank(s) {', '.join(map(str, missing))} of the "
            f"{run['P']} in run.json (rank*.json): analyze needs every rank's"
        )
    csv = write_spans(table, directory / "spans.csv")
    summary = phase_summary(table, run)
    if args.json:
        print(
            json.dumps(
                {
                    "run": {k: run[k] for k in ("algo", "P", "grid", "shape", "dtype")},
                    "phases": summary,
                    "spans_csv": str(csv),
                }
            )
        )
        return 0
    M, K, N = run["shape"]
    print(
        f"{run['algo']}: P={run['P']} grid={'x'.join(map(str, run['grid']))} "
        f"shape={M}x{K}x{N} {run['dtype']}, {table['rank'].nunique()} rank traces, "
        f"{len(table)} spans"
    )
    print(f"{'phase':<16}{'predicted [s]':>14}{'measured [s]':>14}{'meas/pred':>11}")
    for phase, row in summary.items():
        pred = "-" if row["predicted"] is None else f"{row['predicted']:.5f}"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(f"{phase:<16}{pred:>14}{row['measured']:>14.5f}{ratio:>11}")
    if "predicted_seconds" not in run:
        print("(no prediction: run with --profile FILE to add the model's numbers)")
    print(
        f"measured: per phase the slowest rank, median over repetitions; total is the timed "
        f"median.\nspans table: {csv}; timeline: {directory / 'combined.json'} "
        f"(vizviewer or https://ui.perfetto.dev)"
    )
    return 0
