"""Lower bounds on what an end-to-end run's moves cost (bench/model/redistribution.py prices
them exactly), whatever the relabelling, so that the planner's search (search.py) prices a
candidate's redistribution exactly only when the candidate is a contender.

Pricing a move exactly counts the elements every pair of ranks exchanges (the overlaps) and
solves the relabelling's assignment problem; at P = 8192 that is 10-600 ms per candidate's
layouts, most of `distmm plan`'s time. Two bounds come cheaper: :func:`shape_bound` from the
layouts' shapes alone, and :func:`overlap_bound` from the overlaps without the relabelling.
Both price what a phase cannot avoid (the moves in are one exchange, layouts/batch.py) as
pairs_seconds prices it (Profile.alltoallv_seconds: a start, and per rank messages, bytes and
bytes copied, the larger of the mean rank's and the busiest one's shared among the ranks on a
core, and the pieces copied, which grow with how finely the layouts cut the rows: none from
the shapes, from the overlaps as :func:`_pieces` bounds them), and the two barriers of a run
with moves where that price does not hold them, as the exact price charges them
(redistribution.ending_barriers). On a real cluster's links (not emulated) messages may go
between nodes, priced by the links: only the start, the copying and the pieces are counted
there. With results/vm-2c-amx's profile, on the 9 T10 layouts whose moves `distmm plan
--shape 8192,8192,8192 --P 8192` prices from block, the overlap bound is 0.41-0.70 of the
exact price without the pieces, 0.965-0.987 with them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from layouts.counting import group_max, piece_counts
from layouts.endpoints import Move
from layouts.redistribute import one_holder

from .profile import Profile
from .redistribution import ending_barriers


def shape_bound(
    all_moves: Sequence[Move], P: int, profile: Profile, itemsize: int, rpn: int, links=None
) -> float:
    """Seconds from the layouts' shapes: each phase's start (the moves in are one exchange),
    its packing, unpacking and keeping (every element needed, twice, whatever the order), and
    what the mean rank receives beyond the most two ranks' blocks share (:func:`most_shared`),
    in as many messages as the dearest move takes."""
    if not all_moves:
        return 0.0
    at = profile.at(rpn)
    if at.alltoallv is None:
        return _words_bound(all_moves, P, profile, itemsize, rpn, links)
    per_core = _per_core(profile, rpn)
    seconds = []  # of each phase that moves
    for phase in _phases(all_moves):  # one exchange each (layouts/batch.py)
        messages = received = copied = 0.0
        moves_any = False
        for m, _ in phase:
            need = needed(m.dst, m.dst_mesh)
            most = most_shared(m.src, m.dst)
            copied += 2 * need / P * itemsize
            if P * most >= need:
                continue  # some order may keep all of it
            moves_any = True
            if _local(links):  # each rank hosting a native one keeps one source, the rest arrive
                messages = max(messages, 1 / per_core, need / (P * most) - 1)
                received += (need - P * most) / P * itemsize
        if moves_any:  # else some order may keep everything: nothing moves, nothing is priced
            seconds.append(at.alltoallv_seconds((messages, received, copied, 0.0)))
    return _ended(seconds, P, profile, rpn, links)


def _phases(all_moves, overlaps=None) -> list[list[tuple]]:
    """(move, its overlaps or None) for the moves in (A and B, one exchange), then for the move
    out (C)."""
    pairs = list(zip(all_moves, overlaps or [None] * len(all_moves), strict=True))
    phases = ([p for p in pairs if p[0].into], [p for p in pairs if not p[0].into])
    return [g for g in phases if g]


def most_shared(a, b) -> int:
    """At most the elements a rank holding a block of layout ``a`` and one of ``b`` (same
    tensor, any meshes) have in common: along each dimension a rank's elements at step 0
    number at most its block's extent (TensorLayout.block_shape), so two blocks share at
    most the smaller extent along each."""
    return math.prod(min(x, y) for x, y in zip(a.block_shape, b.block_shape, strict=True))


def overlap_bound(
    all_moves: Sequence[Move],
    overlaps: Sequence[tuple],
    P: int,
    profile: Profile,
    itemsize: int,
    rpn: int,
    links=None,
) -> float:
    """Seconds from each move's overlaps (layouts.counting.overlap_pairs: (src rank, dst rank,
    count, needed)) before relabelling: in any order a rank keeps at most its largest overlap,
    so it receives the rest of what it needs, in messages from all but one of its sources, and
    (a source holding each element once) sends the rest of what it holds, to all but one of
    its destinations. Which rank hosts which native rank is not known: the busiest rank is at
    least the busiest of either side, the mean rank at least either side's mean."""
    if not all_moves:
        return 0.0
    at = profile.at(rpn)
    if at.alltoallv is None:
        return _words_bound(all_moves, P, profile, itemsize, rpn, links)
    per_core = _per_core(profile, rpn)
    seconds = []  # of each phase that moves
    for phase in _phases(all_moves, overlaps):  # one exchange each: a rank's parts add up
        receive, send, into, out_of, need, owned = (np.zeros(P) for _ in range(6))
        for m, (s, d, count, wanted) in phase:
            _, sources, most = _side(d, count, P)
            short = np.maximum(wanted - most, 0.0)
            receive += short
            need += wanted
            if one_holder(m.src, m.src_mesh):
                total, targets, most = _side(s, count, P)
                send += total - most
                owned += total
                into = np.maximum(into, sources - 1)
                out_of = np.maximum(out_of, targets - 1)
            else:  # each element's source chosen among its holders: nothing known per source
                into = np.maximum(into, short > 0)
        if not receive.any() and not send.any():
            continue  # some order may keep everything
        loads = (0.0, 0.0)
        if _local(links):
            loads = (_load(into, out_of, per_core), _load(receive, send, per_core) * itemsize)
        copied = max(2 * need.sum() / P, max(need.max(), owned.max()) / per_core) * itemsize
        pieces = _pieces(phase, P, at, per_core)
        seconds.append(at.alltoallv_seconds((*loads, copied, pieces)))
    return _ended(seconds, P, profile, rpn, links)


