"""Routing and correctness metrics, on numpy arrays (no torch).

Conventions: `scores` is the (n_queries, n_llms) truth with NaN where not evaluated; `proba` is the
predicted P(correct), same shape. A router may only pick an LLM that was evaluated on the query
(otherwise the pick cannot be scored), so picks are restricted to observed cells.

    >>> import numpy as np
    >>> scores = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> proba = np.array([[0.9, 0.1], [0.2, 0.7]])
    >>> routing_accuracy(proba, scores)
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "FEW_QUERIES",
    "best_per_task_accuracy",
    "best_per_task_choices",
    "best_single_accuracy",
    "best_single_choices",
    "brier_score",
    "cell_log_loss",
    "chosen_accuracy",
    "column_means",
    "correctness_metrics",
    "expected_calibration_error",
    "log_loss",
    "log_loss_gain",
    "oracle_accuracy",
    "routing_accuracy",
    "routing_choices",
    "top_k_hit",
]

# Below this many queries a figure over them is mostly noise: one standard error of a hit@1
# reaches 0.5 / sqrt(30) = 0.09, more than most differences between routers.
FEW_QUERIES = 30


def _masked(proba: np.ndarray, scores: np.ndarray) -> np.ndarray:
    if proba.shape != scores.shape:
        raise ValueError(f"proba {proba.shape} and scores {scores.shape} must have one shape")
    return np.where(np.isnan(scores), -np.inf, proba)


def routing_choices(proba: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """(n_queries,) column of the highest-proba evaluated LLM per query (-1: none evaluated)."""
    masked = _masked(proba, scores)
    choice = np.argmax(masked, axis=1)
    choice[~np.isfinite(masked).any(axis=1)] = -1
    return choice


def routing_accuracy(proba: np.ndarray, scores: np.ndarray) -> float:
    """hit@1: mean true score of the chosen LLM, over queries with at least one evaluated LLM."""
    choice = routing_choices(proba, scores)
    valid = choice >= 0
    if not valid.any():
        return float("nan")
    rows = np.flatnonzero(valid)
    return float(np.mean(scores[rows, choice[valid]]))


def top_k_hit(proba: np.ndarray, scores: np.ndarray, k: int) -> float:
    """hit@k: mean over queries of the best true score among the k highest-proba LLMs."""
    masked = _masked(proba, scores)
    valid = np.isfinite(masked).any(axis=1)
    if not valid.any():
        return float("nan")
    k = min(k, masked.shape[1])
    top = np.argsort(-masked[valid], axis=1, kind="stable")[:, :k]
    picked = np.take_along_axis(scores[valid], top, axis=1)
    return float(np.mean(np.nanmax(np.where(np.isnan(picked), -np.inf, picked), axis=1)))


def oracle_accuracy(scores: np.ndarray) -> float:
    """Mean over queries of the best score any evaluated LLM got."""
    valid = (~np.isnan(scores)).any(axis=1)
    return float(np.mean(np.nanmax(scores[valid], axis=1))) if valid.any() else float("nan")


def column_means(scores: np.ndarray, empty: float = float("nan")) -> np.ndarray:
    """(n_llms,) each column's mean over its scored rows (NaN: not scored), `empty` where a
    column has none: `np.nanmean` without its "Mean of empty slice" warning."""
    observed = ~np.isnan(scores)
    counts = observed.sum(axis=0)
    totals = np.where(observed, scores, 0.0).sum(axis=0)
    return np.where(counts > 0, totals / np.maximum(counts, 1), empty)


def best_single_accuracy(train_scores: np.ndarray, test_scores: np.ndarray) -> tuple[int, float]:
    """The best LLM on the training queries, and the accuracy of always choosing it.

    Where that LLM was not evaluated on a test query, the next LLM of the training ranking that
    was evaluated answers instead, so the baseline covers the same queries as any router (with
    a fully observed table this is exactly "always the best LLM").
    """
    ranking = np.argsort(-column_means(train_scores, -np.inf), kind="stable")
    return int(ranking[0]), chosen_accuracy(_first_scored(ranking, test_scores), test_scores)


def best_single_choices(train_scores: np.ndarray, test_scores: np.ndarray) -> np.ndarray:
    """(n_test,) the column `best_single_accuracy` answers each test query with (-1: none)."""
    ranking = np.argsort(-column_means(train_scores, -np.inf), kind="stable")
    return _first_scored(ranking, test_scores)


def _first_scored(ranking: np.ndarray, test_scores: np.ndarray) -> np.ndarray:
    """(n,) each query's first column of `ranking` (one ranking, or one per query) that was
    scored on it, -1 where none was."""
    ranking = np.broadcast_to(ranking, (len(test_scores), test_scores.shape[1]))
    observed = ~np.isnan(np.take_along_axis(test_scores, ranking, axis=1))
    first = ranking[np.arange(len(test_scores)), np.argmax(observed, axis=1)]
    return np.where(observed.any(axis=1), first, -1)


def chosen_accuracy(choice: np.ndarray, scores: np.ndarray) -> float:
    """The mean true score of each query's `choice` (n,; -1: none) over the queries with one."""
    rows = np.flatnonzero(choice >= 0)
    return float(np.mean(scores[rows, choice[rows]])) if len(rows) else float("nan")


