"""Deterministic matrices: any device generates its own block from global indices alone.

Element (i, j) of matrix ``seed`` is a hash of (seed, i, j) mapped to [-1, 1), so the global
matrix is the same whatever the rank count, grid or layout, and no rank ever builds it whole.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .blockmap import held_indices
from .tensorlayout import TensorLayout

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def values(seed: int, *index: np.ndarray, dtype=np.float64) -> np.ndarray:
    """Values of global elements at broadcastable integer index arrays (one per dimension)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) * _GOLD
        for idx in index:
            z = _mix(z + np.asarray(idx, dtype=np.uint64) + _GOLD)
        vals = (z >> np.uint64(11)).astype(np.float64) * (2.0 / (1 << 53)) - 1.0
    return vals.astype(dtype, copy=False)


def generate_block(
    layout: TensorLayout, coords: Mapping[str, int], seed: int, dtype=np.float64, step: int = 0
) -> np.ndarray:
    """This device's block (held order, ``layout.block_shape``); zero at padding."""
    held = held_indices(layout, coords, step)
    grids = np.ix_(*held)
    block = values(seed, *grids, dtype=dtype)
    for d, idx in enumerate(held):
        pad = idx >= layout.logical_shape[d]
        if pad.any():
            sl = [slice(None)] * layout.ndim
            sl[d] = pad
            block[tuple(sl)] = 0
    return block


def global_matrix(shape: tuple[int, ...], seed: int, dtype=np.float64) -> np.ndarray:
    """The whole logical matrix (for tests and gathered references only)."""
    return values(seed, *np.ix_(*[np.arange(n) for n in shape]), dtype=dtype)
