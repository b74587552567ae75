"""scripts/gemm_shapes.py: the GEMMs the algorithms run, timed as calibrate times its grid,
against a profile's tables (the level of each table divided out)."""

import json
from pathlib import Path

from launch import script

PROFILE = Path(__file__).resolve().parent.parent / "results" / "vm-2c-zen3" / "profile.json"


def test_a_table_twice_as_slow_prices_the_shapes_alike(tmp_path):
    """Every entry of a table doubled: the same figures (each table's level is divided out);
    the times written with --out, a missing profile refused in one line."""
    slow = json.loads(PROFILE.read_text())
    slow["gemm"]["float32"] = [[m, k, n, 2 * t] for m, k, n, t in slow["gemm"]["float32"]]
    doubled = tmp_path / "slow.json"
    doubled.write_text(json.dumps(slow))
    out = tmp_path / "timed.json"
    args = ("--top", "4", "--ranks", "4", "--out", str(out))
    r = script("gemm_shapes.py", "--profile", str(PROFILE), str(doubled), *args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("4 shapes of the schedules at P = 4")
    figures = [line.split(": ", 1)[1] for line in lines[1:]]
    assert len(figures) == 2 and figures[0] == figures[1], lines
    assert "median |price / time - 1|" in figures[0]
    assert len(json.loads(out.read_text())) == 4
    bad = script("gemm_shapes.py", "--profile", str(tmp_path / "none.json"))
    assert bad.returncode == 2 and "no such file" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) <= 3  # argparse: usage, then the one line
