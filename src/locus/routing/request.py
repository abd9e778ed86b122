"""What a caller asks of routing, validated once where it enters (the CLI, an HTTP body, a
gateway model name, a Python call): `RouteRequest`. How it becomes a choice is
`locus.routing.decision`'s (`rank`, `choose`), which re-exports it.

    >>> RouteRequest.parse_rule("cost=2").cost_weight
    2.0
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from locus.errors import LocusInputError

__all__ = ["RULE_KEYS", "RouteRequest"]

# each rule's name in a gateway model name (`locus:<name>=<value>`) and in `parse_rule`
RULE_KEYS = {"cost": "cost_weight", "quality": "quality", "budget": "budget"}
_RULE_FIELDS = ("cost_weight", "quality", "budget")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class RouteRequest:
    """Everything a caller can ask of routing, validated once where it enters (the CLI, an
    HTTP body, a gateway model name, a Python call) and passed whole.

    Attributes:
        top: candidates to report per query, the chosen one first (the fallback order).
        cost_weight: P(correct) traded per USD per query; 0 ignores cost.
        quality: the share of the best candidate's P(correct) the cheapest LLM must reach.
        budget: a mean USD per query to stay under (tuned into a cost weight).
        max_cost: an LLM whose cost on a query is higher is no candidate for it (an LLM
            without a cost neither).
        unavailable: LLMs never to choose (down, rate-limited, not allowed).
        guarded: apply the router's guard to accuracy routing.

    Raises:
        LocusInputError: more than one of cost_weight, quality and budget, or a value out of
            its range.
    """

    top: int = 3
    cost_weight: float = 0.0
    quality: float | None = None
    budget: float | None = None
    max_cost: float | None = None
    unavailable: frozenset[str] = field(default_factory=frozenset)
    guarded: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.unavailable, str) or not isinstance(self.unavailable, Collection):
            raise LocusInputError(
                f"unavailable must be a list of llm_ids, found {self.unavailable!r}"
            )
        object.__setattr__(self, "unavailable", frozenset(str(llm) for llm in self.unavailable))
        if not isinstance(self.top, int) or isinstance(self.top, bool) or self.top < 1:
            raise LocusInputError(f"top must be an integer >= 1, found {self.top!r}")
        weight = self.cost_weight
        if not _number(weight) or not math.isfinite(weight) or weight < 0:
            raise LocusInputError(f"cost_weight must be a finite number >= 0, found {weight!r}")
        if self.quality is not None and not (_number(self.quality) and 0 <= self.quality <= 1):
            raise LocusInputError(
                f"quality must lie in [0, 1] (a share of the best LLM's P(correct), e.g. "
                f"0.95), found {self.quality!r}"
            )
        if self.budget is not None and not (
            _number(self.budget) and math.isfinite(self.budget) and self.budget > 0
        ):
            raise LocusInputError(
                f"budget must be a number > 0 (mean USD per query, e.g. 0.001 for 1 USD per "
                f"1,000 queries), found {self.budget!r}"
            )
        if self.max_cost is not None and not (_number(self.max_cost) and self.max_cost >= 0):
            raise LocusInputError(f"max_cost must be >= 0 USD per query, found {self.max_cost!r}")
        chosen = [name for name in _RULE_FIELDS if self._is_set(name)]
        if len(chosen) > 1:
            raise LocusInputError(
                f"choose one decision rule: {' or '.join(chosen)}, not {len(chosen)} at once"
            )

    def _is_set(self, name: str) -> bool:
        return bool(self.cost_weight) if name == "cost_weight" else getattr(self, name) is not None

    @classmethod
    def of(cls, request: RouteRequest | None = None, **options: Any) -> RouteRequest:
        """`request` with `options` changed (a Python call's keywords), or a new request.

        Raises:
            LocusInputError: an unknown option, or a bad value.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        strangers = sorted(set(options) - names)
        if strangers:
            raise LocusInputError(
                f"unknown routing option {strangers[0]!r}; expected some of "
                f"{', '.join(sorted(names))}"
            )
        if request is None:
            return cls(**options)
        return dataclasses.replace(request, **options) if options else request

    @classmethod
    def parse_rule(cls, text: str, **options: Any) -> RouteRequest:
        """A request with the rule `cost=W`, `quality=S` or `budget=B` (a gateway model
        name's part after `locus:`).

        Raises:
            LocusInputError: another form, or a value out of range.
        """
        key, equals, value = str(text).partition("=")
        name = RULE_KEYS.get(key.strip())
        try:
            number = float(value) if equals else math.nan
        except ValueError:
            number = math.nan
        if name is None or math.isnan(number):
            raise LocusInputError(
                f"decision rule {text!r}: expected cost=W (W >= 0), quality=S (0 <= S <= 1) "
                "or budget=B (USD per query > 0)"
            )
        return cls(**{**options, name: number})

    @property
    def uses_cost(self) -> bool:
        """True for every rule but accuracy routing (max_cost aside)."""
        return self.cost_weight > 0 or self.quality is not None or self.budget is not None

    @property
    def rule(self) -> str:
        """The rule's field: "cost_weight", "quality", "budget", or "" for accuracy."""
        return next((name for name in _RULE_FIELDS if self._is_set(name)), "")

    @property
    def rule_name(self) -> str:
        """`cost=W`, `quality=S`, `budget=B`, or "" for accuracy routing."""
        for key, name in RULE_KEYS.items():
            if self._is_set(name):
                return f"{key}={getattr(self, name):g}"
        return ""

    def with_cost_weight(self, weight: float) -> RouteRequest:
        """The request with its budget resolved to the cost weight `weight` (the guard off:
        a budget is a cost rule even where its weight is 0)."""
        return dataclasses.replace(self, budget=None, cost_weight=float(weight), guarded=False)

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["unavailable"] = sorted(self.unavailable)
        return out
