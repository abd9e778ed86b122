"""Portfolios: a few LLMs that cover the pool, chosen from the embeddings alone (no extra
evaluations), and what routing among them keeps.

    k_center      greedy farthest-first: each pick is the LLM farthest from those chosen
    k_medoids     PAM (build, then swaps): the k LLMs with the least total distance to the pool
    budget_cover  greedy coverage (least total distance to the pool) per unit of cost, under
                  a budget (total parameters or total USD per query)

    >>> import numpy as np
    >>> from locus.atlas.geometry import distance_matrix
    >>> points = np.array([[0, 0], [0, 0.1], [5, 5], [5, 5.1], [9, 0]], dtype=float)
    >>> k_center(distance_matrix(points), 3, first=0)
    [0, 4, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.metrics import routing_accuracy

__all__ = [
    "PORTFOLIO_METHODS",
    "BudgetPortfolio",
    "budget_cover",
    "k_center",
    "k_medoids",
    "portfolio_accuracy",
    "random_budget_portfolios",
    "random_portfolios",
]

PORTFOLIO_METHODS = ("k-center", "k-medoids")


def _check_k(distances: NDArray[Any], k: int) -> NDArray[np.float64]:
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1] or len(d) == 0:
        raise LocusInputError(f"distances must be a square (n_llms, n_llms) array; found {d.shape}")
    if not 1 <= k <= len(d):
        raise LocusInputError(f"--k {k}: expected 1 to {len(d)} (the pool's LLMs)")
    return d


def _medoid(d: NDArray[np.float64], rows: Sequence[int] | None = None) -> int:
    rows = list(range(len(d))) if rows is None else list(rows)
    totals = d[np.ix_(rows, rows)].sum(axis=1)
    return int(rows[int(np.argmin(totals))])


def k_center(distances: NDArray[Any], k: int, *, first: int | None = None) -> list[int]:
    """k LLMs (row indices, in the order picked) by greedy farthest-first traversal: it starts
    at `first` (default: the pool's medoid) and then always adds the LLM farthest from every
    LLM chosen so far, so each group of the pool is visited before any is visited twice. Ties
    go to the lower index."""
    d = _check_k(distances, k)
    chosen = [_medoid(d) if first is None else int(first)]
    gap = d[chosen[0]].copy()
    while len(chosen) < k:
        gap[chosen] = -np.inf
        pick = int(np.argmax(gap))
        chosen.append(pick)
        gap = np.minimum(gap, d[pick])
    return chosen


def k_medoids(
    distances: NDArray[Any], k: int, *, fixed: Sequence[int] = (), max_swaps: int = 200
) -> list[int]:
    """k medoids (row indices, sorted) minimising the total distance of every LLM to its
    nearest medoid: PAM's greedy build, then the best improving swap until none improves.
    LLMs in `fixed` are medoids from the start and never swapped out."""
    d = _check_k(distances, k)
    n = len(d)
    if k == n:
        return list(range(n))
    chosen = [int(i) for i in dict.fromkeys(fixed)][:k] or [_medoid(d)]
    while len(chosen) < k:
        nearest = d[:, chosen].min(axis=1)
        totals = np.minimum(nearest[:, None], d).sum(axis=0)  # (n,) total if each were added
        totals[chosen] = np.inf
        chosen.append(int(np.argmin(totals)))
    kept = set(int(i) for i in fixed)
    cost = d[:, chosen].min(axis=1).sum()
    for _ in range(max_swaps):
        best = (cost, -1, -1)
        others = [j for j in range(n) if j not in chosen]
        for slot in range(k):
            if chosen[slot] in kept:
                continue
            rest = [c for i, c in enumerate(chosen) if i != slot]
            base = d[:, rest].min(axis=1) if rest else np.full(n, np.inf)
            totals = np.minimum(base[:, None], d[:, others]).sum(axis=0)
            j = int(np.argmin(totals))
            if totals[j] < best[0] - 1e-12:
                best = (float(totals[j]), slot, others[j])
        if best[1] < 0:
            break
        cost, slot, pick = best
        chosen[slot] = pick
    return sorted(chosen)


@dataclass(frozen=True)
class BudgetPortfolio:
    """LLMs chosen under a budget: `members` (row indices, in the order picked), their total
    cost (`spent`) and the pool's mean distance to its nearest member (`coverage`)."""

    members: list[int]
    spent: float
    budget: float
    coverage: float


def budget_cover(
    distances: NDArray[Any],
    costs: NDArray[Any],
    budget: float,
    *,
    first: int | None = None,
    max_members: int | None = None,
) -> BudgetPortfolio:
    """Greedy coverage under a budget: repeatedly add the affordable LLM that most reduces the
    pool's total distance to its nearest member per unit of cost; the result is compared with
    the best single affordable LLM, whose coverage can beat a greedy run of cheap ones.

    `first` (when it fits the budget) is chosen before anything else: the most accurate LLM,
    so that the cover is built around the LLM routing leans on. LLMs with NaN cost are never
    chosen.

    Raises:
        LocusInputError: a negative budget, or no LLM whose cost fits it.
    """
    d = np.asarray(distances, dtype=np.float64)
    price = np.asarray(costs, dtype=np.float64)
    if budget < 0:
        raise LocusInputError(f"budget {budget}: expected a non-negative total")
    known = np.isfinite(price)
    if not (known & (price <= budget)).any():
        cheapest = np.nanmin(price) if known.any() else float("nan")
        raise LocusInputError(
            f"no LLM fits a budget of {budget:g}; the cheapest costs {cheapest:g}"
            if known.any()
            else "no LLM has a cost to budget with; import LLM metadata (params, prices) first"
        )
    limit = len(d) if max_members is None else max_members
    far = d.max() + 1.0
    gap = np.full(len(d), far)  # distance of each LLM to its nearest member so far
    members: list[int] = []
    spent = 0.0
    if first is not None and np.isfinite(price[first]) and price[first] <= budget:
        members, spent, gap = [int(first)], float(price[first]), np.minimum(gap, d[first])
    while len(members) < limit:
        affordable = known & (price + spent <= budget + 1e-9)
        affordable[members] = False
        candidates = np.flatnonzero(affordable)
        if not len(candidates):
            break
        gains = np.array([(gap - np.minimum(gap, d[j])).sum() for j in candidates])
        if gains.max() <= 1e-12:
            break
        ratio = gains / np.maximum(price[candidates], 1e-12)
        pick = int(candidates[int(np.argmax(ratio))])
        members.append(pick)
        spent += float(price[pick])
        gap = np.minimum(gap, d[pick])
    single = np.flatnonzero(known & (price <= budget))
    single_cover = d[single].sum(axis=1)  # total distance with that LLM alone
    best_single = int(single[int(np.argmin(single_cover))])
    if first is None and float(single_cover.min()) < gap.sum() - 1e-12:
        members, spent, gap = [best_single], float(price[best_single]), d[best_single]
    return BudgetPortfolio(
        members=members, spent=spent, budget=float(budget), coverage=float(gap.mean())
    )


def portfolio_accuracy(proba: NDArray[Any], scores: NDArray[Any], members: Sequence[int]) -> float:
    """Routing hit@1 on (n_queries, n_llms) P(correct) / scores when only `members` may be
    chosen: each query goes to the member with the highest P(correct) scored on it."""
    if not len(members):
        raise LocusInputError("a portfolio needs at least one LLM")
    allowed = np.zeros(np.asarray(proba).shape[1], dtype=bool)
    allowed[list(members)] = True
    restricted = np.where(allowed[None, :], proba, -np.inf)
    truth = np.where(allowed[None, :], scores, np.nan)
    return routing_accuracy(restricted, truth)


def random_portfolios(
    proba: NDArray[Any], scores: NDArray[Any], k: int, *, draws: int = 100, seed: int = 0
) -> tuple[float, float]:
    """Mean and standard deviation of routing hit@1 over `draws` random k-LLM portfolios."""
    n = np.asarray(proba).shape[1]
    rng = np.random.default_rng([seed, k])
    hits = [
        portfolio_accuracy(proba, scores, rng.choice(n, size=k, replace=False).tolist())
        for _ in range(draws)
    ]
    return float(np.mean(hits)), float(np.std(hits, ddof=1)) if draws > 1 else 0.0


def random_budget_portfolios(
    proba: NDArray[Any],
    scores: NDArray[Any],
    costs: NDArray[Any],
    budget: float,
    *,
    draws: int = 100,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean and standard deviation of routing hit@1, and the mean size, of `draws` random
    portfolios under the same budget: LLMs in a random order, each added while it fits."""
    price = np.asarray(costs, dtype=np.float64)
    rng = np.random.default_rng([seed, int(budget * 1e9) % (2**31)])
    hits, sizes = [], []
    for _ in range(draws):
        members: list[int] = []
        spent = 0.0
        for j in rng.permutation(len(price)):
            if np.isfinite(price[j]) and spent + price[j] <= budget + 1e-12:
                members.append(int(j))
                spent += float(price[j])
        if members:
            hits.append(portfolio_accuracy(proba, scores, members))
            sizes.append(len(members))
    if not hits:
        raise LocusInputError(f"no LLM fits a budget of {budget:g}")
    sd = float(np.std(hits, ddof=1)) if len(hits) > 1 else 0.0
    return float(np.mean(hits)), sd, float(np.mean(sizes))
