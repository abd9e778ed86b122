"""`Router`: one abstract method, `predict_proba`, and `route()` written once on top of it.

A router scores every (query, LLM) pair with its P(correct); `route` turns those into decisions:
the best LLM by utility = P(correct) - cost_weight x cost, among the LLMs that are available and
within the maximum cost, with the ranked candidates behind it (the fallback order).

    >>> import numpy as np
    >>> class Constant(Router):
    ...     llm_ids = ["small", "large"]
    ...     def predict_proba(self, query_vectors):
    ...         return np.tile([0.6, 0.8], (len(query_vectors), 1))
    >>> Constant().route(np.zeros((1, 4)))[0].llm_id
    'large'
    >>> Constant().route(np.zeros((1, 4)), costs={"small": 0.0, "large": 1.0},
    ...                  cost_weight=0.5)[0].llm_id
    'small'
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError, LocusNotFoundError
from locus.routing.guard import Guard, guarded_proba

__all__ = ["RankedLLM", "RouteDecision", "Router"]


@dataclass(frozen=True)
class RankedLLM:
    """One candidate for a query: its P(correct), expected cost (None: unknown), utility."""

    llm_id: str
    p_correct: float
    cost_usd: float | None
    utility: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RouteDecision:
    """Where one query goes.

    Attributes:
        llm_id: the chosen LLM.
        p_correct: its predicted P(correct).
        cost_usd: its expected cost per query (None when unknown).
        ranked: the top candidates, best first, the chosen one included: the fallback order.
        held: True where a guard kept the query on its default LLM although another LLM's
            utility was higher (by less than the guard's margin).
    """

    llm_id: str
    p_correct: float
    cost_usd: float | None = None
    ranked: tuple[RankedLLM, ...] = field(default=())
    held: bool = False

    @property
    def runners_up(self) -> tuple[RankedLLM, ...]:
        """The candidates after the chosen one, best first."""
        return self.ranked[1:]

    def as_dict(self) -> dict[str, Any]:
        return {
            "llm_id": self.llm_id,
            "p_correct": self.p_correct,
            "cost_usd": self.cost_usd,
            "ranked": [candidate.as_dict() for candidate in self.ranked],
            "held": self.held,
        }


class Router(ABC):
    """Maps query vectors to LLMs. Subclasses implement `predict_proba` and set `llm_ids`.

    Attributes:
        llm_ids: the LLMs a router can choose, in the column order of `predict_proba`.
    """

    llm_ids: Sequence[str]

    @abstractmethod
    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        """P(correct) (n_queries, n_llms) of every LLM of `llm_ids` on each query vector."""

    def route(
        self,
        query_vectors: NDArray[np.float32],
        *,
        top: int = 3,
        costs: Mapping[str, float] | None = None,
        cost_weight: float = 0.0,
        max_cost: float | None = None,
        unavailable: Collection[str] = (),
        guard: Guard | None = None,
    ) -> list[RouteDecision]:
        """Send each query to the LLM with the best P(correct) - cost_weight x cost.

        Args:
            query_vectors: (n_queries, dq).
            top: candidates to report per query (the chosen one first).
            costs: expected USD cost per query of each LLM; needed for `cost_weight` > 0 (every
                candidate must have one) and `max_cost` (LLMs without a cost are excluded).
            cost_weight: P(correct) traded per dollar; 0 ignores cost.
            max_cost: LLMs costing more per query are not candidates.
            unavailable: LLMs never to choose (down, rate-limited, not allowed).
            guard: stay on `guard.default` unless another candidate's utility is higher by more
                than `guard.margin` (`locus.routing.guard`); no effect when the default is
                not a candidate (unavailable, over `max_cost`, or not in the pool).

        Raises:
            LocusInputError: a bad knob, unknown costs, or no candidate left.
        """
        candidates = self._candidates(top, costs, cost_weight, max_cost, unavailable)
        proba = np.asarray(self.predict_proba(query_vectors), dtype=np.float64)
        if proba.ndim != 2 or proba.shape[1] != len(self.llm_ids):
            raise ValueError(
                f"{type(self).__name__}.predict_proba returned {proba.shape}; expected "
                f"(n_queries, {len(self.llm_ids)})"
            )
        cost_of = dict(costs or {})
        columns = np.array([index for index, _ in candidates], dtype=np.int64)
        names = [llm for _, llm in candidates]
        cost = np.array([cost_of.get(llm, 0.0) for llm in names], dtype=np.float64)
        chosen_proba = proba[:, columns]  # (n_queries, n_candidates)
        utility = chosen_proba - cost_weight * cost[None, :]
        ranking, held = utility, np.zeros(len(utility), dtype=bool)
        if guard is not None and guard.default in names:
            default = names.index(guard.default)
            ranking = guarded_proba(utility, default, guard.margin)
            held = (ranking.argmax(axis=1) == default) & (utility.argmax(axis=1) != default)
        order = np.argsort(-ranking, axis=1, kind="stable")[:, :top]
        decisions = []
        for row, ranked in enumerate(order):
            entries = tuple(
                RankedLLM(
                    llm_id=names[c],
                    p_correct=float(chosen_proba[row, c]),
                    cost_usd=cost_of.get(names[c]),
                    utility=float(utility[row, c]),
                )
                for c in ranked
            )
            first = entries[0]
            decisions.append(
                RouteDecision(
                    llm_id=first.llm_id,
                    p_correct=first.p_correct,
                    cost_usd=first.cost_usd,
                    ranked=entries,
                    held=bool(held[row]),
                )
            )
        return decisions

    def _candidates(
        self,
        top: int,
        costs: Mapping[str, float] | None,
        cost_weight: float,
        max_cost: float | None,
        unavailable: Collection[str],
    ) -> list[tuple[int, str]]:
        """(column, llm_id) of every LLM that may be chosen, after validating the knobs."""
        if not cost_weight >= 0 or not math.isfinite(cost_weight):
            raise LocusInputError(f"cost_weight must be a finite number >= 0, found {cost_weight}")
        if max_cost is not None and not max_cost >= 0:
            raise LocusInputError(f"max_cost must be >= 0, found {max_cost}")
        if top < 1:
            raise LocusInputError(f"top must be >= 1, found {top}")
        known, down = set(self.llm_ids), set(unavailable)
        strangers = sorted(down - known)
        if strangers:
            raise LocusNotFoundError(
                f"unavailable LLM {strangers[0]!r} is not in the pool; expected some of "
                f"{', '.join(list(self.llm_ids)[:5])}{', ...' if len(known) > 5 else ''}"
            )
        cost_of = dict(costs or {})
        if (cost_weight > 0 or max_cost is not None) and not cost_of:
            raise LocusInputError(
                "cost_weight / max_cost need per-LLM costs; import scores with a cost_usd column "
                "(library: pass costs={llm_id: usd})"
            )
        candidates = [(i, llm) for i, llm in enumerate(self.llm_ids) if llm not in down]
        if max_cost is not None:
            candidates = [
                (i, llm) for i, llm in candidates if cost_of.get(llm, math.inf) <= max_cost
            ]
        if cost_weight > 0:
            unpriced = [llm for _, llm in candidates if llm not in cost_of]
            if unpriced:
                raise LocusInputError(
                    f"cost_weight needs a cost for every candidate; {len(unpriced)} have none, "
                    f"e.g. {unpriced[0]!r}; import their costs, pass them as unavailable, or use "
                    "cost_weight 0"
                )
        if not candidates:
            cheapest = min(cost_of.values()) if cost_of else None
            raise LocusInputError(
                "no LLM is left to route to"
                + (
                    f": none costs at most {max_cost} USD per query (the cheapest costs "
                    f"{cheapest:.6g}); raise max_cost"
                    if max_cost is not None and cheapest is not None
                    else "; every LLM is unavailable"
                )
            )
        return candidates

    def save(self, path: str | Path) -> Path:
        """Write the fitted router to the folder `path` (JSON + safetensors/npz, no pickle)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be saved")
