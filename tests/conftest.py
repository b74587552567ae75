"""Shared test set-up. Under mpiexec only rank 0 reports; every rank still runs and fails."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_configure(config):
    try:
        from mpi4py import MPI
    except ImportError:  # serial runs without MPI installed
        return
    if config.getoption("--only-mpi", default=False) and MPI.COMM_WORLD.Get_rank() != 0:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)
