"""What `distmm plan` prints: the ranked candidate table, predicted against measured order, and
a chain's shortest path beside the greedy choice (as text and as the JSON record)."""

from __future__ import annotations

import statistics

from .planner import Candidate
from .stats import case_agreement
from .units import format_bytes


def _head(width: int = 18) -> str:
    return (
        f"{'algorithm':<10}{'grid/F_op':<14}{'params':<{width}}{'ovl':<7}{'kernel [ms]':>12}"
        f" {'e2e [ms]':>12}"
    )


def _width(cands) -> int:
    """The params column's width: 18, or one more than the longest (bindings can be long)."""
    return max([18, *(len(c.params_text) + 1 for c in cands)])


def _overlap(c: Candidate) -> str:
    return "on/off" if c.overlap_twin is not None else "on" if c.overlap else "off"


def table_rows(cands: list[Candidate]) -> list[Candidate]:
    """The candidates the table lists: one row, the first, for overlap on and off where they
    are priced alike (bench.planner.mark_overlap_alike), which says "on/off" and is on the
    Pareto front if either is (the JSON keeps both)."""
    shown: set[int] = set()
    out = []
    for c in cands:
        if c.overlap_twin is None or id(c.overlap_twin) not in shown:
            shown.add(id(c))
            out.append(c)
    return out


def _row(c: Candidate, width: int = 18) -> str:
    """The columns _head names, for one candidate (end to end: >= when never priced)."""
    e2e = f"{c.seconds * 1e3:.3f}" if c.exact else f">={c.seconds * 1e3:.3f}"
    return (
        f"{c.algo:<10}{c.grid_text:<14}{c.params_text:<{width}}"
        f"{_overlap(c):<7}{c.kernel * 1e3:>12.3f} {e2e:>12}"
    )


def candidate_table(cands: list[Candidate], start: dict | None = None, header: bool = True) -> str:
    """One line per candidate; ``start`` maps id(candidate) to its rank when not 1, 2, ..."""
    w = _width(cands)
    head = (
        f"{'#':>3} {_head(w)} {'GFLOP/s':>8} {'mem/rank':>11} {'words/rank':>11}"
        f" {'words/bound':>11}  P"
    )
    lines = [head] if header else []
    for i, c in enumerate(cands):
        n = start[id(c)] if start else i + 1
        gf = c.plan.flops / c.seconds / 1e9 if c.seconds else 0.0
        ratio = f" {c.words_ratio:>11.2f}" if c.words_ratio is not None else f" {'-':>11}"
        lines.append(
            f"{n:>3} {_row(c, w)} {gf:>8.1f} {format_bytes(c.memory):>11}"
            f" {c.words:>11.4g}{ratio}  {'*' if c.on_front else ''}"
        )
    return "\n".join(lines)


BOUND_NOTE = (
    "words/rank: elements rank 0 sends in the kernel plus those the busiest rank sends or "
    "receives redistributing; words/bound: against max(MKN/(2 sqrt(2) P sqrt(S)) - S, "
    "D - (MK+KN+MN)/P), S the memory per rank in words, D = 3 (MKN/P)^(2/3) in 3-D "
    "(bench/model/bound.py)"
)


def recommendation(best: Candidate) -> str:
    return (
        f"recommended: {best.algo} {best.grid_text} {best.params_text} overlap="
        f"{'on' if best.overlap else 'off'}: {best.seconds * 1e3:.2f} ms predicted end to end "
        f"({best.kernel * 1e3:.2f} ms kernel), {format_bytes(best.memory)}/rank"
    )


# how near a candidate's prediction must be to the recommendation's to be named beside it: the
# median |predicted / measured - 1| of the planner's runs (scripts/plan_accuracy.py: 10.0% from
# block layouts at 4-16 ranks on a 2-core machine, where 12 of 17 misses were such near ties)
NEAR = 0.10


def near_text(best: Candidate, close: list[Candidate]) -> str:
    """The line naming ``close``, candidates predicted within NEAR of ``best``."""
    names = ", ".join(
        f"{c.algo} {c.grid_text}{'' if c.params_text == '-' else ' ' + c.params_text}"
        f"{'' if c.overlap == best.overlap else ' overlap ' + ('on' if c.overlap else 'off')}"
        f" (+{100 * (c.seconds / best.seconds - 1):.1f}%)"
        for c in close
    )
    return (
        f"within {100 * NEAR:.0f}% of it, nearer than the model's typical error: {names}; "
        "`--run` measures them"
    )


def repeatability_text(fastest: int, near: int, tried: int) -> str:
    """The line on the runs' own repeatability (bench.stats.case_agreement, or its sums)."""
    if not tried:
        return "repeatability: one round per candidate, none to hold out (--rounds 3 or more)"
    return (
        f"repeatability of the runs: one round alone picks the fastest of the other rounds in "
        f"{fastest} of {tried} ({100 * fastest / tried:.0f}%), within 10% in {near} "
        f"({100 * near / tried:.0f}%): what a chooser as noisy as this machine scores"
    )


