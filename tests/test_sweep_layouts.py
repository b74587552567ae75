"""Layouts as a sweep axis: the runs and keys it expands to, the --layouts each run gets, bad
layouts refused before any run, and `distmm compare` keeping layouts apart (serial; no MPI,
except the last test, which runs when `distmm run` takes --layouts)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.cli import main
from bench.launch import run_argv
from bench.sweep_config import configure, plan_runs

ROOT = Path(__file__).resolve().parent.parent
FLAGS = dict.fromkeys(
    "name algos ranks shapes weak dtype profile calibrate timeout repeat warmup trace topology "
    "results launcher hostfile ranks_per_node pin layouts".split()
)


def _cfg(tmp_path, toml: str = "", **flags):
    path = None
    if toml:
        path = tmp_path / "s.toml"
        path.write_text(toml)
    return configure(SimpleNamespace(**{**FLAGS, "file": path and str(path), **flags}))


BASE = 'name = "s"\nalgorithms = ["cannon", "summa"]\nranks = [1, 4]\nshapes = [[64, 64, 64]]\n'


def test_layouts_multiply_the_runs_and_only_non_native_ones_change_the_key(tmp_path):
    plain, _ = plan_runs(_cfg(tmp_path, BASE))
    assert {r["layouts_in"] for r in plain} == {"native"}
    runs, _ = plan_runs(_cfg(tmp_path, BASE + 'layouts = ["native", "block", "block-cyclic:8"]\n'))
    assert len(runs) == 3 * len(plain)
    keys = {(r["algo"], r["P"], r["layouts_in"]): r["key"] for r in runs}
    assert len(set(keys.values())) == len(runs)
    # a table written before layouts were an axis resumes: its native keys are the same
    assert {r["key"] for r in plain} == {k for (_, _, lay), k in keys.items() if lay == "native"}
    # flags win over the TOML, separated by ';'
    cfg = _cfg(tmp_path, BASE + 'layouts = ["block"]\n', layouts="cols; native")
    assert cfg["layouts"] == ["cols", "native"]


def test_each_run_gets_its_layouts_and_native_adds_no_flag():
    assert "--layouts" not in run_argv("cannon", (8, 8, 8), layouts="native")
    assert "--layouts" not in run_argv("cannon", (8, 8, 8))
    argv = run_argv("cannon", (8, 8, 8), layouts="block-cyclic:64", as_json=True)
    assert argv[argv.index("--layouts") + 1] == "block-cyclic:64" and argv[-1] == "--json"


def _sweep(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", "sweep", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize(
    "layouts, words",
    [
        ('["native", "blok"]', ["s.toml:5", "'blok'", "unknown layout name"]),
        ('["block-cyclic:0"]', ["s.toml:5", "NB=0"]),
        ('["((4_r, 16), (64))@r=4"]', ["s.toml:5", "P=1", "4 ranks"]),
        ('"block"', ["s.toml:5", "layouts must be a non-empty list"]),
    ],
)
def test_a_bad_layout_stops_the_sweep_before_any_run(tmp_path, layouts, words):
    (tmp_path / "s.toml").write_text(BASE + f"layouts = {layouts}\n")
    res = _sweep(tmp_path, "s.toml")
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert all(w in res.stderr for w in words), res.stderr
    assert not (tmp_path / "results").exists()
    res = _sweep(tmp_path, "--algos", "cannon", "--ranks", "4", "--shapes", "64,64,64",
                 "--layouts", "native;rowz", "--dry-run")  # fmt: skip
    assert res.returncode == 2 and "--layouts: layouts 'rowz' at P=4" in res.stderr


def test_layouts_with_a_tree_or_cluster_topology_are_swept(tmp_path):
    """distmm run takes user layouts on the MN-Core tree and on clusters: the sweep expands
    them there as on a mesh."""
    for topology in ("mncore:2,2,1,1", "cluster:2,2"):
        toml = BASE + f'layouts = ["native", "block"]\ntopology = "{topology}"\n'
        runs, _ = plan_runs(_cfg(tmp_path, toml))
        assert {(r["layouts_in"], r["topology"]) for r in runs} == {
            ("native", topology),
            ("block", topology),
        }


def test_dry_run_lists_the_layouts(tmp_path):
    res = _sweep(tmp_path, "--algos", "cannon", "--ranks", "4", "--shapes", "64,64,64",
                 "--layouts", "native;cols", "--dry-run")  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 2 and "layouts=cols" in lines[1] and "layouts" not in lines[0]


def _table(path, layouts: dict, column: bool = True):
    """{layouts: seconds} for cannon P=4, 7 samples each."""
    head = "key status algo P M K N dtype seconds samples".split() + (["layouts_in"] * column)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=head, extrasaction="ignore")
        w.writeheader()
        for name, t in layouts.items():
            samples = [t * (1 + 0.002 * i) for i in range(7)]
            w.writerow(dict(key=name, status="ok", algo="cannon", P=4, M=64, K=64, N=64,
                            dtype="float32", seconds=t, samples=json.dumps(samples),
                            layouts_in=name))  # fmt: skip
    return str(path)


def test_compare_keys_configurations_by_layouts(tmp_path, capsys):
    old = _table(tmp_path / "old.csv", {"native": 0.1}, column=False)  # before the column
    new = _table(tmp_path / "new.csv", {"native": 0.1, "block": 0.3})
    rc = main(["compare", old, new, "--json"])
    result = json.loads(capsys.readouterr().out)
    assert rc == 0
    verdicts = {c["label"]: c["verdict"] for c in result["configurations"]}
    assert verdicts == {
        "cannon P=4 64x64x64 float32": "no significant difference",
        "cannon P=4 64x64x64 float32 layouts=block": "only in new",
    }


def _run_takes_layouts() -> bool:
    res = subprocess.run([sys.executable, "-m", "bench.cli", "run", "--help"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)  # fmt: skip
    return "--layouts" in res.stdout


@pytest.mark.timeout(300)
def test_a_small_sweep_over_layouts_records_kernel_and_end_to_end(tmp_path, profile_file):
    if not _run_takes_layouts():
        pytest.skip("distmm run does not take --layouts yet")
    res = _sweep(tmp_path, "--algos", "summa", "--ranks", "1,2", "--shapes", "64,64,64",
                 "--layouts", "native;rows", "--repeat", "2", "--warmup", "0", "--timeout",
                 "120", "--results", "t.csv", "--profile", str(profile_file))  # fmt: skip
    assert res.returncode == 0, res.stderr
    with open(tmp_path / "t.csv", newline="") as fh:
        rows = {(r["P"], r["layouts_in"]): r for r in csv.DictReader(fh)}
    assert set(rows) == {("1", "native"), ("1", "rows"), ("2", "native"), ("2", "rows")}
    assert all(r["status"] == "ok" for r in rows.values())
    moved = rows[("2", "rows")]  # summa 1x2: native A is in column blocks, so rows move
    assert float(moved["seconds"]) >= float(moved["multiply_seconds"]) > 0
    assert float(moved["redistribute_bytes_per_rank_max"]) == 8192 + 4096
    assert float(moved["predicted_seconds"]) > float(moved["predicted_multiply_seconds"]) > 0
    native = rows[("2", "native")]
    assert float(native["predicted_seconds"]) == float(native["predicted_multiply_seconds"])
    assert float(native["redistribute_bytes_per_rank_max"]) == 0
    assert main(["report", str(tmp_path / "t.csv"), "-o", str(tmp_path / "r")]) == 0
    assert "Kernel and end to end" in (tmp_path / "r" / "report.md").read_text()
