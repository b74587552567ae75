"""What every run record carries about the machine, the software and the checkout it ran from.

:func:`collect` never starts MPI: it reads the MPI library's version only if this process has
already loaded ``mpi4py.MPI`` (``mpi_library`` is "" otherwise), and gathers host names only when
given a communicator (a collective: every rank of ``world`` must call it). :func:`as_row` turns
the record into CSV-safe strings; :func:`clean` is the rule for any string that goes into a CSV.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import socket
import subprocess
import sys
from pathlib import Path

KEYS = (
    "cpu_model",
    "cores",
    "memory_bytes",
    "blas",
    "numpy",
    "mpi4py",
    "mpi_library",
    "python",
    "hosts",
    "nodes",
    "ranks",
    "ranks_per_node",
    "git_commit",
    "git_dirty",
    "command",
    "settings",
)
# environment variables that change how a run times (:func:`settings`): this suite's own
# (DISTMM_DIRECT, DISTMM_FENCE, DISTMM_FAULT), MPICH's control variables (its launcher sets
# none, so each was set by the user or by bench.machine.YIELD_SETTINGS), Open MPI's yield and
# the BLAS and OpenMP thread counts. Not Open MPI's other OMPI_MCA_ variables: its launcher
# sets many per job (URIs, job ids), which would make every two jobs differ.
SETTING_PREFIXES = ("DISTMM_", "MPIR_CVAR_")
SETTING_NAMES = (
    "OMPI_MCA_mpi_yield_when_idle",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
)
_ROOT = Path(__file__).resolve().parent.parent  # the checkout holding this package


def clean(text: object) -> str:
    """``text`` as one CSV-safe line: NUL bytes removed, other control characters (newlines,
    tabs, carriage returns) turned into spaces, surrounding whitespace stripped.

    Open MPI's ``MPI.Get_library_version()`` ends in a NUL byte; error messages hold newlines.
    """
    text = str(text).replace("\x00", "")
    return "".join(" " if ord(ch) < 32 or ord(ch) == 127 else ch for ch in text).strip()


def cpu_model() -> str:
    """The ``model name`` of /proc/cpuinfo, or platform.processor() / machine() elsewhere."""
    info = cpu_info()
    for key in ("model name", "Model", "cpu model"):
        if info.get(key):
            return clean(info[key])
    return clean(platform.processor() or platform.machine())


def cpu_info() -> dict[str, str]:
    """The fields of /proc/cpuinfo, each as the first processor lists it ({} where there is
    no such file)."""
    out: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() and value.strip():
                    out.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return out


def cores() -> int:
    """Cores this process may run on (its affinity mask), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def launch_cpus() -> set[int]:
    """The CPUs the launcher may put this node's ranks on, as this rank sees them: its own
    affinity and, when a launcher started it, its parent's, the launcher's daemon (Hydra's
    proxy, Open MPI's prterun or prted, slurmstepd). A launcher that binds each rank to a
    core (Open MPI by default with no more ranks than cores, ``-bind-to core``, ``srun
    --cpu-bind=cores``) leaves the rank's own mask one core: 2 ranks pinned on this 2-core VM
    said "1 core, oversubscribed", and a calibration so made took every count for one above
    the cores. Linux; elsewhere :func:`cores`' count of CPUs numbered from 0."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(cores()))
    if any(os.environ.get(var, "").isdigit() for var in RANK_VARS):
        try:
            cpus |= os.sched_getaffinity(os.getppid())
        except OSError:  # (the parent gone, or another user's)
            pass
    return cpus


def node_cores(world) -> int:
    """The cores of a job's node (:func:`launch_cpus` of its ranks there together; of the
    node with fewest where the job spans several). A collective on ``world``."""
    by_host: dict[str, int] = {}  # host -> its ranks' CPUs as one bit mask
    mask = sum(1 << cpu for cpu in launch_cpus())
    for host, cpus in world.allgather((socket.gethostname(), mask)):
        by_host[host] = by_host.get(host, 0) | cpus
    return min(bin(cpus).count("1") for cpus in by_host.values())


def memory_bytes() -> int | None:
    """Physical memory of this node, or None where sysconf does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def blas() -> dict:
    """The BLAS NumPy calls: {internal_api, version, num_threads, architecture} from
    threadpoolctl ({} if none); ``architecture`` names the kernels it chose for this CPU
    (OpenBLAS: Haswell for AVX2, SkylakeX for AVX-512; "" where the BLAS does not say).

    SciPy may load a BLAS of its own; the one inside NumPy's wheel (or the first found) is used.
    """
    import numpy  # noqa: F401  (loads NumPy's BLAS so that threadpoolctl can see it)
    from threadpoolctl import threadpool_info

    found = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    if not found:
        return {}
    lib = next((x for x in found if "numpy" in str(x.get("filepath", ""))), found[0])
    return {
        "internal_api": clean(lib.get("internal_api", "")),
        "version": clean(lib.get("version") or ""),
        "num_threads": lib.get("num_threads"),
        "architecture": clean(lib.get("architecture") or ""),
    }