def best_per_task_accuracy(
    train_scores: np.ndarray,
    train_tasks: Sequence[str | None],
    test_scores: np.ndarray,
    test_tasks: Sequence[str | None],
) -> float:
    """Route each test query to the LLM best on its task in training (overall best if unseen)."""
    choice = best_per_task_choices(train_scores, train_tasks, test_scores, test_tasks)
    return chosen_accuracy(choice, test_scores)


def best_per_task_choices(
    train_scores: np.ndarray,
    train_tasks: Sequence[str | None],
    test_scores: np.ndarray,
    test_tasks: Sequence[str | None],
) -> np.ndarray:
    """(n_test,) the column `best_per_task_accuracy` answers each test query with (-1: none):
    the LLM best on its task in training that was scored on it."""
    if not len(test_tasks):
        return np.full(0, -1)
    overall = column_means(train_scores, -np.inf)
    train_tasks_array = np.asarray(train_tasks, dtype=object)
    pick_for: dict[str | None, np.ndarray] = {}
    for task in set(test_tasks):
        rows = train_tasks_array == task
        means = column_means(train_scores[rows], -np.inf) if rows.any() else overall
        # a tie or an LLM never seen on the task falls back to the overall ranking, then to
        # the column order, as `best_single_choices` breaks ties
        pick_for[task] = np.lexsort((-overall, -means))
    ranking = np.stack([pick_for[task] for task in test_tasks])
    return _first_scored(ranking, test_scores)


def expected_calibration_error(proba: np.ndarray, labels: np.ndarray, bins: int = 10) -> float:
    """ECE with equal-width bins: sum over bins of |mean proba - mean label| x bin share."""
    proba = np.asarray(proba, dtype=float).ravel()
    labels = np.asarray(labels, dtype=float).ravel()
    if proba.size == 0:
        return float("nan")
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(proba, edges[1:-1]), 0, bins - 1)
    error = 0.0
    for b in range(bins):
        in_bin = which == b
        if in_bin.any():
            error += in_bin.mean() * abs(proba[in_bin].mean() - labels[in_bin].mean())
    return float(error)


def brier_score(proba: np.ndarray, scores: np.ndarray) -> float:
    """Mean squared distance of P(correct) from the scores over the evaluated cells (NaN for
    none)."""
    observed = ~np.isnan(np.asarray(scores, dtype=float))
    if not observed.any():
        return float("nan")
    p = np.asarray(proba, dtype=float)[observed]
    return float(np.mean((p - np.asarray(scores, dtype=float)[observed]) ** 2))


