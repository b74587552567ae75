"""Who sends what in a redistribution, counted for every pair of ranks without MPI (the model
prices a transfer from them and the relabelling chooses its rank order), and the placement
helpers layouts/transfer.py builds one rank's Transfer with.

An element a destination holder t needs comes from t itself when t already holds it in the
source (a local copy), else from its primary source (the lowest holder). ``exchange_counts``
gives the (P, P) elements each rank sends each other one in that transfer, per dimension (a
rank is a sum of per-dimension parts); ``overlap_counts`` and ``overlap_pairs`` (sparse, for
large P) what each rank already holds of what each destination rank needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from topology.mesh import AbstractMesh, MeshError

from .blockmap import grain
from .redistribute import Placement, check_pair, placement
from .residues import residue_sums, windowed_keys, windowed_size
from .tensorlayout import TensorLayout

_CHUNK = 1 << 20  # key combinations handled at once by the counting (bounds its memory)
# fewer sorted runs than this are merged (a stable sort finds them), more sorted afresh
_FEW_RUNS = 64
_NO_ROW = np.zeros((1, 4), np.int64)  # the key row before a 1-D tensor's one dimension
_NO_ROW.flags.writeable = False  # (shared by every count)


def exchange_counts(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    ranks: Sequence[int] | None = None,
) -> np.ndarray:
    """(P, P) elements: [s, t] = what communicator rank s sends rank t in
    ``redistribute_between`` with the same arguments (the diagonal is copied locally)."""
    P = src_mesh.size
    to_comm, _ = comm_order(ranks, P)
    splace, dplace, per_dim = _counting(src, src_mesh, dst, dst_mesh)
    held = held_table(splace, P)
    out = np.zeros(P * P, np.int64)
    for sbase, sres, dbase, dres, count in _keys(per_dim, splace, dplace):
        dh = _rows(dplace.holders, dres)
        real = dh >= 0
        t = to_comm[np.where(real, dbase[:, None] + dh, 0)]
        has = holds(held, sbase[:, None], sres[:, None], t)
        source = np.where(has, t, (sbase + _rows(splace.primary, sres))[:, None])
        np.add.at(out, (source * P + t)[real], np.broadcast_to(count[:, None], t.shape)[real])
    return out.reshape(P, P)


def overlap_counts(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> tuple[np.ndarray, np.ndarray]:
    """(H, needed): H[s, d] elements source rank s holds in ``src`` that destination mesh rank
    d needs in ``dst``; needed[d] the elements rank d needs (padding and P@ copies off
    coordinate 0 need nothing). Laid on communicator ranks ``ranks``, the transfer moves
    ``needed.sum() - sum_d H[ranks[d], d]`` elements."""
    P = src_mesh.size
    s, d, count, needed = overlap_pairs(src, src_mesh, dst, dst_mesh)
    H = np.zeros((P, P), np.int64)
    H[s, d] = count
    return H, needed


def overlap_pairs(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`overlap_counts` sparse: (s, d, count, needed), the nonzero entries of H (each
    pair once, sorted by s * P + d) and needed; no P x P array, for large P."""
    P = src_mesh.size
    pairs, counts = [], []
    needed = np.zeros(P, np.int64)
    for d, w, held, sources in _entries(src, src_mesh, dst, dst_mesh):
        if held.all():  # every residue held by as many: no padding to leave out
            needed += np.rint(np.bincount(d.ravel(), w.ravel(), minlength=P)).astype(np.int64)
        else:
            needed += np.rint(np.bincount(d[held], w[held], minlength=P)).astype(np.int64)
        for s, real in sources:
            pairs.append((s[:, None] * P + d)[real])
            counts.append(w[real])
    return (*summed_pairs(pairs, counts, P), needed)


def overlap_chunks(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
):
    """:func:`overlap_pairs`' entries a chunk of key combinations at a time, never all held:
    yields (s, d, count, runs) arrays, a pair possibly again in a later chunk (sum them), with
    the runs of consecutive elements each entry's count is made of (what :func:`piece_counts`
    counts), for moves whose pairs are too many to hold (layouts.endpoints.MAX_PAIRS)."""
    for d, w, _, sources, r in _entries(src, src_mesh, dst, dst_mesh, runs=True):
        for s, real in sources:
            s = np.broadcast_to(s[:, None], d.shape)
            if real.all():  # (no padding, no second holder: no copies to pick them out)
                yield s.ravel(), d.ravel(), w.ravel(), r.ravel()
            else:
                yield s[real], d[real], w[real], r[real]


