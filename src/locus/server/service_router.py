"""What `locus serve` asks the router, in one place: `ServiceRouter` (the workspace router
behind the service, one routing call at a time, following the pool other replicas write to the
shared store), the model names a chat routes by (`parse_model`: a decision rule), POST
/v1/route (`parse_route_body`, `add_route_route`) and the cost rules /v1/models lists
(`cost_rules`). The gateway's fallback order asks `ServiceRouter.rank`
(`Gateway.fallback_order`)."""

from __future__ import annotations

import difflib
import math
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
from fastapi import FastAPI, Request

from locus.errors import LocusInputError
from locus.routing.decision import RouteRequest
from locus.routing.router import RankedLLM, RouteDecision, TextRouter
from locus.server.http_io import BadRequest, non_negative, read_json_body, unavailable_llms
from locus.server.settings import ServerSettings

__all__ = [
    "ROUTE_FIELDS",
    "ROUTING_MODEL",
    "RouteQuery",
    "ServiceRouter",
    "add_route_route",
    "cost_rules",
    "parse_model",
    "parse_route_body",
]

ROUTING_MODEL = "locus"

# what a /v1/route body may hold; anything else is a 400 naming it
ROUTE_FIELDS = (
    "text",
    "texts",
    "top",
    "cost_weight",
    "quality",
    "budget",
    "max_cost",
    "unavailable",
    "guarded",
    "task",
)


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

    def _follow_store(self) -> None:
        """Re-read the pool when another process changed it (called under the lock)."""
        if self._pool_version is None or time.monotonic() - self._checked_at < self._check_every_s:
            return
        self._checked_at = time.monotonic()
        version = self._pool_version()
        if version != self._seen:
            self.router.refresh()
            self._seen = version

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

    def decide(
        self, texts: Sequence[str], request: RouteRequest, task: str | None = None
    ) -> list[RouteDecision]:
        """The routing decision of each text under `request` (every text of `task`, where the
        caller knows it), one call at a time."""
        tasks = None if task is None else [task] * len(texts)
        with self._lock:
            self._follow_store()
            return list(self.router.route_texts(list(texts), request, tasks=tasks))

    def rank(
        self, texts: Sequence[str], request: RouteRequest, task: str | None = None
    ) -> list[list[RankedLLM]]:
        """Every candidate per text (of `task`, where known), best first (the gateway's
        fallback order)."""
        decisions = self.decide(texts, replace(request, top=len(self.llm_ids)), task)
        return [list(d.ranked) for d in decisions]


def parse_model(name: object, llm_ids: Collection[str]) -> tuple[str | None, RouteRequest]:
    """The model name -> (a fixed llm_id or None to route, the request with its decision
    rule): `locus` (accuracy), `locus:cost=W`, `locus:quality=S`, `locus:budget=B`
    (`locus.routing.decision`).

    Raises:
        LocusInputError: not a string, an unknown model, a malformed or out-of-range rule.
    """
    if not isinstance(name, str) or not name:
        raise LocusInputError(
            f"model must be {ROUTING_MODEL!r}, 'locus:quality=S', 'locus:budget=B', "
            "'locus:cost=W' or an llm_id"
        )
    if name in llm_ids:
        return name, RouteRequest()
    if name == ROUTING_MODEL:
        return None, RouteRequest()
    head, sep, tail = name.partition(":")
    if head == ROUTING_MODEL and sep:
        try:
            return None, RouteRequest.parse_rule(tail)
        except LocusInputError as error:
            raise LocusInputError(f"model {name!r}: {error}") from None
    shown = ", ".join(sorted(llm_ids)[:5])
    raise LocusInputError(
        f"unknown model {name!r}; expected {ROUTING_MODEL!r}, 'locus:quality=0.95', "
        f"'locus:budget=0.001', 'locus:cost=10' or an llm_id ({shown}, ...; GET /v1/models "
        "lists them)"
    )


@dataclass(frozen=True)
class RouteQuery:
    """What a /v1/route body asks: its texts (`batch`: sent as "texts", answered as a list),
    the `RouteRequest` (its `top`: the candidates to report) and the texts' task where the
    caller knows it."""

    texts: list[str]
    batch: bool
    request: RouteRequest
    task: str | None = None


