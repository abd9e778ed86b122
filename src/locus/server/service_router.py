"""`ServiceRouter`: the workspace router behind `locus serve`, one routing call at a time,
following the pool other replicas write to the shared store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence

from locus.routing.router import RankedLLM, RouteDecision, TextRouter

__all__ = ["ServiceRouter"]


class ServiceRouter:
    """The workspace router behind the service: `rank` (fallback orders) and `decide` (the
    /v1/route answer), one call at a time. Wraps any `locus.routing.router.TextRouter` (a
    `locus.routing.WorkspaceRouter`)."""

    def __init__(
        self,
        router: TextRouter,
        *,
        pool_version: Callable[[], object] | None = None,
        check_every_s: float = 1.0,
    ) -> None:
        """`pool_version`: a cheap read that changes when another process rewrote the pool
        (the store's `embeddings_version`); checked at most every `check_every_s`, and the
        router's `refresh()` runs when it changed."""
        self.router = router
        self._lock = threading.Lock()  # the router's text cache and encoder: one at a time
        self._pool_version = pool_version
        self._check_every_s = check_every_s
        self._seen = None if pool_version is None else pool_version()
        self._checked_at = time.monotonic()
        self.refreshes = 0

    def _follow_store(self) -> None:
        """Re-read the pool when another process changed it (called under the lock)."""
        if self._pool_version is None or time.monotonic() - self._checked_at < self._check_every_s:
            return
        self._checked_at = time.monotonic()
        version = self._pool_version()
        if version != self._seen:
            self.router.refresh()
            self._seen = version
            self.refreshes += 1

    @property
    def llm_ids(self) -> list[str]:
        return list(self.router.llm_ids)

    def costs_of(self, llm_ids: Collection[str]) -> dict[str, float] | None:
        """USD per query of each LLM of `llm_ids` (of the pool) when every one has a cost, so
        a cost rule can weigh them; None when one has none, or for none."""
        costs = getattr(self.router, "costs", None) or {}
        chosen = [llm for llm in self.llm_ids if llm in llm_ids]
        if not chosen or not all(llm in costs for llm in chosen):
            return None
        return {llm: float(costs[llm]) for llm in chosen}

    def priced(self, llm_ids: Collection[str]) -> bool:
        """True when every LLM of `llm_ids` (of the pool) has a cost; False for none."""
        return self.costs_of(llm_ids) is not None

    def decide(
        self,
        texts: Sequence[str],
        *,
        top: int,
        cost_weight: float = 0.0,
        quality: float | None = None,
        budget: float | None = None,
        max_cost: float | None = None,
        unavailable: Sequence[str] = (),
        guarded: bool = True,
    ) -> list[RouteDecision]:
        with self._lock:
            self._follow_store()
            return list(
                self.router.route_texts(
                    list(texts), top=top, cost_weight=cost_weight, quality=quality,
                    budget=budget, max_cost=max_cost, unavailable=unavailable,
                    guarded=guarded,
                )
            )  # fmt: skip

    def rank(
        self,
        texts: Sequence[str],
        *,
        cost_weight: float = 0.0,
        quality: float | None = None,
        budget: float | None = None,
        unavailable: Sequence[str] = (),
    ) -> list[list[RankedLLM]]:
        """Every candidate per text, best first (the gateway's fallback order)."""
        decisions = self.decide(
            texts, top=len(self.llm_ids), cost_weight=cost_weight, quality=quality,
            budget=budget, unavailable=unavailable,
        )  # fmt: skip
        return [list(d.ranked) for d in decisions]
