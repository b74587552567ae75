"""distmm report on a small generated results table (no MPI needed)."""

import csv
import json
import subprocess
import sys

from bench.record import COLUMNS


def test_report_from_small_table(tmp_path):
    rows = []
    for algo, speed in (("cannon", 1.0), ("summa", 1.3)):
        for P in (1, 4, 16):
            t = 0.08 * speed / P**0.8
            rows.append(
                {
                    "key": f"{algo}{P}",
                    "status": "ok",
                    "sweep": "mini",
                    "scaling": "strong",
                    "algo": algo,
                    "P": P,
                    "M": 512,
                    "K": 512,
                    "N": 512,
                    "dtype": "float32",
                    "seconds": t,
                    "seconds_min": t * 0.9,
                    "seconds_max": t * 1.1,
                    "gflops": 2 * 512**3 / t / 1e9,
                    "bytes_sent": 0 if P == 1 else 2**20 * P,
                    "bytes_sent_per_rank_max": 0 if P == 1 else 2**20 / P**0.5,
                    "predicted_seconds": t * 0.8,
                    "predicted_phases": json.dumps({"gemm": t * 0.5, "shift": t * 0.3}),
                    "layouts": json.dumps({"A": "((1:512), (512:1))"}),
                    "host": "h",
                    "cores": 2,
                    "mpi_library": "MPICH",
                    "git_commit": "abc",
                    "settings": json.dumps(
                        {"OPENBLAS_NUM_THREADS": "1", **({"DISTMM_FENCE": "sem"} if P > 4 else {})}
                    ),
                }
            )
    rows.append(
        {
            "key": "bad",
            "status": "failed",
            "sweep": "mini",
            "scaling": "strong",
            "algo": "summa",
            "P": 3,
            "M": 512,
            "K": 512,
            "N": 512,
            "dtype": "float32",
            "error": "distmm run: error: boom",
        }
    )
    table = tmp_path / "mini.csv"
    with open(table, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
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
    for name in (
        "report.md",
        "report.html",
        "strong_512x512x512_float32.png",
        "predicted_vs_measured.png",
        "comm_512x512x512_float32.png",
        "layout_cannon.png",
        "layout_summa.png",
    ):
        assert (out / name).stat().st_size > 1000, name
    md = (out / "report.md").read_text()
    assert "cannon" in md and "summa" in md and "Fastest" in md and "boom" in md
    assert "](strong_512x512x512_float32.png)" in md
    # both send the same bytes at every point: no algorithm moves least
    assert "Least data moved: a tie at 3 of 3 points (P = 1 moves nothing)." in md
    assert "| cannon, summa (tie) |" in md
    settings = "`DISTMM_FENCE=sem|unset`, `OPENBLAS_NUM_THREADS=1`."
    assert f"Settings (they differ between runs): {settings}" in md
    page = (out / "report.html").read_text()
    assert "data:image/png;base64," in page and "<table>" in page


def test_report_refuses_a_missing_table_and_one_without_runs(tmp_path):
    (tmp_path / "header.csv").write_text(",".join(COLUMNS) + "\n")
    for table, words in (("no.csv", "does not exist"), ("header.csv", "holds no runs")):
        res = subprocess.run(
            [sys.executable, "-m", "bench.cli", "report", str(tmp_path / table), "-o",
             str(tmp_path / "r")],
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
        assert words in res.stderr
