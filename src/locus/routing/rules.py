"""Decision rules: how a router trades P(correct) against cost, in the user's own terms.

- accuracy (the default): the LLM with the highest P(correct);
- `cost_weight` w: the highest P(correct) - w x expected USD per query (w = 10: one point of
  P(correct) is worth a tenth of a cent per query);
- `quality` s in (0, 1]: the cheapest LLM whose P(correct) is at least s x the best candidate's
  on that query;
- `budget` B: a mean USD per query to stay under, as the cost weight that routes a set of
  validation queries within it (`tune_cost_weight`: RouteLLM calibrates its threshold to a
  share of strong-LLM calls the same way).

The gateway names them `locus`, `locus:cost=W`, `locus:quality=S` and `locus:budget=B`.

    >>> DecisionRule.parse("quality=0.95")
    DecisionRule(cost_weight=0.0, quality=0.95, budget=None)
    >>> DecisionRule(budget=0.002).name
    'budget=0.002'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.routing.decision import RouteRequest, choose

__all__ = [
    "RULE_KEYS",
    "DecisionRule",
    "tune_cost_weight",
    "unpriced_error",
]

# the name of each rule in `DecisionRule.parse` (the gateway's locus:<name>=<value>)
RULE_KEYS = {"cost": "cost_weight", "quality": "quality", "budget": "budget"}


@dataclass(frozen=True)
class DecisionRule:
    """One decision rule (all unset: accuracy routing).

    Attributes:
        cost_weight: P(correct) traded per USD per query; 0 ignores cost.
        quality: share of the best candidate's P(correct) the cheapest LLM must reach.
        budget: mean USD per query routing must stay under.

    Raises:
        LocusInputError: more than one rule set, or a value out of its range.
    """

    cost_weight: float = 0.0
    quality: float | None = None
    budget: float | None = None

    def __post_init__(self) -> None:
        weight = self.cost_weight
        if not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
            raise LocusInputError(f"cost_weight must be a finite number >= 0, found {weight!r}")
        if self.quality is not None and not (
            isinstance(self.quality, int | float) and 0 < self.quality <= 1
        ):
            raise LocusInputError(
                f"quality must lie in (0, 1] (a share of the best LLM's P(correct), e.g. "
                f"0.95), found {self.quality!r}"
            )
        if self.budget is not None and not (
            isinstance(self.budget, int | float) and math.isfinite(self.budget) and self.budget > 0
        ):
            raise LocusInputError(
                f"budget must be a number > 0 (mean USD per query, e.g. 0.001 for 1 USD per "
                f"1,000 queries), found {self.budget!r}"
            )
        chosen = [name for name in ("cost_weight", "quality", "budget") if self._is_set(name)]
        if len(chosen) > 1:
            raise LocusInputError(
                f"choose one decision rule: {' or '.join(chosen)}, not {len(chosen)} at once"
            )

    def _is_set(self, name: str) -> bool:
        return bool(self.cost_weight) if name == "cost_weight" else getattr(self, name) is not None

    @property
    def uses_cost(self) -> bool:
        """True for every rule but accuracy routing."""
        return self.cost_weight > 0 or self.quality is not None or self.budget is not None

    @property
    def name(self) -> str:
        """`cost=W`, `quality=S`, `budget=B`, or "" for accuracy routing."""
        for key, field in RULE_KEYS.items():
            if self._is_set(field):
                return f"{key}={getattr(self, field):g}"
        return ""

    def as_kwargs(self) -> dict[str, Any]:
        """The rule as keyword arguments of `WorkspaceRouter.route_texts`."""
        return {"cost_weight": self.cost_weight, "quality": self.quality, "budget": self.budget}

    @classmethod
    def parse(cls, text: str) -> DecisionRule:
        """`cost=W`, `quality=S` or `budget=B` (a gateway model name's part after `locus:`).

        Raises:
            LocusInputError: another form, or a value out of range.
        """
        key, equals, value = str(text).partition("=")
        field = RULE_KEYS.get(key.strip())
        try:
            number = float(value) if equals else math.nan
        except ValueError:
            number = math.nan
        if field is None or math.isnan(number):
            raise LocusInputError(
                f"decision rule {text!r}: expected cost=W (W >= 0), quality=S (0 < S <= 1) or "
                "budget=B (USD per query > 0)"
            )
        return cls(**{field: number})


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
