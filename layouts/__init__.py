"""Layout descriptors: TensorLayout (MN-Core notation), PadLayout, broadcast, partial sums,
rotations, and SBP placements; block maps, deterministic data and redistribution."""

from .blockmap import (
    from_memory,
    held_indices,
    local_address,
    local_addresses,
    owner,
    time_chunk,
    to_memory,
)
from .bound import bind_layout
from .data import generate_block, global_matrix
from .parser import parse_layout
from .sbp import SBP, Broadcast, Partial, Split, parse_sbp
from .tensorlayout import TIME, Factor, LayoutError, Rotation, TensorLayout, format_layout

__all__ = [
    "TIME",
    "Factor",
    "LayoutError",
    "Rotation",
    "TensorLayout",
    "format_layout",
    "parse_layout",
    "SBP",
    "Split",
    "Broadcast",
    "Partial",
    "parse_sbp",
    "held_indices",
    "local_address",
    "to_memory",
    "from_memory",
    "local_addresses",
    "owner",
    "time_chunk",
    "generate_block",
    "global_matrix",
    "bind_layout",
]
