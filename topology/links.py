"""Links of a machine hierarchy: per-level latency, bandwidth and sharing; which level a
message crosses. The MN-Core tree and clusters (topology/hierarchy.py) are its instances.

A message between two PEs climbs to their lowest common ancestor: it crosses the highest level
at which their tree coordinates differ (PE: two PEs of one MAB; L2B: two different L2Bs). Its
cost is ``alpha_L + n * share_L / bandwidth_L``, where ``share_L`` is how many PEs share one
uplink of a level-L node: the PEs below that node divided by the level's ``lanes`` (at least 1).
All PEs of a subtree are assumed to send across the level at once, as they do in the shifts
and collectives of these algorithms.

The ``mncore`` preset is illustrative (PE and MAB fast, L1B slower, L2B slowest); its numbers are
plausible orders of magnitude, not measured MN-Core figures. ``mncore-emu`` keeps that ordering
but is slow enough to be visible next to this CPU's GEMMs (what emulated runs here should use).

On a cluster the ``node`` level is the network between nodes (presets in topology/networks.py,
shared by a node's ranks) and ``local`` is the shared memory inside a node. A network preset
leaves ``local`` unset (``None``): nothing emulates it, and the model prices it with the
measured profile of the node (bench/model).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .costs import collective_seconds
from .hierarchy import below, crossing_level_coords, kind_of, levels_of, members_by_level
from .mesh import AbstractMesh, MeshError
from .networks import NETWORKS
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
# presets by hierarchy: a cluster's are its networks (the node level; local left to the profile)
PRESETS_OF = {
    "mncore": PRESETS,
    "cluster": {name: {"node": p, "local": None} for name, p in NETWORKS.items()},
}


@dataclass(frozen=True)
class LinkModel:
    """{level: (alpha s, bandwidth B/s, lanes)} and the tree it describes. ``emulated``: the
    links are held on one machine (``distmm run --emulate-links``): every message really moves
    there and is then held until the link's time has passed, so it takes the longer of the two
    (bench/model/walk.py prices it so)."""

    levels: tuple[tuple[str, tuple[float, float, int] | None], ...]  # outermost first
    tree: AbstractMesh
    name: str = ""
    emulated: bool = False
    measured: bool = False  # from a profile `distmm calibrate --network-into` measured

    @classmethod
    def load(cls, spec: str, tree: AbstractMesh) -> LinkModel:
        """A preset of ``tree``'s hierarchy or a JSON file {level: {"alpha": s,
        "bandwidth": B/s, "lanes": n}}; on a cluster ``local`` may be left out. A machine
        profile whose ``network`` calibrate measured across nodes (bench/calibration_network.py)
        gives that network's links."""
        kind = kind_of(tree)
        presets = PRESETS_OF.get(kind, {})
        levels = levels_of(tree)
        measured = False
        if spec in presets:
            table, name = presets[spec], spec
        else:
            want = f"links file {spec}: want {{level: {{alpha, bandwidth, lanes}}}}"
            try:
                raw = json.loads(Path(spec).read_text())
            except FileNotFoundError:
                raise MeshError(
                    f"links {spec!r} is neither a {kind} preset ({', '.join(presets)}) nor a file"
                ) from None
            except (OSError, ValueError) as err:
                raise MeshError(f"{want} ({err})") from None
            if isinstance(raw, dict) and "p2p" in raw:  # a machine profile
                if "links" not in (raw.get("network") or {}):
                    raise MeshError(
                        f"links {spec}: this profile holds no network (measure one with "
                        "`distmm calibrate --network-into` on a job across nodes)"
                    )
                raw, measured = raw["network"]["links"], True
            try:
                table = {
                    lv: (float(v["alpha"]), float(v["bandwidth"]), int(v.get("lanes", 1)))
                    for lv, v in raw.items()
                }
            except KeyError as err:
                raise MeshError(f"{want} (missing {err.args[0]!r})") from None
            except (ValueError, TypeError, AttributeError) as err:
                raise MeshError(f"{want} ({err})") from None
            unknown = sorted(set(table) - set(levels))
            if unknown:
                raise MeshError(
                    f"links {spec}: level(s) {', '.join(unknown)} not in {kind} "
                    f"({', '.join(levels)})"
                )
            for lv, v in raw.items():
                alpha, bandwidth, lanes = table[lv]
                if not (alpha >= 0 and bandwidth > 0 and math.isfinite(alpha + bandwidth)):
                    raise MeshError(
                        f"links {spec}: level {lv} needs alpha >= 0 s and bandwidth > 0 B/s, "
                        f"not {v['alpha']} and {v['bandwidth']}"
                    )
                if lanes < 1 or lanes != v.get("lanes", 1):
                    raise MeshError(
                        f"links {spec}: level {lv}'s lanes must be a whole number >= 1, "
                        f"not {v.get('lanes')!r}"
                    )
            name = spec
            if kind == "cluster":
                table.setdefault("local", None)
        missing = [lv for lv in levels if lv not in table]
        if missing:
            raise MeshError(f"links {spec}: no parameters for level(s) {', '.join(missing)}")
        return cls(
            tuple((lv, None if table[lv] is None else tuple(table[lv])) for lv in levels),
            tree,
            name,
            measured=measured,
        )

    @property
    def origin(self) -> str:
        """Where the parameters come from: measured (calibrate), preset, or file."""
        if self.measured:
            return "measured"
        return "preset" if self.name in PRESETS_OF.get(kind_of(self.tree), {}) else "file"

    def models(self, level: str | None) -> bool:
        """Whether this model prices ``level`` (a network preset leaves a node's inside out)."""
        return level is not None and self.params(level) is not None

    def params(self, level: str) -> tuple[float, float, int]:
        return dict(self.levels)[level]

    def share(self, level: str) -> float:
        return max(1.0, below(self.tree, level) / self.params(level)[2])

    def alpha_beta(self, level: str) -> tuple[float, float]:
        """(alpha, seconds per byte) of a message crossing ``level`` with its uplink shared."""
        alpha, bw, _ = self.params(level)
        return alpha, self.share(level) / bw

    def message(self, level: str | None, nbytes: int) -> float:
        if not self.models(level):
            return 0.0
        a, b = self.alpha_beta(level)
        return a + nbytes * b

    def collective(
        self, kind: str, nbytes: int, g: int, level: str | None, gamma: float = 0.0
    ) -> float:
        """An operation on g ranks whose messages cross up to ``level``: the MPICH formula
        (topology.costs) with that level's alpha and shared beta, and ``gamma`` the seconds
        the ranks' cores take to combine a byte of a reduction (the links only move bytes)."""
        if not self.models(level) or g <= 1:
            return 0.0
        a, b = self.alpha_beta(level)
        return collective_seconds(kind, nbytes, g, a, b, gamma=gamma)

    def pair_levels(self, src, dst) -> np.ndarray:
        """For messages from tree rank ``src[i]`` to ``dst[i]`` (arrays): the index in
        ``levels_of(tree)`` of the outermost level each crosses, -1 within one rank."""
        levels = levels_of(self.tree)
        cs = dict(zip(self.tree.names, np.unravel_index(src, self.tree.shape), strict=True))
        cd = dict(zip(self.tree.names, np.unravel_index(dst, self.tree.shape), strict=True))
        out = np.full(np.shape(src), -1, np.int64)
        for i in reversed(range(len(levels))):  # outermost last: it wins
            out[cs[levels[i]] != cd[levels[i]]] = i
        return out

    def level_prices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(priced, alpha, seconds per byte), indexed like :meth:`pair_levels` (one entry per
        level of ``levels_of(tree)``, the last for -1, within one rank): whether this model
        prices the level, and a message's start and per-byte cost there (0 where unpriced)."""
        levels = levels_of(self.tree)
        priced = np.array([self.models(lv) for lv in levels] + [False])
        alpha, per_byte = np.zeros(len(levels) + 1), np.zeros(len(levels) + 1)
        for i in np.flatnonzero(priced):
            alpha[i], per_byte[i] = self.alpha_beta(levels[i])
        return priced, alpha, per_byte

    def crosses(self, src, dst) -> np.ndarray:
        """Whether each message from tree rank ``src[i]`` to ``dst[i]`` crosses a level this
        model prices (the others are left to the node's profile)."""
        return self.level_prices()[0][self.pair_levels(src, dst)]

    def exchange(self, src, dst, nbytes) -> np.ndarray:
        """Seconds per tree rank of its part of an exchange (an Alltoallv) in which tree rank
        ``src[i]`` sends ``nbytes[i]`` to ``dst[i]``, over the levels this model prices: each
        message crossing level L costs ``alpha_L + n * share_L / bandwidth_L``, one after
        another, and a rank takes the longer of its sending and its receiving. Messages that
        cross no priced level cost nothing here."""
        _, cost, per_byte = self.level_prices()
        at = self.pair_levels(src, dst)
        seconds = cost[at] + np.asarray(nbytes, float) * per_byte[at]
        seconds = np.where(np.asarray(nbytes) > 0, seconds, 0.0)
        n = self.tree.size
        return np.maximum(
            np.bincount(src, seconds, minlength=n), np.bincount(dst, seconds, minlength=n)
        )

    def as_dict(self) -> dict:
        return {
            lv: None
            if p is None
            else {"alpha": p[0], "bandwidth": p[1], "lanes": p[2], "share": self.share(lv)}
            for lv, p in self.levels
        }


def crossing_level(tree: AbstractMesh, rank_a: int, rank_b: int) -> str | None:
    """The outermost level at which the two devices' coordinates differ (None: the same)."""
    ca, cb = tree.coords(rank_a), tree.coords(rank_b)
    return crossing_level_coords(ca, cb, levels_of(tree))


__all__ = [
    "LinkModel",
    "PRESETS",
    "PRESETS_OF",
    "crossing_level",
    "crossing_level_coords",
    "members_by_level",
]
