"""A GEMM that writes its product straight into C (C = A @ B) is priced without the pass that
adds a product into C, which calibrate's GEMMs (C += A @ B) make: the schedule says which of an
algorithm's GEMMs accumulate, and the profile how long adding takes (calibrate's "adding")."""

import json
import math

import numpy as np
import pytest
from conftest import PROFILE

from algorithms import get
from bench.model import Profile, predict, schedule
from bench.model.gemm_rates import KEPT_AT_LEAST

# seconds to add 64 KiB and 1 MiB into as much: 6.6 and 10.5 GB/s
ADDING = {"float32": [[1 << 16, 1e-5], [1 << 20, 1e-4]]}


def _profile(tmp_path, **extra) -> Profile:
    f = tmp_path / "profile.json"
    f.write_text(json.dumps({**PROFILE, **extra}))
    return Profile.load(f)


def _per_byte(nbytes: int) -> float:
    sizes = [math.log(b) for b, _ in ADDING["float32"]]
    paces = [t / b for b, t in ADDING["float32"]]
    return float(np.interp(math.log(nbytes), sizes, paces))


def test_a_gemm_into_c_costs_its_price_less_the_adding_pass(tmp_path):
    prof, old = _profile(tmp_path, adding=ADDING), _profile(tmp_path)
    for m, k, n in [(128, 512, 128), (512, 128, 512), (1024, 256, 1024)]:
        added = prof.gemm_seconds(m, k, n, "float32")
        assert added == old.gemm_seconds(m, k, n, "float32")  # C += A @ B: as calibrate timed
        into = prof.gemm_seconds(m, k, n, "float32", accumulate=False)
        assert into == pytest.approx(added - m * n * 4 * _per_byte(m * n * 4))
        assert into < added
        # a profile from before calibrate timed the adding pass takes nothing off
        assert old.gemm_seconds(m, k, n, "float32", accumulate=False) == added
    # a pass longer than half the GEMM (an adding time from a slow spell) keeps half its price
    thin = prof.gemm_seconds(1024, 1, 1024, "float32")
    assert prof.gemm_seconds(1024, 1, 1024, "float32", False) == KEPT_AT_LEAST * thin


def test_the_planners_bound_holds_for_gemms_into_c(tmp_path):
    """No GEMM, accumulating or not, is priced below the least rate per flop the planner's
    bound takes (of any shape, or of the shapes the algorithm names)."""
    prof = _profile(tmp_path, adding=ADDING)
    shapes = [(128, 512, 128), (512, 16, 512), (1024, 1, 1024), (99, 9, 5000)]
    least = prof.least_seconds_per_flop("float32")
    named = prof.least_seconds_per_flop("float32", shapes)
    for m, k, n in shapes:
        for accumulate in (True, False):
            price = prof.gemm_seconds(m, k, n, "float32", accumulate)
            assert price >= least * 2 * m * k * n * (1 - 1e-12)
            assert price >= named * 2 * m * k * n * (1 - 1e-12)


@pytest.mark.parametrize(
    ("name", "into"),
    [("summa", "first"), ("cannon", "first"), ("summa_a", "every"), ("summa3d", "every")],
)
def test_schedules_say_which_gemms_accumulate(name, into, tmp_path):
    """SUMMA and Cannon write their first product into C and add the others; the stationary
    and 3-D loops write each product into a block of its own. A prediction takes the adding
    pass off exactly those."""
    module = get(name)
    plan = module.plan((1024, 1024, 1024), 8 if name == "summa3d" else 4, overlap=False)
    events = schedule(module, plan)
    gemms = [e for e in events if e.kind == "gemm"]
    assert len(gemms) > (1 if into == "first" else 0)
    flags = [e.accumulate for e in gemms]
    assert flags == (
        [False] + [True] * (len(gemms) - 1) if into == "first" else [False] * len(gemms)
    )
    prof, old = _profile(tmp_path, adding=ADDING), _profile(tmp_path)
    saved = sum(
        prof.gemm_seconds(*e.shape, "float32") - prof.gemm_seconds(*e.shape, "float32", False)
        for e in gemms
        if not e.accumulate
    )
    now, before = (predict(events, p, "float32", ranks_per_node=1) for p in (prof, old))
    assert saved > 0
    assert before.phases["gemm"] - now.phases["gemm"] == pytest.approx(saved)
