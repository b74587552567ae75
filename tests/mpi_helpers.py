"""Helpers shared by the MPI tests: run a plan the way `distmm run` does and verify it."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from bench.runner import run_plan
from topology import Mesh


def run_and_verify(module, plan, dtype=np.float64, verify: str = "exact") -> dict:
    """Run ``plan`` once on COMM_WORLD and return the result record (verified on all ranks)."""
    world = MPI.COMM_WORLD
    mesh = Mesh(plan.mesh, world)
    try:
        result, _ = run_plan(module, plan, mesh, np.dtype(dtype), repeat=1, warmup=0, verify=verify)
    finally:
        mesh.free()
    return result
