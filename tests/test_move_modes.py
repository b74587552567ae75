"""scripts/move_modes.py: the same run from the user's layouts, job after job, phase by phase; and
scripts/fence_latency.py: the two fences of a direct move, idle."""

import os
import subprocess
import sys

from launch import SCRIPTS, mpirun


def _modes(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "move_modes.py"), *args],
        capture_output=True,
        text=True,
        timeout=150,
        env=dict(os.environ, MPIEXEC_TIMEOUT="120"),
    )


def test_move_modes_prints_each_jobs_phases_and_the_slow_ones():
    done = _modes(
        *("--ranks", "2", "--grid", "1,1,2", "--shape", "96,64,80"),
        *("--jobs", "2", "--repeat", "1", "--pause", "0"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, head, *rows = done.stdout.splitlines()
    assert first.startswith("2 jobs of `distmm run tesseract --shape 96,64,80 --grid 1,1,2")
    assert first.endswith("on 2 ranks")
    assert head.split()[:4] == ["job", "fence/wait", "redistribute_in", "[ms]"]
    jobs, summary = rows[:2], rows[2:]
    assert [r.split()[:2] for r in jobs] == [["1", "auto/poll"], ["2", "auto/poll"]]
    assert all(float(t) > 0 for r in jobs for t in r.split()[2:])
    phases = ("redistribute_in", "multiply", "redistribute_out")
    assert [s.split(":")[0] for s in summary] == list(phases)
    assert all("of 2 jobs" in s for s in summary)


def test_move_modes_takes_the_fences_in_turn():
    done = _modes(
        *("--ranks", "2", "--grid", "1,1,2", "--shape", "96,64,80", "--fences", "sem,mpi"),
        *("--jobs", "3", "--repeat", "1", "--pause", "0"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = done.stdout.splitlines()[2:]
    kinds = ["sem/poll", "mpi/poll", "sem/poll"]
    assert [r.split()[:2] for r in rows[:3]] == [[str(j), k] for j, k in enumerate(kinds, 1)]
    summary = rows[3:]
    assert [s.split(":")[0] for s in summary[:1] + summary[3:4]] == [
        "fence/wait sem/poll, redistribute_in",
        "fence/wait mpi/poll, redistribute_in",
    ]
    assert "of 2 jobs" in summary[0] and "of 1 jobs" in summary[3]


def test_move_modes_takes_the_ways_of_waiting_in_turn_for_a_kernel_too():
    done = _modes(
        *("--ranks", "2", "--algo", "t10", "--grid", "2,1,1", "--shape", "96,64,80"),
        *("--layouts", "native", "--waits", "poll,heavy", "--jobs", "2"),
        *("--repeat", "1", "--pause", "0"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, _, *rows = done.stdout.splitlines()
    assert first.startswith("2 jobs of `distmm run t10 --shape 96,64,80 --fop 2,1,1 ")
    assert [r.split()[:2] for r in rows[:2]] == [["1", "auto/poll"], ["2", "auto/heavy"]]
    assert float(rows[0].split()[3]) > 0  # the multiply phase
    assert rows[2].startswith("fence/wait auto/poll, redistribute_in:")


def test_move_modes_refuses_no_jobs_and_a_bad_shape_before_launching_any():
    for args, says in (
        (("--jobs", "0"), "argument --jobs: '0' must be at least 1"),
        (("--shape", "64,64"), "argument --shape: '64,64' needs 3 integers"),
        (("--slow", "1"), "--slow must be above 1 and --pause at least 0"),
        (("--fences", "sem,x"), "'sem,x': each is one of auto, sem, mpi"),
        (("--waits", "spin"), "'spin': each is one of poll, heavy"),
        (("--algo", "strassen"), "summa3d, summa25d, cannon25d, tesseract, t10)"),
    ):
        done = _modes(*args)
        assert done.returncode == 2 and done.stdout == "", args
        assert done.stderr.strip().splitlines()[-1].endswith(says), done.stderr


def test_fence_latency_times_both_fences_at_three_ranks():
    done = subprocess.run(
        [*mpirun(3), sys.executable, str(SCRIPTS / "fence_latency.py")]
        + ["--laps", "50", "--rounds", "2"],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ, MPIEXEC_TIMEOUT="60"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, head, *rows = done.stdout.splitlines()
    assert first.startswith("3 ranks on ") and first.endswith("idle ranks")
    assert head.split() == ["round", "mpi", "sem"]
    assert [r.split()[0] for r in rows] == ["1", "2"]
    assert all(float(t) > 0 for r in rows for t in r.split()[1:])
