"""The contract every `Router` must pass, run on every implementation.

A new router joins by adding a `RouterCase` to `CASES`: a function that fits it on the planted
workspace's training queries (validation queries for its choices) and returns it. The planted
pool has three groups of specialists (math, law, biology); each answers its own task right 90%
of the time and the others 20%. Routers that read the query (`query_aware`) must find the
specialists; the query-blind ones (random, best single) must do exactly what they say.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from locus.errors import LocusInputError, LocusNotFittedError, LocusNotFoundError
from locus.locus import Locus
from locus.nn.factor_models import LearnedBaselineConfig
from locus.pipeline import WorkspaceTable, workspace_table
from locus.routing import (
    BASELINE_ROUTERS,
    Evidence,
    LocusRouter,
    OracleRouter,
    Router,
    StackedRouter,
    load_router,
    make_baseline,
    router_artifact,
)
from locus.routing.guard import Guard
from locus.store import Store
from tests.nn.conftest import small_config
from tests.planted_workspace import build_planted_workspace


@dataclass(frozen=True)
class Planted:
    data: WorkspaceTable
    folder: Path


def _fit_locus(planted: Planted) -> Router:
    data = planted.data
    model = Locus(small_config())
    model.fit(
        data.table,
        data.vectors,
        data.rows("train"),
        data.rows("val"),
        text_encoder_name=data.encoder,
    )
    return LocusRouter(model)


def _load_locus(path: Path) -> Router:
    return LocusRouter.load(path)


def _evidence(planted: Planted, split: str) -> Evidence:
    return Evidence.from_table(planted.data.table, planted.data.vectors, planted.data.rows(split))


def _fit_baseline(kind: str, **settings: object) -> Callable[[Planted], Router]:
    def fit(planted: Planted) -> Router:
        router = make_baseline(kind, **settings)
        return router.fit(_evidence(planted, "train"), _evidence(planted, "val"))

    return fit


def _fit_oracle(planted: Planted) -> Router:
    # the oracle is given the truth of the queries it is asked about
    return OracleRouter().fit(Evidence.from_table(planted.data.table, planted.data.vectors))


def _fit_stacked(planted: Planted) -> Router:
    """The router `locus fit` keeps: LOCUS stacked with kNN votes, and the guard."""
    locus = _fit_locus(planted)
    assert isinstance(locus, LocusRouter)
    return StackedRouter.fit(locus, _evidence(planted, "train"), _evidence(planted, "val"))


_SMALL = LearnedBaselineConfig(dim=16, hidden=32, min_steps=300, seed=0)


def _save(router: Router, path: Path) -> object:
    return router.save(path)


def _save_artifact(router: Router, path: Path) -> object:
    """The fitted router lives in an artifact folder, beside LOCUS's networks."""
    assert isinstance(router, StackedRouter)
    return router_artifact.save(path, router)


@dataclass(frozen=True)
class RouterCase:
    name: str
    fit: Callable[[Planted], Router]
    load: Callable[[Path], Router] = load_router
    query_aware: bool = True
    save: Callable[[Router, Path], object] = _save


CASES = [
    RouterCase("locus", _fit_locus, _load_locus),
    RouterCase("stacked", _fit_stacked, save=_save_artifact),
    RouterCase("random", _fit_baseline("random", seed=3), query_aware=False),
    RouterCase("best-single", _fit_baseline("best-single"), query_aware=False),
    RouterCase("per-task", _fit_baseline("per-task")),
    RouterCase("oracle", _fit_oracle),
    RouterCase("knn", _fit_baseline("knn")),
    RouterCase("cluster", _fit_baseline("cluster")),
    RouterCase("mf", _fit_baseline("mf", config=_SMALL)),
    RouterCase("irt", _fit_baseline("irt", config=_SMALL)),
]


def test_every_baseline_is_in_the_contract_suite() -> None:
    assert set(BASELINE_ROUTERS) <= {case.name for case in CASES}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    folder = tmp_path_factory.mktemp("contract")
    path = build_planted_workspace(folder / "ws")
    with Store.open(path) as store:
        data = workspace_table(store)
    return Planted(data=data, folder=folder)


@pytest.fixture(scope="module", params=CASES, ids=[case.name for case in CASES])
def case(request: pytest.FixtureRequest, planted: Planted) -> tuple[RouterCase, Router]:
    return request.param, request.param.fit(planted)


def _test_vectors(planted: Planted) -> tuple[np.ndarray, np.ndarray]:
    rows = planted.data.rows("test")
    return planted.data.vectors[rows], planted.data.table.scores[rows]


def _costs(router: Router) -> dict[str, float]:
    """Math specialists are expensive, everyone else cheap."""
    return {llm: (1.0 if llm.startswith("math-") else 0.01) for llm in router.llm_ids}


