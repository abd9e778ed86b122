"""A circuit breaker per LLM: after `failures` failures in a row the LLM is skipped for
`cooldown_s`; then one trial call decides (success closes it, failure opens it again): the
gateway never retries a trial on the same LLM, so a failed trial costs one upstream call. A
trial that never reports (its request was cancelled) is given up after another `cooldown_s`,
so a lost trial cannot shut an LLM out for good.

    >>> clock = [0.0]
    >>> breaker = CircuitBreaker(failures=2, cooldown_s=10, clock=lambda: clock[0])
    >>> breaker.failure("a"); breaker.failure("a"); breaker.allow("a")
    False
    >>> clock[0] = 11; breaker.allow("a"), breaker.state("a")
    (True, 'half-open')
    >>> breaker.success("a"); breaker.state("a")
    'closed'
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CircuitBreaker"]


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

    def open_llms(self) -> list[str]:
        """LLMs currently skipped."""
        return [llm for llm in list(self._circuits) if self.state(llm) == "open"]
