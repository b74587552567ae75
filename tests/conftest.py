"""Shared test set-up. Under mpiexec only rank 0 reports; every rank still runs and fails."""

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
