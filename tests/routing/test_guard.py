"""The guard: stay with the default LLM unless validation shows routing beats it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.routing import Router
from locus.routing.decision import RouteRequest, choose
from locus.routing.guard import Guard, fit_guard

LLMS = ["steady", "coder", "poet"]


def _specialists(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`steady` right 70% of the time everywhere; `coder` right 95% on a third of the queries
    and 20% elsewhere; `poet` never better. The router's P(correct) knows the coder's queries
    (0.9 there), with noise."""
    code = rng.random(n) < 1 / 3
    truth = np.column_stack(
        [
            rng.random(n) < 0.7,
            rng.random(n) < np.where(code, 0.95, 0.2),
            rng.random(n) < 0.3,
        ]
    ).astype(np.float64)
    proba = np.column_stack(
        [np.full(n, 0.7), np.where(code, 0.9, 0.2), np.full(n, 0.3)]
    ) + rng.normal(0, 0.02, (n, 3))
    return proba, truth


def test_real_specialists_clear_the_guard() -> None:
    proba, truth = _specialists(np.random.default_rng(0), 2000)
    guard = fit_guard(proba, truth, LLMS, default_column=0)
    assert math.isfinite(guard.margin) and guard.default == "steady"
    assert guard.validation["hit@1"] > guard.validation["default_hit@1"] + 0.05
    assert 0.2 < guard.validation["moved"] < 0.45  # about the coder's third
    # on fresh queries the guarded router keeps the gain
    test_proba, test_truth = _specialists(np.random.default_rng(1), 2000)
    choice = choose(test_proba, None, RouteRequest(), guard=(0, guard.margin))
    assert test_truth[np.arange(2000), choice].mean() > test_truth[:, 0].mean() + 0.05


def test_noise_keeps_every_query_on_the_default() -> None:
    rng = np.random.default_rng(2)
    truth = (rng.random((800, 3)) < [0.7, 0.6, 0.6]).astype(np.float64)
    proba = rng.uniform(0.5, 0.8, (800, 3))  # knows nothing about the queries
    guard = fit_guard(proba, truth, LLMS, default_column=0)
    assert guard.always_default and guard.validation["moved"] == 0.0
    assert guard.validation["unguarded_moved"] > 0.5
    assert guard.validation["unguarded_hit@1"] < guard.validation["default_hit@1"]
    assert guard.validation["hit@1"] == guard.validation["default_hit@1"]
    assert (choose(proba, None, RouteRequest(), guard=(0, guard.margin)) == 0).all()


def test_a_guard_round_trips_through_json() -> None:
    for margin in (0.05, math.inf):
        guard = Guard("steady", margin, {"queries": 10})
        again = Guard.from_dict(json.loads(json.dumps(guard.as_dict())))
        assert again == guard
    assert Guard("steady", math.inf).as_dict()["margin"] is None
    with pytest.raises(LocusInputError, match="margin must be >= 0"):
        Guard("steady", -0.1)


def test_bad_guard_inputs_are_clear_errors() -> None:
    proba, truth = _specialists(np.random.default_rng(0), 50)
    with pytest.raises(LocusInputError, match="must both be"):
        fit_guard(proba[:, :2], truth, LLMS, 0)
    with pytest.raises(LocusInputError, match="no column 3"):
        fit_guard(proba, truth, LLMS, 3)
    truth[:, 0] = np.nan
    with pytest.raises(LocusInputError, match="no validation score"):
        fit_guard(proba, truth, LLMS, 0)


class _Fixed(Router):
    llm_ids = LLMS

    def predict_proba(self, query_vectors: np.ndarray) -> np.ndarray:
        return np.tile([0.70, 0.74, 0.95], (len(query_vectors), 1))


def _guarded(guard: Guard) -> _Fixed:
    router = _Fixed()
    router.guard = guard
    return router


def test_route_holds_the_default_within_the_margin() -> None:
    router, query = _Fixed(), np.zeros((1, 4))
    assert router.route(query)[0].llm_id == "poet"
    # poet clears a 0.1 margin over steady; coder (0.04 better) would not
    decision = _guarded(Guard("steady", 0.1)).route(query)[0]
    assert decision.llm_id == "poet" and not decision.held
    held = _guarded(Guard("steady", 0.3)).route(query)[0]
    assert _guarded(Guard("steady", 0.3)).route(query, guarded=False)[0].llm_id == "poet"
    assert held.llm_id == "steady" and held.held and held.as_dict()["held"]
    # the fallback order behind the default is the usual one, utilities unchanged
    assert [c.llm_id for c in held.ranked] == ["steady", "poet", "coder"]
    assert held.ranked[0].utility == pytest.approx(0.70)
    # the default down: no guard, the best available answers
    down = _guarded(Guard("steady", math.inf)).route(query, unavailable=["steady"])[0]
    assert down.llm_id == "poet" and not down.held
    # a cost rule decides alone: the guard's margin was chosen for accuracy routing, and the
    # cost suite measures the rules unguarded (poet 0.95 - 0.3 x 1 = 0.65 < coder 0.74)
    costs = {"steady": 0.0, "coder": 0.0, "poet": 1.0}
    priced = _guarded(Guard("steady", 0.3)).route(query, costs=costs, cost_weight=0.3)[0]
    assert priced.llm_id == "coder" and not priced.held
