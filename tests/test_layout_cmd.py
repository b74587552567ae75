"""`distmm layout` through bench.cli.main, plus real subprocess runs. Serial; no MPI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["layout", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def run_json(capsys, *argv: str) -> dict:
    status, out, err = run(capsys, *argv, "--json")
    assert status == 0 and err == ""
    return json.loads(out)


def subprocess_run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_text_report(capsys):
    status, out, err = run(capsys, "((4_PE, 3), (8))")
    assert status == 0 and err == ""
    assert "((4_PE, 3:8), (8:1))" in out  # canonical form
    assert "12 x 8" in out and "PE=4" in out and "24 addresses" in out
    assert "PE=1: rows 3-5; cols 0-7" in out


def test_text_report_compresses_runs_and_shows_padding(capsys):
    status, out, _ = run(capsys, "(10,7)/((3:7, 4_PE), (7:1))")
    assert status == 0
    assert "10 x 7" in out and "12 x 7" in out
    assert "PE=2: rows 2, 6 (+ padding 10); cols 0-6" in out
    status, out, _ = run(capsys, "((2_PE:1, 6:4), (2_PE:2, 4:1))")
    assert "PE=2: rows 0-5; cols 4-7" in out


def test_text_report_many_devices_is_abridged(capsys):
    status, out, _ = run(capsys, "((16_L2B, 8_L1B, 8:8), (16_MAB, 8:1, 4_PE))")
    assert status == 0
    assert "8192" in out and "... and 8184 more devices" in out
    assert "L2B=0, L1B=0, MAB=0, PE=1: rows 0-7; cols 1, 5, 9" in out
    assert len(out.splitlines()) < 30


def test_text_report_rotation(capsys):
    status, out, _ = run(capsys, "((3_x, 4), (3_Time, 4); R@[x + y])", "--levels", "y=3")
    assert status == 0
    assert "R@[x + y]" in out and "(x + y + 1*t) mod 3" in out
    assert "x=1, y=2: rows 4-7; cols 0-3; Time chunk 0" in out


def test_a_rotation_window_is_described_as_the_chunks_from_its_head(capsys):
    status, out, _ = run(capsys, "((2_x, 4:8), (4_Time, 2:1); R@[2*x, pace=3, window=2])")
    assert status == 0
    assert "holds chunks h .. h+1 mod 4, h = (2*x + 3*t) mod 4" in out


def test_json_rows_split(capsys):
    data = run_json(capsys, "((4_PE, 3:8), (8:1))")
    assert data["canonical"] == "((4_PE, 3:8), (8:1))"
    assert data["logical_shape"] == [12, 8] and data["padded_shape"] == [12, 8]
    assert data["levels"] == {"PE": 4} and data["replicated"] == []
    assert data["local_size"] == 24
    for i in range(12):
        for j in range(8):
            assert data["device"]["PE"][i][j] == i // 3
            assert data["address"][i][j] == (i % 3) * 8 + j
    assert "time" not in data and "rotation" not in data


def test_json_pad_layout(capsys):
    data = run_json(capsys, "(10,7)/((3:7, 4_PE), (7:1))")
    assert data["logical_shape"] == [10, 7] and data["padded_shape"] == [12, 7]
    assert len(data["address"]) == 10 and len(data["address"][0]) == 7  # logical shape
    assert data["device"]["PE"][9][6] == 1 and data["address"][9][6] == 2 * 7 + 6


def test_json_extra_levels_are_replicated(capsys):
    data = run_json(capsys, "((4_PE, 3:8), (8:1))", "--levels", "PE=4,MAB=2")
    assert data["levels"] == {"PE": 4, "MAB": 2}
    assert data["replicated"] == ["MAB"]
    assert list(data["device"]) == ["PE"]
    data = run_json(capsys, "((12:8), (8:1); B@[PE])", "--levels", "PE=4, L1B=2")
    assert data["levels"] == {"PE": 4, "L1B": 2} and data["replicated"] == ["PE", "L1B"]


def test_json_time_axis(capsys):
    data = run_json(capsys, "((2_x, 2), (2_Time, 3); R@[x + y, pace=1])")
    assert data["rotation"] == "R@[x + y]"
    assert data["time"][0] == [0, 0, 0, 1, 1, 1]
    assert data["levels"] == {"x": 2, "y": None}
    data = run_json(capsys, "((3, 2_Time), (2))")
    assert data["rotation"] == "" and data["time_size"] == 2
    assert [row[0] for row in data["time"]] == [0, 1] * 3


def test_sbp(capsys):
    data = run_json(
        capsys, "[x=S(0), y=S(1), z=S(1)]", "--sbp", "10,7", "--levels", "x=2,y=2,z=2,w=3"
    )
    assert data["canonical"] == "(10,7)/((2_x, 5:2), (2_y, 2_z, 2:1))"
    assert data["padded_shape"] == [10, 8] and data["replicated"] == ["w"]
    assert data["device"]["y"][0] == [0, 0, 0, 0, 1, 1, 1]
    assert data["device"]["z"][0] == [0, 0, 1, 1, 0, 0, 1]


def test_plot_writes_png(capsys, tmp_path):
    for name, notation in [
        ("small.png", "(10,7)/((3:7, 4_PE), (7:1))"),
        ("row.png", "(10)/((3:1, 4_PE))"),
        ("big.png", "((16_L2B, 8_L1B, 8:8), (16_MAB, 8:1, 4_PE))"),
    ]:
        path = tmp_path / name
        status, out, err = run(capsys, notation, "--plot", str(path))
        assert status == 0 and err == ""
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000


LAYOUT = "((4_PE, 3), (8))"


@pytest.mark.parametrize(
    "argv, quoted, phrase",
    [
        (["((4_PE, 3:8), (8:1)"], "((4_PE, 3:8), (8:1)", "expected ')'"),
        (["((2_PE, 6), (2_PE, 4))"], "((2_PE, 6), (2_PE, 4))", "each needs a stride"),
        ([""], "", "empty layout"),
        ([LAYOUT, "--levels", "PE=x"], "PE=x", "size 'x' of level PE is not a positive integer"),
        ([LAYOUT, "--levels", "PE=0"], "PE=0", "size '0' of level PE is not a positive integer"),
        ([LAYOUT, "--levels", "PE"], "PE", "'PE' is not NAME=SIZE"),
        ([LAYOUT, "--levels", "PE=4,PE=4"], "PE=4,PE=4", "given twice"),
        ([LAYOUT, "--levels", "Time=2"], "Time=2", "not a device level"),
        ([LAYOUT, "--levels", "PE=8"], LAYOUT, "splits level PE into 4 but --levels gives PE=8"),
        (["[x=S(0)]", "--sbp", "10,y", "--levels", "x=2"], "10,y", "invalid --sbp shape"),
        (["[x=S(0)]", "--sbp", "10,7"], "[x=S(0)]", "size of every mesh axis with --levels"),
        (["[x=S(0)", "--sbp", "10,7"], "[x=S(0)", "an SBP placement is written"),
        (
            ["((3:1), (2:3), (2:6))", "--plot", "never.png"],
            "((3:1), (2:3), (2:6))",
            "draws 1-D and 2-D layouts",
        ),
        (["((4000:1), (1001:4000))", "--json"], "((4000:1), (1001:4000))", "at most 4000000"),
    ],
)
def test_bad_input_exit_2_one_line(capsys, argv, quoted, phrase):
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("distmm layout: error: ")
    assert repr(quoted) in lines[0] and phrase in lines[0]


def test_subprocess_module_entry_point():
    proc = subprocess_run("-m", "bench.cli", "layout", "((3:8, 4_PE), (8:1))", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["device"]["PE"][5][0] == 1
    proc = subprocess_run("-m", "bench.cli", "layout", "((4_PE, 3:8), (8:1)")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "distmm layout: error: invalid layout '((4_PE, 3:8), (8:1)': expected ')' at position "
        "19, found the end"
    ]


def test_subprocess_usage_error_and_no_mpi():
    code = (
        "import sys; from bench.cli import main; status = main(sys.argv[1:]); "
        "assert 'mpi4py' not in sys.modules and 'matplotlib' not in sys.modules; "
        "sys.exit(status)"
    )
    proc = subprocess_run("-c", code, "layout", "((4_PE, 3), (8))", "--levels", "PE=x")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "distmm layout: error: invalid --levels 'PE=x' (layout '((4_PE, 3), (8))'): size 'x' of "
        "level PE is not a positive integer"
    ]
    proc = subprocess_run("-c", code, "layout", "((4_PE, 3), (8))")
    assert proc.returncode == 0 and "((4_PE, 3:8), (8:1))" in proc.stdout


def test_subprocess_module_entry_point_usage_error():
    """Under ``-m`` cli runs as __main__; its UsageError must still be the one we raise."""
    proc = subprocess_run("-m", "bench.cli", "layout", "((4_PE, 3), (8))", "--levels", "PE=0")
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "'PE=0'" in lines[0] and "not a positive integer" in lines[0]


def test_sbp_without_the_mesh_sizes_asks_for_levels(capsys):
    status, _, err = run(capsys, "[x=S(0), y=S(1)]", "--sbp", "10,7", "--levels", "x=2")
    assert status == 2
    assert "give the size of every mesh axis with --levels" in err and "(missing: y)" in err
