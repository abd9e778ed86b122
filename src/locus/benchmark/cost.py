"""The `cost` suite: accuracy against dollars as the cost weight sweeps (RouterBench's protocol).

Every method is fitted on all training scores (the same fold per seed as the anchors suite's
"all", so fits are shared through the cache). On the test queries every LLM was scored and
priced on, a router picks, per query, the LLM with the best P(correct) - w x expected cost,
where an LLM's expected cost is its mean cost per training query (what a router knows before
answering); the pick is charged its real cost on that query. Sweeping w from 0 to "only the
cheapest" traces (mean cost, mean accuracy) points; per router:

- the non-decreasing convex hull of its points, and its area (AIQ, RouterBench's figure): the
  mean of the hull's accuracy over the cost range from the cheapest to the most expensive
  single LLM (points beyond the range are clipped, the hull is flat after its last point);
- the cheapest cost at which its hull reaches the most accurate single LLM's accuracy;
- its hull's accuracy at the cheapest single LLM's cost;
- against the best static mix of LLMs at equal cost: the convex hull of the single LLMs'
  (cost, accuracy) points, which any mix of two LLMs lies on or under.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from locus._progress import ProgressFactory, no_progress
from locus.benchmark._stats import mean_sd
from locus.benchmark.anchors import evidence_fold, fitted_proba
from locus.benchmark.methods import METHODS
from locus.errors import LocusInputError
from locus.pipeline import WorkspaceTable

__all__ = ["COST_METHODS", "hull", "hull_accuracy_at", "run_cost"]

COST_METHODS = ("locus", "locus+knn", "knn", "cluster", "mf", "irt", "per-task", "best-single")


def hull(points: np.ndarray) -> np.ndarray:
    """The non-decreasing upper convex hull of (cost, accuracy) points, sorted by cost: no point
    on it is beaten by a cheaper one, and mixing two routers reaches every point on it."""
    order = np.lexsort((-points[:, 1], points[:, 0]))
    kept: list[np.ndarray] = []
    for point in points[order]:
        if kept and point[1] <= kept[-1][1]:
            continue  # costs more, not more accurate
        while len(kept) >= 2:
            (x1, y1), (x2, y2) = kept[-2], kept[-1]
            # drop the middle point if it lies on or under the chord to the new point
            if (y2 - y1) * (point[0] - x1) <= (point[1] - y1) * (x2 - x1):
                kept.pop()
            else:
                break
        kept.append(point)
    return np.array(kept)


def hull_accuracy_at(curve: np.ndarray, cost: float) -> float:
    """Accuracy of the hull at `cost` (NaN below its cheapest point, flat after its last)."""
    if cost < curve[0, 0] * (1 - 1e-9):  # equal costs summed in another order still count
        return float("nan")
    return float(np.interp(cost, curve[:, 0], curve[:, 1]))


def _area(curve: np.ndarray, low: float, high: float) -> float:
    """Mean hull accuracy over [low, high] (0 where the hull has no point yet)."""
    grid = np.linspace(low, high, 512)
    values = np.where(grid < curve[0, 0], 0.0, np.interp(grid, curve[:, 0], curve[:, 1]))
    if high <= low:
        return float(values[0])
    area = np.sum((values[1:] + values[:-1]) / 2 * np.diff(grid))  # trapezoid rule
    return float(area / (high - low))


def _cost_to_reach(curve: np.ndarray, accuracy: float) -> float:
    """Cheapest cost at which the hull reaches `accuracy` (NaN if it never does)."""
    above = np.flatnonzero(curve[:, 1] >= accuracy)
    if len(above) == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(curve[0, 0])
    (x1, y1), (x2, y2) = curve[i - 1], curve[i]
    return float(x1 + (accuracy - y1) * (x2 - x1) / (y2 - y1))


def _sweep(
    proba: np.ndarray, expected: np.ndarray, truth: np.ndarray, real: np.ndarray
) -> np.ndarray:
    """(cost, accuracy) per cost weight, from 0 to past the weight that picks the cheapest."""
    spread = np.ptp(expected) or 1.0
    weights = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 61) / spread])
    available = ~np.isnan(truth)
    points = []
    for weight in weights:
        utility = np.where(available, proba - weight * expected[None, :], -np.inf)
        pick = np.argmax(utility, axis=1)
        rows = np.arange(len(pick))
        points.append((float(np.nanmean(real[rows, pick])), float(np.mean(truth[rows, pick]))))
    return np.array(points)


def run_cost(
    data: WorkspaceTable,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    methods: Sequence[str] = COST_METHODS,
    cache_dir: Path | None = None,
    locus_settings: dict[str, Any] | None = None,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Run the suite on a pool with per-query costs; a JSON-ready dict.

    Raises:
        LocusInputError: the pool has no costs, or an unknown method.
    """
    costs = data.table.costs
    if costs is None or np.isnan(costs).all():
        raise LocusInputError(
            "the cost suite needs per-query costs; import scores with a cost_usd column "
            "(for example `locus import routerbench`)"
        )
    unknown = [m for m in methods if m not in METHODS or m in ("random", "oracle")]
    if unknown:
        raise LocusInputError(
            f"method {unknown[0]!r} is not in the cost suite; expected some of "
            f"{', '.join(COST_METHODS)}"
        )
    if "per-task" in methods and all(t is None for t in data.table.tasks):
        methods = [m for m in methods if m != "per-task"]
    train, test = data.rows("train"), data.rows("test")
    # queries every LLM was scored and priced on: a single LLM and a router are then charged
    # and scored on the same queries
    complete = ~np.isnan(data.table.scores[test]).any(axis=1) & ~np.isnan(costs[test]).any(axis=1)
    if not complete.any():
        raise LocusInputError(
            "the cost suite needs test queries that every LLM was scored and priced on; none is"
        )
    test = test[complete]
    truth, real = data.table.scores[test], costs[test]
    expected = np.nanmean(np.where(np.isnan(costs[train]), np.nan, costs[train]), axis=0)
    if np.isnan(expected).any():
        missing = [data.table.llm_ids[i] for i in np.flatnonzero(np.isnan(expected))]
        raise LocusInputError(f"no training cost for LLM {missing[0]!r}; the suite needs one")
    singles = np.array(
        [
            (float(np.nanmean(real[:, j])), float(np.nanmean(truth[:, j])))
            for j in range(truth.shape[1])
        ]
    )
    low, high = float(singles[:, 0].min()), float(singles[:, 0].max())
    best = int(np.argmax(singles[:, 1]))
    cheapest = int(np.argmin(singles[:, 0]))
    mix = hull(singles)
    started = time.perf_counter()
    per_seed: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    with progress("cost suite", total=len(seeds) * len(methods)) as step:
        for seed in seeds:
            fold = evidence_fold(data, "all", seed)
            for method in methods:
                both, cached = fitted_proba(
                    method, fold, "all", data, locus_settings=locus_settings, cache_dir=cache_dir
                )
                proba = both["test"][complete]
                points = _sweep(proba, expected, truth, real)
                curve = hull(points)
                at_cheapest = hull_accuracy_at(curve, float(singles[cheapest, 0]))
                per_seed[method].append(
                    {
                        "seed": seed,
                        "points": points.tolist(),
                        "hull": curve.tolist(),
                        "aiq": _area(np.clip(curve, [low, 0], [high, 1]), low, high),
                        "max_accuracy": float(curve[:, 1].max()),
                        "cost_to_match_best_single": _cost_to_reach(curve, float(singles[best, 1])),
                        "accuracy_at_cheapest_cost": at_cheapest,
                        "static_mix_accuracy_at_that_cost": hull_accuracy_at(
                            mix, float(singles[cheapest, 0])
                        ),
                        "cached_fit": cached,
                    }
                )
                step(1)
    metrics = ("aiq", "max_accuracy", "cost_to_match_best_single", "accuracy_at_cheapest_cost")
    return {
        "suite": "cost",
        "seeds": list(seeds),
        "methods": list(methods),
        "llms": data.table.n_llms,
        "queries": {
            **{s: len(data.rows(s)) for s in ("train", "val", "test")},
            "test_scored_by_every_llm": len(test),
        },
        "encoder": data.encoder,
        "single_llms": {
            llm: {"cost": float(c), "accuracy": float(a)}
            for llm, (c, a) in zip(data.table.llm_ids, singles, strict=True)
        },
        "best_single": {
            "llm_id": data.table.llm_ids[best],
            "cost": float(singles[best, 0]),
            "accuracy": float(singles[best, 1]),
        },
        "cheapest_single": {
            "llm_id": data.table.llm_ids[cheapest],
            "cost": float(singles[cheapest, 0]),
            "accuracy": float(singles[cheapest, 1]),
        },
        "static_mix": {"hull": mix.tolist(), "aiq": _area(mix, low, high)},
        "per_seed": per_seed,
        "summary": {
            method: {metric: mean_sd([run[metric] for run in runs]) for metric in metrics}
            for method, runs in per_seed.items()
        },
        "wall_seconds": time.perf_counter() - started,
    }
