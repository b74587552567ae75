"""The symbolic schedule (placeholder buffers) is the schedule a real loop issues, and its cost
does not grow with the matrices."""

import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from algorithms import ALGORITHMS, get
from algorithms.comm import Comm
from algorithms.plan import PlanError
from algorithms.symbolic import is_placeholder, placeholder, reshaped
from bench.model import schedule
from topology.tree import bindings, parse_topology

ROOT = Path(__file__).resolve().parent.parent
SHAPES = [(96, 96, 96), (100, 70, 90), (37, 129, 53)]


def _variants(module, shape, P):
    """Every grid, every planner candidate of the other options, overlap on and off."""
    others = [o for o in module.options if not o.is_grid and o.candidates is not None]
    for g in module.grids(P):
        grid = {module.grid_option.name: tuple(g)}
        try:
            default = module.plan(shape, P, **grid)
        except PlanError:
            continue
        for o in others or [None]:
            for v in o.candidates(default) if o else [None]:
                opts = {o.name: v} if o and v is not None else {}
                for overlap in (True, False):
                    yield module.plan(shape, P, overlap=overlap, **grid, **opts)


def _compute_only(module, plan, rank, dtype, binding=None, tree=None):
    """The events of a compute-only run (real zero blocks, real prepare, real arithmetic)."""
    view = plan.mesh.at(rank, binding, tree)
    a = np.zeros(plan.A.block_shape, dtype=dtype)
    b = np.zeros(plan.B.block_shape, dtype=dtype)
    comm = Comm(view, execute=False)
    module.multiply(plan, comm, module.prepare(plan, a, b, view.coords))
    return comm.events


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_schedule_is_the_compute_only_runs(name):
    module = get(name)
    n = 0
    for shape in SHAPES:
        for P in (1, 4, 8, 9, 12):
            for plan in _variants(module, shape, P):
                for rank in sorted({0, P // 2, P - 1}):
                    real = _compute_only(module, plan, rank, "float64")
                    assert schedule(module, plan, rank, "float64") == real, (plan.describe(), rank)
                    n += 1
    assert n > 0


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_schedule_on_a_tree_is_the_compute_only_runs(name):
    module, tree = get(name), parse_topology("mncore:2,2,2,2")
    for g in module.grids(16)[:2]:
        plan = module.plan((64, 48, 80), 16, **{module.grid_option.name: tuple(g)})
        for b in bindings(plan.mesh, tree)[:4]:
            for rank in (0, 7, 15):
                real = _compute_only(module, plan, rank, "float32", b, tree)
                assert schedule(module, plan, rank, "float32", b, tree) == real


def test_placeholders():
    x = placeholder((1 << 20, 1 << 20), np.float32)
    assert x.shape == (1 << 20, 1 << 20) and x.dtype == np.float32 and x.nbytes == 4 << 40
    assert is_placeholder(x) and is_placeholder(x[3]) and is_placeholder(x[:, 5:9])
    assert not is_placeholder(np.zeros((2, 2)))
    assert reshaped(x, (-1, 1024, 1 << 20)).shape == (1024, 1024, 1 << 20)
    with pytest.raises(ValueError):
        x[0, 0] = 1.0  # read-only: a stray write fails instead of touching memory


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_symbolic_schedule_allocates_nothing_of_the_matrix_size(name):
    module = get(name)
    P = {"summa3d": 8, "cannon": 16, "summa": 16, "t10": 16}.get(name, 16)
    plan = module.plan((1 << 20,) * 3, P)  # 4 TiB per float32 matrix
    tracemalloc.start()
    try:
        events = schedule(module, plan, 0, "float32")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert events and peak < 8 << 20


_MEASURE = (
    "import resource, subprocess, sys; "
    "subprocess.run([sys.executable, '-m', 'bench.cli', *sys.argv[1:]], check=True, "
    "stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _peak_rss_of(*argv) -> int:
    """Peak RSS (bytes) of one `distmm` command, measured by a fresh parent of its own (this
    process's RUSAGE_CHILDREN would include every child the test session started before)."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.split()[-1]) * 1024  # KiB on Linux


def test_predict_and_plan_memory_do_not_grow_with_the_shape(profile_file):
    big = "1048576,1048576,1048576"
    rss = _peak_rss_of(
        "predict",
        "tesseract",
        "--grid",
        "1,1,16",
        "--shape",
        big,
        "--P",
        "16",
        "--profile",
        str(profile_file),
    )
    rss = max(
        rss,
        _peak_rss_of(
            "plan", "--shape", "65536,65536,65536", "--P", "64", "--profile", str(profile_file)
        ),
        # from block layouts (the default): the redistributions are counted per grain
        _peak_rss_of("plan", "--shape", big, "--P", "64", "--profile", str(profile_file)),
    )
    assert rss < 400 << 20


_RESIDENT_GROWTH = """
import os, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, {root!r})
from algorithms import get
from algorithms.comm import Comm

def resident():
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")

comm = Comm(get("summa").plan((64, 64, 64), 1).mesh.at(0), execute=False, compute=True)
before = resident()
buf = comm.zeros((4096, 4096), np.float32)
print(resident() - before, buf.nbytes, int(buf.any()), buf.dtype)
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="resident pages from /proc")
def test_compute_only_buffers_are_zeros_in_pages_of_their_own():
    """A compute-only run's receive buffers are never written by a message: np.zeros would
    leave them on the kernel's one zero page, and GEMMs reading them ran 20% fast (Comm.zeros).
    Their pages are resident once made. Timed in a fresh interpreter: in the test process a
    free chunk that earlier tests left resident (bench.machine.keep_freed) may hold the buffer,
    and then the resident size does not grow."""
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", _RESIDENT_GROWTH.format(root=root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    grown, nbytes, nonzero, dtype = done.stdout.split()
    assert int(grown) >= 0.9 * int(nbytes) == 0.9 * 4096 * 4096 * 4
    assert nonzero == "0" and dtype == "float32"
    view = get("summa").plan((64, 64, 64), 1).mesh.at(0)
    assert is_placeholder(Comm(view, execute=False, compute=False).zeros((8, 8), np.float32))
