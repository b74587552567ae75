"""`distmm plan` and `predict` import NumPy without its AVX-512 kernels on AMD Zen 4, whose
AVX-512 sorts run slower than its AVX2 ones (bench/numpy_sorts.py), and on nothing else; the
variable that does it is gone once NumPy is imported, so what the command starts later gets
NumPy as the user has it."""

import os
import subprocess
import sys
from pathlib import Path

from bench.numpy_sorts import slow_avx512_sorts

ROOT = Path(__file__).resolve().parent.parent

ZEN4 = {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17", "flags": "fpu avx2 avx512f"}


def test_only_zen4_is_taken_for_slow_avx512_sorts():
    assert slow_avx512_sorts(ZEN4)
    assert not slow_avx512_sorts({**ZEN4, "flags": "fpu avx2"})  # Zen 3: no AVX-512
    assert not slow_avx512_sorts({**ZEN4, "cpu family": "26"})  # Zen 5
    assert not slow_avx512_sorts({**ZEN4, "vendor_id": "GenuineIntel", "cpu family": "6"})
    assert not slow_avx512_sorts({})  # no /proc/cpuinfo


def _imported(zen4: bool, env: dict) -> list[str]:
    """[whether NumPy was imported so, the variable after, NumPy's X86_V4 kernels on] in a
    fresh interpreter whose processor is taken for a Zen 4 or not."""
    code = (
        "import os, bench.numpy_sorts as s\n"
        f"s.slow_avx512_sorts = lambda info: {zen4}\n"
        "done = s.import_numpy_for_sorting()\n"
        "from numpy._core._multiarray_umath import __cpu_features__ as f\n"
        "print(done, os.environ.get('NPY_DISABLE_CPU_FEATURES'), f.get('X86_V4'))\n"
    )
    clean = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.split()


def test_numpy_loses_its_avx512_kernels_on_zen4_and_the_variable_goes():
    done, left, v4 = _imported(True, {})
    assert done == "True" and left == "None" and v4 == "False"


def test_elsewhere_or_when_told_numpy_is_left_as_it_is():
    assert _imported(False, {})[:2] == ["False", "None"]
    assert _imported(True, {"DISTMM_NUMPY_AVX512": "1"})[:2] == ["False", "None"]
    # a choice of the user's own is theirs
    mine = {"NPY_DISABLE_CPU_FEATURES": "AVX512_SPR"}
    assert _imported(True, mine)[:2] == ["False", "AVX512_SPR"]
