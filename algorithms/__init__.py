"""Distributed matmul algorithms, one module each, all SPMD loops over algorithms.comm.Comm.

Every module provides ``NAME``, ``grids(P)`` (the process grids it admits for P ranks),
``plan(shape, P, **options) -> Plan`` (validates and declares the A, B, C layouts),
``prepare(plan, a, b, coords)`` (arranges this rank's generated blocks, untimed) and
``multiply(plan, comm, state) -> C block`` (the timed SPMD loop).
"""

from __future__ import annotations

import importlib

ALGORITHMS = {
    "cannon": "Cannon's algorithm on a p x p mesh (skewed start, ring shifts)",
    "summa": "2D SUMMA on any p x q mesh (row/column panel broadcasts)",
    "summa3d": "3D SUMMA (Agarwal et al.) on a p x p x p mesh",
    "summa25d": "2.5D SUMMA on a p x p x d mesh (K split over layers, C reduce-scattered)",
    "cannon25d": "2.5D Cannon (Solomonik-Demmel) on a p x p x d mesh",
    "tesseract": "Tesseract (2.5D tensor parallel, Colossal-AI) on a q x q x d mesh",
    "t10": "T10 rTensor rotation for an operator partition F_op = [F_m, F_k, F_n]",
}


def get(name: str):
    """The module implementing algorithm ``name``."""
    from .plan import PlanError

    if name not in ALGORITHMS:
        raise PlanError(f"unknown algorithm {name!r} (choose from {', '.join(ALGORITHMS)})")
    return importlib.import_module(f"algorithms.{name}")
