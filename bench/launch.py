"""Starting `distmm` jobs (the sweep, `distmm plan --run`, the scripts): the launcher (mpiexec,
srun or a command template, with hostfile, ranks per node and pinning), mpiexec's flavour, the one
builder of the `distmm run` command line, the environment a job gets, and running it in its own
process group under a timeout."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .job_output import last_json, last_line
from .machine import YIELD_SETTINGS, blas_threads, cores
from .shm import remove_stale
from .units import positive

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
    layouts: str | dict | None = None,
    relabel: bool = True,
) -> list[str]:
    """``["run", ALGO, "--shape", "M,K,N", ...]``: flags only where they differ from `distmm
    run`'s defaults; ``options`` are the algorithm options (grid, fop, pace, panel) by name,
    ``layouts`` the user's layout spec for A, B and C, or specs {"A", "B", "C"} (--layouts, or
    --layout-a/-b/-c; nothing for native, run's default)."""
    argv = ["run", algo, "--shape", ",".join(map(str, shape))]
    for name, value in (options or {}).items():
        text = ",".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)
        argv += [f"--{name}", text]
    if not overlap:
        argv.append("--no-overlap")
    if dtype != "float32":
        argv += ["--dtype", dtype]
    argv += _layout_flags(layouts, relabel)
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


def _layout_flags(layouts: str | dict | None, relabel: bool) -> list[str]:
    """--layouts NAME when A, B and C share one, else --layout-a/-b/-c; none for native."""
    if isinstance(layouts, str):
        layouts = dict.fromkeys("ABC", layouts)
    specs = {n: (layouts or {}).get(n, "native") for n in "ABC"}
    if set(specs.values()) == {"native"}:
        return []
    if len(set(specs.values())) == 1:
        flags = ["--layouts", specs["A"]]
    else:
        flags = [f for n, v in specs.items() if v != "native" for f in (f"--layout-{n.lower()}", v)]
    return flags + ([] if relabel else ["--no-relabel"])


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
        version = re.search(r"^\s*Version:\s*(\S+)", text, re.M)  # hydra's first line says none
        if first.startswith("HYDRA") and version:
            first = f"MPICH {version.group(1)} (hydra)"
        return "mpich", first
    return "unknown", first


def mpiexec_command(
    mpiexec: str, flavour: str, P: int, cores: int, local: int | None = None
) -> list[str]:
    """``mpiexec [Open MPI's flags] -n P``; ``local``: the ranks on one node (default P)."""
    cmd = [mpiexec]
    if flavour == "openmpi":
        if (local or P) > cores:
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
    """Run cmd in its own process group; ('done' | 'timeout', rc, stdout, stderr). After a
    job that failed, the MPI library's shared memory it left behind is removed (bench/shm.py)."""
    start = time.time()
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
        status, rc = "done", proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        status, rc = "timeout", None
    except BaseException:
        _kill_group(proc)
        remove_stale(start)
        raise
    if rc != 0:
        remove_stale(start)
    return status, rc, out, err


def stop_on_sigterm() -> None:
    """Make SIGTERM end this process as Ctrl-C does (SystemExit, status 143), so that a job it
    is running is ended and cleaned up by :func:`launch` rather than orphaned mid-run. Also
    removes, now, MPICH segments an earlier killed launcher left (bench/shm.py: those no
    process maps)."""
    signal.signal(signal.SIGTERM, _terminated)
    remove_stale(0.0)


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


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


LAUNCHERS = ("mpiexec", "srun")
PLACEHOLDERS = ("P", "cmd", "ppn", "hostfile")
LAUNCHER_HELP = "mpiexec, srun or a template with {P} and {cmd} such as 'srun -n {P} {cmd}'"


def _placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


def launcher_problem(text: str) -> str | None:
    """Why ``text`` is not a launcher (mpiexec, srun or a template), or None if it is one."""
    if text in LAUNCHERS:
        return None
    if "{" not in text:
        return f"{text!r} is not {LAUNCHER_HELP}"
    try:
        names = _placeholders(text)
    except ValueError as err:
        return f"template {text!r}: {err}"
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        return (
            f"template {text!r}: unknown placeholder {{{unknown[0]}}} "
            f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})"
        )
    missing = [p for p in ("P", "cmd") if p not in names]
    if missing:
        return f"template {text!r} lacks {' and '.join('{' + p + '}' for p in missing)}"
    return None


def add_launcher_arguments(p: argparse.ArgumentParser, ranks_per_node: bool = True) -> None:
    """--launcher, --hostfile, --ranks-per-node (unless the command has it already), --pin."""
    p.add_argument("--launcher", help=f"how runs start: {LAUNCHER_HELP} (default mpiexec)")
    p.add_argument("--hostfile", help="mpiexec's hostfile (MPICH -f, Open MPI --hostfile)")
    if ranks_per_node:
        p.add_argument(
            "--ranks-per-node",
            type=positive,
            help="ranks per node (MPICH -ppn, Open MPI --map-by ppr:N:node, srun "
            "--ntasks-per-node)",
        )
    p.add_argument(
        "--pin",
        action="store_true",
        default=None,
        help="bind each rank to a core (mpiexec -bind-to core, srun --cpu-bind=cores)",
    )


