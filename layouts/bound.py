"""A layout bound to an MN-Core tree: an algorithm's layout rewritten on the tree levels.

Under a :class:`topology.tree.Binding` each algorithm axis is a group of tree levels (row-major),
so a whole-axis factor ``n_x`` becomes one factor per level of ``x`` (``a_L2B, b_L1B``), and
B@/P@ entries and rotation terms follow their axis onto its levels. Levels of size 1 are left
out. The same descriptors then set up data on the tree.
"""

from __future__ import annotations

import math

from topology import radix
from topology.hierarchy import levels_of as hierarchy_levels
from topology.mesh import AbstractMesh
from topology.tree import Binding

from .tensorlayout import Factor, LayoutError, Rotation, TensorLayout


def bind_layout(layout: TensorLayout, binding: Binding, tree: AbstractMesh) -> TensorLayout:
    """``layout`` (algorithm axes) rewritten on the tree levels; see the module docstring.
    On a cluster (a RankOrder placement) the layout stays as it is: ranks are the job's."""
    if not binding.by_levels:
        return layout
    groups = binding.map
    sizes = tree.sizes

    def levels_of(a):
        if a not in groups:
            raise LayoutError(str(layout), f"level {a} is not an axis of the binding {binding}")
        return groups[a]

    dims = []
    for dim in layout.dims:
        out = []
        for f in dim:
            if not f.is_device:
                out.append(f)
                continue
            lvs = levels_of(f.level)
            whole = math.prod(sizes[lv] for lv in lvs)
            if f.size != whole or f.stride not in (None, 1) or layout.levels[f.level] != f.size:
                raise LayoutError(
                    str(layout),
                    f"factor {f.size}_{f.level} does not cover axis "
                    f"{f.level} whole (size {whole}); only whole-axis factors can "
                    f"be bound to tree levels",
                )
            out += [Factor(sizes[lv], lv) for lv in lvs if sizes[lv] > 1]
        if not out:  # every factor was a size-1 level
            out = [Factor(1, None, 1)]
        dims.append(tuple(out))

    def map_names(names):
        return tuple(lv for a in names for lv in levels_of(a))

    rotation = None
    if layout.rotation is not None:
        offset = []
        for a, c in layout.rotation.offset:
            lvs = levels_of(a)
            for lv, stride in zip(lvs, radix.strides([sizes[lv] for lv in lvs]), strict=True):
                if sizes[lv] > 1:
                    offset.append((lv, c * stride))
        order = {lv: i for i, lv in enumerate(hierarchy_levels(tree))}
        offset.sort(key=lambda t: order.get(t[0], -1))
        rotation = Rotation(tuple(offset), layout.rotation.pace, layout.rotation.window)
        if not offset:  # every rotating axis has size 1: keep a zero-coefficient-free rotation
            rotation = Rotation((), layout.rotation.pace, layout.rotation.window)
    return TensorLayout(
        tuple(dims),
        layout.logical_shape,
        map_names(layout.broadcast),
        map_names(layout.partial),
        rotation,
    )


__all__ = ["bind_layout"]
