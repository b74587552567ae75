"""The run record without MPI: --repeat and --emulate-links parsing, the stopping rule, the
results-table row (samples, interval, metadata) and NUL-free tables, DISTMM_FAULT mode=delay."""

from __future__ import annotations

import csv
import json

import pytest

from bench.cli import build_parser
from bench.faults import Fault, fault_from_env
from bench.record import COLUMNS, read_table, row_from_result, write_table
from bench.runner import Repetitions, interval


def _run_args(*argv: str):
    return build_parser(["run"]).parse_args(["run", "summa", "--shape", "8,8,8", *argv])


def test_emulate_links_alone_takes_the_default_preset():
    from algorithms import get
    from bench.runner import tree_setup

    plan = get("summa").plan((16, 16, 16), 16)
    for topology, preset in (("mncore:2,2,2,2", "mncore-emu"), ("cluster:4,4", "1gbe")):
        args = _run_args("--topology", topology, "--emulate-links")
        assert args.emulate_links == "default"
        assert tree_setup(args, plan, args.emulate_links)[2].name == preset
    assert _run_args("--emulate-links", "flat").emulate_links == "flat"
    assert _run_args("--emulate-links=links.json").emulate_links == "links.json"
    assert _run_args().emulate_links is None


def test_repeat_auto_and_its_bounds():
    args = _run_args("--repeat", "auto", "--ci-width", "0.1", "--max-repeat", "9")
    assert (args.repeat, args.ci_width, args.max_repeat, args.max_seconds) == ("auto", 0.1, 9, 60)
    assert _run_args().repeat == 3 and _run_args("--repeat", "7").repeat == 7
    for bad in (["--repeat", "0"], ["--repeat", "often"], ["--ci-width", "0"]):
        with pytest.raises(SystemExit):
            _run_args(*bad)


def test_auto_stops_within_bounds():
    auto = Repetitions(None, ci_width=0.05, max_repeat=8, max_seconds=60)
    assert auto.mode == "auto" and Repetitions(3).mode == "fixed"
    assert not auto.done([1.0] * 4)  # narrow, but fewer than 5
    assert auto.done([1.0] * 5)
    noisy = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0]
    assert not auto.done(noisy) and auto.done(noisy + [2.0])  # the cap on repetitions
    assert Repetitions(None, max_seconds=2.5).done([1.0, 2.0])  # the cap on time
    assert Repetitions(3).done([9.0] * 3) and not Repetitions(3).done([9.0] * 2)


def test_interval_names_its_method():
    low_high, method = interval([float(i) for i in range(1, 21)])
    assert low_high == [6.0, 15.0] and method == "order statistics (binomial), 95%"
    low_high, method = interval([3.0, 1.0, 2.0])
    assert low_high == [1.0, 3.0] and "(min, max)" in method and "3 sample(s)" in method


RESULT = {
    "algo": "summa",
    "grid": [1, 1],
    "verified": True,
    "seconds": 0.02,
    "seconds_min": 0.01,
    "seconds_max": 0.03,
    "samples": [0.02, 0.01, 0.03],
    "seconds_ci": [0.01, 0.03],
    "bytes_sent_per_rank": [0],
    "mpi_library": "Open MPI v4.1.6, package: Open MPI\x00",
    "cpu_model": "Some CPU",
    "memory_bytes": 1 << 30,
    "blas": {"internal_api": "openblas", "num_threads": 1, "version": "0.3"},
    "hosts": ["a", "b"],
    "nodes": 2,
    "ranks_per_node": 2,
    "git_dirty": False,
    "command": "distmm run summa",
}
FACTS = {"host": "a", "cores": 2, "mpi_library": "Open MPI\x00", "git_commit": "abc"}


def test_row_has_samples_interval_and_metadata_and_the_csv_no_nul(tmp_path):
    row = row_from_result({"key": "k", "algo": "summa"}, "done", 0, json.dumps(RESULT), "", 1.0,
                          "", FACTS)  # fmt: skip
    assert json.loads(row["samples"]) == [0.02, 0.01, 0.03]
    assert (row["seconds_ci_low"], row["seconds_ci_high"]) == (0.01, 0.03)
    assert json.loads(row["blas"])["internal_api"] == "openblas"
    assert json.loads(row["hosts"]) == ["a", "b"] and row["nodes"] == "2"
    assert row["git_dirty"] == "False" and row["command"] == "distmm run summa"
    path = tmp_path / "results.csv"
    write_table(path, [row, {"key": "x", "error": "two\nlines\x00", "odd": "\x00"}])
    assert b"\x00" not in path.read_bytes()
    back = read_table(path)
    assert back[0]["mpi_library"] == "Open MPI v4.1.6, package: Open MPI"
    assert back[1]["error"] == "two lines"
    with open(path, newline="") as fh:
        header = next(csv.reader(fh))
    assert header[: len(COLUMNS)] == COLUMNS
    for column in "samples seconds_ci_low seconds_ci_high cpu_model hosts git_dirty".split():
        assert column in COLUMNS


def test_old_record_without_samples_still_makes_a_row():
    old = {k: v for k, v in RESULT.items() if k not in ("samples", "seconds_ci", "hosts")}
    row = row_from_result({"key": "k"}, "done", 0, json.dumps(old), "", 1.0, "", FACTS)
    assert row["samples"] == "" and row["seconds_ci_low"] == "" and "hosts" not in row


def test_delay_parsing():
    f = fault_from_env({"DISTMM_FAULT": "mode=delay,factor=1.2,algo=summa"})
    assert f == Fault(rank=None, mode="delay", factor=1.2, algo="summa")
    assert f.delay_for(3, "summa") == 1.2 and f.delay_for(0, "cannon") == 1.0
    assert f.trigger_for(0) is None  # a delay never fails a rank
    g = fault_from_env({"DISTMM_FAULT": "mode=delay,factor=2,rank=1"})
    assert g.delay_for(1, "t10") == 2.0 and g.delay_for(0, "t10") == 1.0
    assert fault_from_env({"DISTMM_FAULT": "rank=0,phase=gemm"}).delay_for(0, "summa") == 1.0
    for bad in (
        "mode=delay",
        "mode=delay,factor=0.5",
        "mode=delay,factor=nan",
        "mode=delay,factor=1.2,algo=nosuch",
        "mode=delay,factor=1.2,phase=gemm",
        "rank=0,phase=gemm,factor=2",
        "mode=slow,factor=2",
    ):
        with pytest.raises(ValueError):
            fault_from_env({"DISTMM_FAULT": bad})
