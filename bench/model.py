"""The alpha-beta-gamma cost model, evaluated on the schedule an algorithm really executes.

:func:`schedule` runs an algorithm's own ``multiply`` loop on a symbolic communication layer (no
MPI, no GEMMs) for one rank, so the events priced here are the ones the real run issues. The model
walks them in order with one message channel per rank: a blocking operation occupies the rank; a
non-blocking one starts when the channel is free and must be complete at its ``wait``; a GEMM
occupies the rank. With more ranks than cores every rank gets cores/ranks of a core, so its
computation and copies slow down by that factor and non-blocking messages no longer hide behind
computation (there is no idle core to progress them on).

Collective costs follow MPICH's algorithms (Thakur, Rabenseifner, Gropp 2005), scaled by a factor
per collective that calibration measures. No MPI import here: predictions for thousands of ranks
run anywhere.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

EAGER_LIMIT = 16384  # bytes: below, MPICH uses the short-message algorithms


class ProfileError(ValueError):
    """A machine profile that is missing, unreadable or incomplete."""


@dataclass(frozen=True)
class Profile:
    """Calibrated machine parameters (what `distmm calibrate` writes)."""

    alpha: float  # s per message, small-message fit
    beta: float  # s per byte, small-message fit
    alpha_large: float  # large-message fit
    beta_large: float
    gemm: dict = field(default_factory=dict)  # dtype -> [[m, k, n, seconds], ...]
    collective_factor: dict = field(default_factory=dict)  # kind -> measured / formula
    shared_efficiency: tuple = ()  # ((ranks per core, efficiency), ...) from calibration
    copy_bandwidth: float = 5e9  # bytes/s one core copies (read + write counted once)
    cores: int = 1
    meta: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> "Profile":
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ProfileError(f"profile {path} does not exist (make one with "
                               f"`mpiexec -n 2 distmm calibrate --out {path}`)") from None
        except (OSError, ValueError) as err:
            raise ProfileError(f"profile {path} is not readable JSON ({err})") from None
        try:
            p2p = data["p2p"]
            return cls(alpha=p2p["small"]["alpha"], beta=p2p["small"]["beta"],
                       alpha_large=p2p["large"]["alpha"], beta_large=p2p["large"]["beta"],
                       gemm=data["gemm"], collective_factor=data.get("collective_factor", {}),
                       shared_efficiency=tuple(map(tuple, data.get("oversubscription", []))),
                       copy_bandwidth=float(data.get("copy_bandwidth", 5e9)),
                       cores=int(data["machine"]["cores"]), meta=data.get("machine", {}))
        except (KeyError, TypeError) as err:
            raise ProfileError(f"profile {path} lacks {err} (re-run distmm calibrate)") from None

    # -- prices ---------------------------------------------------------------------------
    def slowdown(self, ranks_per_node: int) -> float:
        """How much longer a rank's work takes when ranks share cores: ranks per core divided by
        the measured time-slicing efficiency (interpolated; 1 rank per core or fewer: 1)."""
        per_core = ranks_per_node / self.cores
        if per_core <= 1:
            return 1.0
        pts = sorted(self.shared_efficiency) or [(1.0, 1.0)]
        xs, ys = [1.0] + [p[0] for p in pts], [1.0] + [p[1] for p in pts]
        return per_core / float(np.interp(per_core, xs, ys))

    def p2p(self, nbytes: int) -> float:
        if nbytes < EAGER_LIMIT:
            return self.alpha + nbytes * self.beta
        return self.alpha_large + nbytes * self.beta_large

    def collective(self, kind: str, nbytes: int, g: int) -> float:
        return collective_formula(kind, nbytes, g, self) * self.collective_factor.get(kind, 1.0)

    def gemm_seconds(self, m: int, k: int, n: int, dtype: str) -> float:
        """Seconds for one C += A @ B of shape (m, k, n) on one core: the calibrated seconds per
        flop, interpolated linearly in log(m), log(k), log(n) over the measured grid (clamped
        at its edges)."""
        grid, table = self._gemm_grid(dtype)
        point = []
        for axis, x in zip(grid, (m, k, n)):
            logs = np.log(axis)
            lx = min(max(math.log(max(x, 1)), logs[0]), logs[-1])
            i = int(np.clip(np.searchsorted(logs, lx) - 1, 0, len(axis) - 2)) if len(axis) > 1 else 0
            w = (lx - logs[i]) / (logs[i + 1] - logs[i]) if len(axis) > 1 else 0.0
            point.append((i, w))
        per_flop = 0.0
        for corner in range(8):
            weight, idx = 1.0, []
            for axis_no, (i, w) in enumerate(point):
                up = (corner >> axis_no) & 1
                if len(grid[axis_no]) == 1:
                    if up:
                        weight = 0.0
                    idx.append(0)
                    continue
                weight *= w if up else 1 - w
                idx.append(i + up)
            if weight:
                per_flop += weight * table[tuple(idx)]
        return 2.0 * m * k * n * per_flop

    def _gemm_grid(self, dtype: str):
        cache = self.__dict__.setdefault("_grids", {})
        if dtype not in cache:
            rows = self.gemm.get(dtype) or self.gemm.get("float32")
            if not rows:
                raise ProfileError(f"profile has no GEMM rates for {dtype}")
            axes = [sorted({r[i] for r in rows}) for i in range(3)]
            table = np.full([len(a) for a in axes], np.nan)
            for m, k, n, sec in rows:
                table[axes[0].index(m), axes[1].index(k), axes[2].index(n)] = sec / (2.0 * m * k * n)
            if np.isnan(table).any():
                raise ProfileError("profile's GEMM table is not a full m x k x n grid "
                                   "(re-run distmm calibrate)")
            cache[dtype] = (axes, table)
        return cache[dtype]


def collective_formula(kind: str, n: int, g: int, prof: Profile) -> float:
    """MPICH's algorithm cost for ``kind`` on g ranks; n as Event.nbytes defines it."""
    if g <= 1:
        return 0.0
    lg = math.ceil(math.log2(g))
    a, b = (prof.alpha, prof.beta) if n < EAGER_LIMIT else (prof.alpha_large, prof.beta_large)
    if kind == "shift":
        return prof.p2p(n)
    if kind == "bcast":  # binomial tree, or scatter + ring allgather for long messages
        if n < EAGER_LIMIT or g < 8:
            return lg * (a + n * b)
        return (lg + g - 1) * a + 2 * (g - 1) / g * n * b
    if kind == "allgather":  # n is one rank's piece: ring
        return (g - 1) * (a + n * b)
    if kind == "reduce_scatter":  # n is the whole buffer
        return lg * a + (g - 1) / g * n * b
    if kind == "allreduce":  # Rabenseifner
        return 2 * lg * a + 2 * (g - 1) / g * n * b
    raise ValueError(f"no cost formula for {kind}")


