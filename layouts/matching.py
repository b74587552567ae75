"""Bipartite matchings for the relabelling (layouts/relabel.py), over rank pairs at any P.

:func:`max_matching` (most pairs, each rank once) is a maximum flow, not scipy's
``maximum_bipartite_matching``: that Hopcroft-Karp never marks a dead end in its depth-first
phase, so on some layered graphs it runs for ever (scipy/scipy#26147: the 522 240 ties of A, B
and C from `rows` into T10 F_op 32x4x64 at P = 8192 ran for over 11 minutes). Ranks whose
partners are the same set (twins: from 1-D layouts, 8192 job ranks had 128 distinct sets) are
one vertex with a capacity, so such graphs shrink by the twins' number before the flow.
:func:`max_weight_matching` (the most weight) is scipy's sparse assignment, set up so that the
Hopcroft-Karp it runs first has nothing to search. Small graphs (below 1024 ranks, where the
search stays short; up to 128 ranks a side for weights) are matched here in Python and NumPy
first: importing SciPy's graph routines costs more than all of a small plan's or run's matchings.
"""

from __future__ import annotations

import numpy as np


def max_matching(rows, cols, P: int) -> np.ndarray:
    """out[r]: the column row r is matched to (-1: none) in a maximum matching of the pairs
    (rows[i], cols[i]) of a P x P bipartite graph (pairs may repeat): a maximum flow (scipy's
    Dinic, on unit capacities Hopcroft-Karp's O(E sqrt(V))) from a source through the rows and
    the columns to a sink. From _TWINS_FROM pairs, ranks with the same partners (twins, found
    by a hash of their partners) are one vertex of their number's capacity, a pair of groups
    joined wherever a pair of members is, and each group's flow goes to its members in turn.
    Were ranks of different partners taken for twins, the groups' graph would only gain pairs
    (its flow is still at least a maximum matching), and the matching is checked pair by pair:
    if one is not a pair, the flow runs again without groups. Few pairs below _SMALL_BELOW
    ranks: :func:`_augmenting` first."""
    key = np.sort(np.asarray(rows, np.int64) * P + cols)  # by row, then column; pairs once
    key = key[np.append(True, key[1:] != key[:-1])[: key.size]]
    if not key.size:
        return np.full(P, -1, np.int64)
    rows, cols = key // P, key % P
    if key.size <= _SMALL_PAIRS and P < _SMALL_BELOW:
        out = _augmenting(rows, cols, P)
        if out is not None:
            return out
    if key.size >= _TWINS_FROM:
        out = _by_twins(rows, cols, P)
        if out is not None:
            pair = np.flatnonzero(out >= 0) * P + out[out >= 0]
            if (key[np.minimum(np.searchsorted(key, pair), key.size - 1)] == pair).all():
                return out
    # the graph over the ranks the pairs name (one of _by_levels' levels names few)
    row_of, col_of = np.flatnonzero(np.bincount(rows)), np.flatnonzero(np.bincount(cols))
    index = np.zeros(P, np.int64)
    index[row_of] = np.arange(row_of.size)
    src = index[rows]
    index[col_of] = np.arange(col_of.size)
    tail, head, _ = _flow(src, index[cols], row_of.size, col_of.size)
    out = np.full(P, -1, np.int64)
    out[row_of[tail]] = col_of[head]
    return out


# below this many ranks, up to this many pairs, and while the search stays within _SMALL_STEPS,
# matchings are found here, in Python, without SciPy: importing scipy.sparse.csgraph took
# 0.2-0.7 s, on every rank of a run from the user's layouts and in every `distmm plan` below
# 1024 ranks, more than all their matchings (those from 1024 ranks import it in their workers,
# bench/plan_workers.py, and a flow is 2-60 times faster than the search here on larger graphs)
_SMALL_BELOW = 1024
_SMALL_PAIRS = 1 << 16
_SMALL_STEPS = 1 << 17  # pairs looked at by the augmenting paths (about 50 ms), else SciPy's
_SMALL_RANKS = 128  # max_weight_matching: up to this many ranks a side, a dense assignment,
_DENSE_STEPS = 1 << 21  # while its columns looked at stay within this (about 50 ms)


