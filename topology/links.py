"""Links of the MN-Core tree: per-level latency and bandwidth, and which level a message crosses.

A message between two PEs climbs to their lowest common ancestor: it crosses the highest level
at which their tree coordinates differ (PE: two PEs of one MAB; L2B: two different L2Bs). Its
cost is ``alpha_L + n * share_L / bandwidth_L``, where ``share_L`` is how many PEs share one
uplink of a level-L node: the PEs below that node divided by the level's ``lanes`` (at least 1).
All PEs of a subtree are assumed to send across the level at once, as they do in the shifts
and collectives of these algorithms.

The ``mncore`` preset is illustrative (PE and MAB fast, L1B slower, L2B slowest); its numbers are
plausible orders of magnitude, not measured MN-Core figures. ``mncore-emu`` keeps that ordering
but is slow enough to be visible next to this CPU's GEMMs (what emulated runs here should use).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .costs import collective_seconds
from .mesh import AbstractMesh, MeshError
from .tree import LEVELS

PRESETS = {
    # level: alpha seconds, bandwidth bytes/s, lanes (uplinks per node). Illustrative only.
    "mncore": {
        "PE": (2e-6, 8e9, 1),
        "MAB": (5e-6, 8e9, 4),
        "L1B": (2e-5, 8e9, 4),
        "L2B": (5e-5, 8e9, 8),
    },
    # The same ordering slowed down for emulation on a CPU: this machine's GEMMs are far slower
    # than MN-Core's, so links must be slower too for their effect to show in measured times.
    "mncore-emu": {
        "PE": (1e-5, 1e9, 1),
        "MAB": (2e-5, 5e8, 1),
        "L1B": (5e-5, 2e8, 1),
        "L2B": (1e-4, 1e8, 1),
    },
    "flat": {lv: (1e-6, 1e10, 1 << 20) for lv in LEVELS},
}


@dataclass(frozen=True)
class LinkModel:
    """{level: (alpha s, bandwidth B/s, lanes)} and the tree it describes."""

    levels: tuple[tuple[str, tuple[float, float, int]], ...]
    tree: AbstractMesh
    name: str = ""

    @classmethod
    def load(cls, spec: str, tree: AbstractMesh) -> LinkModel:
        """A preset name or a JSON file {level: {"alpha": s, "bandwidth": B/s, "lanes": n}}."""
        if spec in PRESETS:
            table, name = PRESETS[spec], spec
        else:
            try:
                raw = json.loads(Path(spec).read_text())
                table = {
                    lv: (float(v["alpha"]), float(v["bandwidth"]), int(v.get("lanes", 1)))
                    for lv, v in raw.items()
                }
            except FileNotFoundError:
                raise MeshError(
                    f"links {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a file"
                ) from None
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
                raise MeshError(
                    f"links file {spec}: want {{level: {{alpha, bandwidth, lanes}}}} ({err})"
                ) from None
            name = spec
        missing = [lv for lv in LEVELS if lv not in table]
        if missing:
            raise MeshError(f"links {spec}: no parameters for level(s) {', '.join(missing)}")
        return cls(tuple((lv, tuple(table[lv])) for lv in LEVELS), tree, name)

    def params(self, level: str) -> tuple[float, float, int]:
        return dict(self.levels)[level]

    def share(self, level: str) -> float:
        below = math.prod(self.tree.sizes[lv] for lv in LEVELS[LEVELS.index(level) + 1 :])
        return max(1.0, below / self.params(level)[2])

    def alpha_beta(self, level: str) -> tuple[float, float]:
        """(alpha, seconds per byte) of a message crossing ``level`` with its uplink shared."""
        alpha, bw, _ = self.params(level)
        return alpha, self.share(level) / bw

    def message(self, level: str | None, nbytes: int) -> float:
        if level is None:
            return 0.0
        a, b = self.alpha_beta(level)
        return a + nbytes * b

    def collective(self, kind: str, nbytes: int, g: int, level: str | None) -> float:
        """An operation on g ranks whose messages cross up to ``level``: the MPICH formula
        (topology.costs) with that level's alpha and shared beta."""
        if level is None or g <= 1:
            return 0.0
        a, b = self.alpha_beta(level)
        return collective_seconds(kind, nbytes, g, a, b)

    def as_dict(self) -> dict:
        return {
            lv: {"alpha": a, "bandwidth": bw, "lanes": ln, "share": self.share(lv)}
            for lv, (a, bw, ln) in self.levels
        }


def crossing_level(tree: AbstractMesh, rank_a: int, rank_b: int) -> str | None:
    """The highest level at which the two PEs' coordinates differ (None: the same PE)."""
    ca, cb = tree.coords(rank_a), tree.coords(rank_b)
    return crossing_level_coords(ca, cb)


def crossing_level_coords(ca, cb) -> str | None:
    for lv in LEVELS:
        if ca[lv] != cb[lv]:
            return lv
    return None


def members_by_level(tree: AbstractMesh, levels) -> dict[str, int]:
    """For a group spanning ``levels``: how many other members a member reaches across each
    level (those whose highest differing coordinate is that level)."""
    levels = [lv for lv in LEVELS if lv in levels]
    out = {}
    for i, lv in enumerate(levels):
        n = (tree.sizes[lv] - 1) * math.prod(tree.sizes[below] for below in levels[i + 1 :])
        if n:
            out[lv] = n
    return out


__all__ = ["LinkModel", "PRESETS", "crossing_level", "members_by_level"]
