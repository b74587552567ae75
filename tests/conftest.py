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
