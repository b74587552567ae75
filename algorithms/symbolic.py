"""Placeholder arrays: the buffers of a symbolic run (the cost model's), which have the real
shape, dtype and ``nbytes`` but one element of memory.

A placeholder is a read-only zero-stride view of a one-element array, so slicing and indexing it
give placeholders too, and an accidental write raises instead of touching memory. A symbolic
:class:`~algorithms.comm.Comm` hands out placeholders for its work buffers and results; prepare
functions pass them through (:func:`reshaped`) where they would not copy, and make a fresh one
where they would (:func:`copied_bytes` tells them apart, for the model's price of prepare).
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
    """``x.reshape(shape)``; a placeholder's is a placeholder viewing its element (no copy)."""
    if not is_placeholder(x):
        return x.reshape(shape)
    shape = list(shape)
    if -1 in shape:
        i = shape.index(-1)
        rest = int(np.prod([s for j, s in enumerate(shape) if j != i]))
        shape[i] = x.size // rest
    return as_strided(x, tuple(int(s) for s in shape), (0,) * len(shape), writeable=False)


def copied_bytes(state, *inputs: np.ndarray) -> int:
    """Bytes of the arrays in a prepared ``state`` (arrays in nested tuples and lists) that are
    no view of ``inputs``: what prepare copied. Placeholders count alike: prepare makes a fresh
    one where it would copy, a view of its input where it would not."""
    if isinstance(state, np.ndarray):
        return 0 if any(np.may_share_memory(state, x) for x in inputs) else state.nbytes
    if isinstance(state, tuple | list):
        return sum(copied_bytes(s, *inputs) for s in state)
    return 0


__all__ = ["copied_bytes", "is_placeholder", "placeholder", "reshaped"]
