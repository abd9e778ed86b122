"""Decision rules (`locus.routing.decision`) and the cost model (`locus.routing.costs`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from locus.errors import LocusArtifactError, LocusInputError, LocusNotFittedError
from locus.routing.costs import CostModel
from locus.routing.decision import RouteRequest, choose, tune_cost_weight


def test_picks_follow_the_rules_on_planted_rows() -> None:
    proba = np.array([[0.90, 0.88, 0.40], [0.90, 0.50, 0.45], [0.20, 0.21, 0.19]])
    costs = np.array([[10.0, 1.0, 0.1], [10.0, 1.0, 0.1], [10.0, 1.0, 0.1]])
    assert choose(proba, costs, RouteRequest(cost_weight=0.0)).tolist() == [0, 0, 1]
    assert choose(proba, costs, RouteRequest(cost_weight=1.0)).tolist() == [2, 2, 2]
    # within 95% of the best: row 0 the mid LLM (0.88 >= 0.855), row 1 the best only, row 2
    # the mid one again (0.19 < 0.95 x 0.21)
    assert choose(proba, costs, RouteRequest(quality=0.95)).tolist() == [1, 0, 1]
    assert choose(proba, costs, RouteRequest(quality=0.4)).tolist() == [2, 2, 2]
    unknown = costs.copy()
    unknown[:, 2] = np.nan  # never chosen without a price
    assert choose(proba, unknown, RouteRequest(quality=0.4)).tolist() == [1, 1, 1]


def test_a_budget_is_the_smallest_cost_weight_that_keeps_under_it() -> None:
    rng = np.random.default_rng(0)
    proba = rng.uniform(0.3, 0.9, size=(400, 4))
    costs = np.tile([0.01, 0.003, 0.001, 0.0002], (400, 1)) * rng.uniform(0.8, 1.2, (400, 4))
    rows = np.arange(400)
    for budget in (0.008, 0.004, 0.001, 0.0003):
        weight = tune_cost_weight(proba, costs, budget)
        spent = costs[rows, choose(proba, costs, RouteRequest(cost_weight=weight))].mean()
        assert spent <= budget
        if weight > 0:  # a little less weight overspends: the smallest that fits
            less = RouteRequest(cost_weight=weight * 0.98)
            slack = costs[rows, choose(proba, costs, less)].mean()
            assert slack > budget
    assert tune_cost_weight(proba, costs, 1.0) == 0.0  # accuracy routing already fits
    with pytest.raises(LocusInputError, match="below the cheapest routing"):
        tune_cost_weight(proba, costs, 0.0001)
    with pytest.raises(LocusInputError, match="differ"):
        tune_cost_weight(proba, costs[:, :3], 0.01)


def test_cost_model_predicts_from_neighbours_and_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    centres = np.eye(3, 16, dtype=np.float32)
    task = rng.integers(0, 3, size=300)
    vectors = centres[task] + rng.normal(0, 0.05, (300, 16)).astype(np.float32)
    per_task = np.array([[1.0, 0.1], [5.0, 0.2], [2.0, 0.4]])  # (task, llm) USD
    costs = per_task[task] * rng.uniform(0.9, 1.1, (300, 2))
    costs[:50, 1] = np.nan  # unknown cells are skipped
    model = CostModel(k=10).fit(vectors[:200], costs[:200], ("dear", "cheap"))
    predicted = model.predict(vectors[200:])
    assert np.allclose(predicted, per_task[task[200:]], rtol=0.1)
    assert model.mean_costs_ is not None and model.mean_costs_[0] == pytest.approx(
        costs[:200, 0].mean()
    )
    loaded = CostModel.load(model.save(tmp_path / "costs"))
    np.testing.assert_array_equal(loaded.predict(vectors[200:]), predicted)
    assert loaded.llm_ids_ == ("dear", "cheap") and loaded.k == 10
    CostModel.save_validation(tmp_path / "costs", vectors[:7])
    kept = CostModel.validation_vectors(tmp_path / "costs")
    assert kept is not None and kept.shape == (7, 16)
    assert CostModel.validation_vectors(tmp_path) is None
    with pytest.raises(LocusNotFittedError):
        CostModel().predict(vectors[:1])
    with pytest.raises(LocusInputError, match="costs must be >= 0"):
        CostModel().fit(vectors[:3], -np.ones((3, 2)), ("a", "b"))
    with pytest.raises(LocusInputError, match="none is known"):
        CostModel().fit(vectors[:3], np.full((3, 2), np.nan), ("a", "b"))
    with pytest.raises(LocusArtifactError, match="not a saved router"):
        CostModel.load(tmp_path / "nothing")
