"""What the router's decision rules cost and keep on a split's queries (`locus evaluate` on a
workspace with per-query costs or catalog prices): `CostSavings`, by `savings`.

>>> result = evaluate_workspace(store, split="test")                # doctest: +SKIP
>>> result.savings.frontier["aiq"]  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from locus.data.table import ScoreTable
from locus.errors import LocusInputError
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.routing.decision import RouteRequest, choose
from locus.routing.frontier import frontier_metrics, frontier_of, hull

__all__ = ["BUDGET_SHARES", "QUALITY_SETTINGS", "CostSavings", "savings"]


@dataclass(frozen=True)
class CostSavings:
    """What the router's decision rules buy, on the split's queries that every LLM was scored
    and priced on: each LLM's expected cost per query from the artifact's cost model, charged
    its real cost.

    Attributes:
        queries: the queries measured.
        strong: the most accurate LLM on them: llm_id, accuracy, cost (mean USD per query).
        cheapest: the cheapest LLM on them, the same fields.
        rules: one row per rule and setting: rule, setting, accuracy, cost, cost_share (of the
            strong LLM's cost).
        frontier: `locus.routing.frontier.frontier_metrics` of the router's frontier (both
            rules swept); static_mix: the same of the best static mix of single LLMs.
        singles: {llm_id: (cost, accuracy)}; hull: the router's frontier [(cost, accuracy)].
        estimated: the costs are catalog prices on estimated tokens, not recorded costs.
    """

    queries: int
    estimated: bool
    strong: dict[str, Any]
    cheapest: dict[str, Any]
    rules: list[dict[str, Any]]
    frontier: dict[str, float]
    static_mix: dict[str, float]
    singles: dict[str, tuple[float, float]]
    hull: list[tuple[float, float]]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


QUALITY_SETTINGS = (1.0, 0.95, 0.9, 0.8)
BUDGET_SHARES = (0.25, 0.5)


def savings(
    router: WorkspaceRouter,
    table: ScoreTable,
    vectors: np.ndarray,
    rows: np.ndarray,
    columns: list[int],
    proba: np.ndarray,
    choice: np.ndarray,
    truth: np.ndarray,
) -> CostSavings | None:
    """`CostSavings` on the queries every LLM was scored and priced on (`columns`: the
    router's column of each LLM of `table`); None without costs. Real costs are the scores'
    own (cost_usd); without them, each LLM's catalog price on the query's estimated tokens,
    which is then also what the router expects (`estimated`)."""
    if table.costs is not None and router.cost_model is not None:
        real = table.costs[rows].astype(np.float64)
        predicted = router.expected_costs(vectors)[:, columns]
        estimated = False
    elif router.costs:  # catalog prices: the router's expected cost is the only cost known
        texts = [table.query_texts[i] or "" for i in rows] if table.query_texts else None
        real = predicted = router.expected_costs(vectors, texts)[:, columns]
        estimated = True
    else:
        return None
    complete = ~np.isnan(truth).any(axis=1) & ~np.isnan(real).any(axis=1)
    llm_ids = list(table.llm_ids)
    complete &= ~np.isnan(predicted).any(axis=1)
    if complete.sum() < 2:
        return None
    p, c, y, r = proba[complete], predicted[complete], truth[complete], real[complete]
    singles = {llm: (float(r[:, j].mean()), float(y[:, j].mean())) for j, llm in enumerate(llm_ids)}
    strong = max(singles, key=lambda llm: singles[llm][1])
    cheapest = min(singles, key=lambda llm: singles[llm][0])
    strong_cost = singles[strong][0]
    every = np.arange(len(p))

    def row(rule: str, setting: Any, chosen: np.ndarray) -> dict[str, Any]:
        cost = float(r[every, chosen].mean())
        return {
            "rule": rule,
            "setting": setting,
            "accuracy": float(y[every, chosen].mean()),
            "cost": cost,
            "cost_share": cost / strong_cost,
        }

    # accuracy routing as `locus route` does it: with the guard where the artifact has one
    rules = [row("accuracy", None, choice[complete])]
    rules += [row("quality", s, choose(p, c, RouteRequest(quality=s))) for s in QUALITY_SETTINGS]
    for share in BUDGET_SHARES:
        try:
            weight = router.cost_weight_for_budget(share * strong_cost)
        except LocusInputError:
            continue  # below the cheapest routing, or no validation queries kept
        resolved = RouteRequest(budget=share * strong_cost).with_cost_weight(weight)
        rules.append(row("budget", share * strong_cost, choose(p, c, resolved)))
    curve = frontier_of(p, c, y, r)
    points = np.array(list(singles.values()))
    high = float(points[:, 0].max())
    return CostSavings(
        queries=int(complete.sum()),
        estimated=estimated,
        strong={"llm_id": strong, "accuracy": singles[strong][1], "cost": strong_cost},
        cheapest={
            "llm_id": cheapest,
            "accuracy": singles[cheapest][1],
            "cost": singles[cheapest][0],
        },
        rules=rules,
        frontier=frontier_metrics(curve, singles[strong], singles[cheapest], high),
        static_mix=frontier_metrics(hull(points), singles[strong], singles[cheapest], high),
        singles=singles,
        hull=[(float(x), float(a)) for x, a in curve],
    )
