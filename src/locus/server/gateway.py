"""`Gateway`: route a chat request, walk the fallback order, account the answer.

The model name selects routing: `locus` (P(correct) alone, guarded as `locus route` is),
`locus:cost=W` (P(correct) - W x USD per query), or a real llm_id (that LLM first, then the
predictor's next best for the query; the ranking, which encodes a new text, is computed only
when a fallback is needed, so a pinned LLM's answer carries no predicted P(correct)). The
fallback order is the routing ranking (issue 11 measured the next best by the predictor to
keep more of hit@1 than the nearest LLM by embedding), restricted to LLMs with an endpoint,
skipping LLMs whose circuit is open; bounded by `max_attempts` and `total_timeout_s`. With
exploration on (`ServerSettings.explore`, or a request's own `explore` share), a routed
request may go first to an LLM drawn by its uncertainty (`locus.routing.explore`; not under a
quality rule, never for a pinned LLM), the rest of the order behind it. A transient failure
(a 5xx, a reset connection, a 429 whose Retry-After is short) is retried on the same LLM first
(`retries_per_llm`, after `retry_backoff_s` or the Retry-After), except a half-open circuit's
trial, which is one call; a 404 / 410 "model not found" marks the LLM retired for this
process (the catalog names a model its provider no longer serves) and falls back. A stream
that breaks after its first token continues on the next LLM of the same order
(`locus.server.streaming`). The answer keeps the upstream's own `model` (what really
answered); locus's llm_id travels in the `x-locus-llm` header.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
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
)
from locus.server.breaker import CircuitBreaker
from locus.server.latency import LatencyTracker
from locus.server.prometheus import Metrics
from locus.server.settings import ServerSettings
from locus.server.streaming import StreamRelay, continuation_body, resumable
from locus.server.upstream import UpstreamError, Upstreams, UpstreamStream, open_stream

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

    def _pinned_first(self, fixed: str, max_latency_ms: float | None) -> bool:
        """Whether a pinned LLM goes first without the routing ranking: it is served, not
        retired, and meets the request's latency bound (else the ranking reorders it)."""
        return (
            fixed in self.upstreams.endpoints
            and fixed not in self.retired
            and (max_latency_ms is None or self.latency.meets(fixed, max_latency_ms))
        )

    async def _fallbacks(
        self,
        body: Mapping[str, Any],
        text: str,
        unavailable: Sequence[str],
        max_latency_ms: float | None,
        explore: float | None,
    ) -> _Walk:
        """The request's way down its fallback order. For a pinned LLM the routing ranking
        (which encodes a new text: milliseconds of CPU) is computed only when a fallback is
        needed; otherwise at once, off the event loop."""
        fixed, rule = parse_model(body.get("model"), self.upstreams.endpoints)

        def order() -> tuple[list[RankedLLM], bool]:
            return self.fallback_order(text, fixed, rule, unavailable, max_latency_ms, explore)

        if fixed is not None and self._pinned_first(fixed, max_latency_ms):

            async def rest() -> list[RankedLLM]:
                ranked, _ = await anyio.to_thread.run_sync(order)
                return ranked

            pinned = RankedLLM(fixed, float("nan"), None, float("nan"))
            return _Walk(self, [pinned], rest, explored=False)
        ranked, explored = await anyio.to_thread.run_sync(order)
        if not ranked:
            raise GatewayError(503, "no LLM with an endpoint is available", kind="unavailable")
        return _Walk(self, ranked, None, explored=explored)

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

        async def call(llm: str, timeout: float, form: int) -> dict[str, Any]:
            return await self.upstreams.complete(llm, body, timeout=timeout)

        walk = await self._fallbacks(body, text, unavailable, max_latency_ms, explore)
        llm, payload = await walk.first(call, streaming=False)
        model = str(payload.get("model") or self._endpoint_model(llm))
        payload = {**payload, "model": model}
        cost = self.cost(llm, payload)
        return ChatAnswer(
            payload, llm, walk.attempts, cost, list(walk.failed), walk.candidate_of[llm], model,
            walk.explored_first(llm),
        )  # fmt: skip

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
        stream that breaks after its first token (cut, stalled, malformed) continues on the
        next LLM of the same fallback order, the answer so far as a prefill
        (`locus.server.streaming`), so the caller gets one whole answer; where no LLM
        continues it, it ends with an error event and no [DONE], so a client never takes a
        truncated answer for a complete one. One that closes after its last chunk (a
        `finish_reason`) without sending [DONE] is complete, and gets its [DONE]. Malformed
        chunks are skipped and counted (`malformed_chunks_max` in a row break the stream)."""

        def caller(partial: str | None) -> Callable[[str, float, int], Awaitable[UpstreamStream]]:
            """The call of one LLM: the request as it came, or (`partial`: the answer so far)
            its continuation, form 0 with a prefill, form 1 with the partial answer quoted."""

            async def call(llm: str, timeout: float, form: int) -> UpstreamStream:
                sent = (
                    body if partial is None else continuation_body(body, partial, prefill=form == 0)
                )
                return await open_stream(
                    self.upstreams, llm, sent,
                    first_token_s=min(timeout, self.settings.first_token_timeout_s),
                    stall_s=self.settings.stall_timeout_s,
                    malformed_max=self.settings.malformed_chunks_max,
                )  # fmt: skip

            return call

        walk = await self._fallbacks(body, text, unavailable, max_latency_ms, explore)
        llm, upstream = await walk.first(caller(None), streaming=True)
        failed = list(walk.failed)  # what the headers name: the failures before the answer

        async def resume(
            partial: str, broken: str, reason: str
        ) -> tuple[str, UpstreamStream, str] | str:
            """Where the answer goes on after `broken`'s stream broke (`StreamRelay`)."""
            before = len(walk.failed)
            found = await walk.resume(caller(partial))
            if found is None:
                tried = "; ".join(f"{f['llm_id']}: {f['kind']}" for f in walk.failed[before:])
                logger.warning(
                    "%s: the stream broke after its first token (%s); no LLM continued it (%s)",
                    broken, reason, tried or walk.stopped,
                )  # fmt: skip
                return f"no LLM continued it ({tried or walk.stopped})"
            continuing, stream = found
            logger.warning(
                "%s: the stream broke after its first token (%s); the answer continues on %s",
                broken, reason, continuing,
            )  # fmt: skip
            return continuing, stream, self._stream_model(continuing, stream)

        model = self._stream_model(llm, upstream)
        relay = StreamRelay(
            llm, model, upstream, resumable=resumable(body), resume=resume,
            broke=self._stream_broke, ended=self._stream_ended, metrics=self.metrics,
            malformed_max=self.settings.malformed_chunks_max,
        )  # fmt: skip
        return StreamAnswer(
            llm, walk.attempts, relay.events(), failed, walk.candidate_of[llm], model,
            walk.explored_first(llm),
        )  # fmt: skip

    def _stream_model(self, llm: str, upstream: UpstreamStream) -> str:
        """The model name a stream answers as: its first chunk's, else the catalog's."""
        for chunk in upstream.head:
            if isinstance(chunk, dict) and chunk.get("model"):
                return str(chunk["model"])
        return self._endpoint_model(llm)

    def _stream_broke(self, llm: str, upstream: UpstreamStream, error: UpstreamError) -> None:
        """A stream broken after its first token: an error of its LLM (metrics, circuit
        breaker, error rate), as a failure before the first token is."""
        self._failed(llm, error, [])
        self.latency.record_stream(llm, upstream.first_token_s, None, ok=False)

    def _stream_ended(self, llm: str, upstream: UpstreamStream, whole: bool) -> None:
        """A stream that ended whole (its time to the last byte measured), or whose caller
        hung up (only its time to the first token)."""
        seconds = time.perf_counter() - upstream.started if whole else None
        self.latency.record_stream(llm, upstream.first_token_s, seconds, ok=True)

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


