"""Metrics on tiny tables with answers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from locus.metrics import (
    best_per_task_accuracy,
    best_per_task_choices,
    best_single_accuracy,
    best_single_choices,
    correctness_metrics,
    expected_calibration_error,
    oracle_accuracy,
    routing_accuracy,
    routing_choices,
    top_k_hit,
)

NAN = np.nan
SCORES = np.array(
    [
        [1.0, 0.0, 0.0],
        [0.0, 1.0, NAN],
        [0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0],
    ]
)


def test_routing_picks_only_evaluated_llms() -> None:
    proba = np.array([[0.9, 0.1, 0.1], [0.1, 0.2, 0.99], [0.5, 0.6, 0.4], [0.1, 0.1, 0.1]])
    assert routing_choices(proba, SCORES).tolist() == [0, 1, 1, 0]
    assert routing_accuracy(proba, SCORES) == pytest.approx(2 / 4)
    assert top_k_hit(proba, SCORES, 1) == pytest.approx(2 / 4)
    assert top_k_hit(proba, SCORES, 2) == pytest.approx(2 / 4)
    assert top_k_hit(proba, SCORES, 3) == pytest.approx(3 / 4)
    assert oracle_accuracy(SCORES) == pytest.approx(3 / 4)


def test_rows_with_no_evaluated_llm_are_skipped() -> None:
    scores = np.array([[NAN, NAN], [1.0, 0.0]])
    proba = np.array([[0.5, 0.5], [0.1, 0.9]])
    assert routing_choices(proba, scores).tolist() == [-1, 1]
    assert routing_accuracy(proba, scores) == 0.0


def test_baselines_chosen_on_train_scored_on_test() -> None:
    train = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    test = np.array([[0.0, 1.0], [1.0, 1.0]])
    assert best_single_accuracy(train, test) == (0, 0.5)
    # where the best LLM was not evaluated, the next in the training ranking answers
    gappy = np.array([[np.nan, 1.0], [1.0, 0.0]])
    assert best_single_accuracy(train, gappy) == (0, 1.0)
    tasks_train = ["a", "a", "b"]
    assert best_per_task_accuracy(train, tasks_train, test, ["b", "a"]) == 1.0
    assert best_per_task_choices(train, tasks_train, gappy, ["b", "a"]).tolist() == [1, 0]


def test_a_tie_is_broken_alike_by_the_single_llm_and_a_table_without_tasks() -> None:
    train = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # LLMs 0 and 1 tie at 0.5
    test = np.array([[1.0, 0.0, 0.0], [NAN, 1.0, 0.0], [NAN, NAN, NAN]])
    single = best_single_choices(train, test)
    assert single.tolist() == [0, 1, -1]  # the first of the tie; the next where it has no score
    assert best_per_task_choices(train, [None, None], test, [None] * 3).tolist() == [0, 1, -1]
    assert best_per_task_choices(train, [], test[:0], []).tolist() == []


def test_correctness_metrics_perfect_and_calibration() -> None:
    scores = np.array([[1.0, 0.0], [0.0, NAN]])
    perfect = np.array([[0.99, 0.01], [0.01, 0.5]])
    metrics = correctness_metrics(perfect, scores)
    assert metrics["accuracy"] == 1.0 and metrics["auroc"] == 1.0 and metrics["cells"] == 3
    assert metrics["brier"] == pytest.approx(1e-4)
    assert expected_calibration_error(np.full(10, 0.7), np.array([1.0] * 7 + [0.0] * 3)) == (
        pytest.approx(0.0)
    )
    assert expected_calibration_error(np.full(4, 0.9), np.zeros(4)) == pytest.approx(0.9)
