"""What moving a tensor from one layout to another costs: element counts from the two layouts'
block maps, priced as one all-to-all (what layouts/redistribute.py does with its Alltoallv)."""

from __future__ import annotations

import numpy as np

from layouts.blockmap import held_indices
from layouts.redistribute import placement
from layouts.tensorlayout import TensorLayout
from topology.mesh import AbstractMesh

from .profile import Profile


def redistribution_counts(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> np.ndarray:
    """Element counts (not bytes): for each destination rank, the elements it holds under
    ``dst`` whose primary source rank under ``src`` is another rank (ranks are linear on both
    meshes)."""
    place = placement(src, src_mesh)
    shape = src.logical_shape or src.padded_shape
    counts = np.zeros(dst_mesh.size, np.int64)
    for r in range(dst_mesh.size):
        idx = held_indices(dst, dst_mesh.coords(r))
        idx = tuple(ix[ix < n] for ix, n in zip(idx, shape, strict=True))  # padding carries nothing
        if any(ix.size == 0 for ix in idx):
            continue
        counts[r] = int(np.count_nonzero(place.primary_rank(idx) != r))
    return counts


def redistribution_seconds(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
) -> float:
    """Seconds to move ``src`` on ``src_mesh`` into ``dst`` on ``dst_mesh``: the busiest
    receiver's bytes and one message from each other rank, at the large-message rates."""
    if str(src) == str(dst) and src_mesh == dst_mesh:
        return 0.0
    counts = redistribution_counts(src, src_mesh, dst, dst_mesh)
    recv = int(counts.max()) * itemsize
    if recv == 0:
        return 0.0
    P = dst_mesh.size
    return (recv * profile.beta_large + (P - 1) * profile.alpha_large) * profile.slowdown(
        ranks_per_node
    )


__all__ = ["redistribution_counts", "redistribution_seconds"]
