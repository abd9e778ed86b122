"""Proxies: which LLM stands in for one that is down, and how much routing keeps.

Two fallback orders are measured side by side. *Nearest by embedding*: the LLM whose embedding
lies closest to the one routed to. *Next best by the predictor*: the query's second-ranked LLM
(`RouteDecision.candidates`). Proxy retention is routing hit@1 when every routed LLM is replaced
by its stand-in, divided by hit@1 with it (the paper: 85% for the nearest neighbour).

    >>> import numpy as np
    >>> proba = np.array([[0.9, 0.8, 0.1], [0.2, 0.3, 0.9]])
    >>> predicted_agreement(proba).round(2)[0].tolist()
    [0.75, 0.68, 0.22]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.atlas.geometry import nearest
from locus.metrics import routing_choices

__all__ = ["ProxyRetention", "predicted_agreement", "proxy_retention"]


def predicted_agreement(proba: NDArray[Any]) -> NDArray[np.float64]:
    """(n_llms, n_llms) agreement the predictor expects: the mean over queries of
    P(both right) + P(both wrong), treating the two LLMs' answers as independent given the
    query (n_queries, n_llms)."""
    p = np.asarray(proba, dtype=np.float64)
    return np.asarray((p.T @ p + (1.0 - p).T @ (1.0 - p)) / max(len(p), 1))


@dataclass(frozen=True)
class ProxyRetention:
    """hit@1 with every routed LLM available (`hit`), and with each replaced by its stand-in.

    Attributes:
        nearest_hit, nearest_retention: replaced by the nearest LLM by embedding distance.
        next_best_hit, next_best_retention: replaced by the query's second-ranked LLM.
        better: the better fallback order on this pool ("next-best" or "nearest").
        queries: test queries counted (those with at least two scored LLMs).
    """

    hit: float
    nearest_hit: float
    nearest_retention: float
    next_best_hit: float
    next_best_retention: float
    queries: int

    @property
    def better(self) -> str:
        return "next-best" if self.next_best_hit >= self.nearest_hit else "nearest"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "better": self.better}


def proxy_retention(
    proba: NDArray[Any], scores: NDArray[Any], distances: NDArray[Any]
) -> ProxyRetention:
    """Proxy retention on test queries: `proba` and `scores` (n_queries, n_llms), scores NaN
    where not evaluated; `distances` (n_llms, n_llms) between LLM embeddings. Stand-ins must
    have been scored on the query (otherwise it cannot be counted)."""
    p = np.asarray(proba, dtype=np.float64)
    truth = np.asarray(scores, dtype=np.float64)
    observed = ~np.isnan(truth)
    usable = observed.sum(axis=1) >= 2
    p, truth, observed = p[usable], truth[usable], observed[usable]
    chosen = routing_choices(p, truth)
    masked = np.where(observed, p, -np.inf)
    masked[np.arange(len(p)), chosen] = -np.inf
    second = np.argmax(masked, axis=1)
    near = np.empty(len(p), dtype=np.int64)
    for q, c in enumerate(chosen):
        near[q] = int(nearest(distances, int(c), 1, allowed=observed[q])[0])
    rows = np.arange(len(p))
    hit = float(truth[rows, chosen].mean()) if len(p) else float("nan")
    nearest_hit = float(truth[rows, near].mean()) if len(p) else float("nan")
    next_hit = float(truth[rows, second].mean()) if len(p) else float("nan")
    return ProxyRetention(
        hit=hit,
        nearest_hit=nearest_hit,
        nearest_retention=nearest_hit / hit if hit else float("nan"),
        next_best_hit=next_hit,
        next_best_retention=next_hit / hit if hit else float("nan"),
        queries=len(p),
    )
