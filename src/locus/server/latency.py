"""`LatencyTracker`: each upstream's recent latency and error rate, kept by the gateway.

Latency is time to the first token for a stream and time to the whole answer otherwise, over
the last `window` successful calls; the error rate is over the last `window` calls. A request
that states `max_latency_ms` is routed to the LLMs whose median meets it first (an LLM not yet
measured counts as meeting it, so it gets measured), the others after them in the routing
order: latency reorders the fallback order, it never removes an LLM.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import numpy as np

__all__ = ["LatencyTracker"]


class LatencyTracker:
    """Rolling latency (seconds) and outcomes per LLM; safe to share across threads."""

    def __init__(self, window: int = 100) -> None:
        self.window = window
        self._seconds: dict[str, deque[float]] = {}
        self._outcomes: dict[str, deque[bool]] = {}
        self._lock = threading.Lock()

    def record(self, llm_id: str, seconds: float, ok: bool) -> None:
        """One call of `llm_id`: its latency counts when it succeeded."""
        with self._lock:
            self._outcomes.setdefault(llm_id, deque(maxlen=self.window)).append(ok)
            if ok:
                self._seconds.setdefault(llm_id, deque(maxlen=self.window)).append(seconds)

    def median_ms(self, llm_id: str) -> float | None:
        """The median latency of the recent successful calls, None before the first."""
        with self._lock:
            found = self._seconds.get(llm_id)
            return None if not found else float(np.median(found)) * 1000.0

    def meets(self, llm_id: str, max_latency_ms: float) -> bool:
        median = self.median_ms(llm_id)
        return median is None or median <= max_latency_ms

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per LLM: calls and error rate over the window, latency p50 / p90 in ms."""
        with self._lock:
            out = {}
            for llm, outcomes in self._outcomes.items():
                seconds = np.asarray(self._seconds.get(llm) or [np.nan], dtype=np.float64)
                out[llm] = {
                    "calls": len(outcomes),
                    "error_rate": 1.0 - sum(outcomes) / len(outcomes),
                    "p50_ms": None
                    if np.isnan(seconds).all()
                    else float(np.nanpercentile(seconds, 50) * 1000),
                    "p90_ms": None
                    if np.isnan(seconds).all()
                    else float(np.nanpercentile(seconds, 90) * 1000),
                }
            return out