def mpi_library() -> str:
    """First line of MPI.Get_library_version(), cleaned; "" if mpi4py.MPI is not loaded."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return ""
    lines = mpi.Get_library_version().replace("\x00", "").strip().splitlines()
    return clean(lines[0]) if lines else ""


def settings(environ=None) -> dict[str, str]:
    """{name: value} of the environment variables that change how a run times, sorted by
    name (:data:`SETTING_PREFIXES`, :data:`SETTING_NAMES`); ``environ`` defaults to
    os.environ. A rank reads it after bench.machine.start_mpi, so the yield settings it adds
    where ranks outnumber cores are in it."""
    environ = os.environ if environ is None else environ
    return {
        k: clean(environ[k])
        for k in sorted(environ)
        if k.startswith(SETTING_PREFIXES) or k in SETTING_NAMES
    }


def settings_values(cells) -> dict[str, set[str]]:
    """{variable: the values it takes} over ``settings`` cells as a results table holds them
    (:func:`settings` as JSON objects): "unset" among them where a cell lacks a variable that
    another has; cells that are not JSON objects are left out."""
    runs = []
    for cell in cells:
        try:
            runs.append({k: str(v) for k, v in json.loads(cell).items()})
        except (ValueError, AttributeError, TypeError):
            continue
    return {k: {run.get(k, "unset") for run in runs} for k in {k for run in runs for k in run}}


def _git(*argv: str) -> str | None:
    try:
        out = subprocess.run(["git", *argv], capture_output=True, text=True, timeout=10, cwd=_ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state() -> tuple[str, bool | str]:
    """(short commit, uncommitted changes?) of the checkout this package runs from.

    ("", "") when the package is not the top of a git work tree (e.g. installed into a virtual
    environment that happens to sit inside a checkout). Untracked files count as changes.
    """
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != _ROOT:
        return "", ""
    commit = (_git("rev-parse", "--short", "HEAD") or "").strip()
    status = _git("status", "--porcelain")
    return commit, ("" if status is None else bool(status.strip()))


def _hosts(world) -> tuple[list[str], int, int]:
    """(distinct host names in rank order, ranks, ranks on the busiest node)."""
    names = [socket.gethostname()] if world is None else list(world.allgather(socket.gethostname()))
    distinct = list(dict.fromkeys(names))
    return distinct, len(names), max(names.count(h) for h in distinct)


def collect(world=None, on_node: int | None = None) -> dict:
    """The metadata of a run, keys :data:`KEYS`. With a communicator, every rank must call it.

    Without ``world`` the host facts describe this process alone (one host, one rank).
    ``ranks_per_node`` is the number of ranks on the busiest node; ``on_node``: the node's
    cores if already counted (bench.machine.start_mpi's facts), else :func:`node_cores`.
    """
    import mpi4py
    import numpy

    hosts, ranks, per_node = _hosts(world)
    commit, dirty = git_state()
    return {
        "cpu_model": cpu_model(),
        "cores": cores() if world is None else on_node or node_cores(world),
        "memory_bytes": memory_bytes(),
        "blas": blas(),
        "numpy": numpy.__version__,
        "mpi4py": mpi4py.__version__,
        "mpi_library": mpi_library(),
        "python": platform.python_version(),
        "hosts": hosts,
        "nodes": len(hosts),
        "ranks": ranks,
        "ranks_per_node": per_node,
        "git_commit": commit,
        "git_dirty": dirty,
        "command": clean(shlex.join(sys.argv)),
        "settings": settings(),
    }


def as_row(meta: dict) -> dict[str, str]:
    """The record as CSV cells: lists and dicts as compact JSON, None as "", all :func:`clean`.

    ``blas`` becomes e.g. ``{"internal_api": "openblas", "num_threads": 1, "version": "0.3.29"}``.
    """
    out = {}
    for key, value in meta.items():
        if value is None:
            text = ""
        elif isinstance(value, (list, dict)):
            text = json.dumps(value, sort_keys=True)
        else:
            text = str(value)
        out[key] = clean(text)
    return out
