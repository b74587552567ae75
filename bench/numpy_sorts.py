"""NumPy's sorts on AMD Zen 4, where its AVX-512 kernels sort slower than its AVX2 ones.

Zen 4 runs AVX-512's compress to memory (``vpcompressd/q`` with a memory operand) in microcode,
about 140 cycles each (numpy/x86-simd-sort#6; Zen 5 fixed it), and the AVX-512 quicksort NumPy
dispatches to issues one per vector it partitions. On our Zen 4 VM (AMD EPYC, family 25, model
17; results/vm-2c-zen4) ``np.sort`` of 262 144 int64 took 11.3 ms with NumPy 2.4's AVX-512
kernels and 2.4 ms with its AVX2 ones, ``np.argsort`` 15.2 and 6.0 ms. Pricing `distmm plan`'s
moves at thousands of ranks sorts rank pairs by the hundred thousand (layouts/counting.py's
``summed``, the relabelling's matchings): at P = 8192 from block layouts, 8192^3, a plan took
1.55 s of CPU instead of 1.75 with the AVX2 kernels (scripts/plan_speed.py).

NumPy picks its kernels once, when imported, leaving out those named in
``NPY_DISABLE_CPU_FEATURES``. Other kernels lose by it (``np.take`` ran 2x and ``np.exp`` 5x
slower there), so only the commands that price moves and move no data (plan, predict) import
NumPy so on Zen 4, and the variable is removed again once it is imported: what they start later
(`plan --run`'s measured runs) gets NumPy as the user has it. NumPy 1 has no AVX2 sort to fall
back on: it is left as it is.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

from .metadata import cpu_info

# NumPy's AVX-512 dispatch targets: X86_V4 and AVX512_ICL from NumPy 2.4, AVX512_SKX and
# AVX512_ICL before (a name a version does not know is ignored, with an ImportWarning)
AVX512_KERNELS = "X86_V4 AVX512_ICL AVX512_SKX"
ZEN4_FAMILY = "25"  # AMD family 19h: Zen 3 (no AVX-512) and Zen 4; Zen 5 is family 26


def slow_avx512_sorts(info: dict[str, str]) -> bool:
    """Whether the processor /proc/cpuinfo describes as ``info`` is a Zen 4 (AMD family 25
    with AVX-512)."""
    return (
        info.get("vendor_id") == "AuthenticAMD"
        and info.get("cpu family") == ZEN4_FAMILY
        and "avx512f" in info.get("flags", "").split()
    )


def import_numpy_for_sorting() -> bool:
    """Import NumPy without its AVX-512 kernels where they sort slower (Zen 4); whether it did.
    Nothing where NumPy is already imported, is NumPy 1, the user set NPY_DISABLE_CPU_FEATURES,
    or DISTMM_NUMPY_AVX512=1."""
    if (
        "numpy" in sys.modules
        or "NPY_DISABLE_CPU_FEATURES" in os.environ
        or os.environ.get("DISTMM_NUMPY_AVX512") == "1"
        or not slow_avx512_sorts(cpu_info())
        or not _numpy2()
    ):
        return False
    os.environ["NPY_DISABLE_CPU_FEATURES"] = AVX512_KERNELS
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ImportWarning)
            import numpy  # noqa: F401
    finally:
        del os.environ["NPY_DISABLE_CPU_FEATURES"]
    return True


def _numpy2() -> bool:
    """Whether the NumPy to be imported is NumPy 2 (its package has ``_core``), found without
    importing it."""
    spec = importlib.util.find_spec("numpy")
    return bool(spec and spec.origin) and (Path(spec.origin).parent / "_core").is_dir()


__all__ = ["AVX512_KERNELS", "import_numpy_for_sorting", "slow_avx512_sorts"]
