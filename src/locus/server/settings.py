"""Limits and timeouts of the service, one dataclass so tests can shrink them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ServerSettings"]


@dataclass(frozen=True)
class ServerSettings:
    """What bounds every request.

    Attributes:
        max_body_bytes: larger request bodies get 413.
        max_batch: most texts one /v1/route call may route.
        max_attempts: LLMs tried for one chat request (the routed one, then fallbacks).
        attempt_timeout_s: one upstream call, connect to last byte (non-streaming) or to the
            first token (streaming).
        total_timeout_s: every attempt of one request together.
        stall_timeout_s: a stream that sends nothing for this long after its first token is
            ended with an error event.
        breaker_failures, breaker_cooldown_s: an LLM failing this many times in a row is
            skipped for the cool-down, then given one trial request.
        top: ranked LLMs in a /v1/route answer (the fallback order is the whole ranking).
        pool_check_s: how often (at most) a request checks the store for LLM embeddings
            written by another process (a replica's onboarding): the pool is re-read when they
            changed.
    """

    max_body_bytes: int = 1_000_000
    max_batch: int = 256
    max_attempts: int = 3
    attempt_timeout_s: float = 30.0
    total_timeout_s: float = 60.0
    stall_timeout_s: float = 30.0
    breaker_failures: int = 3
    breaker_cooldown_s: float = 30.0
    top: int = 3
    pool_check_s: float = 1.0
