"""The literature's closed-form costs (square n x n; see notes/algorithms.md), for comparison
with the schedule's prediction. Evaluated for n = cube root of M K N.

One small function per algorithm, ``(shape, P, grid, alpha, beta_per_word) -> dict``, giving
{"seconds", "words_per_rank", "formula", "note"}; algorithms without a stated formula have none.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .profile import Profile

log2 = math.log2


def _side(shape) -> float:
    M, K, N = shape
    return (M * K * N) ** (1 / 3)


def _cannon(shape, P: int, grid, a: float, b: float) -> dict:
    n, s = _side(shape), math.sqrt(P)
    words = 2 * (s - 1) * n * n / P
    return {
        "seconds": 2 * (s - 1) * a + words * b,
        "words_per_rank": words,
        "formula": "2(sqrt(P)-1)(alpha + n^2/P beta)",
        "note": "",
    }


def _t10(shape, P: int, grid, a: float, b: float) -> dict:
    return {
        **_cannon(shape, P, grid, a, b),
        "note": "t10 is compared with Cannon's formula, exact only for F_op=[p,1,p]",
    }


def _summa(shape, P: int, grid, a: float, b: float) -> dict:
    n, s = _side(shape), math.sqrt(P)
    words = 2 * s * n * n / P
    return {
        "seconds": 2 * s * a * (log2(s) if s > 1 else 0) + words * b,
        "words_per_rank": words,
        "formula": "2 sqrt(P) (alpha log sqrt(P) + n^2/P beta)",
        "note": "counts every panel as received by every rank (binomial broadcasts); "
        "the schedule counts (p-1)/p of that by the direct convention",
    }


def _summa3d(shape, P: int, grid, a: float, b: float) -> dict:
    n, c = _side(shape), round(P ** (1 / 3))
    words = (c - 1) / c * (2 * n * n / P + n * n / P ** (2 / 3))
    return {
        "seconds": 3 * a * log2(c) + words * b,
        "words_per_rank": words,
        "formula": "3 alpha log cbrt(P) + (cbrt(P)-1)/cbrt(P) (2n^2/P + n^2/P^(2/3)) beta",
        "note": "undercounts: each of the two allgathers and the reduce-scatter moves "
        "(p-1)/p n^2/p^2 = (p-1)/p n^2/P^(2/3) words per rank, so the schedule "
        "counts 3 (p-1)/p n^2/P^(2/3); the stated 2n^2/P allgather term is p "
        "times too small (counted/stated = 3p/(p+2))",
    }


def _layers25d(shape, P: int, grid, a: float, b: float) -> dict:
    n = _side(shape)
    p, _, d = grid if len(grid) == 3 else (grid[0], grid[1], 1)
    words = 2 * n * n / (p * d) + 2 * (d - 1) * n * n / d
    return {
        "seconds": 2 * a * log2(max(p, 2)) + a * log2(max(d, 1)) + words * b,
        "words_per_rank": words,
        "formula": "2 alpha log p + 2 n^2/(p d) beta + alpha log d + 2 (d-1) n^2/d beta",
        "note": "suspect: the replication/reduction term 2(d-1)n^2/d is a whole matrix per "
        "rank; a layer's block is n^2/p^2, so the term should read "
        "2(d-1)/d n^2/p^2 (and this suite starts with K split over layers, so "
        "only C's reduction remains: (d-1)/d n^2/p^2)",
    }


STATED: dict[str, Callable[..., dict]] = {
    "cannon": _cannon,
    "t10": _t10,
    "summa": _summa,
    "summa3d": _summa3d,
    "summa25d": _layers25d,
    "cannon25d": _layers25d,
}


def stated_cost(algo: str, shape, P: int, grid, profile: Profile, word: int) -> dict | None:
    """The closed-form cost the sources state for ``algo``, at the profile's large-message alpha
    and beta (per word of ``word`` bytes); None when no formula is stated."""
    formula = STATED.get(algo)
    if formula is None:
        return None
    return formula(tuple(shape), P, grid, profile.alpha_large, profile.beta_large * word)


__all__ = ["STATED", "stated_cost"]