@dataclass(frozen=True)
class Launcher:
    """How a job starts: ``name`` is mpiexec, srun or a template (with {P}, {cmd}, {ppn},
    {hostfile}); ``mpiexec`` the program found (srun's path for srun, "" for a template), its
    flavour and version line, this machine's cores, and where the ranks go."""

    mpiexec: str
    flavour: str
    version: str
    cores: int
    name: str = "mpiexec"
    hostfile: str | None = None
    ranks_per_node: int | None = None
    pin: bool = False

    @classmethod
    def find(
        cls,
        given: str | None = None,
        name: str | None = None,
        hostfile: str | None = None,
        ranks_per_node: int | None = None,
        pin: bool = False,
    ) -> Launcher:
        """The launcher ``name`` (default mpiexec; ``given``: the mpiexec to use), checked: a bad
        template, a missing hostfile or a setting the launcher cannot take is a UsageError."""
        name = name or "mpiexec"
        problem = launcher_problem(name)
        if problem:
            raise UsageError(f"launcher {problem}")
        if hostfile is not None and not Path(hostfile).is_file():
            raise UsageError(f"hostfile {hostfile} does not exist")
        where = dict(name=name, hostfile=hostfile, ranks_per_node=ranks_per_node, pin=bool(pin))
        if name == "mpiexec":
            mpiexec = find_mpiexec(given)
            return cls(mpiexec, *mpi_flavour(mpiexec), cores(), **where)
        if name == "srun":
            if hostfile is not None:
                raise UsageError("srun takes its nodes from the Slurm allocation, not a hostfile")
            srun = shutil.which("srun")
            if not srun:
                raise UsageError("no srun on PATH (--launcher srun runs in a Slurm allocation)")
            return cls(srun, "slurm", _mpi_version(given), cores(), **where)
        names = _placeholders(name)
        for field, value, flag in (
            ("hostfile", hostfile, "--hostfile"),
            ("ppn", ranks_per_node, "--ranks-per-node"),
        ):
            if field in names and value is None:
                raise UsageError(f"the launcher template uses {{{field}}}: give {flag}")
            if value is not None and field not in names:
                raise UsageError(f"{flag} needs {{{field}}} in the launcher template")
        if pin:
            raise UsageError("--pin with a launcher template: put the binding in the template")
        return cls("", "template", _mpi_version(given), cores(), **where)

    def local(self, P: int) -> int:
        """The ranks sharing one node's cores."""
        return min(P, self.ranks_per_node or P)

    def command(self, P: int, argv: list[str], program: tuple[str, ...] = DISTMM) -> list[str]:
        rpn, job = self.ranks_per_node, [*program, *argv]
        if self.flavour == "template":
            text = self.name.format(
                P=P, cmd=shlex.join(job), ppn=rpn or "", hostfile=self.hostfile or ""
            )
            return shlex.split(text)
        if self.flavour == "slurm":
            cmd = [self.mpiexec, "-n", str(P)]
            cmd += ["--ntasks-per-node", str(rpn)] if rpn else []
            return cmd + (["--cpu-bind=cores"] if self.pin else []) + job
        cmd = mpiexec_command(self.mpiexec, self.flavour, P, self.cores, self.local(P))
        openmpi = self.flavour == "openmpi"
        if self.hostfile:
            cmd += ["--hostfile" if openmpi else "-f", self.hostfile]
        if rpn:
            cmd += ["--map-by", f"ppr:{rpn}:node"] if openmpi else ["-ppn", str(rpn)]
        if self.pin:
            cmd += ["--bind-to" if openmpi else "-bind-to", "core"]
        return cmd + job

    def run(
        self,
        P: int,
        argv: list[str],
        timeout: float,
        program: tuple[str, ...] = DISTMM,
        cwd: str | os.PathLike | None = None,
    ) -> tuple[str, int | None, str, str]:
        """Run ``program ARGV`` (default `distmm`) on P ranks: launch()'s answer."""
        return launch(self.command(P, argv, program), timeout, self.env(P), cwd)

    def env(self, P: int) -> dict:
        """The environment a P-rank job starts with (:func:`child_env`)."""
        return child_env(self.local(P), self.cores)

    def run_json(self, P: int, argv: list[str], timeout: float, **how) -> tuple[dict | None, str]:
        """(the JSON record the job printed, "") or (None, why it failed); ``how``: run()'s
        program and cwd."""
        state, rc, out, err = self.run(P, argv, timeout, **how)
        record = last_json(out) if state == "done" and rc == 0 else None
        if record is None:
            return None, f"{state}, exit {rc}: {last_line(err)}"
        return record, ""

    def calibrate(self, P: int, out, timeout: float, quick: bool = False, **how) -> str:
        """`distmm calibrate --out OUT [--quick]` on P ranks: "" once it wrote the profile, else
        one line saying why not; ``how``: run()'s cwd."""
        argv = ["calibrate", "--out", str(out)] + ["--quick"] * quick
        state, rc, _, err = self.run(P, argv, timeout, **how)
        ok = state == "done" and rc == 0
        return "" if ok else f"calibration failed ({state}, exit {rc}): {last_line(err)}"


def _mpi_version(given: str | None) -> str:
    """The MPI library's version line when mpiexec is not the launcher ("" if none is found)."""
    try:
        return mpi_flavour(find_mpiexec(given))[1]
    except UsageError:
        return ""
