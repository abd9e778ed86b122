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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError, LocusNotFittedError, LocusNotFoundError
from locus.routing import decision
from locus.routing.decision import RouteRequest, unpriced_error
from locus.routing.guard import Guard
from locus.routing.posterior import spread

__all__ = ["Costs", "RankedLLM", "RouteDecision", "Router", "TextRouter", "cost_matrix"]

# USD per query of each LLM: the same for every query (a mapping by llm_id), or per query
# (an array (n_queries, n_llms) in a router's `llm_ids` order, NaN where unknown)
Costs = Mapping[str, float] | NDArray[np.floating[Any]]


def cost_matrix(costs: Costs | None, llm_ids: Sequence[str], n_queries: int) -> NDArray[np.float64]:
    """`costs` as an array (n_queries, n_llms), NaN where unknown.

    Raises:
        LocusInputError: an array of another shape.
    """
    if costs is None:
        return np.full((n_queries, len(llm_ids)), np.nan)
    if isinstance(costs, Mapping):
        row = np.array([float(costs.get(llm, np.nan)) for llm in llm_ids], dtype=np.float64)
        return np.broadcast_to(row, (n_queries, len(llm_ids))).copy()
    matrix = np.asarray(costs, dtype=np.float64)
    if matrix.shape != (n_queries, len(llm_ids)):
        raise LocusInputError(
            f"per-query costs have shape {matrix.shape}; expected (n_queries, n_llms) = "
            f"({n_queries}, {len(llm_ids)})"
        )
    return matrix


