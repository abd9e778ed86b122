"""`Gateway`: route a chat request, walk the fallback order, account the answer.

The model name selects routing: `locus` (P(correct) alone, guarded as `locus route` is),
`locus:cost=W` (P(correct) - W x USD per query), or a real llm_id (that LLM first, then the
predictor's next best for the query). The fallback order is the routing ranking (issue 11
measured the next best by the predictor to keep more of hit@1 than the nearest LLM by
embedding), restricted to LLMs with an endpoint, skipping LLMs whose circuit is open; bounded
by `max_attempts` and `total_timeout_s`. With exploration on (`ServerSettings.explore`, or a
request's own `explore` share), a routed request may go first to an LLM drawn by its
uncertainty (`locus.routing.explore`; not under a quality rule, never for a pinned LLM), the
rest of the order behind it. A transient failure (a 5xx, a reset connection, a 429
whose Retry-After is short) is retried on the same LLM first (`retries_per_llm`, after
`retry_backoff_s` or the Retry-After), except a half-open circuit's trial, which is one call;
a 404 / 410 "model not found" marks the LLM retired for
this process (the catalog names a model its provider no longer serves) and falls back. The
answer keeps the upstream's own `model` (what really answered); locus's llm_id travels in the
`x-locus-llm` header.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import numpy as np

from locus.routing.explore import Exploration
from locus.routing.router import RankedLLM
from locus.routing.rules import DecisionRule
from locus.server.answers import (
    ROUTING_MODEL,
    ChatAnswer,
    GatewayError,
    StreamAnswer,
    parse_model,
    sse,
)
from locus.server.breaker import CircuitBreaker
from locus.server.latency import LatencyTracker
from locus.server.prometheus import Metrics
from locus.server.settings import ServerSettings
from locus.server.upstream import (
    DONE,
    MALFORMED,
    UpstreamError,
    Upstreams,
    UpstreamStream,
    open_stream,
)

__all__ = ["ROUTING_MODEL", "ChatAnswer", "Gateway", "GatewayError", "StreamAnswer", "parse_model"]

logger = logging.getLogger("locus.server")


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
        rng: the exploration's draws (tests pass a seeded one).
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
        rng: np.random.Generator | None = None,
    ) -> None:
        self.settings = settings or ServerSettings()
        self.exploration = Exploration(self.settings.explore)
        self.rng = rng if rng is not None else np.random.default_rng()
        self._rng_lock = threading.Lock()  # routing runs in worker threads
        self.route = route
        self.llm_ids = llm_ids
        self.upstreams = upstreams
        self.prices = dict(prices or {})
        self.metrics = metrics or Metrics()
        self.breaker = breaker or CircuitBreaker(
            self.settings.breaker_failures, self.settings.breaker_cooldown_s, clock=clock
        )
        self.clock = clock
        self.retired: set[str] = set()  # answered "model not found": skipped from now on
        self.latency = LatencyTracker()

    def fallback_order(
        self,
        text: str,
        fixed: str | None,
        rule: DecisionRule,
        unavailable: Sequence[str] = (),
        max_latency_ms: float | None = None,
        explore: float | None = None,
    ) -> tuple[list[RankedLLM], bool]:
        """The candidates to try for one text, first choice first, and whether the first was
        drawn by exploration: those with an endpoint; on an explored request (`explore`, else
        the server's share) the drawn LLM first; with `max_latency_ms`, those whose recent
        median latency meets it first (in that order), then the others."""
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
        served = self.upstreams.endpoints
        ranked = [c for c in ranked if c.llm_id in served and c.llm_id not in self.retired]
        explored = False
        exploration = self.exploration.with_share(explore)
        if not fixed and rule.quality is None and exploration.share > 0:
            with self._rng_lock:
                ranked, explored = exploration.reorder(ranked, self.rng)
        if max_latency_ms is not None:
            fast = [c for c in ranked if self.latency.meets(c.llm_id, max_latency_ms)]
            ranked = fast + [c for c in ranked if c not in fast]
        return ranked, explored

    async def chat(
        self,
        body: Mapping[str, Any],
        text: str,
        *,
        unavailable: Sequence[str] = (),
        max_latency_ms: float | None = None,
        explore: float | None = None,
    ) -> ChatAnswer:
        """Answer a non-streaming chat request.

        Raises:
            LocusInputError: a bad model name.
            GatewayError: every attempt failed, or an upstream refused the request.
        """

        async def call(llm: str, timeout: float) -> dict[str, Any]:
            return await self.upstreams.complete(llm, body, timeout=timeout)

        llm, payload, attempts, failed, predicted, explored = await self._first_success(
            body, text, unavailable, call, max_latency_ms, explore
        )
        model = str(payload.get("model") or self._endpoint_model(llm))
        payload = {**payload, "model": model}
        cost = self.cost(llm, payload)
        return ChatAnswer(payload, llm, attempts, cost, failed, predicted, model, explored)

    async def stream(
        self,
        body: Mapping[str, Any],
        text: str,
        *,
        unavailable: Sequence[str] = (),
        max_latency_ms: float | None = None,
        explore: float | None = None,
    ) -> StreamAnswer:
        """Start a streaming chat request: every failure before the first token falls back;
        the answer's `events` are the SSE lines, each chunk's model the answering LLM's. A
        stream that fails after its first token ends with an error event and no [DONE], so a
        client never takes a truncated answer for a complete one; one that closes after its
        last chunk (a `finish_reason`) without sending [DONE] is complete, and gets its [DONE].
        Malformed chunks are skipped and counted (`malformed_chunks_max` in a row end it)."""

        async def call(llm: str, timeout: float) -> UpstreamStream:
            return await open_stream(
                self.upstreams, llm, body,
                first_token_s=min(timeout, self.settings.first_token_timeout_s),
                stall_s=self.settings.stall_timeout_s,
                malformed_max=self.settings.malformed_chunks_max,
            )  # fmt: skip

        llm, upstream, attempts, failed, predicted, explored = await self._first_success(
            body, text, unavailable, call, max_latency_ms, explore
        )
        if upstream.malformed:
            self.metrics.upstream_errors.labels(llm, "malformed_chunk").inc(upstream.malformed)
        model = self._endpoint_model(llm)
        for chunk in upstream.head:
            if isinstance(chunk, dict) and chunk.get("model"):
                model = str(chunk["model"])
                break
        events = self._events(llm, model, upstream)
        return StreamAnswer(llm, attempts, events, failed, predicted, model, explored)

    async def _events(self, llm: str, model: str, upstream: UpstreamStream) -> AsyncIterator[bytes]:
        finished = False  # a chunk with a finish_reason: the answer is whole

        def event(chunk: Any) -> bytes:
            nonlocal finished
            if isinstance(chunk, dict):
                finished = finished or any(
                    isinstance(c, dict) and c.get("finish_reason")
                    for c in chunk.get("choices") or []
                )
                chunk = {**chunk, "model": chunk.get("model") or model}
            return sse(chunk)

        def broken(message: str) -> bytes:
            return sse({"error": {"message": message, "type": "upstream_stream_error"}})

        malformed = 0
        try:
            for chunk in upstream.head:
                yield event(chunk)
            while True:
                try:
                    chunk = await upstream.next_chunk()
                except UpstreamError as error:
                    self._failed(llm, error, [])
                    yield broken(f"{error}; the answer is incomplete")
                    return
                if chunk == MALFORMED:
                    self.metrics.upstream_errors.labels(llm, "malformed_chunk").inc()
                    malformed += 1
                    if malformed > self.settings.malformed_chunks_max:
                        yield broken(f"{llm}: the stream is malformed; the answer is incomplete")
                        return
                    continue
                malformed = 0
                if chunk is None:
                    self.metrics.upstream_errors.labels(llm, "no_done").inc()
                    if finished:  # closed after its last chunk: complete, only [DONE] missing
                        yield b"data: [DONE]\n\n"
                        return
                    yield broken(
                        f"{llm}: the stream ended without [DONE]; the answer may be incomplete"
                    )
                    return
                if chunk == DONE:
                    yield b"data: [DONE]\n\n"
                    return
                yield event(chunk)
        finally:
            await upstream.aclose()

    async def _first_success(
        self,
        body: Mapping[str, Any],
        text: str,
        unavailable: Sequence[str],
        call: Callable[[str, float], Awaitable[Any]],
        max_latency_ms: float | None = None,
        explore: float | None = None,
    ) -> tuple[str, Any, int, list[dict[str, Any]], RankedLLM | None, bool]:
        """Walk the fallback order until `call(llm, timeout)` succeeds: the LLM, its result,
        the attempts, the failures before it, its prediction, whether it was explored."""
        fixed, rule = parse_model(body.get("model"), self.upstreams.endpoints)
        # routing encodes new texts (milliseconds of CPU): off the event loop
        ranked, explored = await anyio.to_thread.run_sync(
            lambda: self.fallback_order(text, fixed, rule, unavailable, max_latency_ms, explore)
        )
        candidate_of = {c.llm_id: c for c in ranked}
        order = list(candidate_of)
        if not order:
            raise GatewayError(503, "no LLM with an endpoint is available", kind="unavailable")
        started = self.clock()
        failed: list[dict[str, Any]] = []
        attempts = tried = 0
        refusal: UpstreamError | None = None  # a fallback's 4xx: that LLM's, not the request's
        refused: dict[str, Any] = {}  # its entry in `failed`
        for position, llm in enumerate(order):
            if tried >= self.settings.max_attempts:
                break
            if not self.breaker.allow(llm):
                failed.append({"llm_id": llm, "kind": "circuit_open"})
                continue
            # a half-open circuit's trial is one call: its failure opens the circuit again
            trial = self.breaker.state(llm) == "half-open"
            tried += 1
            tries = 0
            while True:
                remaining = self.settings.total_timeout_s - (self.clock() - started)
                if remaining <= 0:
                    break
                attempts += 1
                tries += 1
                began = time.perf_counter()
                try:
                    result = await call(llm, min(self.settings.attempt_timeout_s, remaining))
                except UpstreamError as error:
                    self.latency.record(llm, time.perf_counter() - began, ok=False)
                    self._failed(llm, error, failed)
                    if not error.retryable:
                        if tried == 1:  # the first choice refused the request: the client's
                            raise GatewayError(
                                error.status or 502, str(error), kind=error.kind,
                                body=error.body, llm_id=llm, attempts=attempts,
                                failed=failed[:-1],
                            ) from None  # fmt: skip
                        # a fallback refusing (a prefill or a parameter it does not take) is
                        # that LLM's limit: the next one may take the request
                        if refusal is None:
                            refusal, refused = error, failed[-1]
                        break
                    if error.kind == "retired":
                        self._retire(llm, order[position + 1 :])
                    wait = None if trial else self._retry_wait(error, tries)
                    if wait is None:
                        break  # the next LLM
                    self.metrics.upstream_errors.labels(llm, "retried").inc()
                    await anyio.sleep(min(wait, max(remaining, 0.0)))
                    continue
                finally:
                    self.metrics.upstream_latency.labels(llm).observe(time.perf_counter() - began)
                self.latency.record(llm, time.perf_counter() - began, ok=True)
                self.breaker.success(llm)
                self.metrics.choices.labels(llm).inc()
                if position > 0:
                    self.metrics.fallbacks.inc()
                explored_here = explored and position == 0
                if explored_here:
                    self.metrics.explored.labels(llm).inc()
                return llm, result, attempts, failed, candidate_of[llm], explored_here
        if refusal is not None and all(f["kind"] == "refused" for f in failed[-1:]):
            raise GatewayError(
                refusal.status or 502, str(refusal), kind=refusal.kind, body=refusal.body,
                llm_id=refusal.llm_id, attempts=attempts,
                failed=[f for f in failed if f is not refused],
            )  # fmt: skip
        summary = "; ".join(f"{f['llm_id']}: {f['kind']}" for f in failed) or "no attempt"
        timed_out = any(f["kind"] == "timeout" for f in failed)
        raise GatewayError(
            504 if timed_out and len(failed) == attempts else 503,
            f"no LLM answered after {attempts} attempts ({summary})",
            kind="all_failed", attempts=attempts, failed=failed,
        )  # fmt: skip

    def _endpoint_model(self, llm: str) -> str:
        """The catalog's model name for `llm` (its llm_id where a catalog reload removed it
        while a request was on its way)."""
        endpoint = self.upstreams.endpoints.get(llm)
        return llm if endpoint is None else endpoint.model

    def set_catalog(
        self, endpoints: Mapping[str, Any], prices: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, list[str]]:
        """Take a re-read catalog without a restart: endpoints added, changed and removed,
        prices; LLMs retired for answering 'model not found' get another chance (their entry
        may be corrected). Returns what changed."""
        before = dict(self.upstreams.endpoints)
        self.upstreams.endpoints = dict(endpoints)
        self.prices = {llm: dict(fields) for llm, fields in prices.items()}
        self.retired.clear()
        return {
            "added": sorted(set(endpoints) - set(before)),
            "removed": sorted(set(before) - set(endpoints)),
            "changed": sorted(
                llm for llm in set(before) & set(endpoints) if before[llm] != endpoints[llm]
            ),
        }

    def _retry_wait(self, error: UpstreamError, tries: int) -> float | None:
        """Seconds to wait before calling the same LLM again, or None to move on: transient
        failures only, `retries_per_llm` times, a 429 after its Retry-After when that is at
        most `retry_after_max_s`."""
        if not error.transient or tries > self.settings.retries_per_llm:
            return None
        if error.kind == "rate_limited" and error.retry_after is not None:
            if error.retry_after > self.settings.retry_after_max_s:
                return None
            return error.retry_after
        return self.settings.retry_backoff_s

    def _retire(self, llm: str, rest: Sequence[str]) -> None:
        """Skip `llm` from now on: its provider answered that the model does not exist."""
        self.retired.add(llm)
        self.metrics.upstream_errors.labels(llm, "retired").inc()
        substitute = rest[0] if rest else "none left"
        logger.warning(
            "%s: the upstream answered 'model not found' (its endpoint model %r is retired or "
            "misnamed in the catalog); marked unavailable until the server restarts with a "
            "corrected catalog; this request falls back to %s",
            llm,
            self._endpoint_model(llm),
            substitute,
        )

    def _failed(self, llm: str, error: UpstreamError, failed: list[dict[str, Any]]) -> None:
        failed.append({"llm_id": llm, "kind": error.kind, "status": error.status})
        self.metrics.upstream_errors.labels(llm, error.kind).inc()
        if error.counts_against_llm:
            self.breaker.failure(llm, error.kind)
        else:  # the upstream answered (a refusal, a context limit): it is up, a trial included
            self.breaker.success(llm)
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
