"""distmm sweep: rows, resume after a kill, failed runs, TOML errors (serial; launches mpiexec)."""

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = [
    "--algos",
    "cannon,summa",
    "--ranks",
    "1,4",
    "--shapes",
    "64,64,64",
    "--repeat",
    "1",
    "--warmup",
    "0",
    "--timeout",
    "60",
]


def sweep(tmp_path, *args, timeout=90):
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", "sweep", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.timeout(100)
def test_tiny_sweep_then_kill_and_resume(tmp_path):
    full = tmp_path / "full.csv"
    res = sweep(tmp_path, *TINY, "--results", str(full))
    assert res.returncode == 0, res.stderr
    got = rows(full)
    assert sorted((r["algo"], r["P"]) for r in got) == [
        ("cannon", "1"),
        ("cannon", "4"),
        ("summa", "1"),
        ("summa", "4"),
    ]
    assert all(r["status"] == "ok" and r["verified"] == "True" for r in got)
    assert all(float(r["seconds"]) > 0 and r["M"] == "64" for r in got)
    assert got[0]["mpi_library"] and got[0]["host"]

    part = tmp_path / "part.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", "sweep", *TINY, "--results", str(part)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (part.exists() and len(rows(part)) >= 1):
            time.sleep(0.05)
        assert part.exists(), "the sweep wrote no row in 60 s"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert 1 <= len(rows(part)) <= 4
    res = sweep(tmp_path, *TINY, "--results", str(part))
    assert res.returncode == 0, res.stderr
    keys = [r["key"] for r in rows(part)]
    assert len(keys) == len(set(keys))
    assert set(keys) == {r["key"] for r in rows(full)}
    # a third start has nothing to do and changes nothing
    before = part.read_text()
    res = sweep(tmp_path, *TINY, "--results", str(part))
    assert res.returncode == 0 and "0 to run" in res.stderr
    assert part.read_text() == before


@pytest.mark.timeout(60)
def test_failed_run_is_a_row_and_the_sweep_goes_on(tmp_path):
    toml = tmp_path / "bad.toml"
    toml.write_text(
        'name = "bad"\nalgorithms = ["summa"]\nranks = [1]\n'
        "shapes = [[64, 64, 64]]\nrepeat = 1\nwarmup = 0\n"
        'topology = "no-such-topology"\n'
    )
    res = sweep(tmp_path, str(toml), "--timeout", "60")
    assert res.returncode == 1, res.stderr  # recorded, and said in the exit status
    (row,) = rows(tmp_path / "results" / "bad.csv")
    assert row["status"] == "failed" and row["error"]
    # a 5-second timeout on a run that takes far longer: a timeout row, then the next run
    # (a tiny one, well inside 5 s even on a loaded machine)
    argv = ["--algos", "summa", "--ranks", "4,1", "--shapes", "4096,4096,4096;32,32,32"]
    argv += ["--repeat", "20", "--timeout", "5", "--results", "results/t.csv"]
    res = sweep(tmp_path, *argv)
    assert res.returncode == 1, res.stderr
    status = {(r["P"], r["M"]): r["status"] for r in rows(tmp_path / "results" / "t.csv")}
    assert status[("4", "4096")] == "timeout"
    assert status[("1", "32")] == "ok"
    # started again, the sweep has nothing left to run: nothing failed now
    res = sweep(tmp_path, *argv)
    assert res.returncode == 0 and "0 to run" in res.stderr, res.stderr


def test_toml_typo_names_key_and_line(tmp_path):
    toml = tmp_path / "typo.toml"
    toml.write_text('name = "t"\nranks = [1]\n\nalgoritms = ["summa"]\nshapes = [[8, 8, 8]]\n')
    res = sweep(tmp_path, str(toml), timeout=30)
    assert res.returncode == 2
    assert "typo.toml:4" in res.stderr and "'algoritms'" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    toml.write_text('name = "t"\nranks = [1]\nrepeat = "3"\nshapes = [[8, 8, 8]]\n')
    res = sweep(tmp_path, str(toml), timeout=30)
    assert res.returncode == 2 and "typo.toml:3" in res.stderr and "repeat" in res.stderr


def test_a_sweep_with_nothing_to_run_says_so(tmp_path):
    res = sweep(tmp_path, "--algos", "cannon", "--ranks", "3", "--shapes", "64,64,64", timeout=30)
    assert res.returncode == 2
    assert "error: nothing to run: no algorithm of the sweep has a grid" in res.stderr
    assert not (tmp_path / "results").exists()


def test_weak_rule_and_skips(tmp_path):
    from bench.sweep_config import weak_shape

    assert weak_shape([512, 512, 512], 1, 8) == [1024, 1024, 1024]
    assert weak_shape([512, 512, 512], 1, 4, per="memory") == [1024, 1024, 1024]
    res = sweep(
        tmp_path,
        "--algos",
        "cannon,summa3d",
        "--ranks",
        "4,8",
        "--weak",
        "256,256,256",
        "--dry-run",
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    assert "cannon cannot use P = 8" in res.stderr and "summa3d cannot use P = 4" in res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 2 and "400x400x400" in lines[0] and "512x512x512" in lines[1]
