"""Statistics over every timed repetition: median intervals, ratios, significance, stopping rule.

Times are seconds per repetition, in any order. Nothing here assumes a distribution: run times
are skewed (a floor and a tail of interrupted repetitions), so means and standard deviations would
mislead.

- :func:`median_ci`: a distribution-free confidence interval for the median from order statistics
  (the binomial method for quantiles; e.g. Conover, *Practical Nonparametric Statistics*).
- :func:`ratio_ci`: the ratio of medians new / old with a percentile-bootstrap interval.
- :func:`significant` and :func:`separable`: the two-sided Mann-Whitney U (Wilcoxon rank-sum) test.
- :func:`enough`: the stopping rule for ``--repeat auto``.
- :func:`round_agreement`: how well one round of runs foretells the others' fastest
  (:func:`case_agreement`: of the candidates that ran every round).

How many repetitions a comparison needs: with n and m samples and no ties, the smallest two-sided
exact Mann-Whitney p value is 2 / C(n + m, n) (:func:`min_p_value`), reached only when every
sample of one side is below every sample of the other. 3 vs 3 gives 0.1, so with three
repetitions nothing can be significant at alpha = 0.05; 4 vs 4 gives 0.029 (possible, but only
with complete separation); 5 vs 5 gives 0.0079. :data:`MIN_SAMPLES` = 5 is the fewest this module
recommends, and the fewest :func:`enough` accepts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MIN_SAMPLES = 5
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 14  # fixed: the same samples always give the same interval


def _array(samples: Sequence[float], what: str = "samples") -> np.ndarray:
    x = np.asarray(samples, dtype=float).ravel()
    if x.size == 0:
        raise ValueError(f"no {what}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} must be finite numbers")
    return x


def _check_level(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")


def order_statistic_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, float]:
    """(j, k, coverage): the 1-based order statistics x_(j) <= median <= x_(k) and their coverage.

    The number of samples below the population median is Binomial(n, 1/2), so the symmetric
    interval [x_(j), x_(n+1-j)] covers the median with probability P(j <= B <= n - j). ``j`` is the
    largest rank whose coverage is at least ``confidence`` (the narrowest such interval).

    Rule for few samples: when even [min, max] (j = 1, coverage 1 - 2 / 2^n) falls short of
    ``confidence`` (n < 6 at 95%), the result is still (1, n, coverage) with the coverage actually
    reached (0.9375 for n = 5, 0.5 for n = 2), so the interval is (min, max) and ``coverage <
    confidence`` says so. For n = 1 it is (1, 1, 0.0).
    """
    _check_level(confidence)
    if n < 1:
        raise ValueError("no samples")
    # coverage of [x_(j), x_(n+1-j)] = 1 - 2 P(B <= j - 1), by the symmetry of Binomial(n, 1/2)
    tail = _pmf(n, 0)
    best = (1, n, 1 - 2 * tail)
    for j in range(2, (n + 1) // 2 + 1):
        tail += _pmf(n, j - 1)
        if 1 - 2 * tail < confidence:
            break
        best = (j, n + 1 - j, 1 - 2 * tail)
    return best


def _pmf(n: int, i: int) -> float:
    """P(B = i) for B ~ Binomial(n, 1/2), in logs so that large n does not overflow."""
    log = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
    return math.exp(log)


def ci_coverage(n: int, confidence: float = 0.95) -> float:
    """The coverage :func:`median_ci` really has for n samples (below ``confidence`` if n < 6)."""
    return order_statistic_ranks(n, confidence)[2]


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high): the median and its order-statistic (binomial) confidence interval.

    Distribution-free: it assumes only independent samples from one continuous distribution.
    9 samples give [x_(2), x_(8)] (96.1%); 20 give [x_(6), x_(15)] (95.9%). With fewer than 6
    samples no order-statistic interval reaches 95%, and the interval returned is (min, max);
    :func:`ci_coverage` gives its real coverage (see :func:`order_statistic_ranks`).
    """
    x = np.sort(_array(samples))
    j, k, _ = order_statistic_ranks(x.size, confidence)
    return float(np.median(x)), float(x[j - 1]), float(x[k - 1])


