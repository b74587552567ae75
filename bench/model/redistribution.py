"""What moving a tensor from one layout to another costs: the elements every pair of ranks
exchanges (layouts/transfer.exchange_counts, what the real Alltoallv sends), priced by the
layout changes calibrate timed at each rank count (Profile.alltoallv_seconds: a start and costs
per message, byte sent and byte copied, the node's cores sharing every rank's part), or by an
older profile's all-to-all (Profile.exchange: the pairwise-exchange formula and factor of
``Profile.collective("alltoall", ...)``). On a cluster the network's links price the messages
between nodes (topology.links.LinkModel.exchange), as the kernel's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from layouts.counting import exchange_counts, summed_pairs
from layouts.endpoints import (
    Move,
    UserLayout,
    move_counts,
    move_overlaps,
    moves,
    relabelling,
)
from layouts.redistribute import one_holder
from layouts.tensorlayout import TensorLayout, TooManyPairs
from topology.hierarchy import subtrees_of
from topology.mesh import AbstractMesh

from .dense_moves import streamed_price
from .move_price import (
    MovePrice,
    _reduced,
    ending_barriers,
    held_start,
    phase_barrier,
    phase_end,
    phase_pieces,
    ranks_seconds,
)
from .phase_loads import PhasePairs
from .profile import Profile


def pairs_seconds(
    src,
    dst,
    count,
    P: int,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    links=None,
    pieces=None,
) -> float:
    """Seconds for one redistribution in which job rank ``src[i]`` sends ``count[i]`` elements
    to ``dst[i]`` (each pair once; src == dst: kept, a local copy), at ``ranks_per_node``:
    calibrate's coefficients for layout changes price the :func:`loads` (Profile.
    alltoallv_seconds); older profiles price each rank's messages and bytes, the larger of
    what it sends and receives, by Profile.exchange and its packing, unpacking and keeping at
    the copy bandwidth (slowed as GEMMs are where ranks share cores), the busiest rank's time.
    With ``links`` (a cluster's network, topology.links.LinkModel; job rank = tree rank) the
    links price the messages crossing a priced level (LinkModel.exchange), the two parts at
    once; emulated links hold messages that really moved here: priced both ways, the dearer
    counts. ``pieces``: the pieces each job rank copies (:func:`phase_pieces`; None: none)."""
    src, dst, count = (np.asarray(x, np.int64) for x in (src, dst, count))
    off = src != dst
    if not count[off].any():
        return 0.0
    if links is None:
        per_rank = _per_rank(src, dst, count, P, off)
        return ranks_seconds(per_rank, profile, itemsize, ranks_per_node, pieces=pieces)
    net = off & links.crosses(src, dst)
    # emulated links hold messages that really move on this machine: they count here too
    local = off if links.emulated else off & ~net
    linked = links.exchange(src[net], dst[net], count[net] * itemsize) if net.any() else None
    if linked is not None:
        linked = linked + held_start(links, profile, ranks_per_node)
    per_rank = _per_rank(src, dst, count, P, local)
    return ranks_seconds(per_rank, profile, itemsize, ranks_per_node, linked, pieces)


def loads(src, dst, count, P: int, itemsize: int, per_core: float, sent=None, pieces=None) -> tuple:
    """(messages, bytes, copied bytes, pieces) of a redistribution in which rank ``src[i]``
    sends ``count[i]`` elements to ``dst[i]`` (src == dst: kept), as calibrate's coefficients
    price them (Profile.alltoallv_seconds): per rank, the messages and bytes of the pairs
    ``sent`` (default: every one off the diagonal), the larger of what it sends and receives,
    the bytes it packs, unpacks and keeps (every pair), and the ``pieces`` it copies (per rank,
    :func:`phase_pieces`; None: 0); of each, the busiest rank's, or with ``per_core`` ranks
    sharing a core the mean over ranks where larger (the cores share out every rank's work,
    but no rank goes faster than alone on a core)."""
    src, dst, count = (np.asarray(x, np.int64) for x in (src, dst, count))
    messages, elements, copied = _per_rank(src, dst, count, P, src != dst if sent is None else sent)
    return _reduced(messages, elements, copied, itemsize, per_core, pieces)


def _per_rank(src, dst, count, P: int, sent) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(messages, elements, copied) per rank: :func:`_busiest` of the pairs ``sent``, and the
    elements each rank packs, unpacks or keeps over every pair."""
    messages, elements = _busiest(src[sent], dst[sent], count[sent], P)
    copied = np.bincount(src, count, minlength=P) + np.bincount(dst, count, minlength=P)
    return messages, elements, copied


def _busiest(src, dst, count, P: int) -> tuple[np.ndarray, np.ndarray]:
    """(messages, elements) per rank of the messages (src[i] -> dst[i], count[i] elements,
    each pair once, none to itself): the larger of what it sends and what it receives."""
    sent = np.bincount(src, count, minlength=P)
    recv = np.bincount(dst, count, minlength=P)
    messages = np.maximum(np.bincount(src, minlength=P), np.bincount(dst, minlength=P))
    return messages, np.rint(np.maximum(sent, recv)).astype(np.int64)


def transfer_seconds(
    counts: np.ndarray,
    itemsize: int,
    profile: Profile,
    ranks_per_node: int,
    links=None,
    pieces=None,
) -> float:
    """:func:`pairs_seconds` of one Alltoallv in which job rank s sends ``counts[s, t]``
    elements to rank t (the diagonal is a local copy), job rank s copying ``pieces[s]``."""
    counts = np.asarray(counts)
    src, dst = np.nonzero(counts)
    args = (profile, itemsize, ranks_per_node, links, pieces)
    return pairs_seconds(src, dst, counts[src, dst], len(counts), *args)


def move_seconds(
    all_moves: Sequence[Move],
    ranks: Sequence[int] | None,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    links=None,
    setup: float = 0.0,
) -> dict[str, float]:
    """{"redistribute_in": s, "redistribute_out": s, "closing_barrier": s}: the reference for
    :func:`price_moves`, from the P x P counts: the moves (A and B in as one exchange, C out),
    native mesh rank d on job rank ``ranks[d]``, the phase in with the algorithm's prepare
    (``setup``) and the barrier ending it, and the one closing the repetition (MovePrice.
    closing); ``links`` as for :func:`pairs_seconds`. Without moves, nothing."""
    out = {"redistribute_in": 0.0, "redistribute_out": 0.0, "closing_barrier": 0.0}
    for into, phase in ((True, "redistribute_in"), (False, "redistribute_out")):
        group = [m for m in all_moves if m.into == into]
        if group:  # the moves in run as one exchange (layouts/batch.py)
            counts = sum(move_counts(m, ranks) for m in group)
            if counts.sum() > np.trace(counts):  # (else nothing moves: no price)
                at = profile.at(ranks_per_node)
                pieces = phase_pieces(all_moves, into, ranks, counts.shape[0], at)
                args = (itemsize, profile, ranks_per_node, links, pieces)
                out[phase] = transfer_seconds(counts, *args)
    if all_moves:
        P = all_moves[0].src_mesh.size
        ends = ending_barriers(
            out["redistribute_in"], out["redistribute_out"], P, profile, ranks_per_node, links
        )
        out["redistribute_in"] += ends[0] + setup
        out["closing_barrier"] = ends[1]
    return out


def price_moves(
    all_moves: Sequence[Move],
    P: int,
    profile: Profile,
    itemsize: int,
    ranks_per_node: int,
    relabel: bool = True,
    links=None,
    overlaps=None,
    tree=None,
    placed=None,
) -> MovePrice:
    """:func:`move_seconds` with the relabelling an end-to-end run makes (unless ``relabel`` is
    False), and the words the moves make the busiest rank send or receive; on a machine
    hierarchy ``tree`` (default: ``links``'), native mesh rank d laid on job rank ``placed[d]``
    before relabelling (a tree binding's Binding.tree_ranks; default d).

    From the sparse overlaps (layouts.counting.overlap_pairs; ``overlaps`` if computed), no
    P x P array, where it can be: a source holding each element once sends exactly its overlaps
    (others: layouts.endpoints.move_counts); the relabelling is the run's (layouts.endpoints.
    relabelling: on a hierarchy, ``links``, one moving whole subtrees). Moves of too many pairs
    to hold are counted as they come, not relabelled (bench/model/dense_moves.py)."""
    if placed is not None:
        placed = tuple(int(r) for r in placed)
    if not all_moves:
        return MovePrice(0.0, 0.0, 0, None, 0, has_moves=False)
    if overlaps is None:
        try:
            overlaps = move_overlaps(all_moves)
        except TooManyPairs:
            return streamed_price(all_moves, P, profile, itemsize, ranks_per_node, links, placed)
    found = None
    if relabel:
        hierarchy = tree if tree is not None else None if links is None else links.tree
        groups = subtrees_of(hierarchy)
        found = relabelling(all_moves, P, itemsize, groups, overlaps, placed)
    ranks = found.ranks if found is not None else placed
    pi = np.arange(P) if ranks is None else np.asarray(ranks, np.int64)
    saved = found.bytes_saved if found is not None else 0
    at_most = found.saved_at_most if found is not None else None
    if links is None and all(one_holder(m.src, m.src_mesh) for m in all_moves):
        args = (pi, P, profile, itemsize, ranks_per_node)
        (t_in, t_out), words = _by_sides(all_moves, overlaps, *args)
        in_end, closing = ending_barriers(t_in, t_out, P, profile, ranks_per_node, links)
        return MovePrice(t_in + in_end, t_out, words, ranks, saved, closing, saved_at_most=at_most)
    keys: dict = {True: [], False: []}  # src * P + dst of the moves in and out
    counts: dict = {True: [], False: []}
    words = 0
    for m, (s, d, c, _) in zip(all_moves, overlaps, strict=True):
        if one_holder(m.src, m.src_mesh):
            src, dst = (s, pi[d]) if m.into else (pi[s], d)
        else:  # replicated sources choose among holders: the house's exact counts
            dense = move_counts(m, ranks)
            src, dst = np.nonzero(dense)
            c = dense[src, dst]
        keys[m.into].append(src * P + dst)
        counts[m.into].append(c)
        off = src != dst
        words += int(_busiest(src[off], dst[off], c[off], P)[1].max(initial=0))
    phases = {True: 0.0, False: 0.0}
    for into in phases:  # the moves in run as one exchange (layouts/batch.py)
        if keys[into]:
            src, dst, count = summed_pairs(keys[into], counts[into], P)
            if count[src != dst].any():  # (else nothing moves: no price)
                pieces = phase_pieces(all_moves, into, pi, P, profile.at(ranks_per_node))
                args = (profile, itemsize, ranks_per_node, links, pieces)
                phases[into] = pairs_seconds(src, dst, count, P, *args)
    in_end, closing = ending_barriers(
        phases[True], phases[False], P, profile, ranks_per_node, links
    )
    return MovePrice(
        phases[True] + in_end, phases[False], words, ranks, saved, closing, saved_at_most=at_most
    )


def _by_sides(all_moves, overlaps, pi, P: int, profile, itemsize: int, rpn: int) -> tuple:
    """((seconds in, seconds out), words) of :func:`price_moves` where every source holds each
    element once and no links price messages: from each phase's pairs summed per side
    (bench/model/phase_loads.py), native rank x on job rank ``pi[x]``."""
    seconds, words = [0.0, 0.0], 0
    for phase, into in enumerate((True, False)):
        group = [o for m, o in zip(all_moves, overlaps, strict=True) if m.into == into]
        each = [PhasePairs.of([o], into, P) for o in group]
        for pairs in each:  # the busiest rank of each move
            words += int(pairs.per_rank(pi)[1].max(initial=0))
        if group:  # the moves in run as one exchange (layouts/batch.py)
            per_rank = (each[0] if len(each) == 1 else PhasePairs.of(group, into, P)).per_rank(pi)
            if per_rank[1].any():
                pieces = phase_pieces(all_moves, into, pi, P, profile.at(rpn))
                seconds[phase] = ranks_seconds(per_rank, profile, itemsize, rpn, pieces=pieces)
    return tuple(seconds), words


def plan_moves(users: dict[str, UserLayout], plan) -> list[Move]:
    """The moves between the user's layouts and an algorithm plan's native A, B and C."""
    return moves(users, {n: (getattr(plan, n), plan.mesh) for n in ("A", "B", "C")})


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


__all__ = [
    "MovePrice",
    "move_seconds",
    "pairs_seconds",
    "phase_barrier",
    "phase_end",
    "phase_pieces",
    "ending_barriers",
    "plan_moves",
    "price_moves",
    "redistribution_seconds",
    "transfer_seconds",
]
