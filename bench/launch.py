"""Starting `distmm` jobs under mpiexec (the sweep, `distmm plan --run`, the scripts): finding
mpiexec and its flavour, the one builder of the `distmm run` command line, the environment a job
gets, and running it in its own process group under a timeout."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .machine import YIELD_SETTINGS, blas_threads, cores

DISTMM = (sys.executable, "-m", "bench.cli")  # `distmm` as this interpreter runs it


def run_argv(
    algo: str,
    shape,
    options: dict | None = None,
    *,
    dtype: str = "float32",
    overlap: bool = True,
    topology: str = "mesh",
    binding=None,
    emulate_links: str | None = None,
    repeat: int | None = None,
    warmup: int | None = None,
    profile: str | None = None,
    trace: str | None = None,
    as_json: bool = False,
) -> list[str]:
    """``["run", ALGO, "--shape", "M,K,N", ...]``: flags only where they differ from `distmm
    run`'s defaults; ``options`` are the algorithm options (grid, fop, pace, panel) by name."""
    argv = ["run", algo, "--shape", ",".join(map(str, shape))]
    for name, value in (options or {}).items():
        text = ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)
        argv += [f"--{name}", text]
    if not overlap:
        argv.append("--no-overlap")
    if dtype != "float32":
        argv += ["--dtype", dtype]
    if topology not in ("mesh", "", None):
        argv += ["--topology", topology]
        if binding is not None:
            argv += ["--bind", str(binding)]
    for flag, value in (
        ("--emulate-links", emulate_links),
        ("--repeat", repeat),
        ("--warmup", warmup),
        ("--profile", profile),
        ("--trace", trace),
    ):
        if value is not None:
            argv += [flag, str(value)]
    return argv + (["--json"] if as_json else [])


def shell_command(P: int, argv: list[str]) -> str:
    """The command a user types: ``mpiexec -n P distmm ARGV``."""
    return f"mpiexec -n {P} distmm {shlex.join(argv)}"


def find_mpiexec(given: str | None) -> str:
    if given:
        return given
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if not found:
        raise UsageError("no mpiexec found (run scripts/setup.sh, or install an MPI)")
    return found


def mpi_flavour(mpiexec: str) -> tuple[str, str]:
    """('openmpi' | 'mpich' | 'unknown', first line of mpiexec --version)."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
        text = out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UsageError(f"cannot run {mpiexec} --version: {err}") from None
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if "Open MPI" in text or "OpenRTE" in text or "open-mpi" in text.lower():
        return "openmpi", first
    if "HYDRA" in text or "MPICH" in text or "Intel(R) MPI" in text:
        return "mpich", first
    return "unknown", first


def mpiexec_command(mpiexec: str, flavour: str, P: int, cores: int) -> list[str]:
    cmd = [mpiexec]
    if flavour == "openmpi":
        if P > cores:
            cmd.append("--oversubscribe")
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    return cmd + ["-n", str(P)]


def child_env(P: int, cores: int) -> dict:
    """The environment of a P-rank job on this machine: BLAS threads by the one policy and, with
    more ranks than cores, yielding MPI progress (a setting already in the environment wins)."""
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", str(blas_threads(cores, P)))
    if P > cores:
        for k, v in YIELD_SETTINGS.items():
            env.setdefault(k, v)
    return env


def _child_setup() -> None:
    """In the child: die with the parent (Linux), so a killed sweep leaves no runs behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def launch(
    cmd: list[str], timeout: float, env: dict, cwd: str | os.PathLike | None = None
) -> tuple[str, int | None, str, str]:
    """Run cmd in its own process group; ('done' | 'timeout', rc, stdout, stderr)."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=_child_setup,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return "done", proc.returncode, out, err
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return "timeout", None, out, err
    except BaseException:
        _kill_group(proc)
        raise


def _kill_group(proc) -> None:
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` ("" if none): where a failing job says why."""
    return (text.strip().splitlines() or [""])[-1]


def last_json(out: str) -> dict | None:
    """The last line of ``out`` that is a JSON object (what `distmm ... --json` prints)."""
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


@dataclass(frozen=True)
class Launcher:
    """An mpiexec found once, with what the command line and the environment depend on."""

    mpiexec: str
    flavour: str
    version: str
    cores: int

    @classmethod
    def find(cls, given: str | None = None) -> Launcher:
        mpiexec = find_mpiexec(given)
        return cls(mpiexec, *mpi_flavour(mpiexec), cores())

    def command(self, P: int, argv: list[str], program: tuple[str, ...] = DISTMM) -> list[str]:
        return mpiexec_command(self.mpiexec, self.flavour, P, self.cores) + [*program, *argv]

    def run(
        self,
        P: int,
        argv: list[str],
        timeout: float,
        program: tuple[str, ...] = DISTMM,
        cwd: str | os.PathLike | None = None,
    ) -> tuple[str, int | None, str, str]:
        """Run ``program ARGV`` (default `distmm`) on P ranks: launch()'s answer."""
        return launch(self.command(P, argv, program), timeout, child_env(P, self.cores), cwd)

    def run_json(self, P: int, argv: list[str], timeout: float, **how) -> tuple[dict | None, str]:
        """(the JSON record the job printed, "") or (None, why it failed); ``how``: run()'s
        program and cwd."""
        state, rc, out, err = self.run(P, argv, timeout, **how)
        record = last_json(out) if state == "done" and rc == 0 else None
        if record is None:
            return None, f"{state}, exit {rc}: {last_line(err)}"
        return record, ""
