"""`LatencyTracker`: each upstream's recent latency and error rate, kept by the gateway.

Latency is time to the first token for a stream and time to the whole answer otherwise, over
the last `window` successful calls; a whole stream's time (from the request to its last byte)
is kept beside it. The error rate is over the last `window` calls, a stream counting once,
when it ends: one that breaks or stalls after its first token is an error, as a call that
fails before it is. A request that states `max_latency_ms` is routed to the LLMs whose median
meets it first (an LLM not yet measured counts as meeting it, so it gets measured), the others
after them in the routing order: latency reorders the fallback order, it never removes an LLM.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["LatencyTracker"]


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