def _augmenting(rows, cols, P: int) -> np.ndarray | None:
    """:func:`max_matching` of few pairs (sorted by row, each once): a greedy matching, then an
    augmenting path from each row left out (Kuhn's; O(pairs) a path); None once the paths have
    looked at _SMALL_STEPS pairs (a graph that needs a real algorithm)."""
    rows, cols = rows.tolist(), cols.tolist()
    partners: dict[int, list[int]] = {}
    for r, c in zip(rows, cols, strict=True):
        partners.setdefault(r, []).append(c)
    row_of: dict[int, int] = {}  # column -> its row
    left = []
    for r, cs in partners.items():
        c = next((c for c in cs if c not in row_of), None)
        if c is None:
            left.append(r)
        else:
            row_of[c] = r

    steps = 0  # pairs looked at
    for root in left:  # a depth-first search for a free column, without recursion
        stack, via, seen = [[root, 0]], [], set()
        while stack:
            steps += 1
            if steps > _SMALL_STEPS:
                return None
            top = stack[-1]
            r, i = top
            if i == len(partners[r]):  # every partner tried: back to the row before
                stack.pop()
                if via:
                    via.pop()
                continue
            top[1] += 1
            c = partners[r][i]
            if c in seen:
                continue
            seen.add(c)
            if c in row_of:  # on to the row holding c
                stack.append([row_of[c], 0])
                via.append(c)
                continue
            # free: each row on the path takes the column that led past it, the last one c
            for (on, _), taken in zip(stack, [*via, c], strict=True):
                row_of[taken] = on
            break
    out = np.full(P, -1, np.int64)
    for c, r in row_of.items():
        out[r] = c
    return out


def _assignment(weight: np.ndarray) -> np.ndarray | None:
    """col[i]: the column of row i in a maximum-weight assignment of every row of the n x m
    ``weight`` (n <= m): the Hungarian method with potentials (O(n^2 m)), each step over a row
    at once in NumPy; None once its steps have looked at _DENSE_STEPS columns."""
    n, m = weight.shape
    cost = np.zeros((n + 1, m + 1))
    cost[1:, 1:] = weight.max(initial=0) - weight  # a minimum-cost assignment
    u, v = np.zeros(n + 1), np.zeros(m + 1)
    row = np.zeros(m + 1, np.int64)  # row[j]: the row on column j (0: none; column 0: the root)
    way = np.zeros(m + 1, np.int64)
    budget = _DENSE_STEPS // (m + 1)
    for i in range(1, n + 1):
        row[0], j0 = i, 0
        least = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, bool)
        while row[j0]:
            budget -= 1
            if budget < 0:
                return None
            used[j0] = True
            i0 = row[j0]
            free = ~used
            reduced = cost[i0] - u[i0] - v
            better = free & (reduced < least)
            least[better] = reduced[better]
            way[better] = j0
            j1 = int(np.argmin(np.where(free, least, np.inf)))
            delta = least[j1]
            u[row[used]] += delta
            v[used] -= delta
            least[free] -= delta
            j0 = j1
        while j0:
            j1 = way[j0]
            row[j0] = row[j1]
            j0 = j1
    col = np.empty(n, np.int64)
    on = np.flatnonzero(row[1:]) + 1
    col[row[on] - 1] = on - 1
    return col


# from this many pairs twins are looked for, and groups used where they are at most this part
# of one side's ranks: from 1-D layouts at P = 8192, 128-512 groups of 8192 ranks (1.56 million
# pairs matched in 130 ms, not 230); from block layouts, at most half as many groups as ranks
# where the pairs were this many (hashing 172 216 pairs cost 6-11 ms, 25% of their matching)
_TWINS_FROM = 1 << 18
_TWINS_SHRINK = 0.25
_DENSE_GROUP_PAIRS = 1 << 24  # up to this many group pairs, counted in an array, not sorted


