"""T10's rTensor rotation (Liu et al., SOSP 2024), a generalised Cannon, for any operator
partition F_op = [F_m, F_k, F_n] with P = F_m F_k F_n (mesh axes m, k, n; ranks row-major in
that order).

Core (a, c, b) computes C[a, b] (M/F_m x N/F_n) += A[a, c] @ B[c, b] over the K slice c (K/F_k).
A lacks the n axis: A[a, c] is needed by the F_n cores along n, a ring; B lacks m: B[c, b] is
needed by the F_m cores along m. Nothing is copied: with L = lcm(F_m, F_n), every K slice is cut
into L units of u = K'/(F_k L) columns of A / rows of B (K' = K padded to a multiple of F_k L),
and each member of a ring holds a window of consecutive units, one chunk per ring member: W_A =
L/F_n units of A (f_t^A = F_n chunks) and W_B = L/F_m units of B (f_t^B = F_m chunks). This is
how T10 derives f_t.

Skew: core (a, c, b)'s windows of A and of B both start at unit h = (a W_B + b W_A) mod L, the
rotation ``R@[(L/F_m) m + (L/F_n) n]``. Along A's ring (a fixed) core b starts where core b-1's
window ends, so the ring's windows cover the L units once; likewise B's ring along m (b fixed).

Rotating pace rp (option ``pace``; default min(W_A, W_B) = L / max(F_m, F_n), T10's "compute and
rotate at the smaller chunk"; valid: 1 <= rp <= min(W_A, W_B) with rp dividing L). L/rp steps;
each step multiplies the first rp units of both windows (the same K units), then every core sends
those rp units of A to the previous core along n and receives the next core's first rp units,
appended at the end of its window; B likewise along m. A unit is sent only if the receiver has
not held it yet, so each core receives exactly the L - W units it lacks (nothing after the last
step, and a ring of one core sends nothing). Windows are deques of per-unit contiguous arrays, so
the rotation copies nothing: one message per unit (comm.ishift into a recycled buffer), and rp
GEMMs of depth u per step. With overlap on, a step's messages are posted before its GEMMs and
progressed during them. F_k > 1: each core ends with a K-partial C[a, b], reduce-scattered along
k over its columns (N padded to a multiple of F_n F_k).

Layouts say what a core holds at step t: A
``(M,K)/((F_m_m, M'/F_m), (F_k_k, L_Time, u); R@[W_B m + W_A n, pace=rp, window=W_A])``, B
likewise with ``window=W_B``, C ``(M,N)/((F_m_m, M'/F_m), (F_n_n, F_k_k, N'/(F_n F_k)))``: the
window is the W units from the head, and the head moves rp units a step. Levels of size 1 (and a
Time axis of size 1) are left out, so F_op = [p, 1, p] gives Cannon's layouts with m, n for x, y:
L = p, W = 1, offset m + n, pace 1, and the same schedule. Each core generates exactly its window
from the layouts, like every algorithm here.

Default F_op (when ``fop`` is not given): the one whose rotations and reduction receive the
fewest words per core for this shape (A: M'/F_m K'/F_k (1 - 1/F_n), B: K'/F_k N'/F_n (1 -
1/F_m), C: M'/F_m N'/F_n (1 - 1/F_k)), ties going to F_k = 1, then the most square F_m x F_n.
``grids(P)`` lists every triple, in that order for a cube shape. No ``grid`` option: use --fop.
"""

from __future__ import annotations

import math
import sys
from collections import deque

import numpy as np

from layouts import time_chunk
from layouts.blockmap import time_chunks
from layouts.builder import build, dev, mem, rotate, time
from topology import AbstractMesh

from .cannon import stated_cost as cannon_cost
from .comm import Pending
from .plan import Plan, PlanError, ceil_to, check_shape
from .spec import Algorithm, Option
from .symbolic import is_placeholder, placeholder

NAME = "t10"


