"""scripts/collective_skew.py: what a collective adds to a loop of GEMMs, by the GEMMs' length."""

import os
import subprocess
import sys

from launch import SCRIPTS, mpirun


def _skew(*args: str, n: int = 4) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*mpirun(n), sys.executable, str(SCRIPTS / "collective_skew.py"), *args],
        capture_output=True,
        text=True,
        timeout=135,
        env=dict(os.environ, MPIEXEC_TIMEOUT="120"),
    )


def test_collective_skew_times_each_kind_on_the_grid_and_on_all_ranks():
    done = _skew("--gemms", "32,64", "--sizes", "4096", "--laps", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    first, head, *rows = done.stdout.splitlines()
    assert first.startswith("4 ranks on") and first.endswith("grid 2 x 2")
    assert head.split()[:3] == ["gemm", "step", "[ms]"]
    seen = {(r.split()[0], r.split()[2], r.split()[3]) for r in rows}
    kinds, places = ("shift", "bcast"), ("grid", "all")
    assert len(rows) == 8
    assert seen == {(n, k, w) for n in ("32", "64") for k in kinds for w in places}
    assert all(float(r.split()[1]) > 0 for r in rows)  # each GEMM step took some time


def test_collective_skew_refuses_an_unknown_kind_on_every_rank():
    done = _skew("--kinds", "gossip", n=2)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.count("collective_skew: needs") == 1, done.stderr