def phases_text(c: Candidate, recs: list[dict]) -> str:
    """``c``'s phases predicted and measured in its run records ``recs`` (the median over them),
    in ms: "in / kernel / out | in / kernel / out" from the user's layouts, the kernel alone
    from native ones (or records without phases)."""

    def median(seconds) -> float:
        return statistics.median(seconds(r) for r in recs)

    kernel = median(lambda r: r["multiply_seconds"])
    predicted, measured = [c.kernel], [kernel]
    if c.layouts is not None and all("phases" in r for r in recs):
        into, out = (
            median(lambda r, p=p: r["phases"][p]["seconds"])
            for p in ("redistribute_in", "redistribute_out")
        )
        predicted = [c.redistribute[0], c.kernel, c.redistribute[1]]
        measured = [into, kernel, out]
    return (
        " / ".join(f"{x * 1e3:.1f}" for x in predicted)
        + " | "
        + " / ".join(f"{x * 1e3:.1f}" for x in measured)
    )


def measured_text(measured: list) -> str:
    """[(candidate, bench.plan_measure.Measured)] in predicted order, against the measured
    order, and how far the rounds agree on the fastest."""
    ok = [(c, m) for c, m in measured if m.seconds is not None]
    by_meas = sorted(ok, key=lambda cm: cm[1].seconds)
    meas_rank = {id(c): i + 1 for i, (c, _) in enumerate(by_meas)}
    w = _width([c for c, _ in measured])
    lines = ["predicted vs measured:", f"{'pred#':>5} {'meas#':>5} {_head(w)} {'meas [ms]':>10}"]
    for i, (c, m) in enumerate(measured):
        ms = f" {m.seconds * 1e3:>10.3f}" if m.seconds is not None else f" {'failed':>10}"
        lines.append(
            f"{i + 1:>5} {meas_rank.get(id(c), '-'):>5} {_row(c, w)}{ms}"
            + (f"  {m.note}" if m.note else "")
        )
    if by_meas:
        first, first_s = measured[0][0], measured[0][1].seconds
        fastest, fastest_s = by_meas[0][0], by_meas[0][1].seconds
        if fastest is first:
            lines.append("first choice was the measured fastest")
        elif first_s is not None:
            lines.append(
                f"first choice was not the measured fastest: {first_s / fastest_s:.3f}x "
                f"the fastest ({fastest.algo} {fastest.grid_text} "
                f"{fastest.params_text})"
            )
    agree = case_agreement([m.rounds for _, m in ok])
    if agree[2]:  # what the rounds say of the comparison itself
        lines.append(repeatability_text(*agree))
    return "\n".join(lines)


def chain_record(res: dict, dims, P: int, dtype: str, elapsed: float) -> dict:
    def rows(chosen):
        return [
            c.record((dims[0], c.plan.shape[1], c.plan.shape[2]), P, dtype, "mesh") for c in chosen
        ]

    return {
        "chain": list(dims),
        "P": P,
        "planning_seconds": elapsed,
        "chosen": rows(res["chosen"]),
        "redistribution": res["redistribution"],
        "total": res["total"],
        "greedy": rows(res["greedy"]),
        "greedy_redistribution": res["greedy_redistribution"],
        "greedy_total": res["greedy_total"],
    }


def chain_text(res: dict, dims, P: int, rpn: int, dtype: str, elapsed: float) -> str:
    lines = [
        f"distmm plan --chain: {len(dims) - 2} products on {P} ranks ({rpn} per node), "
        f"{dtype}; planned in {elapsed * 1e3:.0f} ms"
    ]
    paths = (
        ("shortest path", res["chosen"], res["redistribution"], res["total"]),
        (
            "greedy (each product's fastest alone)",
            res["greedy"],
            res["greedy_redistribution"],
            res["greedy_total"],
        ),
    )
    for label, chosen, redis, total in paths:
        lines.append(f"{label}: total {total * 1e3:.3f} ms")
        for i, c in enumerate(chosen):
            M, K, N = c.plan.shape
            lines.append(
                f"  {i + 1}. {M}x{K}x{N}: {c.algo} {c.grid_text} {c.params_text} "
                f"overlap={_overlap(c)}  {c.seconds * 1e3:.3f} ms"
            )
            lines.append(f"       C {c.plan.C}")
            if i < len(redis):
                lines.append(f"     redistribute C -> next A: {redis[i] * 1e3:.3f} ms")
    gain = res["greedy_total"] - res["total"]
    lines.append(
        f"shortest path saves {gain * 1e3:.3f} ms over greedy "
        f"({gain / res['greedy_total'] * 100 if res['greedy_total'] else 0:.1f}%)"
    )
    return "\n".join(lines)
