"""One decision rule: what `Router.route` chooses is what every sweep, evaluation and benchmark
counts (`locus.routing.decision.choose`), ties included, for random P(correct), costs and
requests; and `RouteRequest` is validated once, with errors that name the option."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from locus import metrics
from locus.errors import LocusInputError
from locus.routing.decision import RouteRequest, choose, rank
from locus.routing.guard import Guard
from locus.routing.router import Router

LLMS = ("a", "b", "c", "d", "e")


class _Table(Router):
    """P(correct) read from a table: query vector [i] is row i."""

    llm_ids = LLMS

    def __init__(self, proba: np.ndarray, guard: Guard | None) -> None:
        self.proba, self.guard = proba, guard

    def predict_proba(self, query_vectors: np.ndarray) -> np.ndarray:
        return self.proba[np.asarray(query_vectors[:, 0], dtype=np.int64)]


# few distinct values, so that ties in P(correct), utility and cost are common
LEVELS = st.sampled_from([0.1, 0.4, 0.5, 0.6, 0.9])
PRICES = st.sampled_from([0.0, 0.001, 0.002, 0.01])


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, RouteRequest, Guard | None]:
    n = draw(st.integers(1, 6))
    proba = np.array(draw(st.lists(LEVELS, min_size=5 * n, max_size=5 * n))).reshape(n, 5)
    costs = np.array(draw(st.lists(PRICES, min_size=5 * n, max_size=5 * n))).reshape(n, 5)
    rule = draw(st.sampled_from(["accuracy", "cost_weight", "quality", "max_cost"]))
    options: dict[str, object] = {"top": draw(st.integers(1, 5))}
    if rule == "cost_weight":
        options["cost_weight"] = draw(st.sampled_from([0.5, 10.0, 50.0, 200.0]))
    elif rule == "quality":
        options["quality"] = draw(st.sampled_from([0.0, 0.5, 0.8, 0.95, 1.0]))
    elif rule == "max_cost":
        options["max_cost"] = 0.01  # every row keeps a candidate
    down = draw(st.sets(st.sampled_from(LLMS), max_size=3))
    options["unavailable"] = down
    options["guarded"] = draw(st.booleans())
    guard = None
    if draw(st.booleans()):
        margin = draw(st.sampled_from([0.0, 0.05, 0.3, math.inf]))
        guard = Guard(draw(st.sampled_from(LLMS)), margin)
    return proba, costs, RouteRequest(**options), guard  # type: ignore[arg-type]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(cases())
def test_route_chooses_what_the_sweeps_count(
    case: tuple[np.ndarray, np.ndarray, RouteRequest, Guard | None],
) -> None:
    proba, costs, request, guard = case
    router = _Table(proba, guard)
    vectors = np.arange(len(proba), dtype=np.float32)[:, None]
    decisions = router.route(vectors, request, costs=costs)
    keep = [j for j, llm in enumerate(LLMS) if llm not in request.unavailable]
    names = [LLMS[j] for j in keep]
    bound = None
    if guard is not None and guard.default in names:
        bound = (names.index(guard.default), guard.margin)
    chosen = choose(proba[:, keep], costs[:, keep], request, guard=bound)
    assert [d.llm_id for d in decisions] == [names[c] for c in chosen]
    ranked = rank(proba[:, keep], costs[:, keep], request, guard=bound)
    assert (ranked.order[:, 0] == chosen).all()
    for d, order in zip(decisions, ranked.order, strict=True):
        assert [c.llm_id for c in d.ranked] == [names[c] for c in order if c >= 0]


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.lists(LEVELS, min_size=5, max_size=5), min_size=1, max_size=6), st.data())
def test_evaluation_hit_at_1_counts_the_accuracy_rule(
    rows: list[list[float]], data: st.DataObject
) -> None:
    proba = np.array(rows)
    truth = np.array(
        data.draw(
            st.lists(
                st.sampled_from([0.0, 1.0, math.nan]), min_size=proba.size, max_size=proba.size
            )
        )
    ).reshape(proba.shape)
    evaluated = ~np.isnan(truth)
    assert (
        metrics.routing_choices(proba, truth)
        == choose(proba, None, RouteRequest(), allowed=evaluated)
    ).all()


def test_a_quality_tie_on_cost_goes_to_the_higher_p_correct_then_the_first() -> None:
    proba = np.array([[0.9, 0.7, 0.8, 0.8]])
    costs = np.array([[1.0, 0.1, 0.1, 0.1]])
    request = RouteRequest(quality=0.5)
    assert choose(proba, costs, request).tolist() == [2]
    assert rank(proba, costs, request).order[0].tolist() == [2, 3, 1]


def test_the_guard_binds_accuracy_routing_only() -> None:
    proba, costs = np.array([[0.6, 0.7]]), np.array([[0.0, 0.0]])
    assert choose(proba, costs, RouteRequest(), guard=(0, 0.2)).tolist() == [0]
    assert choose(proba, costs, RouteRequest(guarded=False), guard=(0, 0.2)).tolist() == [1]
    assert choose(proba, costs, RouteRequest(quality=1.0), guard=(0, 0.2)).tolist() == [1]
    # an infinite margin on a default that may not be chosen leaves the others (no NaN)
    allowed = np.array([[False, True]])
    assert choose(proba, None, RouteRequest(), allowed=allowed, guard=(0, math.inf)).tolist() == [1]


def test_a_request_is_checked_once_with_errors_that_name_the_option() -> None:
    assert RouteRequest.parse_rule("quality=0.95") == RouteRequest(quality=0.95)
    assert RouteRequest.parse_rule("budget=0.002", top=1).budget == 0.002
    assert RouteRequest(cost_weight=10).rule_name == "cost=10" and RouteRequest().rule == ""
    assert RouteRequest(unavailable=["b", "a"]).unavailable == frozenset({"a", "b"})
    assert RouteRequest.of(RouteRequest(top=2), quality=0.9) == RouteRequest(top=2, quality=0.9)
    resolved = RouteRequest(budget=0.01).with_cost_weight(3.0)
    assert resolved.budget is None and resolved.cost_weight == 3.0 and not resolved.guarded
    for text in ("quality", "quality=x", "speed=1", "cost=", "=3"):
        with pytest.raises(LocusInputError, match="expected cost=W"):
            RouteRequest.parse_rule(text)
    bad = [
        ({"quality": 1.01}, "quality must"),
        ({"quality": math.nan}, "quality must"),
        ({"budget": 0.0}, "budget must"),
        ({"budget": math.inf}, "budget must"),
        ({"cost_weight": -1.0}, "cost_weight must"),
        ({"cost_weight": math.inf}, "cost_weight must"),
        ({"top": 0}, "top must"),
        ({"max_cost": -1.0}, "max_cost must"),
        ({"unavailable": "a"}, "unavailable must"),
        ({"quality": 0.9, "budget": 0.01}, "choose one decision rule: quality or budget"),
    ]
    for options, message in bad:
        with pytest.raises(LocusInputError, match=message):
            RouteRequest(**options)  # type: ignore[arg-type]
    with pytest.raises(LocusInputError, match="unknown routing option 'qualty'"):
        RouteRequest.of(qualty=0.9)
    with pytest.raises(LocusInputError, match="resolve it"):
        choose(np.ones((1, 2)), np.ones((1, 2)), RouteRequest(budget=0.1))
