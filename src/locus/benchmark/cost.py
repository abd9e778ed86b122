"""The `cost` suite: accuracy against dollars, k-fold over queries (RouterBench's protocol).

For each seed the queries are cut into `folds` hash folds (`locus.data.splits.kfold_splits`):
each fold is tested once by methods fitted on the others (one eighth of them for validation),
so every query that every LLM was scored and priced on is a test query once per seed, and the
figures of a seed are read off the pooled out-of-fold predictions. Before answering, a router
knows each LLM's predicted cost on the query (`locus.routing.costs.CostModel`, fitted on the
fold's training queries; `cost_model="mean"`: each LLM's mean training cost); the pick is
charged its real cost. Two decision rules sweep each method from the most accurate to the
cheapest routing:

- `cost-weight`: the best P(correct) - w x predicted cost, w from 0 to "only the cheapest";
- `quality`: the cheapest LLM whose P(correct) is at least s x the best on the query, s from 1
  down to 0.

Each sweep gives (mean cost, accuracy) points; a method's frontier is the non-decreasing convex
hull of both sweeps' points (a user can use either rule, and mixing two settings reaches every
point between). Read off it, per seed:

- AIQ (RouterBench): the mean of the frontier's accuracy over the cost range from the cheapest
  to the most expensive single LLM;
- the cost to reach 100% and 95% of the most accurate single LLM's ("the strong LLM")
  accuracy, as a share of its cost;
- the accuracy at the cheapest single LLM's cost;
- APGR (RouteLLM's average performance gap recovered, over cost): the mean over the cost range
  from the cheapest single LLM's cost to the strong LLM's of (accuracy - the cheapest LLM's) /
  (the strong LLM's - the cheapest LLM's); CPT(x): the cost, as a share of the strong LLM's,
  at which x of that gap is recovered;
- the best static mix: the hull of the single LLMs' (cost, accuracy) points, read the same way;
- `moved`: at the cost weight that sends about half the queries off the strong LLM, how often
  the cheaper pick was right, beside how often the strong LLM was, on those queries;
- `budgets`: the cost weight tuned on each fold's validation queries to stay under a budget
  (a share of the strong LLM's cost, RouteLLM's threshold calibration), re-checked on test. A
  budget no routing can keep (below what the cheapest LLM on every validation query costs: the
  strong LLM is itself among the cheapest) is skipped, and the result's `skipped` says which
  and why; the rest of the suite's figures stand.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from locus._progress import ProgressFactory, no_progress
from locus.benchmark._stats import log_loss, mean_sd
from locus.benchmark.anchors import evidence_fold, fitted_proba
from locus.benchmark.methods import COMBINED, METHODS, SLOW_METHODS, fit_in_parallel
from locus.data.splits import kfold_splits
from locus.errors import LocusInputError
from locus.metrics import correctness_metrics
from locus.pipeline import WorkspaceTable
from locus.ray_cluster import RaySession
from locus.routing.costs import CostModel
from locus.routing.decision import RouteRequest, choose, tune_cost_weight
from locus.routing.frontier import RULES, frontier_metrics, hull, sweep, sweep_settings

__all__ = ["COST_METHODS", "COST_MODELS", "run_cost"]

COST_METHODS = ("locus+knn", "locus", "knn", "cluster", "mf", "irt", "per-task", "best-single")
COST_MODELS = ("knn", "mean")
# budgets re-checked on test, as shares of the strong LLM's mean cost
BUDGET_SHARES = (0.1, 0.25, 0.6)


def _fold_predictions(
    data: WorkspaceTable,
    parts: list[np.ndarray],
    seed: int,
    methods: Sequence[str],
    cost_model: str,
    cache_dir: Path | None,
    locus_settings: dict[str, Any] | None,
    step: Any,
) -> tuple[dict[str, np.ndarray], np.ndarray, list[dict[str, Any]]]:
    """Out-of-fold P(correct) per method and predicted costs (n_queries, n_llms), and per fold
    what the budget check needs (validation rows, their P(correct) and predicted costs)."""
    costs = data.table.costs
    assert costs is not None
    shape = data.table.scores.shape
    proba = {method: np.full(shape, np.nan) for method in methods}
    predicted = np.full(shape, np.nan)
    folds: list[dict[str, Any]] = []
    for splits in parts:
        fold_data = data.with_splits(splits)
        train, val, test = (fold_data.rows(s) for s in ("train", "val", "test"))
        fold = evidence_fold(fold_data, "all", seed)
        if cost_model == "knn":
            model = CostModel().fit(data.vectors[train], costs[train], data.table.llm_ids)
            predicted[test] = model.predict(data.vectors[test])
            val_costs = model.predict(data.vectors[val])
        else:
            means = np.nanmean(costs[train], axis=0)
            predicted[test] = means[None, :]
            val_costs = np.broadcast_to(means, (len(val), len(means)))
        val_proba = {}
        for method in methods:
            both, _ = fitted_proba(
                method, fold, "all", fold_data, splits=("val", "test"),
                locus_settings=locus_settings, cache_dir=cache_dir,
            )  # fmt: skip
            proba[method][test] = both["test"]
            val_proba[method] = both["val"]
            step(1)
        folds.append({"test": test, "val": val, "val_proba": val_proba, "val_costs": val_costs})
    return proba, predicted, folds


def _fit_slow_first(
    pools: dict[int, WorkspaceTable],
    folds: int,
    methods: Sequence[str],
    cache_dir: Path,
    locus_settings: dict[str, Any] | None,
    workers: int,
    ray: RaySession | None,
    progress: ProgressFactory,
) -> None:
    """The slow fits of every seed's folds (those of a combined method's parts included),
    side by side into the cache, where `_fold_predictions` then finds them."""
    parts_of = {m: COMBINED.get(m, (m,)) for m in methods}
    slow = [m for m in SLOW_METHODS if any(m in parts for parts in parts_of.values())]
    jobs = []
    for seed, pool in pools.items():
        for splits in kfold_splits(list(pool.table.text_hashes), folds=folds, seed=seed):
            fold = evidence_fold(pool.with_splits(splits), "all", seed)
            jobs += [(method, fold, dict(locus_settings or {})) for method in slow]
    fit_in_parallel(jobs, cache_dir, workers=workers, progress=progress, ray=ray)


def _moved(
    proba: np.ndarray, predicted: np.ndarray, truth: np.ndarray, strong: int
) -> dict[str, float]:
    """At the cost weight that moves the share of queries off the strong LLM nearest one half:
    that share, the accuracy of the cheaper picks on the moved queries, and the strong LLM's
    own accuracy on them (a router that ranks LLMs per query well moves queries the strong LLM
    would not have got more right)."""
    best: dict[str, float] = {}
    for weight in sweep_settings("cost-weight", predicted):
        chosen = choose(proba, predicted, RouteRequest(cost_weight=float(weight)))
        moved = chosen != strong
        if not best or abs(moved.mean() - 0.5) < abs(best["share"] - 0.5):
            rows = np.flatnonzero(moved)
            best = {
                "share": float(moved.mean()),
                "picked_accuracy": float(truth[rows, chosen[rows]].mean()) if len(rows) else 0.0,
                "strong_accuracy": float(truth[rows, strong].mean()) if len(rows) else 0.0,
            }
    return best


def _budget_check(
    folds: list[dict[str, Any]],
    method: str,
    proba: np.ndarray,
    predicted: np.ndarray,
    truth: np.ndarray,
    real: np.ndarray,
    complete: np.ndarray,
    strong_cost: float,
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Per budget share: the test mean real cost / budget and test accuracy when each fold's
    cost weight is tuned on its validation queries to stay under the budget; and, per share
    whose budget a fold cannot tune for (`tune_cost_weight`: below the cheapest routing), why
    it was skipped."""
    out, skipped = {}, {}
    for share in BUDGET_SHARES:
        budget = share * strong_cost
        chosen = np.full(len(truth), -1)
        try:
            for fold in folds:
                weight = tune_cost_weight(fold["val_proba"][method], fold["val_costs"], budget)
                rows = fold["test"]
                resolved = RouteRequest(budget=budget).with_cost_weight(weight)
                chosen[rows] = choose(proba[rows], predicted[rows], resolved)
        except LocusInputError as error:
            skipped[f"{share:g}"] = str(error)
            continue
        rows = np.flatnonzero(complete)
        picks = chosen[rows]
        out[f"{share:g}"] = {
            "budget": budget,
            "spent_over_budget": float(real[rows, picks].mean() / budget),
            "accuracy": float(truth[rows, picks].mean()),
        }
    return out, skipped


