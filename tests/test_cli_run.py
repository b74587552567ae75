"""`distmm run` as a user starts it: mpiexec, real ranks, JSON, dumps, and bad input."""

import json
import time
from pathlib import Path

import numpy as np
import pytest
from launch import distmm_mpi

from bench.job_output import said_lines

JSON_KEYS = {
    "algo",
    "P",
    "grid",
    "shape",
    "dtype",
    "seconds",
    "gflops",
    "verified",
    "max_rel_error",
    "bytes_sent",
    "messages",
    "peak_memory_bytes",
    "layouts",
}


def test_json_record():
    r = distmm_mpi(4, "run", "cannon", "--shape", "64,48,40", "--json", "--repeat", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert JSON_KEYS <= rec.keys()
    assert rec["algo"] == "cannon" and rec["P"] == 4 and rec["grid"] == [2, 2]
    assert rec["shape"] == [64, 48, 40] and rec["verified"] is True
    assert set(rec["layouts"]) == {"A", "B", "C"} and "R@[x + y]" in rec["layouts"]["A"]
    assert rec["bytes_sent"] == 4 * 4 * (32 * 24 + 24 * 20)  # each rank shifts A and B once


def test_json_record_from_user_layouts(tmp_path):
    """--layouts: phases, kernel and end-to-end seconds, the layouts given; --dump gathers the
    user's layouts, so the files are the same matrices as a native run's."""
    r = distmm_mpi(
        4,
        *("run", "summa25d", "--shape", "23,17,19", "--dtype", "float64", "--json"),
        *("--layouts", "block-cyclic:4", "--layout-c", "cols", "--dump", str(tmp_path)),
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert rec["verified"] is True
    assert set(rec["phases"]) == {"redistribute_in", "multiply", "redistribute_out"}
    assert rec["seconds"] >= rec["multiply_seconds"] == rec["phases"]["multiply"]["seconds"]
    assert rec["layouts_given"] == {"A": "block-cyclic:4", "B": "block-cyclic:4", "C": "cols"}
    assert rec["layout_label"] == "A=block-cyclic:4,B=block-cyclic:4,C=cols"
    assert rec["layouts_user"]["C"].endswith("@c=4")
    a, b, c = (np.load(tmp_path / f"{m}.npy") for m in "ABC")
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


def test_text_says_an_order_saving_too_little_was_not_matched():
    """From rows into SUMMA 1x3 no order saves more than 0.4% of the bytes moved (less than
    layouts.endpoints.WORTH_MATCHING): the relabel line says the order laid was kept and how
    much another could save at most; the record has it too."""
    argv = ("run", "summa", "--shape", "96,64,80", "--layouts", "rows")
    r = distmm_mpi(3, *argv)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("relabel "))
    assert "not relabelled: no order saves more than" in line, line
    rec = json.loads(distmm_mpi(3, *argv, "--json").stdout.strip().splitlines()[-1])
    relabel = rec["relabel"]
    assert relabel["bytes_saved"] == 0 and relabel["ranks"] == [0, 1, 2]
    assert 0 < relabel["saved_at_most"] <= 0.01 * relabel["bytes_before"]


def test_text_sets_the_gemm_only_loop_beside_the_gemm_phase():
    """With --profile the model line gives measured / predicted and the compute-only loop over
    the GEMM phase, the ratio of the two figures printed above it."""
    profile = Path(__file__).resolve().parent.parent / "results" / "vm-2c-zen3" / "profile.json"
    r = distmm_mpi(2, "run", "summa", "--shape", "1024,1024,1024", "--profile", str(profile))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    compute = float(next(ln for ln in lines if ln.startswith("compute-only")).split()[1])
    model = next(ln for ln in lines if ln.startswith("model "))
    ratio = float(model.split("compute-only / gemm ")[1].split(")")[0])
    gemm = float(model.split("gemm ")[-1].split(",")[0])
    assert ratio == pytest.approx(compute / gemm, rel=0.02), model


# (algorithm, ranks, extra flags): every algorithm at rank counts up to 16, checked from --dump
DUMP_CASES = [
    ("cannon", 1, []),
    ("cannon", 9, []),
    ("cannon", 16, []),
    ("summa", 5, []),
    ("summa", 12, ["--grid", "3x4"]),
    ("summa", 7, ["--no-overlap"]),
    ("summa3d", 8, []),
    ("summa25d", 8, ["--grid", "2,2,2"]),
    ("summa25d", 4, ["--grid", "2,2,1"]),
    ("cannon25d", 4, []),
    ("cannon25d", 8, ["--grid", "2,2,2"]),
    ("tesseract", 8, []),
    ("tesseract", 16, []),
    ("t10", 6, ["--fop", "2,1,3"]),
    ("t10", 12, ["--fop", "2,3,2"]),
    ("t10", 16, ["--fop", "4,1,4"]),
]


@pytest.mark.parametrize("algo,n,flags", DUMP_CASES)
def test_dump_checked_independently(tmp_path, algo, n, flags):
    r = distmm_mpi(
        n,
        "run",
        algo,
        "--shape",
        "23,17,19",
        "--dtype",
        "float64",
        "--repeat",
        "1",
        "--dump",
        str(tmp_path),
        *flags,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    a, b, c = (np.load(tmp_path / f"{m}.npy") for m in "ABC")
    assert a.shape == (23, 17) and b.shape == (17, 19) and c.shape == (23, 19)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


BAD = [
    (["run", "nosuch", "--shape", "8,8,8"], "unknown algorithm 'nosuch'"),
    (["run", "cannon", "--shape", "8,8,8"], "cannot run on 3 ranks"),
    (["run", "summa", "--shape", "8,8,8", "--grid", "2x2"], "grid 2x2 has 4 ranks"),
    (["run", "summa", "--shape", "0,8,8"], "must be positive"),
    (["run", "summa", "--shape", "8,x,8"], "not a list of integers"),
    (["run", "summa", "--shape", "8,8"], "needs 3 integers"),
    (["run", "summa", "--shape", "8,8,8", "--dtype", "int8"], "invalid choice"),
    (["run", "cannon", "--shape", "8,8,8", "--panel", "2"], "cannon"),
    (["run", "summa", "--shape", "8,8,8", "--fop", "1,1,3"], "summa takes no --fop"),
    (["run", "summa", "--shape", "8,8,8", "--repeat", "0"], "must be at least 1"),
    (["run", "summa", "--shape", "8,8,8", "--dump", "/nonexistent/dir/x"], "does not exist"),
    (["run", "summa", "--shape", "8,8,8", "--layouts", "diagonal"], "unknown layout name"),
    (["run", "summa", "--shape", "8,8,8", "--layout-b", "[r=S(0)]@r=2"], "layout of B"),
    (["run", "summa", "--shape", "8,8,8", "--layout-c", "((8), (8))@r=2"], "multiply to 2 ranks"),
]


@pytest.mark.parametrize("argv,message", BAD)
def test_bad_input_one_line_every_rank_fails(argv, message):
    start = time.monotonic()
    r = distmm_mpi(3, *argv, timeout=30)
    assert time.monotonic() - start < 20
    assert r.returncode == 2, (r.returncode, r.stderr)
    err = said_lines(r.stderr)
    assert len(err) == 1, r.stderr
    assert message in err[0]