def test_predict_proba_shape_and_range(case: tuple[RouterCase, Router], planted: Planted) -> None:
    _, router = case
    vectors, _ = _test_vectors(planted)
    proba = router.predict_proba(vectors)
    assert proba.shape == (len(vectors), len(router.llm_ids))
    assert np.isfinite(proba).all() and (proba >= 0).all() and (proba <= 1).all()


def test_planted_specialists_beat_the_best_single_llm(
    case: tuple[RouterCase, Router], planted: Planted
) -> None:
    spec, router = case
    vectors, truth = _test_vectors(planted)
    decisions = router.route(vectors, top=1)
    column = {llm: i for i, llm in enumerate(planted.data.table.llm_ids)}
    chosen = [column[d.llm_id] for d in decisions]
    routed = np.mean([truth[i, c] for i, c in enumerate(chosen)])
    train = planted.data.table.scores[planted.data.rows("train")]
    best = int(np.nanargmax(np.nanmean(train, axis=0)))
    best_single = np.nanmean(truth[:, best])
    if spec.query_aware:
        assert routed > best_single + 0.2, (routed, best_single)
    elif spec.name == "best-single":
        assert set(chosen) == {best}
    else:  # random: every LLM chosen, none most of the time
        counts = np.bincount(chosen, minlength=len(column))
        assert (counts > 0).all() and counts.max() < 0.25 * len(chosen)


def test_ranked_candidates_are_the_fallback_order(
    case: tuple[RouterCase, Router], planted: Planted
) -> None:
    _, router = case
    vectors, _ = _test_vectors(planted)
    proba = router.predict_proba(vectors[:10])
    for row, decision in enumerate(router.route(vectors[:10], top=4)):
        assert len(decision.ranked) == 4 and decision.ranked[0].llm_id == decision.llm_id
        utilities = [c.utility for c in decision.ranked]
        assert utilities == sorted(utilities, reverse=True)
        best = router.llm_ids[int(np.argmax(proba[row]))]
        assert decision.llm_id == best


def test_cost_knob_moves_choices_to_cheaper_llms(
    case: tuple[RouterCase, Router], planted: Planted
) -> None:
    _, router = case
    vectors, _ = _test_vectors(planted)
    costs = _costs(router)
    spent = []
    for weight in (0.0, 0.05, 0.5, 5.0):
        decisions = router.route(vectors, top=1, costs=costs, cost_weight=weight)
        spent.append(sum(costs[d.llm_id] for d in decisions))
    assert spent == sorted(spent, reverse=True) and spent[-1] < spent[0]
    assert spent[-1] == pytest.approx(0.01 * len(vectors))  # at a high weight: only cheap LLMs
    capped = router.route(vectors, top=len(router.llm_ids), costs=costs, max_cost=0.5)
    assert all(not c.llm_id.startswith("math-") for d in capped for c in d.ranked)
    assert all(len(d.ranked) == len(router.llm_ids) - 4 for d in capped)  # the fallback order
    # per-query costs: an LLM over max_cost on one query only is left out there only
    matrix = np.tile([costs[llm] for llm in router.llm_ids], (len(vectors), 1))
    matrix[0, :] = 0.01
    mixed = router.route(vectors, top=len(router.llm_ids), costs=matrix, max_cost=0.5)
    assert len(mixed[0].ranked) == len(router.llm_ids) and len(mixed[1].ranked) < len(
        mixed[0].ranked
    )
    with pytest.raises(LocusInputError, match="raise max_cost"):
        router.route(vectors, costs=costs, max_cost=0.001)
    with pytest.raises(LocusInputError, match="needs each LLM's cost per query"):
        router.route(vectors, cost_weight=1.0)
    with pytest.raises(LocusInputError, match="cost for every candidate"):
        router.route(vectors, costs={"math-0": 1.0}, cost_weight=1.0)


