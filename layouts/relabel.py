"""COSTA's rank relabelling: lay the destination mesh on the ranks so that least data moves.

An algorithm's mesh can usually be laid onto the job's ranks in any order. Given V[s, d], the
elements source rank s already holds that destination mesh rank d needs, placing d on rank
pi(d) keeps sum_d V[pi(d), d] elements in place; the permutation maximising it is a linear
assignment problem (scipy.optimize.linear_sum_assignment, Hungarian-type, O(P^3)). Layouts that
differ only by a permutation of ranks then move nothing.

On a machine hierarchy (a cluster's nodes, the MN-Core tree's L2B > L1B > MAB > PE) the
algorithm's mesh was laid on the machine (in blocks on a cluster's nodes, by its level binding
on the tree), and its schedule's messages inside and between nodes were priced that way; an
order free to split those blocks can move fewer bytes but sends the kernel's messages across
slower links (SUMMA 4x2 on an emulated 1 GbE cluster of 4 nodes of 2, each row of two split
over two nodes: the multiplication took 106 ms, against 49 with the rows kept on their nodes).
So there the order only moves whole subtrees among the nodes of one parent and ranks among the
leaves of one innermost node, which changes no message's crossing level and so not the kernel:
from the outermost level in, it chooses which node hosts each of the mesh's subtrees (keeping
the most elements inside that node: an assignment per parent), and last which rank each mesh
rank runs on (the most kept on the rank). ``groups`` (topology.hierarchy.subtrees_of) gives
each rank's node at each level; a mesh rank's own node is that of the position it was laid on.
Orders are compared level by level from the outermost, so one may move more bytes in all
(inside the innermost nodes) to move fewer across a slower level: there ``bytes_saved`` can be
negative.

:func:`relabel` takes the P x P volumes (the reference, for small P); :func:`relabel_pairs` the
sparse overlaps, what runs and the model use (layouts.endpoints.relabelling), so that at P =
8192 no rank builds a P x P array or solves a dense O(P^3) assignment. With more than
_EXACT_PAIRS pairs to match (never in a job of at most 512 ranks; from block layouts, P of a
few thousand) it gives up optimality for time where the layouts do not tie
(:func:`_by_levels`: within 0.2% of the optimum's bytes moved in the planner's cases, 7-37 ms
each at P = 8192 instead of 0.1-0.6 s).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topology.mesh import AbstractMesh

from .counting import group_max, overlap_counts, summed
from .matching import max_matching, max_weight_matching
from .tensorlayout import TensorLayout


@dataclass(frozen=True)
class Relabelling:
    """Destination mesh rank d runs on rank ``ranks[d]`` (pass it to ``redistribute_between``)."""

    ranks: tuple[int, ...]
    bytes_before: int  # moved with the identity order (rank d of the mesh on rank d)
    bytes_after: int  # moved with ``ranks``
    # False: the moves paired too many ranks to match (layouts.endpoints.MAX_PAIRS), the
    # order is the one laid, not chosen
    counted: bool = True
    # set where the order laid was kept unmatched because no order could save more than these
    # bytes, too few to be worth matching (layouts.endpoints.WORTH_MATCHING)
    saved_at_most: int | None = None

    @property
    def bytes_saved(self) -> int:
        """Negative where a machine hierarchy's order moved more in all, fewer across levels."""
        return self.bytes_before - self.bytes_after

    @property
    def is_identity(self) -> bool:
        return self.ranks == tuple(range(len(self.ranks)))


