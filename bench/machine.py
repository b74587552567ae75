"""Process set-up for the machine a run lands on, done before MPI starts.

When ranks outnumber cores, MPICH's busy polling makes waiting ranks steal the cores of working
ones, and multi-threaded BLAS makes it worse (README: "Running the algorithms"). So: yielding
progress settings for MPICH and Open MPI (read at MPI_Init, so set before mpi4py is imported) and
:func:`blas_threads` BLAS threads per rank (the one policy, for runs and for the jobs
bench/launch.py starts). An unexpected exception on any rank aborts the job instead of leaving
the other ranks waiting in a collective.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from .metadata import (  # the version string, clean (Open MPI's ends in a NUL byte)
    RANK_VARS,
    cores,
    launch_cpus,
    mpi_library,
    node_cores,
)
from .shm import unlink_own

# Not MPICH's MPIR_CVAR_ENABLE_HEAVY_YIELD (a sleep on every empty poll): with 4 ranks on 2 cores
# it made a 4.5 MiB per rank Alltoallv 6x slower, and end-to-end runs from 1-D columns (3072^3,
# every algorithm) took 27% longer at 4 ranks, 9% at 8 and 2% at 16, for kernels 4% and 3%
# faster at 8 and 16 (issue 12's note of 2026-11-23). The environment still overrides these.
YIELD_SETTINGS = {
    "MPIR_CVAR_POLLS_BEFORE_YIELD": "1",
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "1",
    "OMPI_MCA_mpi_yield_when_idle": "1",
}


def blas_threads(cores: int, ranks_on_node: int) -> int:
    """BLAS threads per rank: the node's cores shared out among its ranks, at least 1."""
    return max(1, cores // max(1, ranks_on_node))


def cache_bytes() -> int:
    """The largest CPU cache of core 0 (Linux sysfs; 32 MiB where it does not say)."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes, default=32 << 20)


def launched_local_ranks() -> int:
    """Ranks on this node as the launcher announces them (before MPI_Init); 1 if unknown."""
    return _announced(("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE", "PMIX_SIZE"), 1)


def launched_rank() -> int:
    return _announced(RANK_VARS, 0)


def launched_size() -> int:
    """The job's ranks as the launcher announces them (before MPI_Init); 1 if unknown."""
    return _announced(("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"), 1)


def _announced(names: tuple[str, ...], unknown: int) -> int:
    """The first of the launcher's environment variables ``names`` that holds a count."""
    for var in names:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return unknown


_STARTED: dict = {}


def start_mpi(keep: bool = True):
    """Initialise MPI for this machine; returns (MPI module, facts about the set-up). ``keep``:
    have malloc keep freed memory from now on (:func:`keep_freed`); `distmm run` leaves that to
    its timed repetitions (bench.runner._timed), its blocks allocated before."""
    if _STARTED:
        return _STARTED["MPI"], _STARTED["facts"]
    if launched_local_ranks() > len(launch_cpus()):  # (MPI reads these when it starts)
        for key, value in YIELD_SETTINGS.items():
            os.environ.setdefault(key, value)
    if keep:
        keep_freed()
    from mpi4py import MPI

    _install_abort_hook()
    world = MPI.COMM_WORLD
    node = world.Split_type(MPI.COMM_TYPE_SHARED)
    local = node.Get_size()
    node.Free()
    on_node = node_cores(world)  # (not this rank's own cores: a launcher may bind it to one)
    # a rank bound to fewer cores than its share runs no more BLAS threads than it has cores
    threads = min(blas_threads(on_node, local), cores())
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")
    facts = {
        "mpi_library": mpi_library(),
        "cores": on_node,
        "ranks_per_node": local,
        "blas_threads": threads,
        "oversubscribed": local > on_node,
    }
    _STARTED.update(MPI=MPI, facts=facts)
    return MPI, facts


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed() -> None:
    """Have glibc's malloc serve arrays up to 32 MiB (its most) from memory freed before and
    keep what is freed, where by default each array of a few MB is mapped afresh and returned
    on free, so repetitions of a loop page-fault their buffers in again. A rank's timed
    repetitions then reuse the memory of the ones before (summa3d 2x2x2 on 8192x1024x512 with
    8 ranks on 2 cores: 480-520 page faults in most repetitions, 60-67 ms each, against 0-2
    and 57-61 ms so; bench.runner also frees a repetition's C before the next). At 8192 ranks
    from block layouts (8192^3) `distmm plan`'s workers took 150 000-180 000 page faults and
    0.22-0.30 s of system time, 51 000-58 000 and 0.10-0.17 s so (the plan 0.96 s, against
    1.03; from cols 6.3 s against 7.4, its peak RSS 648 MiB against 611: what is freed stays
    mapped). Not glibc (musl, say): nothing changes.

    `distmm run` sets it once its blocks are generated and its algorithm's state prepared, so
    that those stay where malloc puts them by default (arrays of 128 KiB and more mapped on
    their own). Set before them, T10 16x1x1 on 8192x1024x512 at 16 ranks on 2 cores took
    0.17-0.20 s in 6 of 12 jobs (its ring's ranks yielding the core to each other several times
    as often) and 0.12-0.13 s in the rest; set after, 0.12-0.15 s in all 12, summa3d's page
    faults as few (results/vm-2c-zen3/t10_modes_s85.txt). Why, not found."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
    except (AttributeError, OSError):
        pass


def page_faults() -> int:
    """The minor page faults this process has taken (memory mapped in, not read from disk)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def validated() -> None:
    """Say that every rank has checked its input: an error from here on may be one rank's
    alone, and ends the whole job (:func:`abort_job`) instead of leaving the others waiting."""
    _STARTED["validated"] = True


def leave_together(most: float = 10.0) -> None:
    """Before a job's ranks exit non-zero with the one line rank 0 printed: wait until every
    rank is here (at most ``most`` seconds), so that no rank ends before that line is out.
    Open MPI ends the whole job at the first rank's non-zero exit, rank 0 perhaps before it
    printed (9 and 3 of the test suite's 50 refusals, in two runs, showed Open MPI's notice
    alone); MPICH waits for every rank. MPI starts here if it had not (a usage error found
    before it did)."""
    mpi = sys.modules.get("mpi4py.MPI")
    started = mpi is not None and mpi.Is_initialized()
    if not started and launched_size() <= 1:
        return
    from mpi4py import MPI

    if MPI.Is_finalized() or MPI.COMM_WORLD.Get_size() <= 1:
        return
    request, end = MPI.COMM_WORLD.Ibarrier(), time.monotonic() + most
    while not request.Test() and time.monotonic() < end:
        time.sleep(0.001)


def past_validation() -> bool:
    return bool(_STARTED.get("validated"))


def abort_job(message: str, code: int) -> None:
    """Print ``message`` (from this rank) and abort every rank of the job."""
    from mpi4py import MPI

    sys.stderr.write(f"[rank {MPI.COMM_WORLD.Get_rank()}] {message}\n")
    sys.stderr.flush()
    time.sleep(0.3)  # let the launcher forward the message before Abort tears the job down
    unlink_own()  # MPICH's segment, which Abort would leave in /dev/shm
    MPI.COMM_WORLD.Abort(code)
    os._exit(code)  # MPICH's Abort may return while the launcher ends the job: nothing more


def _mpi_error(err, tb) -> str:
    """One line for an MPI error: most often another rank's end seen by this one (a dead peer
    fails its messages), where MPI's words and our innermost call say more than a traceback
    through the communication layer."""
    root = Path(__file__).resolve().parents[1]
    ours = [root / p for p in ("algorithms", "bench", "layouts", "topology")]
    frames = [
        f
        for f in traceback.extract_tb(tb)
        if any(Path(f.filename).resolve().is_relative_to(p) for p in ours)
    ]
    at = "".join(f" in {f.name} ({Path(f.filename).name}:{f.lineno})" for f in frames[-1:])
    return (
        f"MPI error{at} ({err.Get_error_string().strip()}); another rank may have failed first: "
        "aborting the job"
    )


def _install_abort_hook() -> None:
    def hook(kind, value, tb):
        from .faults import InjectedFault

        if issubclass(kind, InjectedFault):
            abort_job(f"{value}: aborting the job", 1)
        mpi = sys.modules.get("mpi4py.MPI")
        if mpi is not None and issubclass(kind, mpi.Exception):
            abort_job(_mpi_error(value, tb), 1)
        lines = traceback.format_exception(kind, value, tb)
        abort_job("unexpected error, aborting the job:\n" + "".join(lines).rstrip(), 1)

    sys.excepthook = hook
