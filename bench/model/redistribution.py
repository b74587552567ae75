"""What moving a tensor from one layout to another costs: the elements every pair of ranks
exchanges (layouts/transfer.exchange_counts, the counts the real Alltoallv sends), priced as
that all-to-all with the calibrated parameters."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from layouts.endpoints import Move, move_counts
from layouts.tensorlayout import TensorLayout
from layouts.transfer import exchange_counts
from topology.mesh import AbstractMesh

from .profile import Profile


def transfer_seconds(
    counts: np.ndarray, itemsize: int, profile: Profile, ranks_per_node: int
) -> float:
    """Seconds for one Alltoallv in which job rank s sends ``counts[s, t]`` elements to rank t
    (the diagonal is a local copy): the busiest rank's messages and bytes (the larger of what
    it sends and receives) at the large-message rates, scaled by the calibrated all-to-all
    factor and by core sharing."""
    counts = np.asarray(counts)
    off = counts * (1 - np.eye(len(counts), dtype=counts.dtype))
    if not off.any():
        return 0.0
    sent, recv = off.sum(axis=1), off.sum(axis=0)
    messages = np.maximum((off > 0).sum(axis=1), (off > 0).sum(axis=0))
    per_rank = messages * profile.alpha_large + np.maximum(sent, recv) * itemsize * (
        profile.beta_large
    )
    factor = profile.collective_factor.get("alltoall", 1.0)
    return float(per_rank.max()) * factor * profile.slowdown(ranks_per_node)


def move_seconds(
    all_moves: Sequence[Move],
    ranks: Sequence[int] | None,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
) -> dict[str, float]:
    """{"redistribute_in": s, "redistribute_out": s}: the end-to-end run's moves priced (A and B
    in, C out), native mesh rank d on job rank ``ranks[d]``."""
    out = {"redistribute_in": 0.0, "redistribute_out": 0.0}
    for m in all_moves:
        phase = "redistribute_in" if m.into else "redistribute_out"
        out[phase] += transfer_seconds(move_counts(m, ranks), itemsize, profile, ranks_per_node)
    return out


def redistribution_seconds(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
) -> float:
    """Seconds to move ``src`` on ``src_mesh`` into ``dst`` on ``dst_mesh`` (same rank order)."""
    if str(src) == str(dst) and src_mesh == dst_mesh:
        return 0.0
    counts = exchange_counts(src, src_mesh, dst, dst_mesh)
    return transfer_seconds(counts, itemsize, profile, ranks_per_node)


__all__ = ["move_seconds", "redistribution_seconds", "transfer_seconds"]
