"""What `distmm run` refuses before MPI starts or anything is allocated, identically on every
rank: --dump and --trace targets that cannot be written, runs that would not fit in memory."""

from __future__ import annotations

import os

from algorithms import get

from .errors import UsageError
from .units import format_bytes

DUMP_LIMIT = 1 << 24  # elements per matrix that --dump will gather


def check_paths(args) -> None:
    """Refuse --dump / --trace targets that cannot be written, before MPI starts: each is a
    directory, made now (every rank tries; a file of that name, or a place no directory can be
    made, is refused)."""
    if args.dump:
        M, K, N = args.shape
        if max(M * K, K * N, M * N) > DUMP_LIMIT:
            raise UsageError(f"--dump is for small shapes (at most {DUMP_LIMIT} elements a matrix)")
        _directory("--dump", args.dump)
    if args.trace:
        _directory("--trace", args.trace)


def _directory(flag: str, path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{flag} {path}: directory {parent} does not exist")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag} {path}: a file of that name is in the way (give a directory)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot make that directory ({err.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: directory not writable")


def check_memory(plan, dtype, ranks_per_node: int) -> None:
    """Refuse, before allocating anything, a run whose ranks would not fit in this node's memory
    (every rank computes the same verdict from the plan and the node's physical memory)."""
    need = get(plan.algo).memory(plan, dtype.itemsize)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need * ranks_per_node > 0.8 * total:

        def gib(n):
            return format_bytes(n, "GiB", ".1f")

        raise UsageError(
            f"{plan.algo} {'x'.join(map(str, plan.shape))} {dtype} needs about "
            f"{gib(need)} per rank, {gib(need * ranks_per_node)} for the "
            f"{ranks_per_node} ranks on this node, which has {gib(total)}: use a "
            f"smaller shape or more nodes"
        )


__all__ = ["DUMP_LIMIT", "check_memory", "check_paths"]
