"""`Gateway`: route a chat request, walk the fallback order, account the answer.

The model name selects routing: `locus` (P(correct) alone, guarded as `locus route` is),
`locus:cost=W` (P(correct) - W x USD per query), or a real llm_id (that LLM first, then the
predictor's next best for the query). The fallback order is the routing ranking (issue 11
measured the next best by the predictor to keep more of hit@1 than the nearest LLM by
embedding), restricted to LLMs with an endpoint, skipping LLMs whose circuit is open; bounded
by `max_attempts` and `total_timeout_s`.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from locus.errors import LocusInputError
from locus.routing.router import RankedLLM
from locus.routing.rules import DecisionRule
from locus.server.breaker import CircuitBreaker
from locus.server.prometheus import Metrics
from locus.server.settings import ServerSettings
from locus.server.upstream import DONE, UpstreamError, Upstreams, UpstreamStream, open_stream

__all__ = ["ROUTING_MODEL", "ChatAnswer", "Gateway", "GatewayError", "StreamAnswer", "parse_model"]

ROUTING_MODEL = "locus"


class GatewayError(Exception):
    """No LLM answered (`status` 502/503/504), or an upstream refused the request (its 4xx)."""

    def __init__(self, status: int, message: str, *, kind: str, body: Any = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.body = status, kind, body


@dataclass(frozen=True)
class ChatAnswer:
    """The answering LLM's completion and how it came about."""

    payload: dict[str, Any]
    llm_id: str
    attempts: int
    cost_usd: float | None
    failed: list[dict[str, Any]] = field(default_factory=list)
    predicted: RankedLLM | None = None  # the router's P(correct) and expected cost for it

    @property
    def fell_back(self) -> bool:
        return self.attempts > 1


@dataclass(frozen=True)
class StreamAnswer:
    """A stream past its first token: the answering LLM, attempts, and the SSE lines."""

    llm_id: str
    attempts: int
    events: AsyncIterator[bytes]
    failed: list[dict[str, Any]] = field(default_factory=list)
    predicted: RankedLLM | None = None


def _sse(data: Any) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def parse_model(name: object, llm_ids: Collection[str]) -> tuple[str | None, DecisionRule]:
    """The model name -> (a fixed llm_id or None to route, the decision rule): `locus`
    (accuracy), `locus:cost=W`, `locus:quality=S`, `locus:budget=B` (`locus.routing.rules`).

    Raises:
        LocusInputError: not a string, an unknown model, a malformed or out-of-range rule.
    """
    if not isinstance(name, str) or not name:
        raise LocusInputError(
            f"model must be {ROUTING_MODEL!r}, 'locus:quality=S', 'locus:budget=B', "
            "'locus:cost=W' or an llm_id"
        )
    if name in llm_ids:
        return name, DecisionRule()
    if name == ROUTING_MODEL:
        return None, DecisionRule()
    head, sep, tail = name.partition(":")
    if head == ROUTING_MODEL and sep:
        try:
            return None, DecisionRule.parse(tail)
        except LocusInputError as error:
            raise LocusInputError(f"model {name!r}: {error}") from None
    shown = ", ".join(sorted(llm_ids)[:5])
    raise LocusInputError(
        f"unknown model {name!r}; expected {ROUTING_MODEL!r}, 'locus:quality=0.95', "
        f"'locus:budget=0.001', 'locus:cost=10' or an llm_id ({shown}, ...; GET /v1/models "
        "lists them)"
    )