class _Walk:
    """One request's way down its fallback order, shared by its first attempt and a stream's
    continuations: the candidates (for a pinned LLM, the rest of the ranking computed when
    first needed), the next to try, the LLMs tried (`max_attempts`), the upstream calls, the
    failures, and the time spent looking for an LLM that answers (`total_timeout_s`: the
    walks together; the time an answer streams is not counted)."""

    def __init__(
        self,
        gateway: Gateway,
        first: Sequence[RankedLLM],
        rest: Callable[[], Awaitable[list[RankedLLM]]] | None,
        *,
        explored: bool,
    ) -> None:
        self.gateway = gateway
        self.candidate_of = {c.llm_id: c for c in first}
        self.order = list(self.candidate_of)
        self._rest = rest
        self.explored = explored  # the first candidate was drawn by exploration
        self.position = 0  # the next candidate to try
        self.tried = 0  # LLMs called
        self.attempts = 0  # upstream calls
        self.failed: list[dict[str, Any]] = []
        self.spent = 0.0  # seconds of the walks so far
        self.stopped = ""  # why the latest walk ended without an answer, in words

    def explored_first(self, llm: str) -> bool:
        """Whether `llm`'s answer is the exploration's draw (the first candidate)."""
        return self.explored and bool(self.order) and self.order[0] == llm

    async def _extend(self, position: int) -> None:
        """Compute the rest of the order once a position past the known candidates is needed."""
        if position < len(self.order) or self._rest is None:
            return
        rest, self._rest = self._rest, None
        for candidate in await rest():
            if candidate.llm_id not in self.candidate_of:
                self.candidate_of[candidate.llm_id] = candidate
                self.order.append(candidate.llm_id)

    async def first(
        self, call: Callable[[str, float, int], Awaitable[Any]], *, streaming: bool
    ) -> tuple[str, Any]:
        """The first LLM of the order whose `call(llm, timeout, form)` succeeds, and its
        result (`form` is always 0 here).

        Raises:
            GatewayError: the first LLM called refused the request (its 4xx, the client's),
                every fallback refused it, or no LLM answered.
        """
        found = await self._advance(call, continuing=False, streaming=streaming)
        assert found is not None  # a first walk raises rather than returning nothing
        return found

    async def resume(
        self, call: Callable[[str, float, int], Awaitable[UpstreamStream]]
    ) -> tuple[str, UpstreamStream] | None:
        """Go on down the order after a stream broke: the next LLM whose `call` succeeds,
        with `form` 0 (a prefill) and, where that LLM refuses it (a 400 / 422), once more
        with `form` 1; None (with `stopped`) when none does."""
        return await self._advance(call, continuing=True, streaming=True)

    async def _advance(
        self,
        call: Callable[[str, float, int], Awaitable[Any]],
        *,
        continuing: bool,
        streaming: bool,
    ) -> tuple[str, Any] | None:
        began_walk = self.gateway.clock()
        try:
            return await self._go(call, continuing, streaming, began_walk)
        finally:
            self.spent += self.gateway.clock() - began_walk

    async def _go(
        self,
        call: Callable[[str, float, int], Awaitable[Any]],
        continuing: bool,
        streaming: bool,
        began_walk: float,
    ) -> tuple[str, Any] | None:
        gateway, settings = self.gateway, self.gateway.settings
        refusal: UpstreamError | None = None  # a fallback's 4xx: that LLM's, not the request's
        refused: dict[str, Any] = {}  # its entry in `failed`
        self.stopped = "no other LLM to try"
        while True:
            if self.tried >= settings.max_attempts:
                self.stopped = f"max_attempts ({settings.max_attempts}) LLMs tried"
                break
            await self._extend(self.position)
            if self.position >= len(self.order):
                break
            position, llm = self.position, self.order[self.position]
            self.position += 1
            if not gateway.breaker.allow(llm):
                self.failed.append({"llm_id": llm, "kind": "circuit_open"})
                continue
            # a half-open circuit's trial is one call: its failure opens the circuit again
            trial = gateway.breaker.state(llm) == "half-open"
            self.tried += 1
            tries = form = 0
            while True:
                remaining = settings.total_timeout_s - self.spent
                remaining -= gateway.clock() - began_walk
                if remaining <= 0:
                    self.stopped = f"total_timeout_s ({settings.total_timeout_s:g} s) spent"
                    break
                self.attempts += 1
                tries += 1
                began = time.perf_counter()
                try:
                    result = await call(llm, min(settings.attempt_timeout_s, remaining), form)
                except UpstreamError as error:
                    gateway.latency.record(llm, time.perf_counter() - began, ok=False)
                    gateway._failed(llm, error, self.failed)
                    if not error.retryable:
                        if continuing and form == 0 and error.status in (400, 422):
                            form, tries = 1, 0  # no prefill: the partial answer quoted
                            continue
                        if self.tried == 1 and not continuing:  # the first choice refused
                            raise GatewayError(  # the request: the client's
                                error.status or 502, str(error), kind=error.kind,
                                body=error.body, llm_id=llm, attempts=self.attempts,
                                failed=self.failed[:-1],
                            ) from None  # fmt: skip
                        # a fallback refusing (a prefill or a parameter it does not take) is
                        # that LLM's limit: the next one may take the request
                        if refusal is None:
                            refusal, refused = error, self.failed[-1]
                        break
                    if error.kind == "retired":
                        await self._extend(self.position)
                        gateway._retire(llm, self.order[self.position :])
                    wait = None if trial else gateway._retry_wait(error, tries)
                    if wait is None:
                        break  # the next LLM
                    gateway.metrics.upstream_errors.labels(llm, "retried").inc()
                    await anyio.sleep(min(wait, max(remaining, 0.0)))
                    continue
                finally:
                    gateway.metrics.upstream_latency.labels(llm).observe(
                        time.perf_counter() - began
                    )
                if not streaming:  # a stream's latency and outcome count when it ends
                    gateway.latency.record(llm, time.perf_counter() - began, ok=True)
                gateway.breaker.success(llm)
                if not continuing:
                    gateway.metrics.choices.labels(llm).inc()
                    if position > 0:
                        gateway.metrics.fallbacks.inc()
                    if self.explored and position == 0:
                        gateway.metrics.explored.labels(llm).inc()
                return llm, result
            if self.stopped.startswith("total_timeout_s"):
                break
        if continuing:
            return None
        if refusal is not None and all(f["kind"] == "refused" for f in self.failed[-1:]):
            raise GatewayError(
                refusal.status or 502, str(refusal), kind=refusal.kind, body=refusal.body,
                llm_id=refusal.llm_id, attempts=self.attempts,
                failed=[f for f in self.failed if f is not refused],
            )  # fmt: skip
        summary = "; ".join(f"{f['llm_id']}: {f['kind']}" for f in self.failed) or "no attempt"
        timed_out = any(f["kind"] == "timeout" for f in self.failed)
        raise GatewayError(
            504 if timed_out and len(self.failed) == self.attempts else 503,
            f"no LLM answered after {self.attempts} attempts ({summary})",
            kind="all_failed", attempts=self.attempts, failed=self.failed,
        )  # fmt: skip
