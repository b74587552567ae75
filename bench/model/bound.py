"""Lower bounds on the words a rank must send or receive to multiply C[M,N] = A[M,K] @ B[K,N]
on P ranks, for `distmm plan`'s words/bound column (as CA3DMM prints its volume ratio).

With F = MKN/P multiply-adds on the busiest rank and S the words it may hold:

- memory-dependent (Irony, Toledo, Tiskin 2004): W >= F / (2 sqrt(2) sqrt(S)) - S; for
  S ~ 3n^2/P (one copy of each matrix, a 2-D algorithm's memory) this is the n^2/sqrt(P) type;
- memory-independent, tight (Al Daas, Ballard, Grigori, Kumar, Rouse 2022, Theorem 3), with
  d1 >= d2 >= d3 the sorted M, K, N and I = (MK + KN + MN)/P the words a rank starts with:
  W >= D - I, D the least sum of the three faces of a rank's MKN/P sub-cube: D = (d1 d2 +
  d1 d3)/P + d2 d3 for P <= d1/d2 (1-D), D = 2 (d1 d2 d3^2 / P)^(1/2) + d1 d2 / P for
  d1/d2 < P <= d1 d2 / d3^2 (2-D), and D = 3 (MKN/P)^(2/3) beyond (3-D).

The bound is the larger of the two (and at least 0); a ratio words/bound of 1 would be optimal.
"""

from __future__ import annotations

import math


def memory_dependent_bound(shape, P: int, memory_words: float) -> float:
    """Irony-Toledo-Tiskin: MKN / (P 2 sqrt(2) sqrt(S)) - S words."""
    M, K, N = shape
    if memory_words <= 0:
        return 0.0
    return M * K * N / P / (2 * math.sqrt(2) * math.sqrt(memory_words)) - memory_words


def memory_independent_bound(shape, P: int) -> float:
    """Al Daas et al. 2022: D - (MK + KN + MN)/P with D by the 1-D / 2-D / 3-D case."""
    M, K, N = shape
    d1, d2, d3 = sorted(shape, reverse=True)
    if P <= d1 / d2:
        D = (d1 * d2 + d1 * d3) / P + d2 * d3
    elif P <= d1 * d2 / d3**2:
        D = 2 * math.sqrt(d1 * d2 * d3 * d3 / P) + d1 * d2 / P
    else:
        D = 3 * (M * K * N / P) ** (2 / 3)
    return D - (M * K + K * N + M * N) / P


def words_bound(shape, P: int, memory_words: float) -> float:
    """The larger of the two bounds above, at least 0 (0 on one rank)."""
    if P <= 1:
        return 0.0
    return max(
        0.0, memory_dependent_bound(shape, P, memory_words), memory_independent_bound(shape, P)
    )


__all__ = ["memory_dependent_bound", "memory_independent_bound", "words_bound"]
