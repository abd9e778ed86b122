"""`Gateway`: route a chat request, walk the fallback order, account the answer.

The model name selects routing: `locus` (P(correct) alone, guarded as `locus route` is),
`locus:cost=W` (P(correct) - W x USD per query), or a real llm_id (that LLM first, then the
predictor's next best for the query; the ranking, which encodes a new text, is computed only
when a fallback is needed, so a pinned LLM's answer carries no predicted P(correct)). The
fallback order is the routing ranking (issue 11 measured the next best by the predictor to
keep more of hit@1 than the nearest LLM by embedding), restricted to LLMs with an endpoint
(a cost rule weighs only those: `cost_candidates`), skipping LLMs whose circuit is open. With
exploration on (`ServerSettings.explore`, or a request's own `explore` share), a routed
request may go first to an LLM drawn by its uncertainty (`locus.routing.explore`; not under a
quality rule, never for a pinned LLM), the rest of the order behind it. The walk down the
order (retries, retirement, `max_attempts`, `total_timeout_s`) is `locus.server.fallback`; a
stream that breaks after its first token continues on the next LLM of the same order
(`locus.server.streaming`). The answer keeps the upstream's own `model` (what really
answered); locus's llm_id travels in the `x-locus-llm` header.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import numpy as np

from locus.routing.decision import RouteRequest
from locus.routing.drift import DriftMonitor
from locus.routing.explore import Exploration
from locus.routing.router import RankedLLM
from locus.server.fallback import FallbackWalk, GatewayError
from locus.server.health import CircuitBreaker, LatencyTracker
from locus.server.metrics import Metrics
from locus.server.service_router import parse_model
from locus.server.settings import ServerSettings
from locus.server.streaming import StreamRelay, continuation_body, prompt_chars, resumable
from locus.server.upstream import (
    Attempt,
    UpstreamError,
    Upstreams,
    UpstreamStream,
    open_stream,
)

__all__ = ["ChatAnswer", "Gateway", "GatewayError", "StreamAnswer"]

logger = logging.getLogger("locus.server")


@dataclass(frozen=True)
class ChatAnswer:
    """The answering LLM's completion and how it came about."""

    payload: dict[str, Any]
    llm_id: str
    attempts: int
    cost_usd: float | None
    failed: list[Attempt] = field(default_factory=list)
    predicted: RankedLLM | None = None  # the router's P(correct) and expected cost for it
    upstream_model: str | None = None  # the model name the upstream answered with
    explored: bool = False  # routed by an exploration draw, not to the best mean
    # the probability that routing chose the LLM that answered (None: pinned, or a fallback)
    propensity: float | None = None
    ranked: tuple[RankedLLM, ...] = ()  # the first candidates of the fallback order


@dataclass(frozen=True)
class StreamAnswer:
    """A stream past its first token: the answering LLM, attempts, and the SSE lines."""

    llm_id: str
    attempts: int
    events: AsyncIterator[bytes]
    failed: list[Attempt] = field(default_factory=list)
    predicted: RankedLLM | None = None
    upstream_model: str | None = None
    explored: bool = False
    propensity: float | None = None
    ranked: tuple[RankedLLM, ...] = ()


