"""The walk down one request's fallback order: each LLM called (a transient failure retried
on the same LLM first), each failure recorded as an `Attempt`, bounded by `max_attempts` LLMs
and `total_timeout_s`.

A transient failure (a 5xx, a reset connection, a 429 whose Retry-After is short) is retried
on the same LLM first (`retries_per_llm`, after `retry_backoff_s` or the Retry-After), except
a half-open circuit's trial, which is one call; a 404 / 410 "model not found" marks the LLM
retired for this process (the catalog names a model its provider no longer serves) and falls
back. The first choice refusing the request (its 4xx) is the client's answer, as it came; a
fallback refusing it is that LLM's limit, and the walk goes on. A stream broken after its first
token resumes the same walk (`FallbackWalk.resume`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import anyio

from locus.routing.router import RankedLLM
from locus.server.health import CircuitBreaker, LatencyTracker
from locus.server.metrics import Metrics
from locus.server.settings import ServerSettings
from locus.server.upstream import Attempt, Failure, UpstreamError, UpstreamStream

__all__ = ["FallbackWalk", "GatewayError", "Walker"]


class Walker(Protocol):
    """What a walk down the fallback order uses of the gateway (`locus.server.gateway`)."""

    settings: ServerSettings
    breaker: CircuitBreaker
    latency: LatencyTracker
    metrics: Metrics
    retired: set[str]
    clock: Callable[[], float]

    def account_failure(self, llm: str, error: UpstreamError) -> Attempt: ...

    def endpoint_model(self, llm: str) -> str: ...


logger = logging.getLogger("locus.server")


class GatewayError(Exception):
    """No LLM answered (`status` 502/503/504), or an upstream refused the request (its 4xx).

    Attributes:
        kind: the JSON error's type: "refused" (an upstream's refusal, passed on),
            "unavailable" (no LLM with an endpoint to try), "all_failed".
        refusal: the upstream's refusal (its status, JSON body and LLM), None when none.
        attempts: upstream calls made for the request (0: none).
        failed: the LLMs tried before the refusing one (all of them when none refused).
    """

    def __init__(
        self, status: int, message: str, *, kind: str, refusal: UpstreamError | None = None,
        attempts: int = 0, failed: Sequence[Attempt] = (),
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.kind, self.refusal = status, kind, refusal
        self.attempts, self.failed = attempts, list(failed)

    @property
    def llm_id(self) -> str | None:
        """The LLM whose upstream gave this answer (a refusal), None when none did."""
        return None if self.refusal is None else self.refusal.llm_id


class FallbackWalk:
    """One request's way down its fallback order, shared by its first attempt and a stream's
    continuations: the candidates (for a pinned LLM, the rest of the ranking computed when
    first needed), the next to try, the LLMs tried (`max_attempts`), the upstream calls, the
    failures, and the time spent looking for an LLM that answers (`total_timeout_s`: the
    walks together; the time an answer streams is not counted)."""

    def __init__(
        self,
        gateway: Walker,
        first: Sequence[RankedLLM],
        rest: Callable[[], Awaitable[list[RankedLLM]]] | None,
        *,
        explored: bool,
        propensity: float | None = None,
    ) -> None:
        self.gateway = gateway
        self.propensity = propensity  # the probability routing put the first candidate first
        self.candidate_of = {c.llm_id: c for c in first}
        self.order = list(self.candidate_of)
        self._rest = rest
        self.explored = explored  # the first candidate was drawn by exploration
        self.position = 0  # the next candidate to try
        self.tried = 0  # LLMs called
        self.attempts = 0  # upstream calls
        self.failed: list[Attempt] = []  # every LLM that gave no answer, in order
        self.spent = 0.0  # seconds of the walks so far
        self.stopped = ""  # why the latest walk ended without an answer, in words

    def explored_first(self, llm: str) -> bool:
        """Whether `llm`'s answer is the exploration's draw (the first candidate)."""
        return self.explored and bool(self.order) and self.order[0] == llm

    def propensity_of(self, llm: str) -> float | None:
        """The probability that routing chose `llm`: the walk's, where `llm` is its first
        candidate; None for a fallback (an answer routing did not choose)."""
        return self.propensity if self.order and self.order[0] == llm else None

    def leading(self, count: int = 5) -> tuple[RankedLLM, ...]:
        """The first `count` candidates known, in order (the decision log's ranking)."""
        return tuple(self.candidate_of[llm] for llm in self.order[:count])

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
        refused: Attempt | None = None  # its entry in `failed`
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
                self.failed.append(Attempt(llm, Failure.CIRCUIT_OPEN))
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
                    self.failed.append(gateway.account_failure(llm, error))
                    if error.refused:  # the request's fault, not the LLM's
                        if continuing and form == 0 and error.status in (400, 422):
                            form, tries = 1, 0  # no prefill: the partial answer quoted
                            continue
                        if self.tried == 1 and not continuing:  # the first choice refused
                            raise GatewayError(  # the request: the client's
                                error.status or 502, str(error), kind=Failure.REFUSED.value,
                                refusal=error, attempts=self.attempts, failed=self.failed[:-1],
                            ) from None  # fmt: skip
                        # a fallback refusing (a prefill or a parameter it does not take) is
                        # that LLM's limit: the next one may take the request
                        if refusal is None:
                            refusal, refused = error, self.failed[-1]
                        break
                    if error.retired:
                        await self._extend(self.position)
                        self._retire(llm)
                    wait = None if trial else self._retry_wait(error, tries)
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
        if refusal is not None and all(a.kind is Failure.REFUSED for a in self.failed[-1:]):
            raise GatewayError(
                refusal.status or 502, str(refusal), kind=Failure.REFUSED.value, refusal=refusal,
                attempts=self.attempts, failed=[a for a in self.failed if a is not refused],
            )  # fmt: skip
        summary = "; ".join(map(str, self.failed)) or "no attempt"
        timed_out = any(a.kind is Failure.TIMEOUT for a in self.failed)
        raise GatewayError(
            504 if timed_out and len(self.failed) == self.attempts else 503,
            f"no LLM answered after {self.attempts} attempts ({summary})",
            kind="all_failed", attempts=self.attempts, failed=self.failed,
        )  # fmt: skip

    def _retry_wait(self, error: UpstreamError, tries: int) -> float | None:
        """Seconds to wait before calling the same LLM again, or None to move on: transient
        failures only, `retries_per_llm` times, a 429 after its Retry-After when that is at
        most `retry_after_max_s`."""
        settings = self.gateway.settings
        if not error.transient or tries > settings.retries_per_llm:
            return None
        if error.retry_after is not None:  # a 429 that said when
            if error.retry_after > settings.retry_after_max_s:
                return None
            return error.retry_after
        return settings.retry_backoff_s

    def _retire(self, llm: str) -> None:
        """Skip `llm` from now on: its provider answered that the model does not exist."""
        self.gateway.retired.add(llm)
        self.gateway.metrics.upstream_errors.labels(llm, Failure.RETIRED.value).inc()
        rest = self.order[self.position :]
        substitute = rest[0] if rest else "none left"
        logger.warning(
            "%s: the upstream answered 'model not found' (its endpoint model %r is retired or "
            "misnamed in the catalog); marked unavailable until the server restarts with a "
            "corrected catalog; this request falls back to %s",
            llm,
            self.gateway.endpoint_model(llm),
            substitute,
        )
