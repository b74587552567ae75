"""Where a multiplication's matrices start and end: the user's layouts of A, B and C, the moves
into and out of an algorithm's native layouts, and the rank order that makes them cheapest.

An end-to-end run redistributes A and B from the user's layouts into the algorithm's native
ones (``redistribute_in``), multiplies, and redistributes C out into the user's layout
(``redistribute_out``). The algorithm's mesh may be laid onto the job's ranks in any order
(COSTA's relabelling): native mesh rank d runs on job rank ``ranks[d]``. Everything here is pure
(no MPI): the runner executes the moves, the model prices their :func:`move_counts`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from topology.mesh import AbstractMesh

from .counting import exchange_counts, group_max, moved_elements, overlap_pairs, pair_bound
from .named import user_layout
from .relabel import Relabelling, relabel_pairs
from .tensorlayout import LayoutError, TensorLayout, TooManyPairs

NATIVE = "native"
MATRICES = {"A": (0, 1), "B": (1, 2), "C": (0, 2)}  # the dimensions of (M, K, N) each spans
INPUTS, OUTPUTS = ("A", "B"), ("C",)


@dataclass(frozen=True)
class UserLayout:
    """One matrix's layout as the user gave it: ``spec`` as written, and the layout and mesh it
    names (both None for ``native``: the algorithm's own layout, no move)."""

    spec: str
    layout: TensorLayout | None = None
    mesh: AbstractMesh | None = None

    @property
    def native(self) -> bool:
        return self.layout is None

    def __str__(self) -> str:
        return NATIVE if self.native else f"{self.layout}@{self.mesh}"


@dataclass(frozen=True)
class Move:
    """One redistribution: ``matrix`` from ``src`` on ``src_mesh`` to ``dst`` on ``dst_mesh``;
    ``into`` is True for A and B (user -> native), False for C (native -> user)."""

    matrix: str
    src: TensorLayout
    src_mesh: AbstractMesh
    dst: TensorLayout
    dst_mesh: AbstractMesh
    into: bool


def user_layouts(
    specs: Mapping[str, str], shape: tuple[int, int, int], P: int
) -> dict[str, UserLayout]:
    """{"A", "B", "C": UserLayout} for ``specs`` (names or LAYOUT@MESH, see layouts/named.py;
    a missing matrix or ``native``: the algorithm's own). Bad specs raise LayoutError or
    MeshError with one line naming the matrix."""
    from topology.mesh import MeshError

    out = {}
    for name, dims in MATRICES.items():
        spec = (specs.get(name) or NATIVE).strip()
        if spec == NATIVE:
            out[name] = UserLayout(NATIVE)
            continue
        try:
            layout, mesh = user_layout(spec, tuple(shape[d] for d in dims), P)
        except MeshError as err:
            raise MeshError(f"layout of {name}: {err}") from None
        except LayoutError as err:
            raise LayoutError(err.text, f"layout of {name}: {err.problem}") from None
        out[name] = UserLayout(spec, layout, mesh)
    return out


def moves(users: Mapping[str, UserLayout], native: Mapping[str, tuple]) -> list[Move]:
    """The redistributions an end-to-end run makes; ``native`` is {matrix: (layout, mesh)}."""
    out = []
    for name in INPUTS + OUTPUTS:
        user = users[name]
        if user.native:
            continue
        layout, mesh = native[name]
        if name in INPUTS:
            out.append(Move(name, user.layout, user.mesh, layout, mesh, True))
        else:
            out.append(Move(name, layout, mesh, user.layout, user.mesh, False))
    return out


# the most (source, destination) entries the overlaps of one set of moves may hold before
# they are summed: counting and relabelling take about 130 bytes and 0.2 us each (8 million:
# about 1 GB and 2 s). Beyond that, every rank's part overlaps thousands of others': a whole
# MN-Core board's A copied to every PE is 68 million (4 GB and 25 s to plan), block-cyclic:64
# into summa's blocks at P = 8192 and 2^20-square matrices 201 million (killed at 17 GB)
MAX_PAIRS = 1 << 23
# moves beyond MAX_PAIRS are not relabelled (the order as laid) and are counted a chunk of pairs
# at a time (layouts.counting.overlap_chunks: time, not memory, grows with the pairs), up to
# this many: 2^30, a few minutes of counting; beyond, they are refused in one line
MAX_STREAMED = 1 << 30
# the relabelling matches ranks only where some order could save more than this share of the
# bytes the moves send in the order laid (:func:`relabelling`): from block-cyclic:64 at 4096
# ranks (65536^3) no order saves more than 0.37%, and matching took 0.2-0.7 s a candidate,
# half of what `distmm plan` took
WORTH_MATCHING = 0.01


def pair_bounds(all_moves: Sequence[Move]) -> list[int]:
    """Each move's layouts.counting.pair_bound: at most how many entries its overlaps hold."""
    return [pair_bound(m.src, m.src_mesh, m.dst, m.dst_mesh) for m in all_moves]


def move_overlaps(all_moves: Sequence[Move]) -> list[tuple]:
    """Each move's layouts.counting.overlap_pairs, refused (TooManyPairs, one line) where
    together they would hold more than MAX_PAIRS entries (every rank's part overlapping most
    others' at thousands of ranks), before any is made."""
    check_pairs(all_moves, MAX_PAIRS, "holds")
    return [overlap_pairs(m.src, m.src_mesh, m.dst, m.dst_mesh) for m in all_moves]


def check_pairs(all_moves: Sequence[Move], limit: int, verb: str) -> None:
    """TooManyPairs (one line) where ``all_moves`` pair more than ``limit`` rank parts."""
    bounds = pair_bounds(all_moves)
    if sum(bounds) > limit:
        m = all_moves[max(range(len(bounds)), key=bounds.__getitem__)]
        raise TooManyPairs(
            f"{m.matrix} {m.src} -> {m.dst}",
            f"at P = {m.src_mesh.size} these moves pair up to {sum(bounds):,} (source, "
            f"destination) rank parts, more than the {limit:,} distmm {verb}: each rank's "
            "part overlaps most others' (choose layouts closer to the algorithm's, or fewer "
            "ranks)",
        )


def moved_in_order(all_moves: Sequence[Move], start: np.ndarray) -> int:
    """Elements ``all_moves`` send between ranks with native mesh rank d on job rank
    ``start[d]``, counted a chunk of pairs at a time (layouts.counting.moved_elements), for
    moves of more than MAX_PAIRS pairs; refused beyond MAX_STREAMED."""
    check_pairs(all_moves, MAX_STREAMED, "counts")
    start = np.asarray(start, np.int64)
    moved = 0
    for m in all_moves:  # in: d native, kept from job rank start[d]; out: d a job rank
        host = start if m.into else np.argsort(start)  # ... kept from the native rank on it
        moved += moved_elements(m.src, m.src_mesh, m.dst, m.dst_mesh, host)
    return moved


def relabelling(
    all_moves: Sequence[Move],
    P: int,
    itemsize: int = 1,
    groups=(),
    overlaps=None,
    placed=None,
) -> Relabelling:
    """The order of the native mesh on the job's ranks that keeps the most elements of all
    ``all_moves`` in place (one assignment for A, B and C together; layouts.relabel.
    relabel_pairs, from the sparse overlaps: the run and the model choose it alike, at any P);
    ``groups``: on a machine hierarchy, each job rank's node at each level (topology.hierarchy.
    subtrees_of), whose subtrees then move whole; ``overlaps``: the moves' layouts.counting.
    overlap_pairs, if already computed; ``placed[d]``: the job rank native mesh rank d was laid
    on (a tree binding's; default d), the order the relabelling starts from and compares with
    (Relabelling.bytes_before), its nodes the ones mesh rank d's subtrees move from. Moves
    pairing more than MAX_PAIRS rank parts keep the order laid (Relabelling.counted False):
    where every rank's part overlaps most others', no order keeps much in place (block-cyclic:64
    into 3-D blocks at P = 4096, 65536^3: 0.13-0.24% of the bytes, for 0.2-0.7 s and hundreds
    of MB of matching). Off a hierarchy the order laid is also kept, unmatched, where no order
    could save more than WORTH_MATCHING of the bytes it moves (each native rank on the rank
    holding most of what it needs, ranks shared or not: Relabelling.saved_at_most)."""
    start = np.arange(P) if placed is None else np.asarray(placed, np.int64)
    if not all_moves:
        return Relabelling(tuple(start.tolist()), 0, 0)
    if overlaps is None:
        try:
            overlaps = move_overlaps(all_moves)
        except TooManyPairs:  # too many pairs to match: the order as laid
            moved = moved_in_order(all_moves, start) * itemsize
            return Relabelling(tuple(start.tolist()), moved, moved, counted=False)
    total = sum(int(o[3].sum()) for o in overlaps)
    if not groups:
        in_order, at_most = kept_bounds(all_moves, overlaps, start, P)
        moved, saved = (total - in_order) * itemsize, (at_most - in_order) * itemsize
        if saved <= WORTH_MATCHING * moved:
            return Relabelling(tuple(start.tolist()), moved, moved, saved_at_most=saved)
    jobs, natives, kept = [], [], []
    for m, (s, d, count, _) in zip(all_moves, overlaps, strict=True):
        if not m.into:  # out: s is the native rank, d the user's; by job rank, as the moves in
            order = np.argsort(d * P + s)
            s, d, count = d[order], s[order], count[order]
        jobs.append(s)  # each move's pairs by job rank: relabel_pairs merges them
        natives.append(d)
        kept.append(count)
    job, native = np.concatenate(jobs), start[np.concatenate(natives)]
    found = relabel_pairs(job, native, np.concatenate(kept), total, P, itemsize, groups)
    if placed is None:
        return found
    return replace(found, ranks=tuple(np.asarray(found.ranks)[start].tolist()))


def kept_bounds(all_moves, overlaps, start: np.ndarray, P: int) -> tuple[int, int]:
    """(elements kept in place with native mesh rank d on job rank ``start[d]``, at most how
    many any order keeps): each native rank on the job rank holding most of what it needs, move
    by move, whether or not those ranks are distinct (no matching; ufunc.at, no sort)."""
    in_order = at_most = 0
    for m, (s, d, count, _) in zip(all_moves, overlaps, strict=True):
        job, native = (s, d) if m.into else (d, s)
        in_order += int(count[job == start[native]].sum())
        at_most += int(group_max(native, count, P).sum())
    return in_order, at_most


def move_counts(move: Move, ranks: Sequence[int] | None = None) -> np.ndarray:
    """(P, P) elements job rank s sends job rank t in ``move`` when native mesh rank d runs on
    job rank ``ranks[d]`` (the diagonal is copied locally)."""
    P = move.src_mesh.size
    pi = np.arange(P) if ranks is None else np.asarray(ranks, np.int64)
    if move.into:  # the communicator is the job's: the destination is relabelled
        return exchange_counts(move.src, move.src_mesh, move.dst, move.dst_mesh, pi)
    inv = np.argsort(pi)  # out: on the relabelled communicator (rank = native mesh rank)
    counts = exchange_counts(move.src, move.src_mesh, move.dst, move.dst_mesh, inv)
    return counts[np.ix_(inv, inv)]


def label(users: Mapping[str, UserLayout]) -> str:
    """One word for a results table: the spec if A, B and C share it, else A=..,B=..,C=.."""
    specs = [users[n].spec for n in MATRICES]
    if len(set(specs)) == 1:
        return specs[0]
    return ",".join(f"{n}={users[n].spec}" for n in MATRICES)


__all__ = [
    "INPUTS",
    "MAX_PAIRS",
    "MAX_STREAMED",
    "MATRICES",
    "NATIVE",
    "OUTPUTS",
    "Move",
    "UserLayout",
    "WORTH_MATCHING",
    "check_pairs",
    "kept_bounds",
    "label",
    "move_counts",
    "move_overlaps",
    "moved_in_order",
    "moves",
    "pair_bounds",
    "relabelling",
    "user_layouts",
]
