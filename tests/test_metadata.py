"""bench.metadata without MPI: the keys, clean strings, host facts from a communicator."""

from __future__ import annotations

import sys

from bench.metadata import KEYS, as_row, clean, collect, launch_cpus, settings


class _World:
    """Stands in for a communicator of ranks on these hosts: allgather returns this rank's
    value from each, its host name (alone or first of a tuple) replaced by that rank's."""

    def __init__(self, names: list[str]):
        self.names = names

    def allgather(self, value):
        if isinstance(value, tuple):
            return [(name, *value[1:]) for name in self.names]
        return list(self.names)


def test_clean_strips_nul_and_newlines():
    assert clean("Open MPI v4.1.6, package: Open MPI\x00") == "Open MPI v4.1.6, package: Open MPI"
    assert clean("line one\nline two\r\n\tend \x00") == "line one line two   end"
    assert clean(3) == "3"


def test_collect_without_mpi_has_every_key():
    meta = collect()
    assert tuple(meta) == KEYS
    assert meta["cores"] >= 1 and meta["nodes"] == 1 and meta["ranks"] == 1
    assert meta["ranks_per_node"] == 1 and len(meta["hosts"]) == 1
    assert meta["cpu_model"] and meta["python"].count(".") == 2
    assert meta["memory_bytes"] is None or meta["memory_bytes"] > 2**20
    assert set(meta["blas"]) in ({"internal_api", "version", "num_threads", "architecture"}, set())
    assert meta["git_dirty"] in (True, False, "")
    if "mpi4py.MPI" not in sys.modules:
        assert meta["mpi_library"] == ""  # collect never starts MPI


def test_row_cells_are_csv_safe():
    row = as_row(collect())
    assert set(row) == set(KEYS)
    assert all(isinstance(v, str) and "\x00" not in v and "\n" not in v for v in row.values())


def test_hosts_from_a_communicator():
    meta = collect(_World(["n1", "n1", "n1", "n2", "n2", "n2", "n2"]))
    assert meta["hosts"] == ["n1", "n2"]
    assert (meta["nodes"], meta["ranks"], meta["ranks_per_node"]) == (2, 7, 4)
    assert meta["cores"] == len(launch_cpus())  # a node's: its ranks' CPUs together


def test_open_mpi_version_loses_its_nul_byte(monkeypatch):
    class _MPI:
        @staticmethod
        def Get_library_version():
            return "Open MPI v4.1.6, package: Open MPI, ident: 4.1.6, Sep 30, 2023\x00"

    monkeypatch.setitem(sys.modules, "mpi4py.MPI", _MPI)
    assert (
        collect()["mpi_library"] == "Open MPI v4.1.6, package: Open MPI, ident: 4.1.6, Sep 30, 2023"
    )


def test_settings_are_the_variables_that_change_timing():
    environ = {
        "PATH": "/usr/bin",
        "DISTMM_FENCE": "sem",
        "MPIR_CVAR_POLLS_BEFORE_YIELD": "1\n",
        "OMPI_MCA_mpi_yield_when_idle": "1",
        "OMPI_MCA_orte_hnp_uri": "1234.0;tcp://10.0.0.1:5555",  # Open MPI's launcher's, per job
        "OMP_NUM_THREADS": "2",
        "PMI_RANK": "3",
    }
    assert settings(environ) == {
        "DISTMM_FENCE": "sem",
        "MPIR_CVAR_POLLS_BEFORE_YIELD": "1",
        "OMPI_MCA_mpi_yield_when_idle": "1",
        "OMP_NUM_THREADS": "2",
    }
    assert list(settings(environ)) == sorted(settings(environ))


def test_a_launched_rank_counts_its_launchers_cpus_too(monkeypatch):
    """A rank bound to one core (its own mask) still counts the CPUs its launcher's daemon, its
    parent, may place ranks on; a process no launcher started counts its own alone."""
    import os

    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)
    own = os.sched_getaffinity(0)
    assert launch_cpus() == own
    monkeypatch.setenv("PMI_RANK", "0")
    assert launch_cpus() == own | os.sched_getaffinity(os.getppid())
