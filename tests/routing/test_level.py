"""A newcomer's level read against how easy the pool found its probes (`locus.routing.level`)."""

from __future__ import annotations

import numpy as np
import pytest

from locus.calibration import sigmoid
from locus.routing.level import FitRows, easiness, pool_level, reference_rows


def _pool(seed: int, n: int = 4_000, m: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """(difficulty (n,), scores (n, m + 1)): a one-parameter IRT pool, the last LLM of level 0.6."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.5, n)
    levels = np.append(rng.normal(0, 1.0, m), 0.6)
    scores = rng.random((n, m + 1)) < sigmoid(levels[None, :] - difficulty[:, None])
    return difficulty, scores.astype(np.float64)


def test_lucky_probes_are_read_down_and_unlucky_ones_up() -> None:
    """32 probes from the easiest or the hardest quarter of the queries: their mean is 0.27-0.37
    off the newcomer's accuracy; read against the pool's scores on them, less than half as far
    (0.01-0.16: the logit of the pool's mean is flatter than one LLM's, so the most lopsided
    probes are read part of the way)."""
    for seed in range(3):
        difficulty, scores = _pool(seed)
        pool, new = scores[:, :-1], scores[:, -1]
        truth = float(new.mean())
        reference = easiness(pool[:1_000])
        order = np.argsort(difficulty)
        for quarter in (order[:1_000], order[-1_000:]):
            probes = np.random.default_rng(seed).choice(quarter, 32, replace=False)
            raw = float(new[probes].mean())
            level = pool_level(new[probes], easiness(pool[probes]), reference)
            assert abs(raw - truth) > 0.25
            assert abs(level - truth) < abs(raw - truth) / 2


def test_random_probes_are_read_closer_than_their_mean_over_many_draws() -> None:
    _, scores = _pool(7)
    pool, new = scores[:, :-1], scores[:, -1]
    truth, reference = float(new.mean()), easiness(pool)
    rng = np.random.default_rng(1)
    raw, read = [], []
    for _ in range(200):
        probes = rng.choice(len(new), 32, replace=False)
        raw.append(abs(float(new[probes].mean()) - truth))
        read.append(abs(pool_level(new[probes], easiness(pool[probes]), reference) - truth))
    assert np.mean(read) < 0.9 * np.mean(raw)  # 0.062 against 0.071


def test_scores_the_pool_does_not_know_count_at_their_own_mean() -> None:
    unknown = np.full(4, np.nan)
    assert pool_level(np.array([1.0, 0.0, 1.0, 1.0]), unknown, np.zeros(5)) == 0.75
    # two known probes at the reference's easiness (read 0.5 there, bounded: 1 of 2 right),
    # two unknown ones both right: (0.5 * 2 + 2) / 4
    level = pool_level(np.array([1.0, 0.0, 1.0, 1.0]), np.array([0.0, 0.0, np.nan, np.nan]),
                       np.zeros(5))  # fmt: skip
    assert level == pytest.approx(0.75)
    # no reference: its mean
    assert pool_level(np.array([1.0, 0.0]), np.zeros(2), np.array([np.nan])) == 0.5


def test_probes_all_right_are_not_read_as_certain() -> None:
    level = pool_level(np.ones(16), np.zeros(16), np.zeros(10))
    assert level == pytest.approx(16.5 / 17, abs=1e-6)


def test_reference_rows_follow_the_probes_tasks() -> None:
    codes = np.array([0] * 500 + [1] * 500 + [2] * 500, np.int32)
    rows = reference_rows(codes, [0] * 24 + [2] * 8, 1_500, 200)
    assert len(rows) == 200 and np.all(np.diff(rows) > 0)
    assert np.sum(codes[rows] == 0) == 150 and np.sum(codes[rows] == 2) == 50
    # a probe without a task (or one no row has) draws from all rows; no tasks: at random
    mixed = reference_rows(codes, [0, None], 1_500, 100)
    assert np.sum(codes[mixed] == 0) >= 50 and np.sum(codes[mixed] != 0) > 10
    assert len(reference_rows(None, None, 1_500, 100)) == 100
    assert len(reference_rows(codes, [1], 1_500, 5_000)) == 500


def test_fit_rows_are_found_by_their_vectors() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 6)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = FitRows(vectors)
    other = rng.normal(size=(2, 6)).astype(np.float32)
    found = rows.find(np.vstack([vectors[[7, 3]], other]))
    assert found.tolist() == [7, 3, -1, -1]


def test_easiness_is_the_smoothed_logit_of_the_pools_mean() -> None:
    found = easiness(np.array([[1.0, 1.0, 1.0], [0.0, 1.0, np.nan]]))
    assert found[0] == pytest.approx(np.log(3.5 / 0.5))
    assert found[1] == pytest.approx(0.0)
