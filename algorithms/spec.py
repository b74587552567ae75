"""The algorithm interface: one :class:`Algorithm` record per algorithm module.

The record says everything the commands and the planner need: the grids an algorithm admits,
its options (type, default, choices, help, the values the planner tries), how it plans, prepares
and multiplies, the cost the literature states for it and the memory a rank needs. `distmm`'s
flags and the planner's search space are generated from these records, so adding an algorithm is
one module that ends with ``ALGORITHM = Algorithm(...)`` plus one line in ``algorithms/__init__``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from .plan import Plan


@dataclass(frozen=True)
class Option:
    """One algorithm option: the keyword of ``plan()`` and the flag ``--NAME``.

    ``type`` is ``int`` or ``tuple`` (a list of integers, written ``2x3`` or ``2,3``; ``length``
    fixes how many). ``default`` None means the algorithm chooses. ``candidates(plan)`` lists the
    values the planner tries, given the plan with every option at its default.
    """

    name: str
    help: str
    type: type = int
    length: int | None = None
    metavar: str | None = None
    default: object = None
    choices: tuple = ()
    is_grid: bool = False  # its values are the entries of Algorithm.grids(P)
    candidates: Callable[[Plan], Iterable] | None = None


GRID = Option(
    "grid",
    "process grid, e.g. 2x3 or 2,2,2 (default: the algorithm's choice for the rank count)",
    type=tuple,
    metavar="GRID",
    is_grid=True,
)


def keep_blocks(plan: Plan, a: np.ndarray, b: np.ndarray, coords) -> tuple:
    """The default prepare: the generated blocks are the algorithm's state as they are."""
    return a, b


def cube_side(shape) -> float:
    """n of the literature's square n x n formulas for an M x K x N product: (M K N)^(1/3)."""
    M, K, N = shape
    return (M * K * N) ** (1 / 3)


def block_gemms(plan: Plan) -> tuple[tuple[int, int, int], ...]:
    """GEMMs of this rank's whole A and B blocks (Cannon's)."""
    return ((plan.A.block_shape[0], plan.A.block_shape[1], plan.B.block_shape[1]),)


def panel_gemms(plan: Plan) -> tuple[tuple[int, int, int], ...]:
    """GEMMs of ``panel`` columns of the A block and as many rows of the B block (SUMMA's)."""
    return ((plan.A.block_shape[0], plan.params["panel"], plan.B.block_shape[1]),)


def one_layer(algorithm: str) -> Callable[[tuple[int, ...]], tuple[str, tuple[int, ...]] | None]:
    """Algorithm.same_as of a p x p x d algorithm that is ``algorithm`` on p x p where d = 1."""

    def same_as(grid: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
        p, q, d = grid
        return (algorithm, (p, q)) if d == 1 else None

    return same_as


def blocks_memory(plan: Plan, itemsize: int) -> int:
    """Bytes one rank needs, roughly: its A, B and C blocks, plus the copies and double buffers
    the algorithms keep (4x the inputs, 3x the output)."""
    a, b, c = (math.prod(layout.block_shape) for layout in (plan.A, plan.B, plan.C))
    return itemsize * (4 * (a + b) + 3 * c)


@dataclass(frozen=True)
class Algorithm:
    """What one algorithm module declares (see the module docstring)."""

    name: str
    summary: str
    grids: Callable[[int], list[tuple[int, ...]]]
    plan: Callable[..., Plan]  # plan(shape, P, *, overlap=True, **{option.name: value})
    multiply: Callable  # (plan, comm, state) -> this rank's C block
    options: tuple[Option, ...] = (GRID,)
    prepare: Callable = keep_blocks  # (plan, a, b, coords) -> state (see the package's doc)
    # (shape, P, grid, alpha, beta per word) -> {"seconds", "words_per_rank", "formula", "note"}
    stated_cost: Callable | None = None
    memory: Callable[[Plan, int], int] = blocks_memory
    # the (m, k, n) shapes of the plan's local GEMMs, each GEMM one of them (the planner's
    # bound prices the GEMMs still to come at the cheapest of their rates); None: unknown
    gemms: Callable[[Plan], tuple[tuple[int, int, int], ...]] | None = None
    # operations besides GEMMs that every rank certainly issues, (kind, bytes, group, count,
    # blocking) at ``itemsize`` bytes an element (a "copy" is blocking, group 1): the planner's
    # bound prices those still to come (a loop whose messages alone lose stops at once); None:
    # none promised
    promised: Callable[[Plan, int], tuple[tuple[str, int, int, int, bool], ...]] | None = None
    # (algorithm, grid) whose plan this one's on ``grid`` is, the same layouts and schedule
    # (2.5D with one layer is the 2D algorithm), else None: the planner ranks that one alone,
    # so one schedule is not offered under two names
    same_as: Callable[[tuple[int, ...]], tuple[str, tuple[int, ...]] | None] | None = None

    @property
    def grid_option(self) -> Option:
        return next(o for o in self.options if o.is_grid)

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)