def _skipped_budgets(
    skipped: dict[tuple[int, str, str], list[str]], budgets: dict[tuple[int, str], float]
) -> list[dict[str, Any]]:
    """The budgets skipped, one entry per (seed, share, reason) with the methods it held for."""
    return [
        {
            "what": "budget",
            "seed": seed,
            "budget_share": float(share),
            "budget_usd": budgets[seed, share],
            "methods": methods,
            "reason": reason,
        }
        for (seed, share, reason), methods in skipped.items()
    ]


def _reference(
    pool: WorkspaceTable,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mask of the queries every LLM was scored and priced on, their scores, their costs, each
    LLM's (mean cost, accuracy) on them): a single LLM and a router are charged and scored on
    the same queries.

    Raises:
        LocusInputError: no such query.
    """
    costs = pool.table.costs
    assert costs is not None
    complete = ~np.isnan(pool.table.scores).any(axis=1) & ~np.isnan(costs).any(axis=1)
    if not complete.any():
        raise LocusInputError(
            "the cost suite needs queries that every LLM was scored and priced on; none is"
        )
    truth = pool.table.scores[complete].astype(np.float64)
    real = costs[complete].astype(np.float64)
    return complete, truth, real, np.column_stack([real.mean(axis=0), truth.mean(axis=0)])


def run_cost(
    data: WorkspaceTable,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    folds: int = 5,
    methods: Sequence[str] = COST_METHODS,
    cost_model: str = "knn",
    queries: int | None = None,
    cache_dir: Path | None = None,
    locus_settings: dict[str, Any] | None = None,
    workers: int = 1,
    ray: RaySession | None = None,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Run the suite on a pool with per-query costs; a JSON-ready dict. `queries`: each seed
    on its own random subsample of that many queries (`WorkspaceTable.subsample`), a small
    pool drawn from a large one; the single LLMs' figures are then means over the seeds.
    `workers` > 1 or `ray` (with a `cache_dir`): the slow fits of every seed and fold run
    first, side by side (`fit_in_parallel`), then the suite reads them from the cache.

    A budget below the cheapest routing is skipped (its figures absent from `per_seed` and
    NaN in `summary`) and listed in the result's `skipped`, with the reason.

    Raises:
        LocusInputError: the pool has no costs, an unknown method or cost model, fewer than 2
            folds, or no query every LLM was scored and priced on.
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
    if cost_model not in COST_MODELS:
        raise LocusInputError(
            f"unknown cost model {cost_model!r}; expected one of {', '.join(COST_MODELS)}"
        )
    if not seeds:
        raise LocusInputError("a suite needs at least one seed")
    if "per-task" in methods and all(t is None for t in data.table.tasks):
        methods = [m for m in methods if m != "per-task"]
    pools = {seed: data if queries is None else data.subsample(queries, seed) for seed in seeds}
    references = {seed: _reference(pool) for seed, pool in pools.items()}
    started = time.perf_counter()
    if (workers > 1 or ray is not None) and cache_dir is not None:
        _fit_slow_first(pools, folds, methods, cache_dir, locus_settings, workers, ray, progress)
    per_seed: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    cost_errors = []
    skipped: dict[tuple[int, str, str], list[str]] = {}
    budgets: dict[tuple[int, str], float] = {}
    with progress("cost suite", total=len(seeds) * folds * len(methods)) as step:
        for seed in seeds:
            pool, (complete, truth, real, singles) = pools[seed], references[seed]
            strong, weak = int(np.argmax(singles[:, 1])), int(np.argmin(singles[:, 0]))
            strong_point = (float(singles[strong, 0]), float(singles[strong, 1]))
            weak_point = (float(singles[weak, 0]), float(singles[weak, 1]))
            high = float(singles[:, 0].max())
            pool_costs = pool.table.costs
            assert pool_costs is not None  # checked above, kept by subsample
            parts = kfold_splits(list(pool.table.text_hashes), folds=folds, seed=seed)
            proba, predicted, fold_info = _fold_predictions(
                pool, parts, seed, methods, cost_model, cache_dir, locus_settings, step
            )
            expected = predicted[complete]
            cost_errors.append(float(np.mean(np.abs(expected - real)) / np.mean(real)))
            for method in methods:
                p = proba[method][complete]
                sweeps = {rule: sweep(rule, p, expected, truth, real) for rule in RULES}
                curve = hull(np.concatenate(list(sweeps.values())))
                checked, unkept = _budget_check(
                    fold_info, method, proba[method], predicted,
                    pool.table.scores.astype(np.float64), pool_costs, complete, strong_point[0],
                )  # fmt: skip
                for share, reason in unkept.items():
                    skipped.setdefault((seed, share, reason), []).append(method)
                    budgets[seed, share] = float(share) * strong_point[0]
                per_seed[method].append(
                    {
                        "seed": seed,
                        **frontier_metrics(curve, strong_point, weak_point, high),
                        "auroc": correctness_metrics(p, truth)["auroc"],
                        "log_loss": log_loss(p, truth),
                        "rules": {
                            rule: frontier_metrics(hull(points), strong_point, weak_point, high)
                            for rule, points in sweeps.items()
                        },
                        "moved": _moved(p, expected, truth, strong),
                        "budgets": checked,
                        "hull": curve.tolist(),
                        "points": {rule: points.tolist() for rule, points in sweeps.items()},
                    }
                )
    # the single LLMs, their static mix and the strong / cheapest LLM: means over the seeds'
    # pools (one pool unless `queries`)
    singles = np.mean([references[seed][3] for seed in seeds], axis=0)
    truth = references[seeds[0]][1]
    high = float(singles[:, 0].max())
    strong, weak = int(np.argmax(singles[:, 1])), int(np.argmin(singles[:, 0]))
    strong_point = (float(singles[strong, 0]), float(singles[strong, 1]))
    weak_point = (float(singles[weak, 0]), float(singles[weak, 1]))
    static_mix = hull(singles)
    metrics = ("aiq", "max_accuracy", "cost_share_at_100", "cost_share_at_95", "apgr", "cpt50",
               "cpt80", "accuracy_at_cheapest_cost", "auroc", "log_loss")  # fmt: skip
    return {
        "suite": "cost",
        "seeds": list(seeds),
        "folds": folds,
        "cost_model": cost_model,
        "methods": list(methods),
        "llms": data.table.n_llms,
        "queries": {
            "all": pools[seeds[0]].table.n_queries,
            "scored_and_priced_by_every_llm": len(truth),
        },
        "subsample": queries,
        "encoder": data.encoder,
        "cost_model_relative_error": mean_sd(cost_errors),
        "single_llms": {
            llm: {"cost": float(c), "accuracy": float(a)}
            for llm, (c, a) in zip(data.table.llm_ids, singles, strict=True)
        },
        "best_single": {
            "llm_id": data.table.llm_ids[strong],
            "cost": strong_point[0],
            "accuracy": strong_point[1],
        },
        "cheapest_single": {
            "llm_id": data.table.llm_ids[weak],
            "cost": weak_point[0],
            "accuracy": weak_point[1],
        },
        "static_mix": {
            "hull": static_mix.tolist(),
            **frontier_metrics(static_mix, strong_point, weak_point, high),
        },
        "per_seed": per_seed,
        "summary": {
            method: {
                **{metric: mean_sd([run.get(metric) for run in runs]) for metric in metrics},
                "moved_picked_accuracy": mean_sd([r["moved"]["picked_accuracy"] for r in runs]),
                "moved_strong_accuracy": mean_sd([r["moved"]["strong_accuracy"] for r in runs]),
                "moved_share": mean_sd([r["moved"]["share"] for r in runs]),
                **{
                    f"{rule}_{metric}": mean_sd([r["rules"][rule].get(metric) for r in runs])
                    for rule in RULES
                    for metric in ("aiq", "cost_share_at_100", "cost_share_at_95")
                },
                **{
                    f"budget_{share:g}_{metric}": mean_sd(
                        [r["budgets"].get(f"{share:g}", {}).get(metric) for r in runs]
                    )
                    for share in BUDGET_SHARES
                    for metric in ("spent_over_budget", "accuracy")
                },
            }
            for method, runs in per_seed.items()
        },
        "skipped": _skipped_budgets(skipped, budgets),
        "wall_seconds": time.perf_counter() - started,
    }