# -- schedules ---------------------------------------------------------------------------------
def schedule(module, plan, rank: int = 0, dtype=np.float32, binding=None, tree=None) -> list:
    """The events rank ``rank`` issues in one multiplication, from the algorithm's own loop.

    With a binding onto a tree, ``rank`` is a PE of the tree and the events carry their levels."""
    from algorithms.comm import Comm

    view = plan.mesh.at(rank, binding, tree)
    a = np.zeros(plan.A.block_shape, dtype=dtype)
    b = np.zeros(plan.B.block_shape, dtype=dtype)
    comm = Comm(view, execute=False, compute=False)
    module.multiply(plan, comm, module.prepare(plan, a, b, view.coords))
    return comm.events


def bytes_per_rank(module, plan, dtype=np.float32) -> list[int]:
    """Bytes each rank sends in one multiplication (the counting convention of comm.py)."""
    return [sum(e.sent for e in schedule(module, plan, r, dtype)) for r in range(plan.P)]


@dataclass
class Prediction:
    seconds: float
    phases: dict  # kind -> seconds on the critical path (gemm, and exposed communication)
    flops: int
    bytes_sent: int  # by the modelled rank
    messages: int
    oversubscription: float
    level_bytes: dict = field(default_factory=dict)  # on a tree: the modelled rank's bytes

    def as_dict(self) -> dict:
        out = {"predicted_seconds": self.seconds, "predicted_phases": self.phases,
               "model_rank_bytes_sent": self.bytes_sent, "oversubscription": self.oversubscription}
        if self.level_bytes:
            out["model_rank_level_bytes"] = self.level_bytes
        return out


def level_bytes(events) -> dict:
    """{tree level: bytes} of a schedule's events (empty off a tree)."""
    out: dict[str, int] = defaultdict(int)
    for e in events:
        for lv, n in e.level_bytes:
            out[lv] += n
    return dict(out)