def test_quality_rule_takes_the_cheapest_llm_within_the_share_of_the_best(
    case: tuple[RouterCase, Router], planted: Planted
) -> None:
    _, router = case
    vectors, _ = _test_vectors(planted)
    costs = _costs(router)
    proba = np.asarray(router.predict_proba(vectors), dtype=np.float64)
    spent = []
    for share in (1.0, 0.95, 0.8, 0.5, 1e-3):
        decisions = router.route(vectors, top=len(router.llm_ids), costs=costs, quality=share)
        for row, decision in enumerate(decisions):
            best = proba[row].max()
            within = [j for j, p in enumerate(proba[row]) if p >= share * best - 1e-9]
            cheapest = min(costs[router.llm_ids[j]] for j in within)
            assert decision.p_correct >= share * best - 1e-6
            assert costs[decision.llm_id] == pytest.approx(cheapest)
            # the fallback order: the LLMs within the share by cost, then the rest
            shown = [c.llm_id for c in decision.ranked[: len(within)]]
            assert sorted(shown) == sorted(router.llm_ids[j] for j in within)
        spent.append(sum(costs[d.llm_id] for d in decisions))
    assert spent == sorted(spent, reverse=True)
    # per-query costs (n_queries, n_llms): the same choices as the mapping they repeat
    matrix = np.tile([costs[llm] for llm in router.llm_ids], (len(vectors), 1))
    same = router.route(vectors, costs=matrix, quality=0.8)
    assert [d.llm_id for d in same] == [
        d.llm_id for d in router.route(vectors, costs=costs, quality=0.8)
    ]
    for bad in (-0.5, 1.5, float("nan")):
        with pytest.raises(LocusInputError, match=r"quality must lie in \[0, 1\]"):
            router.route(vectors, costs=costs, quality=bad)
    cheapest = min(costs.values())  # quality 0: a cheapest LLM
    assert {costs[d.llm_id] for d in router.route(vectors, costs=costs, quality=0.0)} == {cheapest}
    with pytest.raises(LocusInputError, match="choose one decision rule"):
        router.route(vectors, costs=costs, quality=0.9, cost_weight=1.0)
    with pytest.raises(
        LocusInputError, match=r"quality needs a cost for every candidate.*`locus import llms`"
    ):
        router.route(vectors, costs={"math-0": 1.0}, quality=0.9)
    with pytest.raises(LocusInputError, match=r"shape \(2, 3\)"):
        router.route(vectors, costs=np.ones((2, 3)), quality=0.9)


def test_unavailable_llms_are_never_chosen(
    case: tuple[RouterCase, Router], planted: Planted
) -> None:
    _, router = case
    vectors, _ = _test_vectors(planted)
    down = [llm for llm in router.llm_ids if llm.startswith(("math-", "law-0"))]
    decisions = router.route(vectors, top=len(router.llm_ids), unavailable=down)
    assert all(c.llm_id not in down for d in decisions for c in d.ranked)
    assert all(len(d.ranked) == len(router.llm_ids) - len(down) for d in decisions)
    with pytest.raises(LocusInputError, match="every LLM is unavailable"):
        router.route(vectors, unavailable=list(router.llm_ids))
    with pytest.raises(LocusNotFoundError, match="not in the pool"):
        router.route(vectors, unavailable=["gpt-9"])


def test_bad_knobs_are_clear_errors(case: tuple[RouterCase, Router], planted: Planted) -> None:
    _, router = case
    vectors, _ = _test_vectors(planted)
    with pytest.raises(LocusInputError, match="top must be"):
        router.route(vectors, top=0)
    with pytest.raises(LocusInputError, match="cost_weight"):
        router.route(vectors, cost_weight=-1.0)


def test_save_load_gives_identical_choices(
    case: tuple[RouterCase, Router], planted: Planted, tmp_path: Path
) -> None:
    spec, router = case
    vectors, _ = _test_vectors(planted)
    spec.save(router, tmp_path / spec.name)
    loaded = spec.load(tmp_path / spec.name)
    assert list(loaded.llm_ids) == list(router.llm_ids)
    np.testing.assert_array_equal(loaded.predict_proba(vectors), router.predict_proba(vectors))
    costs = _costs(router)
    assert [d.llm_id for d in loaded.route(vectors, costs=costs, cost_weight=0.3)] == [
        d.llm_id for d in router.route(vectors, costs=costs, cost_weight=0.3)
    ]


@pytest.mark.parametrize("kind", ["random", "best-single", "per-task", "knn", "cluster"])
def test_fit_returns_the_router_and_unfitted_use_is_a_clear_error(
    kind: str, planted: Planted
) -> None:
    """scikit-learn's discipline, for every baseline (MF and IRT: the same base class, too
    slow to fit twice here): `fit` returns self; predicting before it says to call it."""
    router = make_baseline(kind)
    vectors, _ = _test_vectors(planted)
    with pytest.raises(LocusNotFittedError, match="not fitted; call fit"):
        router.predict_proba(vectors)
    with pytest.raises(LocusNotFittedError, match="not fitted; call fit"):
        router.route(vectors)
    assert router.fit(_evidence(planted, "train"), _evidence(planted, "val")) is router


def test_a_guard_holds_every_router_on_its_default(
    case: tuple[RouterCase, Router], planted: Planted
) -> None:
    """An infinite margin keeps accuracy routing on the guard's default, for every router;
    `guarded=False` and a cost rule route as if there were no guard."""
    _, router = case
    vectors, _ = _test_vectors(planted)
    before = router.guard
    default = router.llm_ids[-1]
    unguarded = [d.llm_id for d in router.route(vectors, guarded=False)]
    try:
        router.guard = Guard(default, float("inf"))
        assert {d.llm_id for d in router.route(vectors)} == {default}
        assert [d.llm_id for d in router.route(vectors, guarded=False)] == unguarded
        costs = _costs(router)
        priced = router.route(vectors, costs=costs, cost_weight=1.0)
        router.guard = None
        assert [d.llm_id for d in priced] == [
            d.llm_id for d in router.route(vectors, costs=costs, cost_weight=1.0)
        ]
    finally:
        router.guard = before
