"""Redistribution between two layouts on one mesh, with one ``Alltoallv`` and no metadata.

Every rank can say, from the layouts alone, which rank holds which element, so senders and
receivers agree on counts and order without exchanging them:

* each element has one *primary* source: the lowest rank holding it at step 0 in ``src``;
* each element goes to every rank holding it at step 0 in ``dst`` (for ``P@`` levels only to
  coordinate 0: a partial-sum destination gets the value once and zeros elsewhere);
* a sender sends the elements it is primary for, ordered by (destination rank, flat index);
  a receiver orders its elements by (primary source rank, flat index). Both orders are the same.

Ranks are linear in the mesh coordinates (``rank = sum coord_L * stride_L``) and a layout's
coordinates are sums of per-dimension contributions, so ranks are computed per dimension and
combined by broadcasting. Only the levels a layout leaves free (replicated levels and rotation
levels that no factor splits) need enumerating, and that is done once per Time residue.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from topology.mesh import AbstractMesh, Mesh, MeshError

from .blockmap import grains, held_indices, level_contributions
from .tensorlayout import TIME, LayoutError, TensorLayout


def check_on_mesh(layout: TensorLayout, mesh: AbstractMesh | Mesh) -> None:
    """Every level the layout names must be a mesh axis, of the same size where it has one."""
    am = getattr(mesh, "abstract", mesh)
    named = list(layout.levels) + list(layout.broadcast) + list(layout.partial)
    if layout.rotation is not None:
        named += [lv for lv, _ in layout.rotation.offset]
    for lv in named:
        if lv not in am.sizes:
            raise LayoutError(
                str(layout), f"level {lv} is not an axis of mesh {am} (axes {', '.join(am.names)})"
            )
        size = layout.levels.get(lv)
        if size is not None and size != am.sizes[lv]:
            raise LayoutError(
                str(layout),
                f"level {lv} has size {size} in the layout but {am.sizes[lv]} on mesh {am}",
            )


@dataclass(frozen=True)
class Placement:
    """Where a layout's elements live on a mesh at step 0.

    rank of a holder = sum_d rank_part[d][i_d] + offsets[residue, k], with
    residue = sum_d residue_part[d][i_d] mod n_time; offsets rows are padded with -1.
    """

    rank_part: tuple[np.ndarray, ...]  # per dim: rank contribution of the named levels
    residue_part: tuple[np.ndarray, ...]  # per dim: Time chunk minus split rotation terms
    n_time: int
    primary: np.ndarray  # (n_time,): offset of the lowest holder, -1 where nobody holds
    holders: np.ndarray  # (n_time, K): offsets of every destination holder, -1 padding
    # per dim: the parts' entry j is index j * step's (and its step - 1 successors')
    steps: tuple[int, ...] | None = None

    def sampled(self, d: int, n: int) -> int:
        """How many entries of dimension d's parts cover its first ``n`` indices."""
        step = 1 if self.steps is None else self.steps[d]
        return -(-n // step)

    def locate(self, idx: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(base rank, residue) of the Cartesian product of ``idx``, flattened in C order."""
        if self.steps is not None and any(s != 1 for s in self.steps):
            raise ValueError("a placement of every step-th index cannot locate indices")
        base = np.zeros((), np.int64)
        res = np.zeros((), np.int64)
        for d, ix in enumerate(idx):
            shape = [1] * len(idx)
            shape[d] = ix.size
            base = base + self.rank_part[d][ix].reshape(shape)
            res = res + self.residue_part[d][ix].reshape(shape)
        return base.ravel(), (res % self.n_time).ravel()

    def primary_rank(self, idx: tuple[np.ndarray, ...]) -> np.ndarray:
        base, res = self.locate(idx)
        return base + self.primary[res]

    def holder_ranks(self, idx: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(n, K) destination ranks of the elements and the (n, K) mask of real entries."""
        base, res = self.locate(idx)
        off = self.holders[res]
        return base[:, None] + off, off >= 0


@lru_cache(maxsize=32)
def placement(
    layout: TensorLayout, am: AbstractMesh, steps: tuple[int, ...] | None = None
) -> Placement:
    """Where ``layout``'s elements live on ``am`` at step 0 (see :class:`Placement`); with
    ``steps`` (each dividing the dimension's blockmap.grain), of every step-th index only."""
    strides, n_time = am.rank_strides, layout.time_size
    offset = dict(layout.rotation.offset) if layout.rotation is not None else {}
    rank_part, residue_part = [], []
    for d in range(layout.ndim):
        step = 1 if steps is None else steps[d]
        contrib = level_contributions(layout, d, step)
        n = layout.padded_shape[d] // step
        rank = np.zeros(n, np.int64)
        res = contrib.get(TIME, np.zeros(n, np.int64)).copy()
        for lv, vec in contrib.items():
            if lv != TIME:
                rank += vec * strides[lv]
                res -= offset.get(lv, 0) * vec
        rank_part.append(rank)
        residue_part.append(res % n_time)
    # Rotation levels no factor splits: per residue, every coordinate combination solving
    # sum(coef * coord) == residue (mod n_time), in mesh-axis (= rank) order. No rotation:
    # the empty combination solves residue 0 (the chunk a Time axis shows at step 0).
    free = [lv for lv in am.names if lv in offset and lv not in layout.levels]
    solutions: list[list[int]] = [[] for _ in range(n_time)]
    for combo in itertools.product(*(range(am.sizes[lv]) for lv in free)):
        r = sum(offset[lv] * c for lv, c in zip(free, combo, strict=True)) % n_time
        solutions[r].append(sum(strides[lv] * c for lv, c in zip(free, combo, strict=True)))
    # A window of W chunks: a device whose head is residue r - w (0 <= w < W) holds residue r.
    offsets = _windowed(solutions, min(layout.window, n_time))
    # Replicated levels: every coordinate holds a copy (P@ levels: coordinate 0 only).
    repl = layout.replicated_levels(am.names)
    copies = np.array(
        [
            sum(strides[lv] * c for lv, c in zip(repl, combo, strict=True))
            for combo in itertools.product(*(range(am.sizes[lv]) for lv in repl))
        ],
        np.int64,
    )
    real = (offsets >= 0)[:, :, None]
    holders = np.where(real, offsets[:, :, None] + copies, -1).reshape(n_time, -1)
    primary = offsets[:, 0] if offsets.shape[1] else np.full(n_time, -1, np.int64)
    return Placement(tuple(rank_part), tuple(residue_part), n_time, primary, holders, steps)


def one_holder(layout: TensorLayout, am: AbstractMesh) -> bool:
    """Whether every element of ``layout`` on ``am`` has a single holder at step 0 (no
    replicated or windowed copies): a move from it sends exactly its overlaps."""
    return placement(layout, am, grains(layout)).holders.shape[1] == 1


def _windowed(solutions: list[list[int]], window: int) -> np.ndarray:
    """(n_time, K) offsets holding each residue r, -1 padded: those solving residues r - w
    (0 <= w < window), sorted (each offset solves one residue). Where every residue has as
    many, gathered as one array; else spread from the residues that have any (t10's B on a
    whole board, F_op 1x1x8192, is one offset in a window of all 8192 chunks: 7 s when every
    residue looked at every chunk of its window)."""
    n = len(solutions)
    k = len(solutions[0])
    if k and all(len(s) == k for s in solutions):
        table = np.array(solutions, np.int64)
        back = (np.arange(n)[:, None] - np.arange(window)[None, :]) % n
        return np.sort(table[back].reshape(n, window * k), axis=1)
    if window > 1:  # spread from the residues that have offsets
        held: list[set] = [set() for _ in range(n)]
        for r, sol in enumerate(solutions):
            for w in range(window) if sol else ():
                held[(r + w) % n].update(sol)
        solutions = [sorted(h) for h in held]
    out = np.full((n, max(len(s) for s in solutions)), -1, np.int64)
    for r, sol in enumerate(solutions):
        out[r, : len(sol)] = sol
    return out


def _check_source(
    src: TensorLayout, am: AbstractMesh, steps: tuple[int, ...] | None = None
) -> Placement:
    """Validate a source layout on the mesh; return its placement."""
    check_on_mesh(src, am)
    if src.partial:
        raise LayoutError(
            str(src),
            "a partial-sum layout (P@[...]) must be reduced before it is redistributed or gathered",
        )
    return check_whole(src, am, steps)


def check_whole(
    src: TensorLayout, am: AbstractMesh, steps: tuple[int, ...] | None = None
) -> Placement:
    """Every logical element has a holder at step 0 on the mesh; return the placement (of
    every step-th index with ``steps``, as :func:`placement`)."""
    place = placement(src, am, steps)
    # Residues the logical elements need (per-dim residue sets combined), each needs a holder.
    needed = np.zeros(1, np.int64)
    for d, n in enumerate(src.logical_shape):
        part = np.unique(place.residue_part[d][: place.sampled(d, n)])
        needed = np.unique((needed[:, None] + part[None, :]) % place.n_time)
    if (place.primary[needed] < 0).any():
        raise LayoutError(
            str(src), f"the layout does not hold the whole tensor at step 0 on mesh {am}"
        )
    return place


def _check_block(block: np.ndarray, src: TensorLayout) -> np.ndarray:
    block = np.asarray(block)
    if block.shape != src.block_shape:
        raise ValueError(
            f"block of shape {block.shape} does not match layout {src}, whose "
            f"blocks have shape {src.block_shape}"
        )
    _mpi_type(block.dtype)
    return block


def _mpi_type(dtype):
    """The MPI datatype of a native-endian numeric (bool, int, float, complex) NumPy dtype."""
    from mpi4py import MPI

    dtype = np.dtype(dtype)
    try:
        if dtype.kind not in "biufc" or not dtype.isnative:
            raise ValueError(dtype)
        return MPI.Datatype.fromcode(dtype.char)
    except (KeyError, ValueError) as err:
        raise ValueError(f"no MPI datatype for NumPy dtype {dtype.str}") from err


def _logical(layout: TensorLayout, coords):
    """(held indices without padding, per-dim masks selecting them from the held indices)."""
    held = held_indices(layout, coords)
    keep = tuple(ix < n for ix, n in zip(held, layout.logical_shape, strict=True))
    return tuple(ix[k] for ix, k in zip(held, keep, strict=True)), keep


def _send_side(block, src: TensorLayout, place: Placement, rank: int, coords):
    """The non-padding elements this rank holds in ``src`` and is the primary source of:
    (their per-dim index arrays, the mask selecting them, their values, their flat indices)."""
    idx, keep = _logical(src, coords)
    mine = place.primary_rank(idx) == rank
    vals = block[np.ix_(*keep)].ravel()[mine]
    flat = np.ravel_multi_index(np.meshgrid(*idx, indexing="ij"), src.logical_shape).ravel()
    return idx, mine, vals, flat[mine]


def _exchange(comm, vals, dest, flat, source, dtype) -> np.ndarray:
    """The one Alltoallv. Send vals[i] to dest[i] ordered by (dest, flat); return what arrives,
    indexed like ``source`` (primary source rank of each element this rank receives, in
    increasing flat-index order)."""
    size = comm.Get_size()
    order = np.lexsort((flat, dest))
    sendbuf = np.ascontiguousarray(vals[order], dtype=dtype)
    sendcounts = np.bincount(dest, minlength=size)
    recvcounts = np.bincount(source, minlength=size)
    recvbuf = np.empty(source.size, dtype=dtype)
    mpitype = _mpi_type(dtype)

    def spec(buf, counts):
        displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
        return [buf, (counts.tolist(), displs.tolist()), mpitype]

    comm.Alltoallv(spec(sendbuf, sendcounts), spec(recvbuf, recvcounts))
    out = np.empty_like(recvbuf)
    out[np.argsort(source, kind="stable")] = recvbuf
    return out


def check_pair(
    src: TensorLayout,
    src_mesh: AbstractMesh,
    dst: TensorLayout,
    dst_mesh: AbstractMesh,
    steps: tuple[int, ...] | None = None,
) -> Placement:
    """Validate moving ``src`` (on src_mesh) into ``dst`` (on dst_mesh); return the source's
    placement (with ``steps``, as :func:`placement`). Both meshes cover the same ranks and both
    layouts the same logical tensor."""
    if src_mesh.size != dst_mesh.size:
        raise MeshError(
            f"source mesh {src_mesh} has {src_mesh.size} ranks, destination mesh "
            f"{dst_mesh} has {dst_mesh.size}: they must be the same ranks"
        )
    splace = _check_source(src, src_mesh, steps)
    check_on_mesh(dst, dst_mesh)
    if tuple(src.logical_shape) != tuple(dst.logical_shape):
        raise LayoutError(
            str(dst),
            f"logical shape {dst.logical_shape} differs from the "
            f"source's {src.logical_shape} ({src})",
        )
    return splace


def redistribute(block: np.ndarray, src: TensorLayout, dst: TensorLayout, mesh: Mesh) -> np.ndarray:
    """This rank's block in ``dst`` (zeros at padding) from its block in ``src`` (step 0)."""
    am = mesh.abstract
    splace = check_pair(src, am, dst, am)
    block = _check_block(block, src)
    dplace = placement(dst, am)

    idx, mine, vals, flat = _send_side(block, src, splace, mesh.rank, mesh.coords)
    dest, real = dplace.holder_ranks(idx)  # (n, K): one column per replica option
    dest, real = dest[mine], real[mine]
    vals = np.repeat(vals, real.shape[1])[real.ravel()]
    flat = np.repeat(flat, real.shape[1])[real.ravel()]
    dest = dest[real]

    out = np.zeros(dst.block_shape, dtype=block.dtype)
    ridx, rkeep = _logical(dst, mesh.coords)
    if any(mesh.coords[lv] != 0 for lv in dst.partial):
        # a partial-sum copy off coordinate 0 receives nothing: it stays zero
        ridx = tuple(ix[:0] for ix in ridx)
        rkeep = tuple(np.zeros_like(m) for m in rkeep)
    got = _exchange(mesh.cart, vals, dest, flat, splace.primary_rank(ridx), block.dtype)
    out[np.ix_(*rkeep)] = got.reshape([ix.size for ix in ridx])
    return out


def gather(block: np.ndarray, layout: TensorLayout, mesh: Mesh, root: int = 0):
    """The whole logical tensor on ``root`` (None elsewhere), with the same single Alltoallv."""
    am = mesh.abstract
    place = _check_source(layout, am)
    block = _check_block(block, layout)
    if not 0 <= root < am.size:
        raise ValueError(f"root {root} is outside mesh {am}")
    _, _, vals, flat = _send_side(block, layout, place, mesh.rank, mesh.coords)
    dest = np.full(vals.size, root, np.int64)
    shape = tuple(layout.logical_shape)
    if mesh.rank == root:
        ridx = tuple(np.arange(n) for n in shape)
    else:
        ridx = tuple(np.arange(0) for _ in shape)
    got = _exchange(mesh.cart, vals, dest, flat, place.primary_rank(ridx), block.dtype)
    return got.reshape(shape) if mesh.rank == root else None


__all__ = [
    "Placement",
    "one_holder",
    "check_on_mesh",
    "check_pair",
    "check_whole",
    "gather",
    "placement",
    "redistribute",
]