def _priced_llms(costs: Costs | None, llm_ids: Sequence[str]) -> set[str]:
    """The LLMs with a known cost (for an array: known on every query)."""
    if costs is None:
        return set()
    if isinstance(costs, Mapping):
        return {llm for llm, usd in costs.items() if usd is not None and math.isfinite(usd)}
    matrix = np.asarray(costs, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != len(llm_ids):
        raise LocusInputError(
            f"per-query costs have shape {matrix.shape}; expected (n_queries, n_llms) with "
            f"n_llms = {len(llm_ids)}"
        )
    return {llm for j, llm in enumerate(llm_ids) if np.isfinite(matrix[:, j]).all()}


@dataclass(frozen=True)
class RankedLLM:
    """One candidate for a query: its P(correct), expected cost (None: unknown), utility, and
    the standard deviation of its P(correct) where the router gives one (None: not given):
    it shrinks as the LLM's evidence grows."""

    llm_id: str
    p_correct: float
    cost_usd: float | None
    utility: float
    uncertainty: float | None = None

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
    def uncertainty(self) -> float | None:
        """The standard deviation of the chosen LLM's P(correct), where the router gives one."""
        return next((c.uncertainty for c in self.ranked if c.llm_id == self.llm_id), None)

    @property
    def runners_up(self) -> tuple[RankedLLM, ...]:
        """The candidates after the chosen one, best first."""
        return self.ranked[1:]

    def as_dict(self) -> dict[str, Any]:
        return {
            "llm_id": self.llm_id,
            "p_correct": self.p_correct,
            "cost_usd": self.cost_usd,
            "uncertainty": self.uncertainty,
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

    guard: Guard | None = None  # a fitted router's guard (`StackedRouter`); None: unguarded

    def predict_proba_given_tasks(
        self, query_vectors: NDArray[np.float32], tasks: Sequence[str | None] | None
    ) -> NDArray[np.float32]:
        """P(correct) (n_queries, n_llms) where the request knows some queries' tasks (one per
        query, None where not known). A router that reads no task ignores them; the fitted
        router reads the per-task rates of a known task (`StackedRouter`), the per-task
        baseline its table."""
        return self.predict_proba(query_vectors)

    def evidence_counts(self) -> NDArray[np.float64] | None:
        """(n_llms,) how many scores each LLM's P(correct) rests on, where the router knows:
        each candidate then carries its `uncertainty`. None: not known."""
        return None

    def route(
        self,
        query_vectors: NDArray[np.float32],
        request: RouteRequest | None = None,
        *,
        costs: Costs | None = None,
        tasks: Sequence[str | None] | None = None,
        **options: Any,
    ) -> list[RouteDecision]:
        """Send each query to an LLM by one decision rule (`locus.routing.decision`):

        - accuracy (the default): the highest P(correct), held on the router's `guard`
          default unless another clears its margin (`guarded=False`: no guard);
        - `cost_weight` w > 0: the highest utility P(correct) - w x cost, w in P(correct) per
          USD per query (0.5: half a percentage point of success is worth 1 cent per query);
        - `quality` s in [0, 1]: the cheapest LLM whose P(correct) is at least s x the best
          candidate's on that query (s = 1: the best, cheapest among ties).
        A mean cost per query (a budget) is a cost weight tuned on validation queries:
        `locus.routing.decision.tune_cost_weight`, or the workspace router's `budget`.

        Args:
            query_vectors: (n_queries, dq).
            request: the `RouteRequest` (top, rule, max_cost, unavailable, guarded); keyword
                `options` build or change one (`route(v, top=5, quality=0.95)`).
            costs: USD per query of each LLM: a mapping (the same for every query) or an array
                (n_queries, n_llms) in `llm_ids` order (a `CostModel`'s prediction, NaN where
                unknown). Needed by `cost_weight`, `quality` (every candidate must have one)
                and `max_cost` (an LLM without a cost is no candidate).
            tasks: each query's task where the caller knows it (None: read from the text),
                for routers that read tasks (`predict_proba_given_tasks`).

        Raises:
            LocusInputError: a bad option, unknown costs, or no candidate left.
        """
        request = RouteRequest.of(request, **options)
        if getattr(self, "llm_ids", None) is None:  # a baseline sets it in fit()
            raise LocusNotFittedError(f"{type(self).__name__} is not fitted; call fit() first")
        ids = list(self.llm_ids)  # read once: a live pool may grow while this call runs
        candidates = self._candidates(ids, costs, request)
        proba = np.asarray(self.predict_proba_given_tasks(query_vectors, tasks), dtype=np.float64)
        if proba.ndim != 2 or proba.shape[1] != len(ids):
            raise ValueError(
                f"{type(self).__name__}.predict_proba returned {proba.shape}; expected "
                f"(n_queries, {len(ids)})"
            )
        columns = np.array([index for index, _ in candidates], dtype=np.int64)
        names = [llm for _, llm in candidates]
        cost = cost_matrix(costs, ids, len(proba))[:, columns]  # (n_queries, n_cand)
        chosen_proba = proba[:, columns]  # (n_queries, n_candidates)
        guard = self.guard
        bound = None
        if guard is not None and guard.default in names:
            bound = (names.index(guard.default), guard.margin)
        ranking = decision.rank(chosen_proba, cost, request, guard=bound)
        counts = self.evidence_counts()  # in `llm_ids` order, read now (a live pool grows)
        evidence = (
            None if counts is None else dict(zip(self.llm_ids, counts.tolist(), strict=False))
        )
        decisions = []
        for row, ranked in enumerate(ranking.order):
            if ranked[0] < 0:
                raise decision.no_candidate_error(request, cost, row)
            entries = tuple(
                RankedLLM(
                    llm_id=names[c],
                    p_correct=float(chosen_proba[row, c]),
                    cost_usd=None if math.isnan(cost[row, c]) else float(cost[row, c]),
                    utility=float(ranking.utility[row, c]),
                    uncertainty=_uncertainty(float(chosen_proba[row, c]), names[c], evidence),
                )
                for c in ranked
                if c >= 0  # over max_cost on this query: not even a fallback
            )
            first = entries[0]
            decisions.append(
                RouteDecision(
                    llm_id=first.llm_id,
                    p_correct=first.p_correct,
                    cost_usd=first.cost_usd,
                    ranked=entries,
                    held=bool(ranking.held[row]),
                )
            )
        return decisions

    def _candidates(
        self, ids: list[str], costs: Costs | None, request: RouteRequest
    ) -> list[tuple[int, str]]:
        """(column, llm_id) of every LLM that may be chosen, after checking the request
        against the pool and the costs."""
        known, down = set(ids), request.unavailable
        strangers = sorted(down - known)
        if strangers:
            raise LocusNotFoundError(
                f"unavailable LLM {strangers[0]!r} is not in the pool; expected some of "
                f"{', '.join(ids[:5])}{', ...' if len(known) > 5 else ''}"
            )
        priced = _priced_llms(costs, ids)
        rule = request.rule or "max_cost"
        if (request.uses_cost or request.max_cost is not None) and not priced:
            raise LocusInputError(
                f"{rule} needs each LLM's cost per query; import scores with a cost_usd column "
                "or give prices in the LLM catalog (cost_per_query, or price_in_per_mtok and "
                "price_out_per_mtok: `locus import llms`); library: costs={llm_id: usd}"
            )
        candidates = [(i, llm) for i, llm in enumerate(ids) if llm not in down]
        if request.max_cost is not None:
            candidates = [(i, llm) for i, llm in candidates if llm in priced]
        if request.uses_cost:
            unpriced = [llm for _, llm in candidates if llm not in priced]
            if unpriced:
                raise unpriced_error(rule, unpriced)
        if not candidates:
            raise LocusInputError(
                "no LLM is left to route to"
                + (
                    "; none has a known cost for max_cost"
                    if request.max_cost is not None and priced
                    else "; every LLM is unavailable"
                )
            )
        return candidates

    def save(self, path: str | Path) -> Path:
        """Write the fitted router to the folder `path` (JSON + safetensors/npz, no pickle)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be saved")


def _uncertainty(p: float, llm_id: str, evidence: Mapping[str, float] | None) -> float | None:
    n = None if evidence is None else evidence.get(llm_id)
    return None if n is None else spread(p, n)


class TextRouter(Protocol):
    """What routes query *texts* for a long-lived service (`WorkspaceRouter` is one): the pool,
    its known costs, one routing call with every option, and a refresh when the pool changed.
    `locus.server` depends on this, not on a concrete router."""

    @property
    def llm_ids(self) -> Sequence[str]: ...

    @property
    def costs(self) -> Mapping[str, float]: ...

    def route_texts(
        self,
        texts: Sequence[str],
        request: RouteRequest | None = None,
        *,
        tasks: Sequence[str | None] | None = None,
        **options: Any,
    ) -> list[RouteDecision]: ...

    def refresh(self) -> None: ...