def relabel(
    volume: np.ndarray, needed: np.ndarray | None = None, itemsize: int = 1, groups=()
) -> Relabelling:
    """The order of destination ranks that keeps the most data in place.

    ``volume[s, d]``: elements source rank s holds that destination rank d needs;
    ``needed[d]``: elements d needs (default: the column sums, right when no element has two
    source holders). Bytes moved = (needed.sum() - kept) * itemsize. ``groups``: on a machine
    hierarchy, each rank's node at each level, outermost first (topology.hierarchy.subtrees_of;
    empty: keep the most on each rank only). Where the identity order is already optimal it is
    kept.
    """
    V = np.asarray(volume)
    if V.ndim != 2 or V.shape[0] != V.shape[1]:
        raise ValueError(f"the volume matrix must be square (P x P), not {V.shape}")
    total = int((V.sum(axis=0) if needed is None else np.asarray(needed)).sum())
    P = V.shape[0]
    # imported here: scipy.optimize takes half a second to import, and `distmm plan` and
    # `predict` import this module without relabelling anything
    from scipy.optimize import linear_sum_assignment

    groups = [np.asarray(g) for g in groups]
    order = _tree_blocks(V, groups, linear_sum_assignment)
    identity = _kept_by_level(V, groups, np.arange(P))
    if _kept_by_level(V, groups, order) <= identity:
        ranks, kept = tuple(range(P)), identity[-1]
    else:
        ranks, kept = tuple(int(r) for r in order), int(V[order, np.arange(P)].sum())
    return Relabelling(ranks, (total - identity[-1]) * itemsize, (total - kept) * itemsize)


def _tree_blocks(V: np.ndarray, groups: list, assign) -> np.ndarray:
    """order[d]: the rank destination d runs on. With ``groups`` (outermost first), the
    subtrees of d's own nodes are moved whole: at each level the subtrees of one parent onto the
    nodes of the parent it was given that hold the most of what they need, last the ranks of
    each innermost node onto that node's ranks (``assign``:
    scipy.optimize.linear_sum_assignment)."""
    order = np.empty(V.shape[1], np.int64)

    def place(ranks: np.ndarray, mesh: np.ndarray, depth: int) -> None:
        if depth == len(groups):
            rows, cols = assign(V[np.ix_(ranks, mesh)], maximize=True)
            order[mesh[cols]] = ranks[rows]
            return
        g = groups[depth]
        hosts = [ranks[g[ranks] == n] for n in np.unique(g[ranks])]
        blocks = [mesh[g[mesh] == n] for n in np.unique(g[mesh])]
        on = np.array([[V[np.ix_(h, b)].sum() for b in blocks] for h in hosts])
        for h, b in zip(*assign(on, maximize=True), strict=True):
            place(hosts[h], blocks[b], depth + 1)

    place(np.arange(V.shape[0]), np.arange(V.shape[1]), 0)
    return order


def _kept_by_level(V: np.ndarray, groups: list, order: np.ndarray) -> tuple[int, ...]:
    """Elements kept inside each level's nodes, outermost first, then on the ranks, when
    destination d runs on rank ``order[d]``."""
    inside = [int(V[g[:, None] == g[order][None, :]].sum()) for g in groups]
    return (*inside, int(V[order, np.arange(V.shape[1])].sum()))


_EDGES_PER_RANK = 8
# above this many pairs, :func:`_heaviest` is :func:`_by_levels`, in _LEVELS groups at most
_EXACT_PAIRS = 1 << 14
_LEVELS = 8


def relabel_pairs(
    job: np.ndarray,
    native: np.ndarray,
    kept: np.ndarray,
    total: int,
    P: int,
    itemsize: int = 1,
    groups=(),
) -> Relabelling:
    """:func:`relabel` from the sparse overlaps, never a P x P array: ``kept[i]`` elements stay
    in place when destination (native) mesh rank ``native[i]`` runs on rank ``job[i]`` (pairs
    may repeat: summed), ``total`` elements are needed. Each native rank on the rank holding
    most of what it needs when those differ (then optimal), else a maximum-weight matching on
    the overlapping pairs (:func:`max_weight_matching`). With more than 4 _EDGES_PER_RANK pairs
    per rank (P = 4096 and 1-D layouts), only each native rank's _EDGES_PER_RANK heaviest
    pairs: optimal unless a native rank's best free rank is not among them (such spread
    overlaps keep little in place anyway); with more than _EXACT_PAIRS of those,
    :func:`_by_levels` (not optimal). With ``groups`` whole subtrees move, as in
    :func:`relabel` (:func:`_pair_tree_blocks`).
    The identity is kept where it is no worse."""
    key, weight = summed(job * P + native, kept)
    job, native = key // P, key % P
    groups = [np.asarray(g) for g in groups]
    out = _pair_tree_blocks(job, native, weight, P, groups)
    identity = _pairs_kept_by_level(job, native, weight, groups)
    best = _pairs_kept_by_level(job, out[native], weight, groups)
    if best <= identity:
        ranks = tuple(range(P))
        best = identity
    else:
        ranks = tuple(out.tolist())
    return Relabelling(ranks, (total - identity[-1]) * itemsize, (total - best[-1]) * itemsize)


