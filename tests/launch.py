"""Start `distmm` under mpiexec from a test, with a hard timeout (no test can hang)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def mpirun(n: int) -> list[str]:
    """``mpiexec -n N`` with the flags this MPI needs for N ranks here, as distmm's own
    launcher gives them (bench.launch: Open MPI's for more ranks than cores, and as root)."""
    return launcher().command(n, [], program=())


@functools.cache
def launcher():
    """distmm's launcher here: the mpiexec beside this Python, else on PATH (bench.launch), its
    flavour asked once per test session."""
    from bench.launch import Launcher

    return Launcher.find()


def distmm_mpi(n: int, *args: str, timeout: float = 120, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(int(timeout)))
    cmd = [*mpirun(n), sys.executable, "-m", "bench.cli", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout + 15, env=env, cwd=cwd
    )


def distmm(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def script(name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``scripts/NAME ARGS`` with this interpreter, its output captured."""
    return subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