def predict(events, profile: Profile, dtype: str, ranks_per_node: int, links=None) -> Prediction:
    """Walk one rank's schedule; see the module docstring for the rules.

    With ``links`` (topology.links.LinkModel) a communication event on a tree costs the link
    model's price at its ``phase_level`` (the highest level any member's message crosses) and is
    not slowed by oversubscription: it models the tree's links (or their emulation, which
    sleeps and so overlaps computation even with more ranks than cores)."""
    slow = profile.slowdown(ranks_per_node)
    overlap = slow <= 1.0
    t = channel = 0.0
    done: dict[int, float] = {}
    phases: dict[str, float] = defaultdict(float)
    for i, e in enumerate(events):
        if e.kind == "gemm":
            d = profile.gemm_seconds(*e.shape, dtype) * slow
            t += d
            phases["gemm"] += d
        elif e.kind == "copy":
            d = e.nbytes / profile.copy_bandwidth * slow
            t += d
            phases["copy"] += d
        elif e.kind == "wait":
            end = max(done.get(j, t) for j in e.waits)
            if end > t:
                phases[events[e.waits[0]].kind] += end - t
                t = end
        else:
            if links is not None and e.phase_level is not None:
                cost = links.collective(e.kind, e.nbytes, e.group, e.phase_level)
                hides = True
            else:
                cost = profile.collective(e.kind, e.nbytes, e.group) * slow
                hides = overlap
            if e.overlapped and hides:
                start = max(t, channel)
                channel = done[i] = start + cost
            else:
                start = max(t, channel)
                phases[e.kind] += start + cost - t
                t = channel = done[i] = start + cost
    return Prediction(t, dict(phases), sum(e.flops for e in events),
                      sum(e.sent for e in events), sum(e.messages for e in events), slow,
                      level_bytes(events))


# -- the literature's closed forms (square n x n; see notes/algorithms.md) ---------------------
def stated_cost(algo: str, shape, P: int, grid, profile: Profile, word: int) -> dict | None:
    """The closed-form cost the sources state, evaluated for n = cube root of M K N.

    Returns {"seconds", "words_per_rank", "formula", "note"}, or None when no formula is stated.
    """
    M, K, N = shape
    n = (M * K * N) ** (1 / 3)
    a, b = profile.alpha_large, profile.beta_large * word  # per word
    lg = math.log2
    if algo in ("cannon", "t10"):
        s = math.sqrt(P)
        words = 2 * (s - 1) * n * n / P
        return {"seconds": 2 * (s - 1) * a + words * b, "words_per_rank": words,
                "formula": "2(sqrt(P)-1)(alpha + n^2/P beta)",
                "note": "t10 is compared with Cannon's formula, exact only for F_op=[p,1,p]"
                if algo == "t10" else ""}
    if algo == "summa":
        s = math.sqrt(P)
        words = 2 * s * n * n / P
        return {"seconds": 2 * s * a * (lg(s) if s > 1 else 0) + words * b,
                "words_per_rank": words, "formula": "2 sqrt(P) (alpha log sqrt(P) + n^2/P beta)",
                "note": "counts every panel as received by every rank (binomial broadcasts); "
                        "the schedule counts (p-1)/p of that by the direct convention"}
    if algo == "summa3d":
        c = round(P ** (1 / 3))
        words = (c - 1) / c * (2 * n * n / P + n * n / P ** (2 / 3))
        return {"seconds": 3 * a * lg(c) + words * b, "words_per_rank": words,
                "formula": "3 alpha log cbrt(P) + (cbrt(P)-1)/cbrt(P) (2n^2/P + n^2/P^(2/3)) beta",
                "note": "undercounts: each of the two allgathers and the reduce-scatter moves "
                        "(p-1)/p n^2/p^2 = (p-1)/p n^2/P^(2/3) words per rank, so the schedule "
                        "counts 3 (p-1)/p n^2/P^(2/3); the stated 2n^2/P allgather term is p "
                        "times too small (counted/stated = 3p/(p+2))"}
    if algo in ("summa25d", "cannon25d"):
        p, _, d = grid if len(grid) == 3 else (grid[0], grid[1], 1)
        words = 2 * n * n / (p * d) + 2 * (d - 1) * n * n / d
        return {"seconds": 2 * a * lg(max(p, 2)) + a * lg(max(d, 1)) + words * b,
                "words_per_rank": words,
                "formula": "2 alpha log p + 2 n^2/(p d) beta + alpha log d + 2 (d-1) n^2/d beta",
                "note": "suspect: the replication/reduction term 2(d-1)n^2/d is a whole matrix per "
                        "rank; a layer's block is n^2/p^2, so the term should read "
                        "2(d-1)/d n^2/p^2 (and this suite starts with K split over layers, so "
                        "only C's reduction remains: (d-1)/d n^2/p^2)"}
    return None