def grids(P: int) -> list[tuple[int, ...]]:
    """Every F_op = (F_m, F_k, F_n) with F_m F_k F_n == P, the default for a cube shape first."""
    triples = [
        (fm, fk, P // (fm * fk))
        for fm in range(1, P + 1)
        if P % fm == 0
        for fk in range(1, P // fm + 1)
        if (P // fm) % fk == 0
    ]
    return sorted(triples, key=lambda f: _cost_key(f, (P, P, P)))


def _geometry(shape, fop) -> dict:
    """Units, windows and padded block sizes of F_op on shape (M, K, N)."""
    (M, K, N), (fm, fk, fn) = shape, fop
    L = math.lcm(fm, fn)
    Kp = ceil_to(K, fk * L)
    return {
        "L": L,
        "u": Kp // (fk * L),
        "wa": L // fn,
        "wb": L // fm,
        "m": ceil_to(M, fm) // fm,
        "k": Kp // fk,
        "n": ceil_to(N, fn * fk) // fn,
    }


def _cost_key(fop, shape) -> tuple:
    """Words a core receives (rotations of A and B, reduce-scatter of C), then tie-breaks."""
    fm, fk, fn = fop
    g = _geometry(shape, fop)
    words = (
        g["m"] * g["k"] * (fn - 1) // fn
        + g["k"] * g["n"] * (fm - 1) // fm
        + g["m"] * g["n"] * (fk - 1) // fk
    )
    return (words, fk, abs(fm - fn), fm > fn)


def valid_paces(units: int, window_a: int, window_b: int) -> list[int]:
    """The rotating paces an F_op admits: 1 <= rp <= min(W_A, W_B), rp dividing L."""
    return [r for r in range(1, min(window_a, window_b) + 1) if units % r == 0]


def plan(shape, P: int, *, fop=None, pace: int | None = None, overlap: bool = True) -> Plan:
    M, K, N = check_shape(shape, NAME)
    if fop is None:
        fop = min(grids(P), key=lambda f: _cost_key(f, (M, K, N)))
    fop = tuple(fop)
    if len(fop) != 3 or any(not isinstance(f, int) or f < 1 for f in fop):
        raise PlanError(f"{NAME}: F_op must be three positive integers F_m,F_k,F_n, got {fop}")
    fm, fk, fn = fop
    if fm * fk * fn != P:
        every = "; ".join(",".join(map(str, f)) for f in grids(P))
        raise PlanError(
            f"{NAME}: F_op {fm},{fk},{fn} has {fm * fk * fn} cores but the job has "
            f"{P} (for {P} ranks: {every})"
        )
    g = _geometry((M, K, N), fop)
    L, u, wa, wb = g["L"], g["u"], g["wa"], g["wb"]
    paces = valid_paces(L, wa, wb)
    rp = min(wa, wb) if pace is None else pace
    if not isinstance(rp, int) or rp not in paces:
        raise PlanError(
            f"{NAME}: pace {pace} is not valid for F_op {fm},{fk},{fn} (L = {L} units, "
            f"windows W_A = {wa}, W_B = {wb}; valid: {', '.join(map(str, paces))})"
        )
    mesh = AbstractMesh((("m", fm), ("k", fk), ("n", fn)))
    head = {"m": wb, "n": wa}  # the skew: unit (W_B m + W_A n) mod L
    ks = [dev("k", fk), time(L), mem(u)]
    rows = [dev("m", fm), mem(g["m"])]
    return Plan(
        NAME,
        (M, K, N),
        mesh,
        A=build((M, K), [rows, ks], rotation=rotate(head, rp, wa), sizes=mesh.sizes),
        B=build(
            (K, N),
            [ks, [dev("n", fn), mem(g["n"])]],
            rotation=rotate(head, rp, wb),
            sizes=mesh.sizes,
        ),
        C=build((M, N), [rows, [dev("n", fn), dev("k", fk), mem(g["n"] // fk)]]),
        params={
            "fop": list(fop),
            "pace": rp,
            "steps": L // rp,
            "units": L,
            "unit": u,
            "window_A": wa,
            "window_B": wb,
        },
        overlap=overlap,
    )


def gemms(plan: Plan) -> tuple[tuple[int, int, int], ...]:
    """Each GEMM multiplies one unit: u columns of the A window by u rows of the B window."""
    return ((plan.A.block_shape[0], plan.params["unit"], plan.B.block_shape[1]),)


def promised(plan: Plan, itemsize: int) -> tuple[tuple[str, int, int, int, bool], ...]:
    """What every core issues besides GEMMs: the L - W units of A the next core along n lacks,
    and of B along m (a ring of one sends nothing), then with F_k > 1 C's reduce-scatter along
    k, its columns packed first."""
    fm, fk, fn = plan.params["fop"]
    L, u = plan.params["units"], plan.params["unit"]
    rows, cols = plan.A.block_shape[0], plan.B.block_shape[1]
    blocking = not plan.overlap
    out = []
    if fn > 1:
        out.append(("shift", rows * u * itemsize, fn, L - plan.params["window_A"], blocking))
    if fm > 1:
        out.append(("shift", u * cols * itemsize, fm, L - plan.params["window_B"], blocking))
    if fk > 1:
        c = rows * cols * itemsize
        out += [("copy", c, 1, 1, True), ("reduce_scatter", c, fk, 1, True)]
    return tuple(out)


def prepare(plan: Plan, a: np.ndarray, b: np.ndarray, coords) -> tuple:
    """This core's windows as deques of contiguous units, head unit first (untimed set-up).

    ``a`` and ``b`` are the generated blocks of the window layouts: W units in increasing K
    order, which the head-first rotation order starts somewhere inside (it wraps around L).
    """
    u = plan.params["unit"]
    head = time_chunk(plan.A, coords) if plan.A.time_size > 1 else 0
    return (_units(a, plan.A, coords, head, u, axis=1), _units(b, plan.B, coords, head, u, axis=0))


def _units(block: np.ndarray, layout, coords, head: int, u: int, axis: int) -> tuple:
    chunks = sorted(time_chunks(layout, coords))  # held order: increasing chunk
    if is_placeholder(block):  # shapes alone: one view stands for every unit (W up to P)
        return (_unit(block, 0, u, axis),) * len(chunks)
    L = max(layout.time_size, 1)
    pieces = {c: _unit(block, i, u, axis) for i, c in enumerate(chunks)}
    return tuple(pieces[c] for c in sorted(chunks, key=lambda c: (c - head) % L))


def _unit(block: np.ndarray, i: int, u: int, axis: int) -> np.ndarray:
    """Unit i (u columns of A / rows of B), contiguous: the block's own memory where it is
    (rows of B; A's columns when one unit spans them), else a copy (of a placeholder, a fresh
    one: algorithms.symbolic.copied_bytes)."""
    unit = block[:, i * u : (i + 1) * u] if axis == 1 else block[i * u : (i + 1) * u]
    if not is_placeholder(block):
        return np.ascontiguousarray(unit)
    return placeholder(unit.shape, unit.dtype) if axis == 1 and u < block.shape[1] else unit


class _Ring:
    """One operand's window on its ring: a deque of per-unit arrays, rotated without copies.

    Received units land in buffers allocated here (and recycled once consumed); the input
    arrays are only read, so multiply() can run again on the same state.
    """

    def __init__(self, window, axis: str, units: int):
        self.window = deque(window)
        self.axis, self.units = axis, units
        self.held = len(window)  # units held so far: the receiver's next unit is number `held`
        self.spare: list[np.ndarray] = []
        self.owned: set[int] = set()
        self.moving: list[tuple[np.ndarray, Pending]] = []

    def head(self, rp: int) -> list[np.ndarray]:
        return [self.window[j] for j in range(rp)]

    def start(self, comm, rp: int, blocking: bool) -> list[Pending]:
        """Send the first rp units one place back along the ring and receive the next core's;
        units the receiver has already held (all of them on a ring of one) are not sent."""
        for j in range(min(rp, self.units - self.held)):
            out = self.spare.pop() if self.spare else self._new(comm, self.window[j])
            if blocking:
                p = Pending(result=comm.shift(self.window[j], self.axis, -1, out))
            else:
                p = comm.ishift(self.window[j], self.axis, -1, out)
            self.moving.append((out, p))
        return [p for _, p in self.moving]

    def finish(self, rp: int) -> None:
        """Complete the step's messages: drop the rp units just used, append those received."""
        got = [(out, p.wait()) for out, p in self.moving]
        self.moving = []
        used = [self.window.popleft() for _ in range(rp)]
        for out, unit in got:
            if unit is not out:  # nothing moved (compute-only mode): the unit came back
                self.spare.append(out)
            self.window.append(unit)
        self.held += len(got)
        for unit in used:
            if id(unit) in self.owned and not any(unit is g for _, g in got):
                self.spare.append(unit)

    def _new(self, comm, like: np.ndarray) -> np.ndarray:
        buf = comm.scratch(f"t10.{self.axis}.{len(self.owned)}", like)
        self.owned.add(id(buf))
        return buf


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a_window, b_window = state
    rp, steps, L = plan.params["pace"], plan.params["steps"], plan.params["units"]
    A = _Ring(a_window, "n", L)  # A[a, c] rotates among the F_n cores along n
    B = _Ring(b_window, "m", L)  # B[c, b] among the F_m cores along m
    c = comm.empty((a_window[0].shape[0], b_window[0].shape[1]), a_window[0].dtype)
    tmp = comm.scratch("t10.tmp", c)
    for t in range(steps):
        comm.step = t
        units = list(zip(A.head(rp), B.head(rp), strict=True))  # the same rp K units of A and of B
        moving = A.start(comm, rp, False) + B.start(comm, rp, False) if plan.overlap else []
        for j, (a, b) in enumerate(units):
            comm.gemm(a, b, c, accumulate=t + j > 0, tmp=tmp, progress=moving)
        if not plan.overlap:
            A.start(comm, rp, True)
            B.start(comm, rp, True)
        A.finish(rp)
        B.finish(rp)
    if plan.params["fop"][1] > 1:
        comm.step = None
        c = comm.reduce_scatter(c, "k", dim=1)  # sum the K slices; core c keeps column piece c
    return c


def stated_cost(shape, P: int, grid, alpha: float, beta: float) -> dict:
    return cannon_cost(
        shape,
        P,
        grid,
        alpha,
        beta,
        note="t10 is compared with Cannon's formula, exact only for F_op=[p,1,p]",
    )


def _paces(plan: Plan) -> list[int]:
    return valid_paces(plan.params["units"], plan.params["window_A"], plan.params["window_B"])


FOP = Option("fop", "operator partition F_op", type=tuple, length=3, metavar="m,k,n", is_grid=True)
PACE = Option("pace", "rotating pace (K chunks per step)", candidates=_paces)


def cannon_twin(fop: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
    """Algorithm.same_as: F_op = [p, 1, p] is Cannon on p x p (its only pace is 1)."""
    m, k, n = fop
    return ("cannon", (m, n)) if k == 1 and m == n else None


ALGORITHM = Algorithm(
    name=NAME,
    summary="T10 rTensor rotation for an operator partition F_op = [F_m, F_k, F_n]",
    grids=grids,
    plan=plan,
    multiply=multiply,
    options=(FOP, PACE),
    prepare=prepare,
    stated_cost=stated_cost,
    gemms=gemms,
    promised=promised,
    same_as=cannon_twin,
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
