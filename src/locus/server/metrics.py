"""Prometheus metrics of one app, on its own registry (no module-level state)."""

from __future__ import annotations

from typing import Any

__all__ = ["Metrics"]


class Metrics:
    """requests and their time, choices per LLM, fallbacks, stream continuations, upstream
    latency and errors, outcomes and drift alarms."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter(
            "locus_requests", "HTTP requests by endpoint and status", ["endpoint", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.choices = Counter(
            "locus_choices", "Requests answered per LLM", ["llm_id"], registry=self.registry
        )
        self.explored = Counter(
            "locus_explored", "Requests answered by an LLM drawn by exploration", ["llm_id"],
            registry=self.registry,
        )  # fmt: skip
        self.fallbacks = Counter(
            "locus_fallbacks", "Requests answered by a fallback LLM", registry=self.registry
        )
        self.upstream_errors = Counter(
            "locus_upstream_errors", "Failed upstream attempts by LLM and kind",
            ["llm_id", "kind"], registry=self.registry,
        )  # fmt: skip
        self.stream_continuations = Counter(
            "locus_stream_continuations",
            "Streams broken after their first token and continued on another LLM, by the LLM "
            "that broke, the one that continued and why (cut, stall, malformed)",
            ["from", "to", "reason"], registry=self.registry,
        )  # fmt: skip
        self.outcomes = Counter(
            "locus_outcomes", "Outcomes posted per LLM", ["llm_id"], registry=self.registry
        )
        self.drift_alarm = Gauge(
            "locus_drift_alarm",
            "1 where an LLM's outcomes say it became worse than its predicted P(correct) (a "
            "CUSUM past its threshold, locus.routing.drift), else 0",
            ["llm_id"], registry=self.registry,
        )  # fmt: skip
        self.drift_statistic = Gauge(
            "locus_drift_statistic", "Each LLM's drift CUSUM (its alarm at log 20,000 = 9.9)",
            ["llm_id"], registry=self.registry,
        )  # fmt: skip
        self.canary_alarm = Gauge(
            "locus_canary_alarm",
            "1 where half or more of an LLM's canary answers changed since its baseline "
            "(locus canary), else 0",
            ["llm_id"], registry=self.registry,
        )  # fmt: skip
        self.canary_changed = Gauge(
            "locus_canary_changed_share",
            "The share of an LLM's canary answers that changed at its last check",
            ["llm_id"], registry=self.registry,
        )  # fmt: skip
        self.upstream_latency = Histogram(
            "locus_upstream_latency_seconds", "Upstream call time by LLM", ["llm_id"],
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )  # fmt: skip
        self.request_seconds = Histogram(
            "locus_request_seconds", "Time in the service by endpoint (route template)",
            ["endpoint"], registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30),
        )  # fmt: skip

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def value(self, name: str, **labels: Any) -> float:
        """A sample's current value (tests, /ready): e.g. value("locus_fallbacks_total")."""
        found = self.registry.get_sample_value(name, labels or None)
        return 0.0 if found is None else float(found)
