"""Placeholder arrays: the buffers of a symbolic run (the cost model's), which have the real
shape, dtype and ``nbytes`` but one element of memory.

A placeholder is a read-only zero-stride view of a one-element array, so slicing and indexing it
give placeholders too, and an accidental write raises instead of touching memory. A symbolic
:class:`~algorithms.comm.Comm` hands out placeholders for its work buffers and results; prepare
functions pass them through (:func:`reshaped`, :func:`unit`) instead of copying.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided


def placeholder(shape, dtype) -> np.ndarray:
    """A read-only array of ``shape`` and ``dtype`` that holds one (zero) element."""
    shape = tuple(int(s) for s in shape)
    return as_strided(np.zeros(1, dtype=dtype), shape, (0,) * len(shape), writeable=False)


def is_placeholder(x) -> bool:
    return isinstance(x, np.ndarray) and x.ndim > 0 and not any(x.strides)


def reshaped(x: np.ndarray, shape) -> np.ndarray:
    """``x.reshape(shape)``; a placeholder stays a placeholder (no copy)."""
    if not is_placeholder(x):
        return x.reshape(shape)
    shape = list(shape)
    if -1 in shape:
        i = shape.index(-1)
        rest = int(np.prod([s for j, s in enumerate(shape) if j != i]))
        shape[i] = x.size // rest
    return placeholder(shape, x.dtype)


__all__ = ["is_placeholder", "placeholder", "reshaped"]