def _pairs_kept_by_level(job, on, weight, groups: list) -> tuple[int, ...]:
    """:func:`_kept_by_level` of the weighted pairs, the native rank of pair i on rank on[i]."""
    inside = [g[job] == g[on] for g in groups]
    return tuple(int(np.rint(weight[m].sum())) for m in (*inside, job == on))


def _top(group: np.ndarray, weight: np.ndarray, P: int) -> np.ndarray:
    """Indices of the pairs to match: all of them, or with more than 4 _EDGES_PER_RANK per
    rank each ``group``'s _EDGES_PER_RANK heaviest."""
    order = np.lexsort((-weight, group))
    if not _trims(order.size, P):
        return order
    rank_in = np.arange(order.size) - np.searchsorted(group[order], group[order])
    return order[rank_in < _EDGES_PER_RANK]


def _top_size(group: np.ndarray, P: int) -> int:
    """How many pairs :func:`_top` keeps (without sorting them)."""
    if not _trims(group.size, P):
        return group.size
    return int(np.minimum(np.bincount(group), _EDGES_PER_RANK).sum())


def _trims(pairs: int, P: int) -> bool:
    """Whether :func:`_top` keeps only each rank's _EDGES_PER_RANK heaviest of ``pairs``."""
    return pairs > 4 * _EDGES_PER_RANK * P


def _heaviest(job, native, weight, P: int) -> tuple[np.ndarray, np.ndarray]:
    """(job ranks, native ranks) keeping the most in place: each native rank on a job rank it
    overlaps most, all distinct, where that can be (a maximum matching of the pairs of largest
    weight per native rank, :func:`max_matching`, that covers every native rank: no order keeps
    more), else :func:`max_weight_matching` (above _EXACT_PAIRS pairs, :func:`_by_levels`).
    Layouts tie often (at P = 8192 from block layouts, three of eight plans of 8192^3 match
    this way in 10-40 ms each, against 0.3-0.45 s)."""
    most = group_max(native, weight, P)
    top = weight == most[native]  # exact: weights are sums of element counts
    natives = np.flatnonzero(np.bincount(native, minlength=P))
    # fewer ranks in the ties than native ranks cannot cover them, nor can two native ranks
    # whose one tie is the same rank (Hall); a matching failing on 200 000 ties took 0.2 s
    # at P = 8192, and the second test finds the five of the eight relabellings of `distmm plan
    # --shape 8192,8192,8192 --P 8192` that go on to _by_levels (distinct ranks counted, not
    # np.unique'd: NumPy 2.4's np.unique hashes, 4-40 times slower than counting these)
    tie_native, tie_job = native[top], job[top]
    alone = tie_job[np.bincount(tie_native, minlength=P)[tie_native] == 1]  # a native's only tie
    if (
        np.count_nonzero(np.bincount(tie_job, minlength=P)) >= natives.size
        and np.bincount(alone, minlength=P).max(initial=0) <= 1
    ):
        matched = max_matching(tie_native, tie_job, P)
        if (matched[natives] >= 0).all():
            return matched[natives], natives
    if _top_size(native, P) <= _EXACT_PAIRS:
        keep = _top(native, weight, P)
        return max_weight_matching(job[keep], native[keep], weight[keep])
    return _by_levels(job, native, weight, P, most, top)


