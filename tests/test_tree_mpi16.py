"""`distmm run --topology mncore:2,2,2,2` as a user starts it: 16-rank jobs under mpiexec."""

import json
import sys
from pathlib import Path

import numpy as np
from launch import distmm_mpi, mpirun

from bench.job_output import said_lines

TREE = ("--topology", "mncore:2,2,2,2")


def _record(r):
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_cannon_bound_and_emulated(profile_file):
    rec = _record(
        distmm_mpi(
            16,
            "run",
            "cannon",
            "--shape",
            "64,48,40",
            *TREE,
            "--bind",
            "x=L1B+PE,y=L2B+MAB",
            "--emulate-links",
            "mncore-emu",
            "--profile",
            str(profile_file),
            "--repeat",
            "1",
            "--json",
        )
    )
    assert rec["verified"] and rec["binding"] == "x=L1B+PE,y=L2B+MAB"
    assert rec["emulate_links"] == "mncore-emu" and rec["tree"]["L2B"] == 2
    assert "R@[2*L2B + 2*L1B + MAB + PE]" in rec["layouts"]["A"]
    assert "_x" not in rec["layouts"]["C"] and "R@[x + y]" in rec["mesh_layouts"]["A"]
    assert sum(rec["level_bytes"].values()) == rec["bytes_sent"]
    assert rec["predicted_seconds"] > 0 and "model_rank_level_bytes" in rec


def test_dump_on_the_tree_without_emulation(tmp_path):
    out = tmp_path / "d"
    rec = _record(
        distmm_mpi(
            16,
            "run",
            "summa",
            "--shape",
            "30,20,40",
            *TREE,
            "--bind",
            "x=MAB+PE,y=L2B+L1B",
            "--repeat",
            "1",
            "--dump",
            str(out),
            "--json",
        )
    )
    assert rec["verified"] and rec["emulate_links"] is None
    from layouts import global_matrix

    a, b, c = (np.load(out / f"{n}.npy") for n in "ABC")
    assert np.array_equal(a, global_matrix((30, 20), 1, np.float32))
    assert np.array_equal(b, global_matrix((20, 40), 2, np.float32))
    assert np.abs(c - a.astype(np.float64) @ b).max() < 1e-4


def test_bad_topology_or_binding_is_one_line():
    r = distmm_mpi(16, "run", "cannon", "--shape", "8,8,8", *TREE, "--bind", "x=L2B,y=L1B+MAB+PE")
    assert r.returncode == 2
    lines = said_lines(r.stderr)
    assert len(set(lines)) == 1 and "valid for mesh" in lines[0]
    assert "x=L2B+L1B,y=MAB+PE" in lines[0]
    r = distmm_mpi(4, "run", "cannon", "--shape", "8,8,8", *TREE)
    assert r.returncode == 2 and "16 PEs" in r.stderr


def test_seed_layout_scaled_down_on_16_ranks():
    import os
    import subprocess

    here = Path(__file__).parent
    env = dict(os.environ, MPIEXEC_TIMEOUT="100")
    r = subprocess.run(
        [*mpirun(16), sys.executable, str(here / "tree_seed_job.py")],
        capture_output=True,
        text=True,
        timeout=115,
        env=env,
        cwd=here.parent,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    assert "gathered == global" in r.stdout and "(32, 32)" in r.stdout