def _by_twins(rows, cols, P: int) -> np.ndarray | None:
    """:func:`max_matching` over groups of twins of pairs sorted by (row, column), each once;
    None where neither side's groups are at most _TWINS_SHRINK of its ranks."""
    row_of, row_members, row_size = _twins(rows, cols, P)
    col_of, col_members, col_size = _twins(cols, rows, P)
    n, m = row_size.size, col_size.size
    if n > row_members.size * _TWINS_SHRINK and m > col_members.size * _TWINS_SHRINK:
        return None
    edge = row_of[rows] * m + col_of[cols]
    if n * m <= min(_DENSE_GROUP_PAIRS, 4 * rows.size):
        edge = np.flatnonzero(np.bincount(edge, minlength=n * m))
    else:
        edge = np.sort(edge)
        edge = edge[np.append(True, edge[1:] != edge[:-1])]
    tail, head, units = _flow(edge // m, edge % m, row_size, col_size)
    # unit k of a group's flow goes to its k-th member, the units in order of the other side
    row_at = _unit_positions(tail, units, row_size)
    order = np.argsort(head, kind="stable")
    col_at = np.empty(row_at.size, np.int64)
    col_at[_unit_order(order, units)] = _unit_positions(head[order], units[order], col_size)
    out = np.full(P, -1, np.int64)
    out[row_members[row_at]] = col_members[col_at]
    return out


def _flow(src, dst, src_size, dst_size) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, units) of each pair carrying flow in a maximum flow from a source through n
    vertices, each taking up to its size, over the pairs (src[i], dst[i]) (sorted by src, each
    once; up to the smaller size) to m vertices, each giving up to its size to a sink; sizes
    are arrays, or n and m for sizes of 1."""
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_flow

    if isinstance(src_size, int):
        n, m = src_size, dst_size
        caps = np.ones(src.size + m + n, np.int32)
    else:
        n, m = src_size.size, dst_size.size
        caps = np.concatenate([np.minimum(src_size[src], dst_size[dst]), dst_size, src_size])
    source, sink = n + m, n + m + 1  # vertices 0 .. n-1, then n .. n+m-1
    heads = np.concatenate([n + dst, np.full(m, sink), np.arange(n)])
    counts = np.concatenate([np.bincount(src, minlength=n), np.ones(m, np.int64), [n, 0]])
    indptr = np.concatenate([[0], np.cumsum(counts)])
    graph = csr_array(
        (caps.astype(np.int32), heads.astype(np.int32), indptr.astype(np.int32)),
        shape=(sink + 1, sink + 1),
    )
    flow = maximum_flow(graph, source, sink, method="dinic").flow
    # the first n vertices' edges lead the flow's CSR (the solver added reverse edges, 0 wide)
    ends = flow.indptr[n]
    tail = np.repeat(np.arange(n), np.diff(flow.indptr[: n + 1]))
    head, units = flow.indices[:ends] - n, flow.data[:ends]
    used = (units > 0) & (head >= 0) & (head < m)
    return tail[used], head[used], units[used].astype(np.int64)


def _twins(a, b, P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group of each rank (P entries; -1: in no pair), the ranks by group, each group's size)
    of the ranks ``a`` of pairs (a[i], b[i]): ranks with the same partners one group, found by
    their number and a hash of them (a sum of random integers, exact in float64; ranks of
    different partners it puts together cost :func:`max_matching` at most a second flow)."""
    degree = np.bincount(a, minlength=P)
    ranks = np.flatnonzero(degree)
    bits = 52 - a.size.bit_length()  # sums of a.size such integers stay below 2^52
    weight = np.random.default_rng(0).integers(0, 1 << bits, P)
    keys = (np.bincount(a, weight[b], minlength=P)[ranks], degree[ranks])
    order = np.lexsort(keys)  # stable: twins in rank order
    new = np.append(True, np.any([k[order][1:] != k[order][:-1] for k in keys], axis=0))
    group = np.empty(ranks.size, np.int64)
    group[order] = np.cumsum(new[: ranks.size]) - 1
    of = np.full(P, -1, np.int64)
    of[ranks] = group
    return of, ranks[order], np.bincount(group)