def _by_levels(job, native, weight, P: int, most, top) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_heaviest` above _EXACT_PAIRS pairs, where an exact matching takes 0.1-0.6 s
    (P = 8192): the native ranks needing most first (by their heaviest overlap ``most``, in at
    most _LEVELS groups), each on a free rank it overlaps most (a maximum matching of those
    ties, :func:`max_matching`), then those left out matched exactly on the ranks left free.
    Not optimal: on the eight relabellings of `distmm plan --shape 8192,8192,8192 --P 8192`
    it moves at most 0.19% more bytes than the optimum (0.33% with a maximal matching of the
    ties in place of a maximum one; 0.14% with scipy's Hopcroft-Karp's maximum matchings, which
    differ from the flow's)."""
    at = np.full(P, -1, np.int64)  # native rank -> job rank
    free = np.ones(P, bool)
    tie_job, tie_native = job[top], native[top]
    need = most[tie_native]
    levels = np.sort(need)[::-1]
    levels = levels[np.append(True, levels[1:] != levels[:-1])]
    for group in np.array_split(levels, min(_LEVELS, levels.size)):
        ties = (need >= group[-1]) & (need <= group[0]) & free[tie_job]
        matched = max_matching(tie_native[ties], tie_job[ties], P)
        hit = np.flatnonzero(matched >= 0)
        at[hit] = matched[hit]
        free[matched[hit]] = False
    held = np.flatnonzero(at >= 0)
    rest = np.flatnonzero(free[job] & (at[native] < 0))
    rest = rest[_top(native[rest], weight[rest], P)]
    more_job, more_native = max_weight_matching(job[rest], native[rest], weight[rest])
    return np.concatenate([at[held], more_job]), np.concatenate([held, more_native])


def _pair_tree_blocks(job, native, weight, P: int, groups: list) -> np.ndarray:
    """:func:`_tree_blocks`'s order from the weighted pairs (job rank, native rank), level by
    level for all parents at once: at each level, each native subtree on the node (of the one
    its parent was given) holding the most of what it needs (:func:`_heaviest` of the pairs
    inside matched parents), then each native rank on a rank of its innermost node's host."""
    where = before = None  # native node -> the node hosting it; the level before's nodes
    for g in groups:
        n = int(g.max()) + 1
        ok = np.ones(job.size, bool) if before is None else before[job] == where[before[native]]
        key, on = summed(g[job[ok]] * n + g[native[ok]], weight[ok])
        host, block = _heaviest(key // n, key % n, on, n)
        if before is None:  # node b runs on node where[b] (overlapping nothing: any free one)
            where = _filled(host, block, n)
        else:  # ... under the node its parent runs on
            parent = np.zeros(n, np.int64)
            parent[g] = before
            where = _filled(host, block, n, where[parent], parent)
        before = g
    if before is None:
        ranks, natives = _heaviest(job, native, weight, P)
        return _filled(ranks, natives, P)  # natives overlapping nothing: any rank
    inside = before[job] == where[before[native]]
    ranks, natives = _heaviest(job[inside], native[inside], weight[inside], P)
    return _filled(ranks, natives, P, where[before], before)


def _filled(to, of, n: int, want=None, has=None) -> np.ndarray:
    """out[i]: ``to[k]`` where ``of[k] == i``, the others of 0 .. n-1 on the free ones; with
    ``want`` and ``has``, i only on a free one s with has[s] == want[i] (each group has as many
    free as unplaced)."""
    out = np.full(n, -1, np.int64)
    out[of] = to
    unplaced = np.flatnonzero(out < 0)
    taken = np.zeros(n, bool)
    taken[to] = True
    free = np.flatnonzero(~taken)
    if want is not None:
        unplaced = unplaced[np.argsort(want[unplaced], kind="stable")]
        free = free[np.argsort(has[free], kind="stable")]
    out[unplaced] = free
    return out


def relabel_layouts(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    itemsize: int = 1,
) -> Relabelling:
    """:func:`relabel` for moving ``src`` on ``src_mesh`` into ``dst`` on ``dst_mesh``."""
    V, needed = overlap_counts(src, src_mesh, dst, dst_mesh)
    return relabel(V, needed, itemsize)


__all__ = ["Relabelling", "relabel", "relabel_layouts", "relabel_pairs"]
