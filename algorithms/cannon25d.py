"""2.5D Cannon (Solomonik & Demmel 2011) on a p x p x d mesh, 1 <= d <= p, P = p^2 d
(axes x = mesh row i, y = mesh column j, z = layer l).

K is cut into d slices, one per layer, and each slice into p chunks (a Time axis). Layer l runs
Cannon (algorithms.cannon's step loop, shared, not copied) over its slice: rank (i, j, l) starts
with A[i, chunk (i+j) % p of slice l] and B[chunk (i+j) % p of slice l, j] (the skew is the
rotation ``R@[x + y]`` of the Time axis, so it comes from the layouts, with no skewing
messages), then p steps of C += A @ B, A moving one place left along y and B one place up along
x between steps (double-buffered; with overlap on, the shifts of step t+1's blocks are in flight
while step t multiplies). A reduce-scatter along z then sums the d K-partial C blocks and leaves
layer l with the l-th 1/d of the block's rows.

Initial distribution (the same design decision as summa25d): A and B start on every layer with K
split over the layers, so each rank holds 1/P of A and B and layer l already holds its K slice;
the textbook broadcast of A and B from layer 0 along z is not needed. C ends 2D-blocked over
(x, y) with each block's rows split over z, as in summa25d. Grids and their order are summa25d's
(largest d first: the cheapest). d = 1 is Cannon; d = p is a 3D algorithm. The final
reduce-scatter is blocking.
"""

from __future__ import annotations

import sys

import numpy as np

from layouts.builder import build, dev, mem, rotate, time
from topology import AbstractMesh

from .cannon import cannon_steps
from .plan import Plan, ceil_to, check_grid, check_shape
from .spec import Algorithm, block_gemms, one_layer
from .summa25d import WHAT, stated_cost
from .summa25d import grids as layered_grids

NAME = "cannon25d"


def grids(P: int) -> list[tuple[int, ...]]:
    return layered_grids(P)


def plan(shape, P: int, *, grid=None, overlap: bool = True) -> Plan:
    M, K, N = check_shape(shape, NAME)
    p, _, d = check_grid(NAME, P, grid, grids, WHAT)
    m, kk, n = ceil_to(M, p * d) // p, ceil_to(K, d * p) // (d * p), ceil_to(N, p) // p
    mesh = AbstractMesh((("x", p), ("y", p), ("z", d)))
    skew = rotate({"x": 1, "y": 1})
    return Plan(
        NAME,
        (M, K, N),
        mesh,
        A=build(
            (M, K),
            [[dev("x", p), mem(m)], [dev("z", d), time(p), mem(kk)]],
            rotation=skew,
            sizes=mesh.sizes,
        ),
        B=build(
            (K, N),
            [[dev("z", d), time(p), mem(kk)], [dev("y", p), mem(n)]],
            rotation=skew,
            sizes=mesh.sizes,
        ),
        C=build((M, N), [[dev("x", p), dev("z", d), mem(m // d)], [dev("y", p), mem(n)]]),
        overlap=overlap,
    )


def multiply(plan: Plan, comm, state) -> np.ndarray:
    a, b = state
    c = comm.empty((a.shape[0], b.shape[1]), a.dtype)
    c = cannon_steps(comm, a, b, c, overlap=plan.overlap)  # layer l: C over K slice l
    comm.step = None
    return comm.reduce_scatter(c, "z", dim=0)  # sum the layers; layer l keeps row piece l


ALGORITHM = Algorithm(
    name=NAME,
    summary="2.5D Cannon (Solomonik-Demmel) on a p x p x d mesh",
    grids=grids,
    plan=plan,
    multiply=multiply,
    stated_cost=stated_cost,  # summa25d's: the literature states one 2.5D bound for both
    gemms=block_gemms,
    same_as=one_layer("cannon"),
)

if __name__ == "__main__":
    from bench.cli import main

    sys.exit(main(["run", NAME, *sys.argv[1:]]))