class Gateway:
    """Chat requests through the router to the LLMs' endpoints.

    Args:
        route: texts + a `RouteRequest` + their task (None: read from the text) -> the
            ranked candidates per text (`ServiceRouter.rank`: the workspace router's ranking).
        upstreams: the endpoints.
        prices: llm_id -> metadata with price_in_per_mtok / price_out_per_mtok /
            cost_per_query, for the cost of an answer.
        clock: monotonic seconds (tests).
        llm_ids: the pool's LLMs now (a cost rule leaves out those it cannot call:
            `cost_candidates`).
        rng: the exploration's draws (tests pass a seeded one).
    """

    def __init__(
        self,
        route: Callable[[Sequence[str], RouteRequest, str | None], list[list[RankedLLM]]],
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
        # each LLM's outcomes against its predicted P(correct), and its alarm
        self.drift = DriftMonitor()
        self.breaker = breaker or CircuitBreaker(
            self.settings.breaker_failures, self.settings.breaker_cooldown_s, clock=clock
        )
        self.clock = clock
        self.retired: set[str] = set()  # answered "model not found": skipped from now on
        self.latency = LatencyTracker()

    def served_llms(self, pool: Sequence[str]) -> list[str]:
        """What a chat may name: the LLMs with an endpoint, not retired (the `pool`'s order,
        then endpoints outside the pool, which are served too)."""
        served = self.upstreams.endpoints
        order = [llm for llm in pool if llm in served]
        order += sorted(set(served) - set(order))
        return [llm for llm in order if llm not in self.retired]

    def cost_candidates(self, pool: Sequence[str]) -> list[str]:
        """The LLMs a cost rule weighs, so the ones that must be priced for it to route: the
        `pool`'s LLMs that can answer (an endpoint, not retired). One without an endpoint is
        never called, and may have no price: it is no candidate."""
        served = self.upstreams.endpoints
        return [llm for llm in pool if llm in served and llm not in self.retired]

    def unreachable(self, llm: str) -> str | None:
        """Why `llm`'s upstream cannot be reached now, or None. No probes are sent: the calls
        are the evidence. A circuit whose cool-down has passed counts as reachable, its trial
        due: a server whose every upstream failed once would otherwise stay unready, and
        never be sent the request that shows they are back."""
        if llm in self.retired:
            return "retired"
        state = self.breaker.state(llm)
        if state == "open":
            return "circuit open"
        failure = self.breaker.last_failure(llm)
        if state == "closed" and failure is not None:
            return f"its last call failed ({failure})"
        return None

    def fallback_order(
        self,
        text: str,
        fixed: str | None,
        request: RouteRequest,
        max_latency_ms: float | None = None,
        explore: float | None = None,
        task: str | None = None,
    ) -> tuple[list[RankedLLM], bool, float | None]:
        """The candidates to try for one text under `request` (its rule and unavailable
        LLMs), first choice first, whether the first was drawn by exploration, and the
        probability that routing put it first (the decision log's logging probability; None
        for a pinned LLM, or a first moved by the latency bound): those with an endpoint; on
        an explored request (`explore`, else the server's share) the drawn LLM first; with
        `max_latency_ms`, those whose recent median latency meets it first (in that order),
        then the others. `task`: the text's task, where the request says it."""
        if request.uses_cost:
            weighed = set(self.cost_candidates(self.llm_ids()))
            idle = {llm for llm in self.llm_ids() if llm not in weighed}
            request = replace(request, unavailable=request.unavailable | idle)
        [ranked] = self.route([text], request, task)
        if fixed:
            ranked = sorted(ranked, key=lambda candidate: candidate.llm_id != fixed)
            if not any(candidate.llm_id == fixed for candidate in ranked):
                ranked = [RankedLLM(fixed, float("nan"), None, float("nan")), *ranked]
        served = self.upstreams.endpoints
        ranked = [c for c in ranked if c.llm_id in served and c.llm_id not in self.retired]
        explored = False
        exploration = self.exploration.with_share(explore)
        propensity = None if fixed or not ranked else 1.0
        if not fixed and request.quality is None and exploration.share > 0:
            with self._rng_lock:
                routed = ranked
                ranked, explored = exploration.reorder(ranked, self.rng)
            if ranked:
                propensity = exploration.propensity(routed, ranked[0].llm_id)
        if max_latency_ms is not None:
            fast = [c for c in ranked if self.latency.meets(c.llm_id, max_latency_ms)]
            moved = bool(fast) and fast[0] is not ranked[0]
            ranked = fast + [c for c in ranked if c not in fast]
            propensity = None if moved else propensity
        return ranked, explored, propensity

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
        task: str | None = None,
        fallbacks: bool = True,
    ) -> FallbackWalk:
        """The request's way down its fallback order. For a pinned LLM the routing ranking
        (which encodes a new text: milliseconds of CPU) is computed only when a fallback is
        needed; otherwise at once, off the event loop. Without `fallbacks`, the order is its
        first LLM alone: the pinned one (a 503 naming why where it cannot be called), or the
        routed one."""
        fixed, rule = parse_model(body.get("model"), self.upstreams.endpoints)
        request = replace(rule, unavailable=frozenset(unavailable))

        def order() -> tuple[list[RankedLLM], bool, float | None]:
            return self.fallback_order(text, fixed, request, max_latency_ms, explore, task)

        if fixed is not None and not fallbacks:
            if not self._pinned_first(fixed, max_latency_ms):
                why = (
                    "retired" if fixed in self.retired
                    else "has no endpoint" if fixed not in self.upstreams.endpoints
                    else f"slower than max_latency_ms {max_latency_ms:g}"
                )  # fmt: skip
                raise GatewayError(
                    503, f"{fixed} cannot be called ({why}) and the request asked for no "
                    "other LLM in its place (fallbacks: false)", kind="unavailable",
                )  # fmt: skip
            pinned = RankedLLM(fixed, float("nan"), None, float("nan"))
            return FallbackWalk(self, [pinned], None, explored=False)

        if fixed is not None and self._pinned_first(fixed, max_latency_ms):

            async def rest() -> list[RankedLLM]:
                ranked, _, _ = await anyio.to_thread.run_sync(order)
                return ranked

            pinned = RankedLLM(fixed, float("nan"), None, float("nan"))
            return FallbackWalk(self, [pinned], rest, explored=False)
        ranked, explored, propensity = await anyio.to_thread.run_sync(order)
        if not ranked:
            raise GatewayError(503, "no LLM with an endpoint is available", kind="unavailable")
        return FallbackWalk(
            self, ranked if fallbacks else ranked[:1], None, explored=explored,
            propensity=propensity,
        )  # fmt: skip

    async def chat(
        self,
        body: Mapping[str, Any],
        text: str,
        *,
        unavailable: Sequence[str] = (),
        max_latency_ms: float | None = None,
        explore: float | None = None,
        task: str | None = None,
        fallbacks: bool = True,
    ) -> ChatAnswer:
        """Answer a non-streaming chat request.

        Raises:
            LocusInputError: a bad model name.
            GatewayError: every attempt failed, or an upstream refused the request.
        """

        async def call(llm: str, timeout: float, form: int) -> dict[str, Any]:
            return await self.upstreams.complete(llm, body, timeout=timeout)

        walk = await self._fallbacks(
            body, text, unavailable, max_latency_ms, explore, task, fallbacks
        )
        llm, payload = await walk.first(call, streaming=False)
        model = str(payload.get("model") or self.endpoint_model(llm))
        payload = {**payload, "model": model}
        cost = self.cost(llm, payload)
        return ChatAnswer(
            payload, llm, walk.attempts, cost, list(walk.failed), walk.candidate_of[llm], model,
            walk.explored_first(llm), walk.propensity_of(llm), walk.leading(),
        )  # fmt: skip

    async def stream(
        self,
        body: Mapping[str, Any],
        text: str,
        *,
        unavailable: Sequence[str] = (),
        max_latency_ms: float | None = None,
        explore: float | None = None,
        task: str | None = None,
        fallbacks: bool = True,
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

        walk = await self._fallbacks(
            body, text, unavailable, max_latency_ms, explore, task, fallbacks
        )
        llm, upstream = await walk.first(caller(None), streaming=True)
        failed = list(walk.failed)  # what the headers name: the failures before the answer

        async def resume(
            partial: str, broken: str, reason: str
        ) -> tuple[str, UpstreamStream, str] | str:
            """Where the answer goes on after `broken`'s stream broke (`StreamRelay`)."""
            before = len(walk.failed)
            found = await walk.resume(caller(partial))
            if found is None:
                tried = "; ".join(map(str, walk.failed[before:]))
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
            malformed_max=self.settings.malformed_chunks_max, prompt_chars=prompt_chars(body),
        )  # fmt: skip
        return StreamAnswer(
            llm, walk.attempts, relay.events(), failed, walk.candidate_of[llm], model,
            walk.explored_first(llm), walk.propensity_of(llm), walk.leading(),
        )  # fmt: skip

    def _stream_model(self, llm: str, upstream: UpstreamStream) -> str:
        """The model name a stream answers as: its first chunk's, else the catalog's."""
        for chunk in upstream.head:
            if isinstance(chunk, dict) and chunk.get("model"):
                return str(chunk["model"])
        return self.endpoint_model(llm)

    def _stream_broke(self, llm: str, upstream: UpstreamStream, error: UpstreamError) -> None:
        """A stream broken after its first token: an error of its LLM (metrics, circuit
        breaker, error rate), as a failure before the first token is."""
        self.account_failure(llm, error)
        self.latency.record_stream(llm, upstream.first_token_s, None, ok=False)

    def _stream_ended(self, llm: str, upstream: UpstreamStream, whole: bool) -> None:
        """A stream that ended whole (its time to the last byte measured), or whose caller
        hung up (only its time to the first token)."""
        seconds = time.perf_counter() - upstream.started if whole else None
        self.latency.record_stream(llm, upstream.first_token_s, seconds, ok=True)

    def endpoint_model(self, llm: str) -> str:
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

    def account_failure(self, llm: str, error: UpstreamError) -> Attempt:
        """A failed call of `llm`, in the metrics and its circuit breaker; its `Attempt`."""
        self.metrics.upstream_errors.labels(llm, error.kind.value).inc()
        if error.unwell:
            self.breaker.failure(llm, error.kind.value)
        else:  # the upstream answered (a refusal, a context limit): it is up, a trial included
            self.breaker.success(llm)
        if error.retry_after:  # a 429's
            self.breaker.hold(llm, min(error.retry_after, self.settings.breaker_cooldown_s))
        return Attempt(llm, error.kind, error.status)

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
