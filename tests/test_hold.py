"""Link emulation's holds (algorithms/levels.py): never before their deadline, and on time where
sleeps wake late."""

from __future__ import annotations

import time

from algorithms import levels
from algorithms.levels import hold_until


def test_a_hold_never_ends_before_its_deadline():
    for _ in range(30):
        deadline = time.perf_counter() + 1e-3
        hold_until(deadline)
        assert time.perf_counter() >= deadline
    t0 = time.perf_counter()
    hold_until(0.0)
    hold_until(t0 - 1.0)  # passed already
    assert time.perf_counter() - t0 < 1e-3


def test_holds_learn_how_late_sleeps_wake_and_wake_that_much_early(monkeypatch):
    late = 1e-4  # every sleep here wakes 100 us after it was asked to

    def sleep(seconds):
        end = time.perf_counter() + seconds + late
        while time.perf_counter() < end:
            pass

    monkeypatch.setattr(levels.time, "sleep", sleep)
    waker = levels._Waker()
    misses = []
    for _ in range(60):
        deadline = time.perf_counter() + 1e-3
        waker.until(deadline)
        misses.append(time.perf_counter() - deadline)
    assert abs(waker.early - late) <= 5 * waker.STEP  # at the sleeps' lateness, give or take
    assert min(misses) >= 0.0
    assert sorted(misses[-20:])[10] < 2e-5  # no longer late (the first ones were, by 100 us)
    assert misses[0] >= late * 0.9
