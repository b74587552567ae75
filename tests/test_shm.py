"""bench/shm.py removes a failed job's MPICH segment only where no process maps it."""

import mmap
import os
import time
from pathlib import Path

import pytest

from bench import shm

pytestmark = pytest.mark.skipif(
    not (shm.SHM.is_dir() and Path("/proc/self/maps").exists()), reason="Linux /dev/shm only"
)


def test_a_mapped_segment_is_kept_an_unmapped_one_removed(monkeypatch):
    monkeypatch.setattr(shm, "SETTLE_SECONDS", 0.2)
    since = time.time() - 1
    path = shm.SHM / f"{shm.PREFIX}test_{os.getpid()}_0"
    path.write_bytes(b"\0" * 4096)
    try:
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 4096) as m:
            m[0] = 1
            assert path.name not in shm.remove_stale(since)  # still mapped: a live job's
            assert path.exists()
        assert shm.remove_stale(time.time() + 60) == []  # made before `since`: not this job's
        assert shm.remove_stale(since) == [path.name]
        assert not path.exists()
    finally:
        path.unlink(missing_ok=True)