def _unit_positions(group, units, size) -> np.ndarray:
    """For edges (``group``, ``units`` of flow) in order, each unit's position among the
    members listed by group (a group's units to its members in turn)."""
    starts = np.cumsum(size) - size
    before = np.cumsum(units) - units  # units of earlier edges
    first = np.append(True, group[1:] != group[:-1])[: group.size]
    group_first = np.maximum.accumulate(np.where(first, np.arange(group.size), 0))
    offset = before - before[group_first]  # units of earlier edges of the same group
    k = np.arange(units.sum()) - np.repeat(before, units)
    return np.repeat(starts[group] + offset, units) + k


def _unit_order(order, units) -> np.ndarray:
    """Where each unit of the edges taken in ``order`` stands among the units in edge order."""
    before = np.cumsum(units) - units
    moved = units[order]
    k = np.arange(moved.sum()) - np.repeat(np.cumsum(moved) - moved, moved)
    return np.repeat(before[order], moved) + k


def max_weight_matching(job, native, weight) -> tuple[np.ndarray, np.ndarray]:
    """(job ranks, native ranks) of a maximum-weight matching over the weighted pairs, by
    scipy's sparse assignment (LAPJVsp) on a square graph that makes it perfect, over the n job
    and m native ranks the pairs name (not all P: a residual matching names few): rows are job
    ranks and one spare per native rank, columns native ranks and one spare per job rank; a
    job rank may take its spare (unmatched), a native rank its spare, and a native's spare the
    job's spare wherever the pair is an edge. Every edge weighs 1 more than its overlap, so each
    perfect matching's weight is its overlap plus n + m. Each row lists first the column of the
    perfect matching of spares (job rank to its spare, a native's spare to the native), so the
    Hopcroft-Karp check scipy runs first finds it in one greedy pass (no search to stall).
    Up to _SMALL_RANKS ranks a side, :func:`_assignment` on the dense matrix first (pairs of
    no weight left out after: every pair given weighs more)."""
    jobs, job = np.unique(job, return_inverse=True)
    natives, native = np.unique(native, return_inverse=True)
    n, m = jobs.size, natives.size
    if max(n, m) <= _SMALL_RANKS:  # dense; no pair: no weight, left out after
        dense = np.zeros((n, m))
        np.add.at(dense, (job, native), weight)
        found = _assignment(dense) if n <= m else _assignment(dense.T)
        if found is not None:
            rows, cols = (np.arange(n), found) if n <= m else (found, np.arange(m))
            real = dense[rows, cols] > 0
            return jobs[rows[real]], natives[cols[real]]
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    by_job, by_native = np.argsort(job, kind="stable"), np.argsort(native, kind="stable")
    per_job, per_native = np.bincount(job, minlength=n) + 1, np.bincount(native, minlength=m) + 1
    indptr = np.concatenate([[0], np.cumsum(np.concatenate([per_job, per_native]))])
    first = indptr[:-1]
    cols = np.empty(indptr[-1], np.int64)
    data = np.ones(indptr[-1])
    rest = np.ones(indptr[-1], bool)
    rest[first] = False
    cols[first] = np.concatenate([m + np.arange(n), np.arange(m)])
    cols[rest] = np.concatenate([native[by_job], m + job[by_native]])
    data[rest] = np.concatenate([weight[by_job] + 1.0, np.ones(job.size)])
    graph = csr_array((data, cols, indptr), shape=(n + m, n + m))
    _, match = min_weight_full_bipartite_matching(graph, maximize=True)
    real = (np.arange(n + m) < n) & (match < m)
    return jobs[real[:n].nonzero()[0]], natives[match[real]]


__all__ = ["max_matching", "max_weight_matching"]
