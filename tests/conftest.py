"""Shared test set-up. Under mpiexec only rank 0 reports; every rank still runs and fails."""

import json
import os

import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if not config.getoption("--only-mpi", default=False):
        return
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() != 0:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)


def pytest_ignore_collect(collection_path, config):
    """Under ``--only-mpi`` a test module without an MPI test is not collected: every rank
    imports what it collects, and at 8 ranks on 2 cores importing every module took 18 s of the
    64 the MPI tests took (those modules' tests are skipped there anyway)."""
    if not config.getoption("--only-mpi", default=False):
        return None
    path = collection_path
    if (
        path.suffix == ".py"
        and path.name.startswith("test_")
        and "mark.mpi" not in path.read_text(encoding="utf-8")
    ):
        return True
    return None


# A machine profile with round numbers (what `distmm calibrate` writes), for tests that need the
# model without calibrating: results/profile.json exists only where someone calibrated.
PROFILE = {
    "machine": {"cores": 2},
    "p2p": {"small": {"alpha": 2e-6, "beta": 1e-10}, "large": {"alpha": 5e-6, "beta": 1e-10}},
    "gemm": {"float32": [[512, 512, 512, 0.0025]], "float64": [[512, 512, 512, 0.005]]},
    "collective_factor": {},
}


@pytest.fixture
def profile_file(tmp_path):
    f = tmp_path / "profile.json"
    f.write_text(json.dumps(PROFILE))
    return f


def pieces_profile(profile_file, tmp_path):
    """The tests' profile with layout changes timed, a cost per piece copied among them."""
    from bench.model import Profile

    a2av = {"start": 4e-5, "message": 2e-5, "byte": 3e-10, "copy": 1e-10, "piece": 3e-8}
    p2p = {"alpha": 2e-6, "beta": 1e-10, "alpha_large": 5e-6, "beta_large": 1e-10}
    counts = [{"ranks": 2, **p2p, "collective_factor": {}, "alltoallv": a2av}]
    f = tmp_path / "pieces.json"
    f.write_text(json.dumps({**json.loads(profile_file.read_text()), "counts": counts}))
    return Profile.load(f)


def every_grid(P: int, spec: str, shape):
    """(algorithm, grid, the moves from ``spec`` into its layouts) for every algorithm and grid
    at P."""
    from algorithms import ALGORITHMS, get
    from bench.model import plan_moves
    from layouts.endpoints import user_layouts

    users = user_layouts(dict.fromkeys("ABC", spec), shape, P)
    for name in ALGORITHMS:
        algorithm = get(name)
        for g in algorithm.grids(P):
            plan = algorithm.plan(shape, P, **{algorithm.grid_option.name: tuple(g)})
            yield name, g, plan_moves(users, plan)
