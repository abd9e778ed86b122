"""The decision rule, once: `rank` / `choose` (how P(correct) and costs become a choice for a
`RouteRequest`, what a caller asks for: `locus.routing.request`, re-exported here).
`Router.route`, the workspace router, the gateway, and every evaluation, sweep and benchmark
decide through this module, so a figure measured with `choose` is what `locus route` does (a
property test pins it, ties included).

The rules:

- accuracy (the default): the highest P(correct), with the guard where one is given (stay on
  its default LLM unless another clears its margin);
- `cost_weight` w > 0: the highest utility P(correct) - w x USD per query;
- `quality` s in [0, 1]: the cheapest LLM whose P(correct) is at least s x the best
  candidate's on that query (ties: the higher P(correct)); s = 0 is the cheapest LLM;
- `budget` B: a mean USD per query, resolved to the cost weight that routes a set of
  validation queries within it (`tune_cost_weight`: RouteLLM calibrates its threshold to a
  share of strong-LLM calls the same way) before deciding.

The gateway names them `locus`, `locus:cost=W`, `locus:quality=S` and `locus:budget=B`.

Ties go to the lower column (the router's `llm_ids` order) under every rule.

    >>> import numpy as np
    >>> p = np.array([[0.9, 0.85, 0.5]])
    >>> costs = np.array([[1.0, 0.1, 0.01]])
    >>> choose(p, costs, RouteRequest()).tolist()
    [0]
    >>> choose(p, costs, RouteRequest(quality=0.9)).tolist()
    [1]
    >>> RouteRequest.parse_rule("cost=2").cost_weight
    2.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.routing.request import RULE_KEYS, RouteRequest

__all__ = [
    "RULE_KEYS",
    "Ranking",
    "RouteRequest",
    "choose",
    "no_candidate_error",
    "rank",
    "tune_cost_weight",
    "unpriced_error",
]


@dataclass(frozen=True)
class Ranking:
    """Where each query goes, as columns of the arrays `rank` was given.

    Attributes:
        order: (n_queries, top) the candidates best first; -1 pads a row with fewer allowed
            (a row of -1: no LLM allowed for that query, `no_candidate_error` says why).
        utility: (n_queries, n_llms) P(correct) - cost weight x cost (unknown cost: 0).
        held: (n_queries,) True where the guard kept the query on its default LLM although
            another's P(correct) was higher.
    """

    order: NDArray[np.int64]
    utility: NDArray[np.float64]
    held: NDArray[np.bool_]


def _check(request: RouteRequest, proba: NDArray[np.float64], costs: NDArray[np.float64]) -> None:
    if request.budget is not None:
        raise LocusInputError(
            "a budget is decided as a cost weight tuned on validation queries: resolve it "
            "first (`RouteRequest.with_cost_weight(tune_cost_weight(...))`, or route through "
            "the workspace router)"
        )
    if proba.ndim != 2 or costs.shape != proba.shape:
        raise LocusInputError(
            f"proba {proba.shape} and costs {costs.shape} must both be (n_queries, n_llms)"
        )


def _inputs(
    proba: NDArray[np.floating[Any]],
    costs: NDArray[np.floating[Any]] | None,
    request: RouteRequest,
    allowed: NDArray[np.bool_] | None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """P(correct), costs (NaN: unknown) and the allowed cells, checked."""
    p = np.asarray(proba, dtype=np.float64)
    c = np.full(p.shape, np.nan) if costs is None else np.asarray(costs, dtype=np.float64)
    _check(request, p, c)
    return p, c, _allowed(request, c, allowed)


def _allowed(
    request: RouteRequest, costs: NDArray[np.float64], allowed: NDArray[np.bool_] | None
) -> NDArray[np.bool_]:
    """(n_queries, n_llms) the cells that may be chosen: `allowed`, priced under a cost rule
    or a maximum cost, within the maximum cost."""
    out = np.ones(costs.shape, dtype=bool) if allowed is None else np.array(allowed, dtype=bool)
    if request.uses_cost or request.max_cost is not None:
        out &= ~np.isnan(costs)
    if request.max_cost is not None:
        out &= costs <= request.max_cost * (1 + 1e-12)
    return out


def _guard_column(
    request: RouteRequest, guard: tuple[int, float] | None
) -> tuple[int, float] | None:
    """(column, margin) of the guard where it binds: accuracy routing, guarded."""
    if guard is None or not request.guarded or request.uses_cost:
        return None
    return guard


def rank(
    proba: NDArray[np.floating[Any]],
    costs: NDArray[np.floating[Any]] | None,
    request: RouteRequest,
    *,
    allowed: NDArray[np.bool_] | None = None,
    guard: tuple[int, float] | None = None,
) -> Ranking:
    """The candidates of each query, best first, by `request`'s rule.

    Args:
        proba: (n_queries, n_llms) P(correct).
        costs: (n_queries, n_llms) USD per query, NaN where unknown (never chosen under a
            cost rule or a maximum cost); None: no costs known.
        request: the rule (a budget resolved already), `top`; `unavailable` is the caller's
            to drop from the columns.
        allowed: (n_queries, n_llms) cells that may be chosen at all (e.g. the evaluated ones).
        guard: (default column, margin): accuracy routing stays on the default unless another
            candidate's P(correct) is higher by more than the margin.

    Raises:
        LocusInputError: an unresolved budget, or shapes that differ.
    """
    p, c, ok = _inputs(proba, costs, request, allowed)
    priced = np.nan_to_num(c, nan=0.0)
    utility = p - request.cost_weight * priced
    held = np.zeros(len(p), dtype=bool)
    top = min(request.top, p.shape[1])
    if request.quality is not None:
        best = np.where(ok, p, -np.inf).max(axis=1, keepdims=True)
        eligible = ok & (p >= request.quality * best - 1e-12)
        # eligible LLMs by cost (then P(correct)), the others by P(correct), barred last
        group = np.where(eligible, 0, np.where(ok, 1, 2))
        within = np.where(eligible, priced, -p)
        order = np.lexsort((-p, within, group), axis=1)[:, :top]
    else:
        ranking = np.where(ok, utility, -np.inf)
        bound = _guard_column(request, guard)
        if bound is not None:
            column, margin = bound
            guarded = ranking.copy()
            guarded[ok[:, column], column] += margin  # a barred default stays barred
            held = (guarded.argmax(axis=1) == column) & (ranking.argmax(axis=1) != column)
            ranking = guarded
        order = np.argsort(-ranking, axis=1, kind="stable")[:, :top]
    order = np.where(np.take_along_axis(ok, order, axis=1), order, -1)
    return Ranking(order=order.astype(np.int64), utility=utility, held=held)


def choose(
    proba: NDArray[np.floating[Any]],
    costs: NDArray[np.floating[Any]] | None,
    request: RouteRequest,
    *,
    allowed: NDArray[np.bool_] | None = None,
    guard: tuple[int, float] | None = None,
) -> NDArray[np.int64]:
    """(n_queries,) the column `rank` puts first (-1 where `allowed` leaves a query no LLM),
    in one pass per query instead of a sort: what sweeps call hundreds of times.

    Raises:
        LocusInputError: as `rank`.
    """
    p, c, ok = _inputs(proba, costs, request, allowed)
    if request.quality is not None:
        best = np.where(ok, p, -np.inf).max(axis=1, keepdims=True)
        eligible = ok & (p >= request.quality * best - 1e-12)
        cheapest = np.where(eligible, c, np.inf).min(axis=1, keepdims=True)
        tied = eligible & (c == cheapest)
        chosen = np.argmax(np.where(tied, p, -np.inf), axis=1)
    else:
        ranking = np.where(ok, p - request.cost_weight * np.nan_to_num(c, nan=0.0), -np.inf)
        bound = _guard_column(request, guard)
        if bound is not None:
            column, margin = bound
            ranking[ok[:, column], column] += margin
        chosen = np.argmax(ranking, axis=1)
    return np.where(ok.any(axis=1), chosen, -1).astype(np.int64)


def no_candidate_error(
    request: RouteRequest, costs: NDArray[np.floating[Any]], row: int
) -> LocusInputError:
    """Why query `row` (of the `costs` given to `rank`) has no LLM to go to."""
    if request.max_cost is not None and np.isfinite(costs[row]).any():
        return LocusInputError(
            f"no LLM costs at most {request.max_cost:g} USD on query {row} (the cheapest there "
            f"costs {np.nanmin(costs[row]):.6g}); raise max_cost"
        )
    return LocusInputError(f"no LLM is left to route query {row} to")


def unpriced_error(rule: str, unpriced: Sequence[str]) -> LocusInputError:
    """The one-line error for a rule that needs a cost of LLMs that have none."""
    return LocusInputError(
        f"{rule} needs a cost for every candidate LLM; {len(unpriced)} have none, e.g. "
        f"{unpriced[0]!r}: give its price (price_in_per_mtok and price_out_per_mtok, or "
        "cost_per_query, in the LLM catalog: `locus import llms`; or scores with cost_usd), or "
        "pass it as unavailable"
    )


def tune_cost_weight(
    proba: NDArray[np.floating[Any]], costs: NDArray[np.floating[Any]], budget: float
) -> float:
    """The smallest cost weight whose routing of these queries costs at most `budget` USD per
    query on average: P(correct) (n_queries, n_llms) and predicted costs of the same shape
    (NaN: unknown, never chosen), on a router's validation queries. 0 when accuracy routing is
    already within the budget.

        >>> round(tune_cost_weight(np.array([[0.9, 0.6]]), np.array([[1.0, 0.1]]), 0.5), 4)
        0.3333

    Raises:
        LocusInputError: a budget below what the cheapest LLM on every query costs, or shapes
            that differ.
    """
    p, c = np.asarray(proba, np.float64), np.asarray(costs, np.float64)
    if p.shape != c.shape or p.ndim != 2 or len(p) == 0:
        raise LocusInputError(f"tune_cost_weight: proba {p.shape} and costs {c.shape} differ")
    if not budget >= 0:
        raise LocusInputError(f"a budget must be >= 0 USD per query, found {budget}")
    c = np.where(np.isnan(c), np.inf, c)
    floor = float(c.min(axis=1).mean())
    if not budget >= floor * (1 - 1e-6):  # costs stored as float32 round by ~1e-7
        raise LocusInputError(
            f"a budget of {budget:.6g} USD per query is below the cheapest routing's "
            f"{floor:.6g} (the cheapest LLM on every query); raise the budget"
        )
    rows = np.arange(len(p))

    known, priced = np.where(np.isinf(c), np.nan, c), np.isfinite(c)

    def spent(weight: float) -> float:  # an unpriced LLM is never chosen, at weight 0 too
        chosen = choose(p, known, RouteRequest(cost_weight=weight), allowed=priced)
        return float(c[rows, chosen].mean())

    if spent(0.0) <= budget:
        return 0.0
    finite = c[np.isfinite(c)]
    low, high = 0.0, 1.0 / max(float(np.ptp(finite)), 1e-12)
    while spent(high) > budget and high < 1e15:
        low, high = high, high * 4
    for _ in range(60):  # spent() falls in steps as the weight grows: bisect to its edge
        middle = (low + high) / 2
        if spent(middle) > budget:
            low = middle
        else:
            high = middle
    return high