def _pieces(phase, P: int, at, per_core: float) -> float:
    """At least the pieces a phase's busiest rank copies as redistribution.loads counts them,
    in any order (none where ``at``, a Profile.at, prices none): each job rank copies the
    pieces of its own side of every move and those of the native rank it hosts
    (redistribution.phase_pieces), so their mean is known and the busiest copies at least
    the most of either side."""
    if not (at.alltoallv or {}).get("piece", 0.0) > 0:
        return 0.0
    job = native = np.zeros(P, np.int64)
    for m, _ in phase:
        sent, got = piece_counts(m.src, m.src_mesh, m.dst, m.dst_mesh)
        job, native = (job + sent, native + got) if m.into else (job + got, native + sent)
    return max((job.sum() + native.sum()) / P, max(job.max(), native.max()) / per_core)


def _ended(seconds: list[float], P: int, profile: Profile, rpn: int, links) -> float:
    """The phases' ``seconds`` (those that move, at most two) and the barriers ending the phase
    in and the repetition, as the exact price charges them (redistribution.ending_barriers)."""
    return sum(seconds) + sum(ending_barriers(*(seconds + [0.0, 0.0])[:2], P, profile, rpn, links))


def needed(layout, mesh) -> int:
    """Elements every rank of ``mesh`` together needs in ``layout`` at step 0: each element
    once per copy (padding and a partial sum's other coordinates need nothing)."""
    copies = math.prod(mesh.sizes[lv] for lv in layout.replicated_levels(mesh.sizes))
    return math.prod(layout.logical_shape) * copies


def _side(rank, count, P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rank of one side of the pairs: (elements in all its pairs, its pairs, its largest)."""
    total = np.bincount(rank, count, minlength=P)
    return total, np.bincount(rank, minlength=P).astype(float), group_max(rank, count, P)


def _load(a: np.ndarray, b: np.ndarray, per_core: float) -> float:
    """At least redistribution.loads' figure for per-rank amounts of which each rank has one of
    ``a`` (as some native rank) and one of ``b`` (as itself), matched in an unknown order."""
    return max(float(a.mean()), float(b.mean()), max(float(a.max()), float(b.max())) / per_core)


def _per_core(profile: Profile, rpn: int) -> float:
    return max(rpn / profile.cores, 1.0)


def _local(links) -> bool:
    """Whether every message is priced in the local loads (no links, or emulated ones)."""
    return links is None or links.emulated


def _words_bound(all_moves, P: int, profile: Profile, itemsize: int, rpn: int, links) -> float:
    """For profiles without layout-change coefficients: the elements an average rank needs in
    the moves in beyond the largest user block, at the cheapest bandwidth a byte can take (the
    node's, or a priced link's)."""
    beta = profile.at(rpn).byte_seconds()
    if links is not None:
        from topology.hierarchy import levels_of

        priced = [links.alpha_beta(lv)[1] for lv in levels_of(links.tree) if links.models(lv)]
        beta = min([beta, *priced])
    words = sum(
        max(0.0, needed(m.dst, m.dst_mesh) / P - math.prod(m.src.block_shape))
        for m in all_moves
        if m.into
    )
    return words * itemsize * beta


__all__ = ["most_shared", "needed", "overlap_bound", "shape_bound"]
