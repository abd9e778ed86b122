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

__all__ = [
    "BUDGET_SHARES",
    "QUALITY_SETTINGS",
    "SMALL_SAVINGS",
    "CostSavings",
    "rule_row",
    "savings",
]

# on fewer queries than this the frontier's figures get standard errors (`CostSavings.spread`):
# a cost share read off 27 queries moves by tens of points from one sample to the next
SMALL_SAVINGS = 200
BOOTSTRAPS = 200  # resamples of the queries behind those standard errors


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
            strong LLM's cost), their standard errors over the queries (accuracy_se,
            cost_se), and for a budget rule `over_budget`: the share by which its mean cost
            on these queries exceeds the budget (None where it kept to it; the budget is
            tuned on the fit's validation queries, so it can overspend on others).
        frontier: `locus.routing.frontier.frontier_metrics` of the router's frontier (both
            rules swept); static_mix: the same of the best static mix of single LLMs.
        singles: {llm_id: (cost, accuracy)}; hull: the router's frontier [(cost, accuracy)].
        estimated: the costs are catalog prices on estimated tokens, not recorded costs.
        spread: on fewer than `SMALL_SAVINGS` queries, the standard error of each frontier
            figure (aiq, cost_share_at_100, cost_share_at_95) over bootstrap resamples of
            the queries, and `reached_100`: the share of resamples on which the router's
            frontier reaches the most accurate LLM at all; None on more queries.
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
    spread: dict[str, float] | None = None

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
        return rule_row(rule, setting, y[every, chosen], r[every, chosen], strong_cost)

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
    spread = _spread(p, c, y, r) if len(p) < SMALL_SAVINGS else None
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
        spread=spread,
    )


def rule_row(
    rule: str, setting: Any, hits: np.ndarray, spent: np.ndarray, strong_cost: float
) -> dict[str, Any]:
    """One rule's row of `CostSavings.rules` from its choice's `hits` and USD `spent` on each
    query; a budget rule (`setting` its budget) that spent more on them says by how much.

    >>> row = rule_row("budget", 0.004, np.array([1.0, 0.0]), np.array([0.003, 0.0062]), 0.01)
    >>> round(row["over_budget"], 2), row["cost_share"]
    (0.15, 0.46)
    """
    cost = float(spent.mean())
    over = cost / setting - 1.0 if rule == "budget" and cost > setting else None
    root_n = np.sqrt(len(spent))
    return {
        "rule": rule,
        "setting": setting,
        "accuracy": float(hits.mean()),
        "cost": cost,
        "cost_share": round(cost / strong_cost, 12),
        "accuracy_se": float(hits.std(ddof=1) / root_n) if len(hits) > 1 else float("nan"),
        "cost_se": float(spent.std(ddof=1) / root_n) if len(spent) > 1 else float("nan"),
        "over_budget": over,
    }


def _spread(p: np.ndarray, c: np.ndarray, y: np.ndarray, r: np.ndarray) -> dict[str, float]:
    """The standard errors of the frontier's figures over bootstrap resamples of the queries
    (each resample's strong and cheapest LLM and frontier read afresh), and the share of
    resamples whose frontier reaches the strong LLM's accuracy."""
    rng = np.random.default_rng(0)
    figures: dict[str, list[float]] = {"aiq": [], "cost_share_at_100": [], "cost_share_at_95": []}
    for _ in range(BOOTSTRAPS):
        pick = rng.integers(0, len(p), len(p))
        costs, accuracies = r[pick].mean(axis=0), y[pick].mean(axis=0)
        strong, cheapest = int(np.argmax(accuracies)), int(np.argmin(costs))
        metrics = frontier_metrics(
            frontier_of(p[pick], c[pick], y[pick], r[pick]),
            (float(costs[strong]), float(accuracies[strong])),
            (float(costs[cheapest]), float(accuracies[cheapest])),
            float(costs.max()),
        )
        for name, values in figures.items():
            values.append(metrics[name])
    out = {}
    for name, values in figures.items():
        finite = np.array([v for v in values if np.isfinite(v)])
        out[f"{name}_se"] = float(finite.std(ddof=1)) if len(finite) > 1 else float("nan")
    out["reached_100"] = float(np.isfinite(figures["cost_share_at_100"]).mean())
    return out
