"""Mixed-radix numbers: the one rank <-> coordinate arithmetic of meshes, trees and layouts.

A number over sizes ``(s_0, ..., s_k)`` has one digit per size, the first most significant
(row-major): ``n = sum(d_i * stride_i)`` with ``stride_i = s_{i+1} * ... * s_k``. Digits are
taken mod their size, so ``digits`` and ``number`` wrap around like a periodic mesh. Both work
on Python ints and elementwise on NumPy integer arrays.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides: the last size varies fastest (stride 1)."""
    out, acc = [], 1
    for s in reversed(sizes):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def digits(n, sizes: Sequence[int]) -> tuple:
    """The digits of ``n`` (mod the product of ``sizes``), most significant first."""
    out = []
    for s in reversed(sizes):
        n, d = divmod(n, s)
        out.append(d)
    return tuple(reversed(out))


def number(values: Iterable, sizes: Sequence[int]):
    """The number whose digits are ``values`` (each taken mod its size)."""
    n = 0
    for d, s in zip(values, sizes, strict=True):
        n = n * s + d % s
    return n


__all__ = ["digits", "number", "strides"]
