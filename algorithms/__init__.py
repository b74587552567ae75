"""Distributed matmul algorithms, one module each, all SPMD loops over algorithms.comm.Comm.

Every module ends with ``ALGORITHM = Algorithm(...)`` (algorithms.spec): its name, the grids it
admits for P ranks, its options, ``plan(shape, P, **options) -> Plan`` (validates and declares
the A, B, C layouts), ``prepare(plan, a, b, coords)`` (arranges this rank's blocks as its
loop reads them: untimed in a native run, in the phase in of an end-to-end one, where the model
prices what it copies, algorithms.symbolic.copied_bytes), ``multiply(plan, comm, state) -> C
block`` (the timed SPMD loop), the cost the literature states, the memory a rank needs, the
shapes its GEMMs take and, if it says, the messages and copies every rank certainly issues
(both priced by the planner's bounds; tests/test_plan_speed.py holds them to the schedules).
Adding an algorithm is its module plus one line in ``_registry``.
"""

from __future__ import annotations

from functools import cache

from .plan import PlanError
from .spec import Algorithm

ALGORITHMS: dict[str, Algorithm]  # name -> record, in this order; built on first use


@cache
def _registry() -> dict[str, Algorithm]:
    # Imported on first use, not with the package: `python -m algorithms.cannon` runs a module
    # that importing the package must not have loaded already (runpy warns if it has).
    from . import cannon, cannon25d, summa, summa3d, summa25d, summa_a, summa_b, t10, tesseract

    records = (
        cannon.ALGORITHM,
        summa.ALGORITHM,
        summa_a.ALGORITHM,
        summa_b.ALGORITHM,
        summa3d.ALGORITHM,
        summa25d.ALGORITHM,
        cannon25d.ALGORITHM,
        tesseract.ALGORITHM,
        t10.ALGORITHM,
    )
    return {algorithm.name: algorithm for algorithm in records}


def __getattr__(name: str):
    if name == "ALGORITHMS":
        return _registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> Algorithm:
    """The record of algorithm ``name``."""
    registry = _registry()
    if name not in registry:
        raise PlanError(f"unknown algorithm {name!r} (choose from {', '.join(registry)})")
    return registry[name]


def left_to_twin(algorithm: Algorithm, grid, P: int, among) -> bool:
    """Whether ``algorithm``'s plan on ``grid`` is that of another algorithm of ``among`` on a
    grid it admits at P (Algorithm.same_as): the planner ranks that one instead."""
    twin = algorithm.same_as(tuple(grid)) if algorithm.same_as else None
    return twin is not None and twin[0] in among and twin[1] in map(tuple, get(twin[0]).grids(P))
