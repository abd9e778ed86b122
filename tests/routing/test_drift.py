"""The drift alarm (`locus.routing.drift`): a CUSUM of outcomes against predicted P(correct).
Planted streams with known rates: calibrated predictions (no change) for false alarms, swaps
of known size for the delay."""

from __future__ import annotations

import math

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.routing.drift import RECENT, THRESHOLD, DriftMonitor


def delay(before: float, after: float, seed: int, limit: int = 2000) -> int:
    """Outcomes until the alarm, an LLM predicted at `before` now right at rate `after`."""
    rng = np.random.default_rng(seed)
    monitor = DriftMonitor()
    for t in range(1, limit + 1):
        if monitor.update("x", before, float(rng.random() < after)):
            return t
    return limit + 1


def test_calibrated_predictions_raise_almost_no_alarm() -> None:
    # 20 LLMs x 10,000 outcomes whose predictions are right (each query its own P)
    rng = np.random.default_rng(0)
    false_alarms = 0
    for _ in range(20):
        monitor = DriftMonitor()
        predicted = rng.uniform(0.2, 0.95, 10_000)
        outcomes = (rng.random(10_000) < predicted).astype(float)
        false_alarms += sum(
            monitor.update("x", p, y) for p, y in zip(predicted, outcomes, strict=True)
        )
    # the bound: a mean of 20,000 outcomes at least between false alarms, 10 in 200,000
    # (issue 54's target: 1 per 10,000 outcomes per LLM, 20 here); seeded: 3
    assert false_alarms <= 10


def test_a_swap_is_caught_within_its_size() -> None:
    swap = [delay(0.9, 0.1, seed) for seed in range(50)]
    assert max(swap) <= 20 and np.median(swap) <= 13
    weaker = [delay(0.9, 0.6, seed) for seed in range(50)]
    assert np.median(weaker) <= 60 and max(weaker) <= 200
    # a change the test is not tuned to, and smaller: slower, still caught
    assert np.median([delay(0.8, 0.6, seed) for seed in range(20)]) < 400


def test_state_counts_rates_and_the_change_point() -> None:
    monitor = DriftMonitor()
    for _ in range(100):  # calibrated at 0.8, a run of right answers: the statistic stays 0
        monitor.update("a", 0.8, 1.0)
    assert monitor.state("a").statistic == 0.0 and not monitor.state("a").alarm
    for _ in range(30):
        monitor.update("a", 0.8, 0.0)
    state = monitor.state("a")
    assert state.alarm and state.since == 100  # the change began after outcome 100
    said = state.as_dict()
    assert said["outcomes"] == 130 and said["rate"] == pytest.approx(100 / 130)
    assert said["recent_rate"] == pytest.approx(20 / RECENT) and said["alarm_at"] > 100
    assert monitor.alarms() == ["a"] and monitor.state("b").outcomes == 0
    monitor.reset("a")
    assert monitor.alarms() == [] and monitor.as_dict() == {}
    # grades in between count as partly right
    monitor.update("g", 0.5, 0.5)
    assert monitor.state("g").correct == 0.5


def test_bad_input_is_refused() -> None:
    with pytest.raises(LocusInputError, match="must be in"):
        DriftMonitor().update("a", 0.5, 2.0)
    with pytest.raises(LocusInputError, match="odds_ratio must be > 1"):
        DriftMonitor(odds_ratio=1.0)
    assert math.exp(THRESHOLD) == pytest.approx(20_000)