def moved_elements(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    host: np.ndarray,
) -> int:
    """Elements moving between ranks in ``src`` -> ``dst`` where destination rank d keeps
    what source rank ``host[d]`` holds of its part (the rest of what it needs moves), counted
    a chunk at a time: what :func:`overlap_pairs` gives as ``needed.sum()`` less the kept
    entries, for moves whose pairs are too many to hold."""
    moved = 0
    for d, w, held, sources in _entries(src, src_mesh, dst, dst_mesh):
        moved += int(w[held].sum())
        on = host[np.where(held, d, 0)]
        for s, real in sources:
            moved -= int(w[real & (s[:, None] == on)].sum())
    return moved


def _entries(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    runs: bool = False,
):
    """Per chunk of :func:`_keys` (at most _CHUNK entries, holders counted): (d, w, held,
    sources): the destination ranks of each key combination's holders (a column each), its
    elements ``w`` alike, which are held (not padding), and per source holder (s, the entries
    it holds); with ``runs``, then the runs of those elements alike."""
    splace, dplace, per_dim = _counting(src, src_mesh, dst, dst_mesh)
    step = max(1, _CHUNK // (splace.holders.shape[1] * dplace.holders.shape[1]))
    for sbase, sres, dbase, dres, *weights in _keys(
        per_dim, splace, dplace, None if runs else False
    ):
        for lo in range(0, sbase.size, step):
            at = slice(lo, lo + step)
            sh, dh = _rows(splace.holders, sres[at]), _rows(dplace.holders, dres[at])
            d = dbase[at, None] + dh
            held = dh >= 0
            s = sbase[at]
            sources = [(s + sh[:, k], (sh[:, k] >= 0)[:, None] & held) for k in range(sh.shape[1])]
            out = [np.broadcast_to(w[at, None], d.shape) for w in weights]
            yield d, out[0], held, sources, *out[1:]


def summed_pairs(keys: list, counts: list, P: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sources, destinations, counts) of the pairs ``src * P + dst`` in the arrays ``keys``,
    each pair once, in order, with its ``counts`` summed (int64)."""
    pair, total = summed(np.concatenate(keys), np.concatenate(counts))
    return pair // P, pair % P, total


@lru_cache(maxsize=8)
def piece_counts(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> tuple[np.ndarray, np.ndarray]:
    """(per source rank, per destination mesh rank) the pieces each copies in moving ``src``
    into ``dst``: runs of elements contiguous in both blocks (consecutive indices of the last
    dimension that neither layout splits), each one copy call's inner loop however the copies
    are grouped (layouts/strided.py). A source sends from its primary holder, every
    destination holder receives; what a rank keeps is a piece on both sides, as it is copied.
    Block-cyclic tiles of 64 make a piece of every 64 elements, 1-D blocks one per row. Where
    a window narrower than its Time axis (T10) holds consecutive chunks side by side, each
    chunk is counted a piece (an over-count: tests/test_exchange_counts.py), as are rows that
    two blocks both hold whole (one copy of consecutive rows). Kept for the next few calls (a
    move's pieces bound its price, bench/model/move_bound.py, then price it): read-only."""
    P = src_mesh.size
    splace, dplace, per_dim = _counting(src, src_mesh, dst, dst_mesh)
    sent, got = np.zeros(P), np.zeros(P)
    for sbase, sres, dbase, dres, runs in _keys(per_dim, splace, dplace, runs=True):
        source, dh = _rows(splace.primary, sres), _rows(dplace.holders, dres)
        held = (dh >= 0) & (source >= 0)[:, None]
        sends = held.any(1)
        sent += np.bincount((sbase + source)[sends], (runs * held.sum(1))[sends], P)
        d = dbase[:, None] + dh
        got += np.bincount(d[held], np.broadcast_to(runs[:, None], d.shape)[held], P)
    out = np.rint(sent).astype(np.int64), np.rint(got).astype(np.int64)
    for a in out:
        a.flags.writeable = False
    return out


# -- placements ------------------------------------------------------------------------------
def comm_order(ranks: Sequence[int] | None, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(to_comm, from_comm): destination mesh rank -> communicator rank, and back (``ranks``
    checked to be a permutation of 0 .. size - 1)."""
    if ranks is None:
        ident = np.arange(size, dtype=np.int64)
        return ident, ident
    to_comm = np.asarray(ranks, dtype=np.int64).ravel()
    if to_comm.size != size or not np.array_equal(np.sort(to_comm), np.arange(size)):
        raise MeshError(f"ranks {list(map(int, to_comm))} is not a permutation of 0..{size - 1}")
    return to_comm, np.argsort(to_comm)


def placements(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    coarse: bool = False,
) -> tuple[Placement, Placement]:
    """The source's placement (the pair checked: one logical shape, meshes of one size) and
    the destination's; ``coarse``: of every step-th index per dimension, steps that divide
    both layouts' grains (blockmap.grain), so that the counts cost the same for any size."""
    steps = None
    if coarse and src.ndim == dst.ndim:  # else check_pair says why not
        steps = tuple(math.gcd(grain(src, d), grain(dst, d)) for d in range(src.ndim))
    return check_pair(src, src_mesh, dst, dst_mesh, steps), placement(dst, dst_mesh, steps)


# -- who holds what --------------------------------------------------------------------------
def held_table(place: Placement, size: int) -> np.ndarray:
    """(n_time, P) bool: [residue, offset] whether base + offset holds an element of residue."""
    table = np.zeros((place.n_time, size), dtype=bool)
    for r, row in enumerate(place.holders):
        table[r, row[row >= 0]] = True
    return table


def holds(table: np.ndarray, base, res, rank) -> np.ndarray:
    """Whether ``rank`` holds (in the source) the elements at ``base``/``res`` (broadcast)."""
    off = rank - base
    ok = (off >= 0) & (off < table.shape[1])
    return ok & table[res, np.where(ok, off, 0)]


def group_max(groups: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """out[g] (n entries, int64): the largest of the non-negative int ``values`` where
    ``groups == g``, 0 where none. np.maximum.at into the n entries, no sort: since NumPy 1.25
    ufunc.at has a fast loop (0.8 ms on 280 000 pairs at P = 8192, against 16 ms sorting them
    by group, as :func:`summed` does; before it, 20-40 ms)."""
    out = np.zeros(n, np.int64)
    np.maximum.at(out, np.asarray(groups, np.intp), np.asarray(values, np.int64))
    return out


def summed(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ``keys`` in order, each one's ``counts`` summed) for non-negative int
    ``keys`` and ``counts``. Where a key and a count fit one int64 together, each pair is
    packed into one and the packed values sorted (NumPy's vectorised sort, or where they come
    in a few sorted runs, as pairs of several moves do, a merge of the runs): the argsort and
    inverse np.unique needs took several times as long on the pairs of P = 8192 layouts. Keys
    already in order are not sorted."""
    keys, counts = np.asarray(keys, np.int64), np.asarray(counts, np.int64)
    if keys.size == 0:
        return keys, counts
    shift = int(counts.max()).bit_length()
    descents = np.count_nonzero(keys[1:] < keys[:-1])  # 0: in order (one side of sorted pairs)
    if descents and (shift + int(keys.max()).bit_length() > 63 or counts.min() < 0):
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
    elif descents:
        packed = (keys << shift) | counts
        packed = np.sort(packed, kind="stable" if descents < _FEW_RUNS else None)
        keys, counts = packed >> shift, packed & ((1 << shift) - 1)
    first = np.empty(keys.size, bool)
    first[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    if first.all():
        return keys, counts
    starts = np.flatnonzero(first)
    return keys[starts], np.add.reduceat(counts, starts)


def _unique_rows(parts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(parts, axis=0) for non-negative int rows, with each one's summed ``weights``
    (int64): each row packed into one integer first (a 1-D unique sorts many times faster)."""
    radix = parts.max(axis=0) + 1
    if float(np.prod(radix.astype(float))) >= 2**62:
        keys, inverse = np.unique(parts, axis=0, return_inverse=True)
        counts = np.bincount(inverse.ravel(), weights, minlength=len(keys))
        return keys.astype(np.int64), np.rint(counts).astype(np.int64)
    packed, counts = summed(np.ravel_multi_index(parts.T, radix), weights)
    return np.stack(np.unravel_index(packed, radix), axis=1).astype(np.int64), counts


def _runs(columns: list[np.ndarray], weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, lengths): the equal columns' values as (n, len(columns)) rows, run-length
    encoded, each run's length the sum of its entries' ``weights`` (layouts are blocks: a
    dimension of 65536 elements is a few hundred runs)."""
    change = np.zeros(len(columns[0]) - 1, bool)
    for c in columns:
        change |= c[1:] != c[:-1]
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    return np.stack([c[starts] for c in columns], axis=1), np.add.reduceat(weights, starts)


def pair_bound(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> int:
    """At most how many (source rank, destination rank) entries :func:`overlap_pairs` makes
    before summing them (its memory): the per-dimension keys' combinations times the holders
    of each, found without making any; where layouts/residues.py counts a window of Time
    chunks as one key, the windows' (the counting makes no more: B from cols into T10 F_op
    2x64x64 at 8192 ranks 1.05 million, where chunk by chunk it was 33.5 million and beyond
    layouts.endpoints.MAX_PAIRS, so neither held nor relabelled)."""
    splace, dplace, per_dim = _counting(src, src_mesh, dst, dst_mesh)
    first, rest = (per_dim[0][0], per_dim[1:]) if len(per_dim) > 1 else (_NO_ROW, per_dim)
    rest_rows = math.prod(len(keys) for keys, *_ in rest)
    residues = tuple(any(keys[:, c].any() for keys, *_ in rest) for c in (1, 3))
    windowed = windowed_size(first, rest_rows, residues, splace, dplace)
    combinations = len(first) * rest_rows if windowed is None else windowed
    return combinations * splace.holders.shape[1] * dplace.holders.shape[1]


@lru_cache(maxsize=8)
def _counting(
    src: TensorLayout, src_mesh: AbstractMesh, dst: TensorLayout, dst_mesh: AbstractMesh
) -> tuple[Placement, Placement, list]:
    """The coarse placements (:func:`placements`) and :func:`_per_dim`'s rows of a move, kept
    for the next few calls (a move's pairs are bounded, then counted)."""
    splace, dplace = placements(src, src_mesh, dst, dst_mesh, coarse=True)
    return splace, dplace, _per_dim(src, splace, dplace)


def _per_dim(src: TensorLayout, splace: Placement, dplace: Placement) -> list:
    """Per dimension the distinct (src rank part, src residue part, dst rank part, dst residue
    part) rows, the elements of each and the runs of consecutive indices each is made of."""
    per_dim = []
    # where every residue has the same holders (a T10 window as wide as its Time axis) the
    # residue tells nothing: rows differing only by it are one (B into T10 F_op 1x4x512 from
    # cols made 4 million keys for 8192 pairs)
    blind = [bool((p.holders == p.holders[0]).all()) for p in (splace, dplace)]
    for d, n in enumerate(src.logical_shape):
        cut = splace.sampled(d, n)  # entries standing for `step` indices each, the last fewer
        step = 1 if splace.steps is None else splace.steps[d]
        weights = np.minimum(step, n - step * np.arange(cut, dtype=np.int64))
        parts = []
        for place, residue_blind in zip((splace, dplace), blind, strict=True):
            residues = place.residue_part[d][:cut]
            parts += [
                place.rank_part[d][:cut],
                np.zeros_like(residues) if residue_blind else residues,
            ]
        rows, lengths = _runs(parts, weights)
        keys, counts = _unique_rows(rows, lengths)
        per_dim.append((keys, counts, _unique_rows(rows, np.ones(len(rows), np.int64))[1]))
    return per_dim


def _keys(per_dim: list, splace: Placement, dplace: Placement, runs: bool | None = False):
    """Yield (src base rank, src residue, dst base rank, dst residue, element count) arrays
    over the logical elements, grouped: :func:`_per_dim`'s rows combined across dimensions;
    with ``runs``, in place of the elements the contiguous runs of them (rows of the blocks
    are C-ordered: a run is consecutive indices of the last dimension); ``runs`` None: both,
    (..., elements, runs). Time chunks sharing holders come as one key per window, residue
    its first chunk's, where layouts/residues.py can group them."""
    keys, counts, last_runs = per_dim[-1]
    weights = [last_runs] if runs else [counts] if runs is False else [counts, last_runs]
    for k, c, _ in reversed(per_dim[1:-1]):  # the inner dimensions, fully combined
        keys = (k[:, None, :] + keys[None, :, :]).reshape(-1, 4)
        weights = [np.outer(c, w).ravel() for w in weights]
    first, first_counts = per_dim[0][:2] if len(per_dim) > 1 else (_NO_ROW, np.ones(1, np.int64))
    windowed = windowed_keys(first, first_counts, keys, weights, splace, dplace, _CHUNK)
    if windowed is not None:
        yield from windowed
        return
    step = max(1, _CHUNK // max(1, len(keys)))
    for lo in range(0, len(first), step):
        part = first[lo : lo + step]
        cs = [np.outer(first_counts[lo : lo + step], w).ravel() for w in weights]
        sbase, dbase = (np.add.outer(part[:, j], keys[:, j]).ravel() for j in (0, 2))
        sres = residue_sums(part[:, 1], keys[:, 1], splace.n_time)
        dres = residue_sums(part[:, 3], keys[:, 3], dplace.n_time)
        yield sbase, sres, dbase, dres, *cs


def _rows(table: np.ndarray, residues: np.ndarray) -> np.ndarray:
    """``table[residues]`` (a placement's holders or primary by residue); a table of one row
    (one time chunk) read-only broadcast instead, no rows gathered."""
    if table.shape[0] == 1:
        return np.broadcast_to(table[0], (residues.shape[0], *table.shape[1:]))
    return table[residues]


__all__ = [
    "pair_bound",
    "piece_counts",
    "comm_order",
    "exchange_counts",
    "group_max",
    "held_table",
    "holds",
    "overlap_chunks",
    "overlap_counts",
    "overlap_pairs",
    "moved_elements",
    "placements",
    "summed_pairs",
    "summed",
]