def cell_log_loss(proba: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Binary cross-entropy of each cell (graded scores as soft targets), P(correct) clipped
    to [1e-6, 1 - 1e-6] so that a certainty proved wrong costs 13.8, not infinity; NaN where
    `scores` is."""
    p = np.clip(np.asarray(proba, dtype=np.float64), 1e-6, 1 - 1e-6)
    y = np.asarray(scores, dtype=np.float64)
    return -(y * np.log(p) + (1 - y) * np.log1p(-p))


def log_loss(proba: np.ndarray, scores: np.ndarray) -> float:
    """Mean `cell_log_loss` over the evaluated cells (NaN for none)."""
    cells = cell_log_loss(proba, scores)
    observed = ~np.isnan(cells)
    return float(cells[observed].mean()) if observed.any() else float("nan")


def logit_log_loss(logits: np.ndarray, scores: np.ndarray) -> float:
    """The mean log-loss of P(correct) = sigmoid(`logits`) over the evaluated cells, computed
    on the logits (exact where sigmoid would round to 0 or 1); NaN for none."""
    observed = ~np.isnan(np.asarray(scores, dtype=np.float64))
    if not observed.any():
        return float("nan")
    z = np.asarray(logits, dtype=np.float64)[observed]
    y = np.asarray(scores, dtype=np.float64)[observed]
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def query_log_losses(logits: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """(n_queries,) each query's log-loss of sigmoid(`logits`) on its evaluated cells, summed:
    what a standard error over queries is taken on (an LLM's cells on one query err
    together)."""
    y = np.asarray(scores, dtype=np.float64)
    z = np.asarray(logits, dtype=np.float64)
    observed = ~np.isnan(y)
    cells = np.logaddexp(0.0, z) - np.where(observed, y, 0.0) * z
    return np.where(observed, cells, 0.0).sum(axis=1)


def log_loss_gain(
    proba: np.ndarray, other: np.ndarray, scores: np.ndarray
) -> tuple[float, float | None]:
    """(mean log-loss of `other` less that of `proba` over the evaluated cells, its standard
    error): positive where `proba` reads the cells better. The error is taken over queries,
    each query's cells summed (an LLM's cells on one query err together), scaled to a cell;
    None under two queries with a cell.

        >>> import numpy as np
        >>> scores = np.array([[1.0, 0.0], [1.0, np.nan]])
        >>> gain, se = log_loss_gain(np.full((2, 2), 0.5), np.full((2, 2), 0.5), scores)
        >>> gain, se
        (0.0, 0.0)
    """
    difference = cell_log_loss(other, scores) - cell_log_loss(proba, scores)
    observed = ~np.isnan(difference)
    cells = int(observed.sum())
    if not cells:
        return float("nan"), None
    gain = float(difference[observed].sum() / cells)
    rows = observed.any(axis=1)
    if rows.sum() < 2:
        return gain, None
    per_query = np.where(observed, difference, 0.0).sum(axis=1)[rows]
    # the mean over cells is sum over queries / cells: its error is the per-query sums'
    se = float(per_query.std(ddof=1) * np.sqrt(rows.sum()) / cells)
    return gain, se


def correctness_metrics(proba: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Accuracy at 0.5, AUROC, Brier score, log-loss and ECE over every evaluated cell.

    Graded scores are thresholded at 0.5 for accuracy and AUROC; Brier, log-loss
    (`log_loss`) and ECE use them as is.
    """
    from sklearn.metrics import roc_auc_score

    observed = ~np.isnan(scores)
    p = np.asarray(proba, dtype=float)[observed]
    y = np.asarray(scores, dtype=float)[observed]
    labels = (y >= 0.5).astype(float)
    auroc = float(roc_auc_score(labels, p)) if 0 < labels.sum() < labels.size else float("nan")
    return {
        "accuracy": float(np.mean((p >= 0.5) == (labels == 1))),
        "auroc": auroc,
        "brier": brier_score(p, y),
        "log_loss": log_loss(p, y),
        "ece": expected_calibration_error(p, y),
        "cells": int(observed.sum()),
    }
