"""The shared-memory segment an aborted MPICH job leaves behind, removed.

MPICH keeps one segment per node and job in /dev/shm (``mpich_shm_*``: its ranks' message
queues, about a MiB per rank) and unlinks it in MPI_Finalize, which a job that aborts never
reaches: each failed run then holds its megabytes of memory until the machine restarts (a
test suite's 22 aborted jobs left 22, 40 sessions of them 6 GB). Schedulers clean up after a
job; on a workstation distmm does: a rank aborting the job unlinks the segments it has mapped
(the others keep theirs mapped until they are killed), and the launcher removes those a failed
job left that no process maps any more (a rank that crashed could not). Linux only (/proc);
elsewhere nothing is done. Open MPI's runtime cleans up its own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

SHM = Path("/dev/shm")
PREFIX = "mpich_shm_"
# the rank creating a segment maps it microseconds later (a descheduled one, milliseconds): an
# unmapped one younger than this may belong to a job starting now, and is left alone
SETTLE_SECONDS = 0.5


def _mapped(maps: Path) -> set[str]:
    """The /dev/shm files a process's ``maps`` lists (unreadable: none)."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:  # the process ended, or is not ours
        return set()
    return {line.split(None, 5)[-1] for line in lines if f" {SHM}/" in line}


def unlink_own() -> None:
    """Unlink the MPICH segments this process maps (before it aborts its job)."""
    for path in _mapped(Path("/proc/self/maps")):
        if Path(path).name.startswith(PREFIX):
            Path(path).unlink(missing_ok=True)


def stale(since: float) -> list[Path]:
    """This user's MPICH segments made since ``since`` (time.time()) that no process maps
    (one younger than SETTLE_SECONDS checked once it is that old)."""
    if not SHM.is_dir() or not Path("/proc/self/maps").exists():
        return []
    uid = os.getuid()
    found = {}
    for p in SHM.glob(f"{PREFIX}*"):
        try:
            st = p.stat()
        except OSError:
            continue
        if st.st_uid == uid and st.st_ctime >= since:
            found[p] = st.st_ctime
    wait = max(found.values(), default=0.0) + SETTLE_SECONDS - time.time()
    if wait > 0:
        time.sleep(wait)
    mapped: set[str] = set()
    for maps in Path("/proc").glob("[0-9]*/maps") if found else ():
        mapped |= _mapped(maps)
    return [p for p in found if str(p) not in mapped]


def remove_stale(since: float) -> list[str]:
    """Remove :func:`stale` segments; their names."""
    found = stale(since)
    for p in found:
        p.unlink(missing_ok=True)
    return [p.name for p in found]


__all__ = ["remove_stale", "stale", "unlink_own"]
