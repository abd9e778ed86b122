"""How each upstream is doing, as the gateway's calls show it (no probes are sent).

`CircuitBreaker`: after `failures` failures in a row an LLM is skipped for `cooldown_s`; then
one trial call decides (success closes it, failure opens it again): the gateway never retries
a trial on the same LLM, so a failed trial costs one upstream call. A trial that never reports
(its request was cancelled) is given up after another `cooldown_s`, so a lost trial cannot shut
an LLM out for good.

    >>> clock = [0.0]
    >>> breaker = CircuitBreaker(failures=2, cooldown_s=10, clock=lambda: clock[0])
    >>> breaker.failure("a"); breaker.failure("a"); breaker.allow("a")
    False
    >>> clock[0] = 11; breaker.allow("a"), breaker.state("a")
    (True, 'half-open')
    >>> breaker.success("a"); breaker.state("a")
    'closed'

`LatencyTracker`: each upstream's recent latency and error rate. Latency is time to the first
token for a stream and time to the whole answer otherwise, over the last `window` successful
calls; a whole stream's time (from the request to its last byte) is kept beside it. The error
rate is over the last `window` calls, a stream counting once, when it ends: one that breaks or
stalls after its first token is an error, as a call that fails before it is. A request that
states `max_latency_ms` is routed to the LLMs whose median meets it first (an LLM not yet
measured counts as meeting it, so it gets measured), the others after them in the routing
order: latency reorders the fallback order, it never removes an LLM.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CircuitBreaker", "LatencyTracker"]


@dataclass
class _Circuit:
    failures: int = 0
    opened_at: float | None = None
    trial: bool = False
    trial_at: float = 0.0  # when the running trial began
    failed_at: float | None = None  # the latest call's failure (None: it succeeded)
    why: str = ""  # what that failure was


class CircuitBreaker:
    """Per-LLM breaker; `clock` is injected (seconds, monotonic) so tests control time."""

    def __init__(
        self,
        failures: int = 3,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures = failures
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._circuits: dict[str, _Circuit] = {}
        self._lock = threading.Lock()

    def _get(self, llm_id: str) -> _Circuit:
        return self._circuits.setdefault(llm_id, _Circuit())

    def state(self, llm_id: str) -> str:
        """ "closed" (in use), "open" (skipped) or "half-open" (one trial allowed or running)."""
        with self._lock:
            circuit = self._get(llm_id)
            if circuit.opened_at is None:
                return "closed"
            if circuit.trial or self._clock() - circuit.opened_at >= self.cooldown_s:
                return "half-open"
            return "open"

    def allow(self, llm_id: str) -> bool:
        """May a request go to this LLM now? A half-open circuit lets one trial through."""
        with self._lock:
            circuit = self._get(llm_id)
            if circuit.opened_at is None:
                return True
            now = self._clock()
            if circuit.trial and now - circuit.trial_at < self.cooldown_s:
                return False
            if now - circuit.opened_at >= self.cooldown_s:
                circuit.trial, circuit.trial_at = True, now
                return True
            return False

    def success(self, llm_id: str) -> None:
        with self._lock:
            self._circuits[llm_id] = _Circuit()

    def failure(self, llm_id: str, why: str = "failed") -> None:
        """One failed call of `llm_id`; `why` says what failed (`last_failure`)."""
        with self._lock:
            circuit = self._get(llm_id)
            circuit.failures += 1
            circuit.failed_at, circuit.why = self._clock(), why
            if circuit.trial or circuit.failures >= self.failures:
                circuit.opened_at = self._clock()
                circuit.trial = False

    def last_failure(self, llm_id: str) -> str | None:
        """What the latest call of `llm_id` failed with, when it failed less than `cooldown_s`
        ago (an older failure no longer says the LLM is down, as an open circuit half-opens);
        None when it succeeded, or was never made."""
        with self._lock:
            circuit = self._circuits.get(llm_id)
            if circuit is None or circuit.failed_at is None:
                return None
            return circuit.why if self._clock() - circuit.failed_at < self.cooldown_s else None

    def hold(self, llm_id: str, seconds: float) -> None:
        """Skip this LLM for `seconds` (a 429's Retry-After), whatever its failure count."""
        with self._lock:
            circuit = self._get(llm_id)
            circuit.opened_at = self._clock() - self.cooldown_s + seconds
            circuit.trial = False


def _percentiles_ms(seconds: Iterable[float] | None) -> tuple[float | None, float | None]:
    found = list(seconds or ())
    if not found:
        return None, None
    p50, p90 = np.percentile(np.asarray(found, dtype=np.float64), [50, 90]) * 1000
    return float(p50), float(p90)


class LatencyTracker:
    """Rolling latency (seconds) and outcomes per LLM; safe to share across threads."""

    def __init__(self, window: int = 100) -> None:
        self.window = window
        self._seconds: dict[str, deque[float]] = {}
        self._stream_seconds: dict[str, deque[float]] = {}
        self._outcomes: dict[str, deque[bool]] = {}
        self._lock = threading.Lock()

    def record(self, llm_id: str, seconds: float, ok: bool) -> None:
        """One call of `llm_id`: its latency counts when it succeeded."""
        with self._lock:
            self._outcomes.setdefault(llm_id, deque(maxlen=self.window)).append(ok)
            if ok:
                self._seconds.setdefault(llm_id, deque(maxlen=self.window)).append(seconds)

    def record_stream(
        self, llm_id: str, first_token_s: float, whole_s: float | None, ok: bool
    ) -> None:
        """One stream of `llm_id`, when it ended: its time to the first token and, when it
        ended by itself, its whole time (None: the caller hung up first). `ok` False: it
        broke or stalled after its first token, an error like a failed call."""
        self.record(llm_id, first_token_s, ok)
        if ok and whole_s is not None:
            with self._lock:
                self._stream_seconds.setdefault(llm_id, deque(maxlen=self.window)).append(whole_s)

    def median_ms(self, llm_id: str) -> float | None:
        """The median latency of the recent successful calls, None before the first."""
        with self._lock:
            found = self._seconds.get(llm_id)
            return None if not found else float(np.median(found)) * 1000.0

    def meets(self, llm_id: str, max_latency_ms: float) -> bool:
        median = self.median_ms(llm_id)
        return median is None or median <= max_latency_ms

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per LLM: calls and error rate over the window (broken streams count as errors),
        latency p50 / p90 in ms (a stream's to its first token), a whole stream's p50 / p90
        (None before a stream ended whole)."""
        with self._lock:
            out = {}
            for llm, outcomes in self._outcomes.items():
                p50, p90 = _percentiles_ms(self._seconds.get(llm))
                stream_p50, stream_p90 = _percentiles_ms(self._stream_seconds.get(llm))
                out[llm] = {
                    "calls": len(outcomes),
                    "error_rate": 1.0 - sum(outcomes) / len(outcomes),
                    "p50_ms": p50,
                    "p90_ms": p90,
                    "stream_p50_ms": stream_p50,
                    "stream_p90_ms": stream_p90,
                }
            return out