def ratio_ci(
    old: Sequence[float],
    new: Sequence[float],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """(ratio, low, high): median(new) / median(old) and its percentile-bootstrap interval.

    Each side is resampled with replacement on its own, ``resamples`` times, from a generator
    seeded with ``seed``: the same inputs always give the same interval. Above 1 means new is
    slower. With few samples the medians of resamples take few values, so the interval is coarse.
    """
    _check_level(confidence)
    a, b = _array(old, "old samples"), _array(new, "new samples")
    if np.median(a) <= 0:
        raise ValueError("the old median must be positive")
    rng = np.random.default_rng(seed)
    old_medians = np.median(rng.choice(a, size=(resamples, a.size)), axis=1)
    new_medians = np.median(rng.choice(b, size=(resamples, b.size)), axis=1)
    ratios = new_medians / np.maximum(old_medians, np.finfo(float).tiny)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(b) / np.median(a)), float(low), float(high)


def min_p_value(n_old: int, n_new: int) -> float:
    """The smallest two-sided exact Mann-Whitney p value n_old vs n_new samples can give.

    2 / C(n_old + n_new, n_old) (capped at 1): 0.1 for 3 vs 3, 0.029 for 4 vs 4, 0.0079 for 5 vs 5.
    Ties only raise it.
    """
    if n_old < 1 or n_new < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_old + n_new, n_old))


def can_be_significant(n_old: int, n_new: int, alpha: float = 0.05) -> bool:
    """Whether any data with these sample counts could give p < alpha (see :func:`min_p_value`)."""
    return min_p_value(n_old, n_new) < alpha


def significant(
    old: Sequence[float], new: Sequence[float], alpha: float = 0.05
) -> tuple[float, bool]:
    """(p_value, p < alpha): two-sided Mann-Whitney U test of old against new.

    scipy chooses the exact distribution for small samples without ties, the normal approximation
    (tie-corrected) otherwise. All samples equal gives p = 1. See the module docstring for how many
    samples a significant result needs.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
    from scipy.stats import mannwhitneyu  # here: importing scipy.stats takes about a second

    a, b = _array(old, "old samples"), _array(new, "new samples")
    p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    if math.isnan(p):  # every value equal: nothing separates the two
        p = 1.0
    return p, p < alpha


def separable(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> bool:
    """Whether two configurations' times are told apart by the same test as :func:`significant`.

    For a report's reading: name a winner only if it is separable from the runner-up, otherwise
    say "no significant difference".
    """
    return significant(a, b, alpha)[1]


def enough(
    samples: Sequence[float],
    rel_width: float = 0.05,
    confidence: float = 0.95,
    min_samples: int = MIN_SAMPLES,
) -> bool:
    """The stopping rule for ``--repeat auto``: stop once the median's interval is narrow enough.

    True when there are at least ``min_samples`` samples and the width of :func:`median_ci`
    (high - low) is at most ``rel_width`` times the median. The time cap is the caller's. Under
    MPI, decide on one rank's samples (or the same samples on every rank) so that every rank stops
    together: the rule is deterministic.
    """
    if rel_width <= 0:
        raise ValueError(f"rel_width must be positive, not {rel_width}")
    if len(samples) < max(1, min_samples):
        return False
    median, low, high = median_ci(samples, confidence)
    return median > 0 and (high - low) <= rel_width * median


def round_agreement(
    rounds: Sequence[Sequence[float]], within: float = 0.10
) -> tuple[int, int, int]:
    """How well one round of runs picks the fastest of the others: ``rounds[c][r]`` is candidate
    c's time in round r (the candidates taking turns). For every round, the candidate fastest in
    it alone is judged against the median of the other rounds, as a planner's choice is against
    the median of all: (times it is their fastest, times it is within ``within`` of it, rounds
    tried). A chooser as noisy as one round scores this; a planner's hits read against it say
    how much of a miss is the machine's. On a shared 2-core VM one round picked the fastest of
    the other two in 44-71% of 96 trials of three sweeps (results/vm-2c-xeon)."""
    times = np.asarray(rounds, dtype=float)
    if times.ndim != 2 or times.shape[1] < 2:
        return 0, 0, 0
    fastest = near = 0
    for r in range(times.shape[1]):
        others = np.median(np.delete(times, r, axis=1), axis=1)
        pick = others[int(np.argmin(times[:, r]))]
        fastest += bool(pick <= others.min())
        near += bool(pick <= (1 + within) * others.min())
    return fastest, near, times.shape[1]


def case_agreement(rounds: Sequence[Sequence[float]]) -> tuple[int, int, int]:
    """:func:`round_agreement` over the candidates' rounds, those with fewer rounds than the
    most left out (a failed run); (0, 0, 0) for none."""
    full = max(map(len, rounds), default=0)
    return round_agreement([r for r in rounds if len(r) == full])
