"""End-to-end runs: A and B start in the user's layouts, C ends in theirs; every algorithm the
world size admits, verified in the user's C layout, with the bytes each rank sends in each
redistribution phase equal to the model's counts (layouts/endpoints.move_counts)."""

import numpy as np
import pytest
from mpi4py import MPI

from algorithms import ALGORITHMS, get
from bench.endtoend import end_to_end, job_comm
from bench.runner import run_plan
from topology import Mesh

P = MPI.COMM_WORLD.Get_size()
SHAPE = (13, 7, 11)
SPECS = [
    {"A": "cols", "B": "cols", "C": "cols"},
    {"A": "block-cyclic:3", "B": "block-cyclic:3", "C": "block-cyclic:3"},
    {"A": "rows", "B": "block", "C": "native"},
    {"A": "native", "B": "native", "C": f"[r=S(0)]@r={P}"},
]


def run_e2e(name, specs, relabel=True, dtype=np.float64):
    algorithm = get(name)
    plan = algorithm.plan(SHAPE, P, overlap=True)
    e2e = end_to_end(specs, plan, np.dtype(dtype).itemsize, relabel)
    world = MPI.COMM_WORLD
    job = job_comm(world, e2e)
    mesh = Mesh(plan.mesh, job)
    try:
        result, _ = run_plan(
            algorithm, plan, mesh, np.dtype(dtype), 2, 1, "exact", e2e=e2e, world=world
        )
    finally:
        mesh.free()
        if job is not world:
            job.Free()
    return result, e2e


@pytest.mark.mpi
@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", list(ALGORITHMS))
@pytest.mark.parametrize("relabel", [True, False])
def test_every_algorithm_from_user_layouts(name, relabel):
    if not get(name).grids(P):
        pytest.skip(f"{name} cannot run on {P} ranks")
    for specs in SPECS:
        r, e2e = run_e2e(name, specs, relabel)
        assert r["verified"], (specs, r["max_rel_error"])
        counted = {p: r["phases"][p]["bytes_sent_per_rank"] for p in e2e.bytes_sent(8)}
        assert counted == e2e.bytes_sent(8), specs
        assert r["seconds"] >= r["multiply_seconds"] > 0
        assert r["relabel"]["enabled"] == relabel
        assert r["relabel"]["bytes_after"] == sum(map(sum, counted.values()))


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_native_up_to_a_rank_permutation_moves_nothing():
    """SUMMA's own layouts written on the transposed mesh: relabelling finds the permutation."""
    plan = get("summa").plan(SHAPE, P, overlap=True)
    p, q = plan.mesh.shape
    specs = {
        n: str(getattr(plan, n)).replace("_x", "_b").replace("_y", "_a") + f"@a={q},b={p}"
        for n in "ABC"
    }
    r, e2e = run_e2e("summa", specs)
    assert r["verified"]
    assert r["relabel"]["bytes_after"] == 0
    for phase in ("redistribute_in", "redistribute_out"):
        assert r["phases"][phase]["bytes_sent_per_rank"] == [0] * P
    if p != q and min(p, q) > 1:
        assert r["relabel"]["bytes_saved"] > 0 and not e2e.relabelling.is_identity


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_the_relabelling_is_worked_out_on_rank_0_and_broadcast(monkeypatch):
    """end_to_end with the job's communicator: rank 0's relabelling on every rank (the same as
    each computing it alone; the order laid where rank 0 finds too many pairs to match), and
    where rank 0's counting refuses the moves, every rank raises its one-line error (the
    others' limits left as they are: they count nothing)."""
    import layouts.endpoints as endpoints
    from layouts.tensorlayout import LayoutError

    world = MPI.COMM_WORLD
    plan = get("summa").plan(SHAPE, P, overlap=True)
    specs = dict.fromkeys("ABC", "cols")
    alone = end_to_end(specs, plan, 8)
    assert end_to_end(specs, plan, 8, comm=world) == alone
    if P == 1:  # nothing to broadcast: counted here
        return
    if world.Get_rank() == 0:  # too many pairs to match, on rank 0 alone: the order laid
        monkeypatch.setattr(endpoints, "MAX_PAIRS", 0)
    laid = end_to_end(specs, plan, 8, comm=world).relabelling
    assert not laid.counted and laid.ranks == tuple(range(P))
    assert laid.bytes_after == alone.relabelling.bytes_before
    if world.Get_rank() == 0:  # ... and too many to count
        monkeypatch.setattr(endpoints, "MAX_STREAMED", 0)
    with pytest.raises(LayoutError, match="pair up to") as err:
        end_to_end(specs, plan, 8, comm=world)
    assert "\n" not in str(err.value)


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_moves_too_dense_to_match_run_in_the_order_laid(monkeypatch):
    """Moves of more rank pairs than distmm holds (layouts.endpoints.MAX_PAIRS) are not
    relabelled: the run keeps the mesh as laid, verifies, and sends what it says it moves."""
    import layouts.endpoints as endpoints

    monkeypatch.setattr(endpoints, "MAX_PAIRS", 0)
    r, e2e = run_e2e("summa", SPECS[0])
    assert r["verified"] and not e2e.relabelling.counted
    assert e2e.relabelling.is_identity and r["relabel"]["counted"] is False
    counted = {p: r["phases"][p]["bytes_sent_per_rank"] for p in e2e.bytes_sent(8)}
    assert counted == e2e.bytes_sent(8)
    assert r["relabel"]["bytes_after"] == r["relabel"]["bytes_before"]
    assert r["relabel"]["bytes_after"] == sum(map(sum, counted.values()))
