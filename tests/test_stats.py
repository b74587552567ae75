"""bench.stats on simulated run times: interval coverage, false alarms, power, stopping rule."""

from __future__ import annotations

import numpy as np
import pytest

from bench.stats import (
    ci_coverage,
    enough,
    median_ci,
    min_p_value,
    order_statistic_ranks,
    ratio_ci,
    round_agreement,
    separable,
    significant,
)


def _times(rng, n: int, median: float = 1.0, noise: float = 0.05) -> np.ndarray:
    """Skewed like run times: lognormal around ``median`` with relative spread ``noise``."""
    return median * np.exp(rng.normal(0.0, noise, size=n))


def test_order_statistics_are_the_binomial_ones():
    assert order_statistic_ranks(9)[:2] == (2, 8)
    assert ci_coverage(9) == pytest.approx(1 - 2 * (1 + 9) / 512)
    assert order_statistic_ranks(20)[:2] == (6, 15)
    assert ci_coverage(6) == pytest.approx(1 - 2 / 64)  # the fewest samples reaching 95%
    assert ci_coverage(6) >= 0.95 > ci_coverage(5)


def test_few_samples_give_min_and_max_with_their_real_coverage():
    assert median_ci([3.0, 1.0, 2.0, 5.0, 4.0]) == (3.0, 1.0, 5.0)
    assert ci_coverage(5) == pytest.approx(0.9375)
    assert median_ci([2.0]) == (2.0, 2.0, 2.0)
    assert ci_coverage(1) == 0.0
    with pytest.raises(ValueError):
        median_ci([])


def test_median_interval_covers_the_median_at_about_its_nominal_rate():
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(400):
        _, low, high = median_ci(_times(rng, 9))
        covered += low <= 1.0 <= high  # the lognormal's median is exactly 1
    assert covered / 400 >= 0.9


def test_identical_distributions_are_rarely_flagged():
    rng = np.random.default_rng(2)
    flagged = sum(significant(_times(rng, 7), _times(rng, 7))[1] for _ in range(200))
    assert flagged / 200 <= 0.05


def test_a_twenty_percent_slowdown_is_flagged():
    rng = np.random.default_rng(3)
    flagged = 0
    for _ in range(200):
        old, new = _times(rng, 7), _times(rng, 7, median=1.2)
        p, slower = significant(old, new)
        flagged += slower and median_ci(new)[0] > median_ci(old)[0]
    assert flagged / 200 >= 0.95


def test_three_repetitions_can_never_be_significant():
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert significant([1, 2, 3], [10, 11, 12]) == (pytest.approx(0.1), False)
    assert min_p_value(5, 5) == pytest.approx(0.0079, abs=1e-4)
    p, flagged = significant([1, 2, 3, 4, 5], [10, 11, 12, 13, 14])
    assert flagged and p == pytest.approx(2 / 252)


def test_equal_samples_are_not_separable():
    assert significant([1.0] * 5, [1.0] * 5) == (1.0, False)
    assert not separable([1.0, 1.1, 0.9, 1.05, 0.95], [1.0, 1.1, 0.9, 1.05, 0.95])
    assert separable([1.0, 1.01, 0.99, 1.02, 0.98], [2.0, 2.01, 1.99, 2.02, 1.98])


def test_ratio_interval_is_reproducible_and_holds_the_ratio():
    rng = np.random.default_rng(4)
    old, new = _times(rng, 9), _times(rng, 9, median=1.2)
    ratio, low, high = ratio_ci(old, new)
    assert low <= ratio <= high
    assert ratio == pytest.approx(np.median(new) / np.median(old))
    assert 1.0 < low and high < 1.45
    assert ratio_ci(old, new) == (ratio, low, high)  # fixed seed


def test_stopping_rule():
    assert not enough([1.0] * 4, rel_width=0.05)  # fewer than 5 samples
    assert enough([1.0, 1.01, 0.99, 1.0, 1.02], rel_width=0.05)
    assert not enough([1.0, 1.5, 0.7, 1.0, 1.2], rel_width=0.05)
    rng = np.random.default_rng(5)
    samples = list(_times(rng, 5, noise=0.1))
    while not enough(samples, rel_width=0.1):
        samples += list(_times(rng, 1, noise=0.1))
    median, low, high = median_ci(samples)
    assert high - low <= 0.1 * median and len(samples) < 200


def test_round_agreement_counts_rounds_that_foretell_the_others():
    steady = [[1.0, 1.0, 1.0], [2.0, 2.1, 1.9]]
    assert round_agreement(steady) == (3, 3, 3)
    # round 0 picks the second (1.175 s in the others, the first 1.0: over 10% off), round 1
    # the first (the others' fastest), round 2 the first (1.1 s against 1.075: within 10%)
    swapped = [[1.2, 1.0, 1.0], [1.1, 1.05, 1.3]]
    assert round_agreement(swapped) == (1, 2, 3)
    assert round_agreement([[1.0], [2.0]]) == (0, 0, 0)  # one round foretells nothing
