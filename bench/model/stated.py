"""The literature's closed-form costs, set beside the schedule's prediction.

Each algorithm states its own formula (``Algorithm.stated_cost``, in its module, next to the loop
it describes); this evaluates it with a profile's large-message alpha and beta, or with a link's
(a cluster's network: ``link=(alpha, seconds per byte)``).
"""

from __future__ import annotations

from algorithms import get

from .profile import Profile


def stated_cost(
    algo: str, shape, P: int, grid, profile: Profile, word: int, link=None
) -> dict | None:
    """{"seconds", "words_per_rank", "formula", "note"} for n = cube root of M K N, or None
    when the sources state no formula for ``algo``."""
    formula = get(algo).stated_cost
    if formula is None:
        return None
    alpha, beta = link if link is not None else (profile.alpha_large, profile.beta_large)
    return formula(tuple(shape), P, tuple(grid), alpha, beta * word)
