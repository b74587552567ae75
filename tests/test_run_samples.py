"""Every timed repetition kept: --repeat auto on real ranks (all stop together, within bounds),
the JSON record's samples, interval and metadata, and DISTMM_FAULT mode=delay slowing a run."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time

import numpy as np
import pytest
from launch import distmm_mpi

from bench.faults import fault_from_env
from bench.metadata import KEYS
from bench.runner import Repetitions


@pytest.mark.mpi
def test_auto_every_rank_stops_together():
    from mpi4py import MPI

    from algorithms.summa import ALGORITHM as summa
    from bench.runner import run_plan
    from topology import Mesh

    world = MPI.COMM_WORLD
    plan = summa.plan((24, 16, 20), world.Get_size())
    mesh = Mesh(plan.mesh, world)
    reps = Repetitions(None, ci_width=0.5, max_repeat=12, max_seconds=30)
    try:
        r, _ = run_plan(summa, plan, mesh, np.dtype(np.float64), reps, warmup=0, verify="exact")
    finally:
        mesh.free()
    assert r["verified"] and r["repeat_mode"] == "auto"
    assert 5 <= r["repeat"] <= 12 and len(r["samples"]) == r["repeat"]
    assert len(r["compute_samples"]) == r["repeat"]
    assert len(set(world.allgather(r["repeat"]))) == 1
    low, high = r["seconds_ci"]
    assert low <= r["seconds"] <= high


@pytest.mark.mpi
def test_delay_stretches_each_timed_repetition():
    """A multiply that sleeps 20 ms, delayed 1.5x, takes at least 30 ms every repetition."""
    from mpi4py import MPI

    from bench.runner import _timed

    class _Comm:
        tracer = None

        def reset(self):
            pass

    world = MPI.COMM_WORLD
    delay = fault_from_env({"DISTMM_FAULT": "mode=delay,factor=1.5"}).delay_for(0, "summa")
    times, _ = _timed(lambda: time.sleep(0.02), [_Comm()], world, 0, Repetitions(3), None, delay)
    assert len(times) == 3 and min(times) >= 0.03


JSON_KEYS = {"samples", "seconds_ci", "ci_method", "compute_samples", "repeat_mode", *KEYS}


def _run(n: int, *argv: str, env: dict | None = None) -> dict:
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        r = distmm_mpi(n, "run", "summa", *argv, "--json")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_json_record_keeps_every_sample_and_the_metadata():
    rec = _run(2, "--shape", "32,24,16", "--repeat", "auto", "--max-repeat", "7")
    assert JSON_KEYS <= rec.keys()
    assert rec["repeat_mode"] == "auto" and 5 <= rec["repeat"] <= 7
    assert len(rec["samples"]) == rec["repeat"] == len(rec["compute_samples"])
    assert rec["seconds"] == statistics.median(rec["samples"])
    assert rec["seconds_min"] == min(rec["samples"]) and rec["seconds_max"] == max(rec["samples"])
    assert rec["ranks"] == 2 and rec["nodes"] == len(rec["hosts"]) >= 1
    assert "\x00" not in rec["mpi_library"]
    fixed = _run(1, "--shape", "8,8,8", "--repeat", "3")
    assert fixed["repeat_mode"] == "fixed" and len(fixed["samples"]) == 3
    assert "(min, max)" in fixed["ci_method"]


def test_delay_makes_the_run_slower():
    """factor 3 at one rank: every delayed repetition is 3x its own undelayed time, so its
    fastest repetition is well above the fastest of an undelayed run, even when the two
    processes see different load on the machine (compared on minima, the least disturbed)."""
    argv = ("--shape", "256,256,256", "--repeat", "7", "--warmup", "2")
    plain = _run(1, *argv)
    slow = _run(1, *argv, env={"DISTMM_FAULT": "mode=delay,factor=3,algo=summa"})
    other = _run(1, *argv, env={"DISTMM_FAULT": "mode=delay,factor=3,algo=cannon"})
    assert slow["seconds_min"] > 1.5 * plain["seconds_min"]
    assert slow["verified"] and other["verified"]
    assert 1.5 * other["seconds_min"] < slow["seconds_min"]


@pytest.mark.mpi
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_warm_repetitions_map_no_fresh_memory():
    """Ranks keep freed memory from the repetitions on (bench.runner._timed sets
    bench.machine.keep_freed) and free the last repetition's C before the next, so a warm
    repetition reuses the pages of the ones before. summa3d on 8192x1024x512 (8 MB buffers)
    used to fault about 500 pages in afresh in some repetitions after two warm-ups, at 1 rank
    and at 8 (55 ms such a one, 131 ms)."""
    from mpi4py import MPI

    from algorithms.summa3d import ALGORITHM as summa3d
    from bench.runner import run_plan
    from topology import Mesh

    world = MPI.COMM_WORLD
    if not summa3d.grids(world.Get_size()):
        pytest.skip("summa3d needs a cube number of ranks")
    plan = summa3d.plan((8192, 1024, 512), world.Get_size())
    mesh = Mesh(plan.mesh, world)
    try:
        r, _ = run_plan(summa3d, plan, mesh, np.dtype(np.float32), 4, warmup=2, verify="freivalds")
    finally:
        mesh.free()
    assert r["verified"] and len(r["page_faults"]) == 4
    assert max(r["page_faults"]) < 64, r["page_faults"]


@pytest.mark.mpi
def test_blocks_and_state_are_made_before_freed_memory_is_kept(monkeypatch):
    """`distmm run` has malloc keep freed memory from its timed repetitions on, its blocks and
    the algorithm's state made before, where malloc maps them by default: kept before them, T10
    16x1x1 at 16 ranks on 2 cores ran in a slow mode in half the jobs (bench.machine.keep_freed,
    results/vm-2c-zen3/t10_modes_s85.txt)."""
    import dataclasses

    from mpi4py import MPI

    import bench.runner as runner
    from algorithms.t10 import ALGORITHM as t10
    from topology import Mesh

    events = []
    monkeypatch.setattr(runner, "keep_freed", lambda: events.append("keep"))

    def prepare(*args):
        events.append("prepare")
        return t10.prepare(*args)

    world = MPI.COMM_WORLD
    plan = t10.plan((96, 80, 72), world.Get_size())
    mesh = Mesh(plan.mesh, world)
    try:
        algo = dataclasses.replace(t10, prepare=prepare)
        r, _ = runner.run_plan(algo, plan, mesh, np.dtype(np.float32), 2, 1, verify="exact")
    finally:
        mesh.free()
    assert r["verified"]
    assert events[0] == "prepare" and "keep" in events[1:], events