class Gateway:
    """Chat requests through the router to the LLMs' endpoints.

    Args:
        route: texts + unavailable + a decision rule's keywords -> the ranked candidates per
            text (`ServiceRouter.rank`: the workspace router's ranking).
        upstreams: the endpoints.
        prices: llm_id -> metadata with price_in_per_mtok / price_out_per_mtok /
            cost_per_query, for the cost of an answer.
        clock: monotonic seconds (tests).
        llm_ids: the pool's LLMs now (a cost rule leaves out those without an endpoint).
    """

    def __init__(
        self,
        route: Callable[..., list[list[RankedLLM]]],
        upstreams: Upstreams,
        *,
        prices: Mapping[str, Mapping[str, Any]] | None = None,
        settings: ServerSettings | None = None,
        metrics: Metrics | None = None,
        breaker: CircuitBreaker | None = None,
        clock: Callable[[], float] = time.monotonic,
        llm_ids: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        self.settings = settings or ServerSettings()
        self.route = route
        self.llm_ids = llm_ids
        self.upstreams = upstreams
        self.prices = dict(prices or {})
        self.metrics = metrics or Metrics()
        self.breaker = breaker or CircuitBreaker(
            self.settings.breaker_failures, self.settings.breaker_cooldown_s, clock=clock
        )
        self.clock = clock

    def fallback_order(
        self,
        text: str,
        fixed: str | None,
        rule: DecisionRule,
        unavailable: Sequence[str] = (),
    ) -> list[RankedLLM]:
        """The candidates to try for one text, first choice first: those with an endpoint."""
        if rule.uses_cost:
            # a cost rule weighs only LLMs that can answer: one without an endpoint (and so
            # perhaps without a price) is no candidate
            served = self.upstreams.endpoints
            idle = [llm for llm in self.llm_ids() if llm not in served and llm not in unavailable]
            unavailable = [*unavailable, *idle]
        [ranked] = self.route([text], unavailable=unavailable, **rule.as_kwargs())
        if fixed:
            ranked = sorted(ranked, key=lambda candidate: candidate.llm_id != fixed)
            if not any(candidate.llm_id == fixed for candidate in ranked):
                ranked = [RankedLLM(fixed, float("nan"), None, float("nan")), *ranked]
        return [c for c in ranked if c.llm_id in self.upstreams.endpoints]

    async def chat(
        self, body: Mapping[str, Any], text: str, *, unavailable: Sequence[str] = ()
    ) -> ChatAnswer:
        """Answer a non-streaming chat request.

        Raises:
            LocusInputError: a bad model name.
            GatewayError: every attempt failed, or an upstream refused the request.
        """

        async def call(llm: str, timeout: float) -> dict[str, Any]:
            return await self.upstreams.complete(llm, body, timeout=timeout)

        llm, payload, attempts, failed, predicted = await self._first_success(
            body, text, unavailable, call
        )
        payload = {**payload, "model": llm}
        return ChatAnswer(payload, llm, attempts, self.cost(llm, payload), failed, predicted)

    async def stream(
        self, body: Mapping[str, Any], text: str, *, unavailable: Sequence[str] = ()
    ) -> StreamAnswer:
        """Start a streaming chat request: every failure before the first token falls back;
        the answer's `events` are the SSE lines, each chunk's model the answering LLM's. A
        stream that fails after its first token ends with an error event and no [DONE], so a
        client never takes a truncated answer for a complete one."""

        async def call(llm: str, timeout: float) -> UpstreamStream:
            return await open_stream(
                self.upstreams, llm, body, first_token_s=timeout,
                stall_s=self.settings.stall_timeout_s,
            )  # fmt: skip

        llm, upstream, attempts, failed, predicted = await self._first_success(
            body, text, unavailable, call
        )
        return StreamAnswer(llm, attempts, self._events(llm, upstream), failed, predicted)

    async def _events(self, llm: str, upstream: UpstreamStream) -> AsyncIterator[bytes]:
        try:
            for chunk in upstream.head:
                yield _sse({**chunk, "model": llm})
            while True:
                try:
                    chunk = await upstream.next_chunk()
                except UpstreamError as error:
                    self._failed(llm, error, [])
                    yield _sse({"error": {"message": f"{error}; the answer is incomplete",
                                          "type": "upstream_stream_error"}})  # fmt: skip
                    return
                if chunk is None:
                    self.metrics.upstream_errors.labels(llm, "no_done").inc()
                    yield _sse({"error": {"message": f"{llm}: the stream ended without [DONE]; "
                                          "the answer may be incomplete",
                                          "type": "upstream_stream_error"}})  # fmt: skip
                    return
                if chunk == DONE:
                    yield b"data: [DONE]\n\n"
                    return
                yield _sse({**chunk, "model": llm} if isinstance(chunk, dict) else chunk)
        finally:
            await upstream.aclose()

    async def _first_success(
        self,
        body: Mapping[str, Any],
        text: str,
        unavailable: Sequence[str],
        call: Callable[[str, float], Awaitable[Any]],
    ) -> tuple[str, Any, int, list[dict[str, Any]], RankedLLM | None]:
        """Walk the fallback order until `call(llm, timeout)` succeeds."""
        fixed, rule = parse_model(body.get("model"), self.upstreams.endpoints)
        # routing encodes new texts (milliseconds of CPU): off the event loop
        ranked = await anyio.to_thread.run_sync(
            lambda: self.fallback_order(text, fixed, rule, unavailable)
        )
        candidate_of = {c.llm_id: c for c in ranked}
        order = list(candidate_of)
        if not order:
            raise GatewayError(503, "no LLM with an endpoint is available", kind="unavailable")
        started = self.clock()
        failed: list[dict[str, Any]] = []
        attempts = 0
        for llm in order:
            remaining = self.settings.total_timeout_s - (self.clock() - started)
            if attempts >= self.settings.max_attempts or remaining <= 0:
                break
            if not self.breaker.allow(llm):
                failed.append({"llm_id": llm, "kind": "circuit_open"})
                continue
            attempts += 1
            began = time.perf_counter()
            try:
                result = await call(llm, min(self.settings.attempt_timeout_s, remaining))
            except UpstreamError as error:
                self._failed(llm, error, failed)
                if not error.retryable:
                    raise GatewayError(
                        error.status or 502, str(error), kind=error.kind, body=error.body
                    ) from None
                continue
            finally:
                self.metrics.upstream_latency.labels(llm).observe(time.perf_counter() - began)
            self.breaker.success(llm)
            self.metrics.choices.labels(llm).inc()
            if attempts > 1:
                self.metrics.fallbacks.inc()
            return llm, result, attempts, failed, candidate_of[llm]
        summary = "; ".join(f"{f['llm_id']}: {f['kind']}" for f in failed) or "no attempt"
        timed_out = any(f["kind"] == "timeout" for f in failed)
        raise GatewayError(
            504 if timed_out and len(failed) == attempts else 503,
            f"no LLM answered after {attempts} attempts ({summary})",
            kind="all_failed",
        )

    def _failed(self, llm: str, error: UpstreamError, failed: list[dict[str, Any]]) -> None:
        failed.append({"llm_id": llm, "kind": error.kind, "status": error.status})
        self.metrics.upstream_errors.labels(llm, error.kind).inc()
        if error.counts_against_llm:
            self.breaker.failure(llm)
        if error.kind == "rate_limited" and error.retry_after:
            self.breaker.hold(llm, min(error.retry_after, self.settings.breaker_cooldown_s))

    def cost(self, llm: str, payload: Mapping[str, Any]) -> float | None:
        """USD of one answer: tokens x prices per million, else the LLM's cost per query."""
        price = self.prices.get(llm, {})
        usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else None
        if usage and ("price_in_per_mtok" in price or "price_out_per_mtok" in price):
            tokens_in = float(usage.get("prompt_tokens") or 0)
            tokens_out = float(usage.get("completion_tokens") or 0)
            return (
                tokens_in * float(price.get("price_in_per_mtok") or 0)
                + tokens_out * float(price.get("price_out_per_mtok") or 0)
            ) / 1e6
        value = price.get("cost_per_query")
        return None if value is None else float(value)