def parse_route_body(
    data: Mapping[str, Any], *, known: Collection[str], max_batch: int, top: int
) -> RouteQuery:
    """A /v1/route body, checked: `known` the pool's LLMs, `max_batch` the most texts,
    `top` the candidates reported when the body does not say.

    Raises:
        BadRequest: a 4xx naming the field that is wrong.
        LocusInputError: a decision rule out of range (a 400 too).
    """
    unknown = [name for name in data if name not in ROUTE_FIELDS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], ROUTE_FIELDS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadRequest(
            400,
            f"unknown field {unknown[0]!r}{hint}; expected some of {', '.join(ROUTE_FIELDS)}",
            "invalid_request",
        )
    if "text" in data and "texts" in data:
        raise BadRequest(
            400, "expected 'text' (one query) or 'texts' (a list), not both", "invalid_request"
        )
    if "text" not in data and "texts" not in data:
        raise BadRequest(
            400,
            "expected 'text' (one query) or 'texts' (a list of queries); found neither",
            "invalid_request",
        )
    if "text" in data and not isinstance(data["text"], str):
        found = type(data["text"]).__name__
        raise BadRequest(400, f"text: expected a string, found {found}", "invalid_request")
    texts = [data["text"]] if "text" in data else data["texts"]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise BadRequest(400, "texts: expected a non-empty list of strings", "invalid_request")
    if len(texts) > max_batch:
        raise BadRequest(413, f"batch of {len(texts):,} texts; at most {max_batch:,}", "too_large")
    if any(not t.strip() for t in texts):
        raise BadRequest(400, "a text is empty; expected query text to route", "invalid_request")
    top = data.get("top", top)
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise BadRequest(
            400, f"top: expected a whole number >= 1, found {top!r}", "invalid_request"
        )
    task = data.get("task")
    if task is not None and (not isinstance(task, str) or not task.strip()):
        raise BadRequest(400, f"task: expected a task name, found {task!r}", "invalid_request")
    guarded = data.get("guarded", True)
    if not isinstance(guarded, bool):
        raise BadRequest(400, "guarded: expected true or false", "invalid_request")
    request = RouteRequest(
        top=top,
        cost_weight=non_negative(data, "cost_weight", 0.0) or 0.0,
        quality=non_negative(data, "quality", None),
        budget=non_negative(data, "budget", None),
        max_cost=non_negative(data, "max_cost", None),
        unavailable=frozenset(unavailable_llms(known, data.get("unavailable"))),
        guarded=guarded,
    )  # one rule, every value in range
    return RouteQuery(texts, "texts" in data, request, task)


def add_route_route(
    app: FastAPI, router: ServiceRouter, settings: ServerSettings, known: set[str]
) -> None:
    """POST /v1/route: the routing decision for texts, without calling an LLM."""

    @app.post("/v1/route")
    async def route(request: Request) -> dict[str, Any]:
        data = await read_json_body(request, settings.max_body_bytes)
        query = parse_route_body(data, known=known, max_batch=settings.max_batch, top=settings.top)
        # one routing call: the whole ranking is the fallback order, its head the answer
        whole = replace(query.request, top=len(router.llm_ids))
        decisions = await anyio.to_thread.run_sync(
            lambda: router.decide(query.texts, whole, query.task)
        )
        answers = [
            {
                **replace(d, ranked=d.ranked[: query.request.top]).as_dict(),
                "fallback_order": [c.llm_id for c in d.ranked],
            }
            for d in decisions
        ]
        return {"decisions": answers} if query.batch else answers[0]


def cost_rules(costs: Mapping[str, float] | None) -> list[str]:
    """The cost rules /v1/models lists, given the costs of the LLMs a cost rule weighs
    (`ServiceRouter.costs_of`; None: one of them is unpriced, so no cost rule can route): a
    quality rule, a budget of their mean cost per query (rounded up: at least the cheapest
    routing's) where it is not 0, a cost weight."""
    if costs is None:
        return []
    mean = sum(costs.values()) / len(costs)
    budget = [f"budget={_round_up(mean)}"] if mean > 0 else []
    return ["quality=0.95", *budget, "cost=10"]


def _round_up(usd: float) -> str:
    """`usd` rounded up to two significant digits, as text.

    >>> _round_up(0.0035), _round_up(0.00123), _round_up(0.001), _round_up(123.0)
    ('0.0035', '0.0013', '0.001', '130')
    """
    decimals = 1 - math.floor(math.log10(usd))
    rounded = math.ceil(usd * 10**decimals - 1e-9) / 10**decimals
    text = f"{rounded:.{max(decimals, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
