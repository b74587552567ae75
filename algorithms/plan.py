"""What an algorithm decides before it runs: its mesh, its A/B/C layouts and its parameters."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from layouts import TensorLayout
from topology import AbstractMesh


class PlanError(ValueError):
    """A rank count, grid, shape or parameter the algorithm cannot take (one line, exit 2)."""


@dataclass(frozen=True)
class Plan:
    """A validated configuration; every rank builds the same one without communicating."""

    algo: str
    shape: tuple[int, int, int]  # (M, K, N)
    mesh: AbstractMesh
    A: TensorLayout
    B: TensorLayout
    C: TensorLayout
    params: dict = field(default_factory=dict, compare=False, hash=False)
    overlap: bool = True

    @property
    def P(self) -> int:
        return self.mesh.size

    @property
    def grid(self) -> tuple[int, ...]:
        return self.mesh.shape

    @property
    def flops(self) -> int:
        M, K, N = self.shape
        return 2 * M * K * N

    def describe(self) -> dict[str, str]:
        return {"A": str(self.A), "B": str(self.B), "C": str(self.C)}


def ceil_to(n: int, m: int) -> int:
    """n rounded up to a multiple of m."""
    return -(-n // m) * m


def factor_pairs(P: int) -> list[tuple[int, int]]:
    """All (p, q) with p * q == P, most square first."""
    pairs = [(p, P // p) for p in range(1, P + 1) if P % p == 0]
    return sorted(pairs, key=lambda pq: (abs(pq[0] - pq[1]), pq[0] > pq[1]))


def exact_root(P: int, k: int) -> int | None:
    r = round(P ** (1.0 / k))
    for c in (r - 1, r, r + 1):
        if c >= 1 and c**k == P:
            return c
    return None


def check_positive(algo: str, what: str, value) -> int:
    """``value`` if it is a positive integer, else the one-line refusal naming ``what``."""
    if not isinstance(value, int) or value < 1:
        raise PlanError(f"{algo}: {what} must be a positive integer, got {value}")
    return value


def check_shape(shape, algo: str) -> tuple[int, int, int]:
    if len(shape) != 3 or any((not isinstance(x, int)) or x < 1 for x in shape):
        raise PlanError(f"{algo}: shape must be three positive integers M,K,N, got {shape}")
    return tuple(shape)


def check_grid(
    algo: str, P: int, grid, grids: Callable[[int], list[tuple[int, ...]]], what: str
) -> tuple[int, ...]:
    """Pick the default grid (the first of ``grids(P)``), or check a requested one against them.

    ``grids`` is the algorithm's own grid function: with no grid for P, the refusal lists the
    rank counts (up to 64) it does admit."""
    if grid is not None and math.prod(grid) != P:  # the grid given says most of what is wrong
        raise PlanError(f"{algo}: grid {_x(grid)} has {math.prod(grid)} ranks but the job has {P}")
    admissible = _admissible(grids, P)
    if not admissible:
        counts = [n for n in range(1, 65) if grids(n)]
        raise PlanError(
            f"{algo} needs {what}; it cannot run on {P} ranks "
            f"(it can on {', '.join(map(str, counts[:12]))}, ...)"
        )
    if grid is None:
        return admissible[0]
    grid = tuple(grid)
    if grid not in admissible:
        raise PlanError(
            f"{algo}: grid {_x(grid)} is not {what} "
            f"(for {P} ranks: {', '.join(map(_x, admissible))})"
        )
    return grid


@functools.lru_cache(maxsize=256)
def _admissible(grids: Callable[[int], list[tuple[int, ...]]], P: int) -> tuple:
    """``grids(P)``, enumerated once: the grid functions walk every divisor of P, and the
    planner makes a plan of each of hundreds of candidates."""
    return tuple(grids(P))


def _x(grid) -> str:
    return "x".join(map(str, grid))
