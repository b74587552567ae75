"""What `distmm calibrate` prints of its measurements beyond the tables it prints as it goes:
the GEMMs' threading, and what the model takes from the counts above the cores."""

from __future__ import annotations

from .calibration_counts import SHORT_GEMM, SLICED_GEMM
from .model.fits import sharing_moves


def say_threads(say, threaded: dict, one_thread: list) -> None:
    one = {tuple(r[:3]): r[3] for r in one_thread}
    ts = sorted(threaded, key=int)
    say(
        "\n# GEMM with t BLAS threads per rank (cores // t ranks at once, as a run of that many "
        "has them), float32: speedup over one thread"
    )
    say(f"{'m':>6} {'k':>6} {'n':>6} " + " ".join(f"{'t=' + t:>7}" for t in ts))
    for i, (m, k, n, _) in enumerate(threaded[ts[0]]):
        speedups = (one[(m, k, n)] / threaded[t][i][3] for t in ts)
        say(f"{m:>6} {k:>6} {n:>6} " + " ".join(f"{x:>7.2f}" for x in speedups))


def say_above_cores(say, counts: list[dict], cores: int, gemm: dict, threaded: dict) -> None:
    """Print what the model takes from the counts: up to the cores, what GEMMs take with every
    rank computing at once against the rates (Profile.busy_at); above them the GEMMs'
    time-slicing efficiency (Profile.with_own_time_slicing) and the collectives' alpha and beta
    (Profile.sliced_fit: only the counts and the cores matter to it)."""
    from .model.profile import Profile

    profile = Profile(
        0.0, 0.0, 0.0, 0.0, gemm=gemm, gemm_threads=threaded, cores=cores, counts=tuple(counts)
    )
    busy = [c["ranks"] for c in counts if c["ranks"] <= cores and c.get("gemm_shared")]
    if busy:
        say(
            "\n# GEMMs with every rank computing at once (the run's BLAS threads each), over "
            "what the rates price, by rank count (the model prices GEMMs so): "
            + ", ".join(f"{g}: {profile.busy_at(g):.2f}" for g in busy)
        )
    exposed = [c for c in counts if c.get("exposed")]
    if exposed:
        kinds, parts = exposed_parts(exposed)
        say(
            "\n# a message posted before a GEMM, what the rank still pays of its price by rank "
            f"count ({kinds}; 0: hidden, 1: as if blocking; above the {cores} cores, of its "
            f"price blocking after the GEMM; the model charges it): {parts}"
        )
    own = profile.with_own_time_slicing()
    if len(own.shared_efficiency) > 1:
        say(
            f"\n# GEMM time slicing above the {cores} cores: efficiency "
            f"{own.efficiency():.3f}, the median over those counts of this profile's time for "
            "the GEMM timed there x ranks per core / its time with every rank working"
        )
    say_move_levels(say, counts, cores)
    fitted = profile.sliced_fit()
    if not fitted:
        return
    say(
        f"\n# above the {cores} cores, fitted to every count there: each collective's alpha "
        "and bandwidth with one rank per core (a run with s ranks per core pays s times)"
    )
    grouped = profile.grid_fit()
    for kind, (alpha, beta) in fitted.items():
        say(f"  {kind:<15} {alpha_rate(alpha, beta)}")
    if grouped:
        say(
            "  and on the rows and columns of a grid of them, every row (column) at once, as "
            "2-D and 3-D algorithms run them (the model prices groups smaller than the node so)"
        )
    for kind, (alpha, beta) in grouped.items():
        say(f"  {kind + ' (grid)':<15} {alpha_rate(alpha, beta)}")
    if law := profile.step_law():
        short = f"{min(law.short) * 1e3:.2f}-{max(law.short) * 1e3:.2f}"
        long = f"{min(law.long) * 1e3:.1f}-{max(law.long) * 1e3:.1f}"
        say(
            f"  after {SHORT_GEMM}^3 GEMMs, not {SLICED_GEMM}^3 (steps of {short} ms per rank per "
            f"core, not {long}; the model prices a run's collectives between the two by the "
            "computation before each: bench/model/steps.py)"
        )
        for kind, (alpha, beta) in law.sliced.items():
            say(f"  {kind:<15} {alpha_rate(alpha, beta)}")
        for kind, (alpha, beta) in law.grouped.items():
            say(f"  {kind + ' (grid)':<15} {alpha_rate(alpha, beta)}")
        if law.posted:
            kinds, parts = exposed_parts(law.posted)
            say(
                "  a message posted before these GEMMs, what the rank still pays of its price "
                f"blocking after them, by rank count ({kinds}): {parts}"
            )


def exposed_parts(counts) -> tuple[str, str]:
    """("kind / kind ...", "ranks: part / part ..., ...") of counts' "exposed" ("-": not
    measured at that count)."""
    kinds = sorted(set().union(*(c["exposed"] for c in counts)))
    parts = ", ".join(
        f"{c['ranks']}: "
        + " / ".join(f"{c['exposed'][k]:.2f}" if k in c["exposed"] else "-" for k in kinds)
        for c in counts
    )
    return " / ".join(kinds), parts


def alpha_rate(alpha: float, beta: float) -> str:
    rate = f"{1 / beta / 1e9:.2f} GB/s" if beta > 0 else "-"
    return f"alpha {alpha * 1e6:8.1f} us  {rate}"


def say_move_levels(say, counts: list[dict], cores: int) -> None:
    """Above the cores, the layout changes' one fit and each count's level (how the model
    prices them there: Profile._alltoallv_at)."""
    found = sharing_moves(counts, cores)
    if found is None:
        return
    unit, gs, levels, measured = found
    say(
        f"\n# layout changes above the {cores} cores, one fit over every count there (with one "
        f"rank per core: move {unit['start'] * 1e6:.0f} us, /msg {unit['message'] * 1e6:.1f} us, "
        f"piece {unit['piece'] * 1e9:.1f} ns; grown with the ranks per core) at each count's "
        "level, its own moves' median time over the fit's price: "
        + ", ".join(
            f"{g}: {x:.2f}"
            + ("" if x == m else f" (measured {m:.2f}: a spell, priced as its neighbour)")
            for g, x, m in zip(gs, levels, measured, strict=True)
        )
    )


__all__ = ["alpha_rate", "say_above_cores", "say_move_levels", "say_threads"]
