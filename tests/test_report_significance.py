"""The report's reading names a winner only where the samples separate it from the runner-up,
and efficiencies count the cores the ranks had (no MPI needed)."""

import csv
import json
import subprocess
import sys

from bench.record import COLUMNS
from bench.report_stats import core_counts, usable_cores


def report_md(tmp_path, samples_of: dict) -> str:
    rows = []
    for algo, samples in samples_of.items():
        t = sorted(samples)[len(samples) // 2]
        rows.append(
            {
                "key": algo, "status": "ok", "sweep": "sig", "scaling": "strong", "algo": algo,
                "P": 4, "M": 256, "K": 256, "N": 256, "dtype": "float32", "seconds": t,
                "seconds_min": min(samples), "seconds_max": max(samples),
                "gflops": 2 * 256**3 / t / 1e9, "bytes_sent": 2**20, "cores": 2,
                "samples": json.dumps(samples),
            }
        )  # fmt: skip
    table = tmp_path / "sig.csv"
    with open(table, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=[*COLUMNS, "samples"])
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "report"
    res = subprocess.run(
        [sys.executable, "-m", "bench.cli", "report", str(table), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return (out / "report.md").read_text()


def test_overlapping_samples_name_no_winner(tmp_path):
    md = report_md(
        tmp_path,
        {
            "summa25d": [0.100, 0.104, 0.097, 0.110, 0.101, 0.099, 0.106],
            "cannon25d": [0.102, 0.098, 0.108, 0.100, 0.103, 0.111, 0.096],
        },
    )
    assert "no significant difference between" in md and "Mann-Whitney p = " in md
    assert "No winner at 1 of 1 points" in md
    assert "5%): no algorithm at any point." in md and "| **" not in md


def test_separated_samples_name_the_winner(tmp_path):
    md = report_md(
        tmp_path,
        {
            "summa": [0.100, 0.101, 0.099, 0.102, 0.100, 0.098],
            "cannon": [0.150, 0.152, 0.149, 0.151, 0.155, 0.148],
        },
    )
    assert "**summa** at 1 of 1" in md and "cannon 1.51x slower (Mann-Whitney p = " in md
    assert "no significant difference" not in md
    assert "[0.098, 0.102]" in md  # the median's interval from the samples


def test_three_samples_are_too_few(tmp_path):
    md = report_md(tmp_path, {"summa": [0.10, 0.11, 0.12], "cannon": [0.20, 0.21, 0.22]})
    assert "too few samples to separate them" in md


def test_efficiency_counts_cores_not_ranks():
    assert [usable_cores(P, 2, 1) for P in (1, 2, 4, 8)] == [1, 2, 2, 2]
    assert usable_cores(8, 2, 4) == 8 and usable_cores(8, float("nan"), None) == 8
    import pandas as pd

    df = pd.DataFrame({"P": [1, 4, 16], "cores": [4, 4, 4], "nodes": [1, 2, 2]})
    assert core_counts(df) == [1, 4, 8]
    assert core_counts(pd.DataFrame({"P": [4, 8]})) == [4, 8]  # no cores column: every rank
