"""Routing: the `Router` interface, the LOCUS router and the long-lived workspace router.

    base.py           Router (predict_proba -> route once: top-k, cost, budget, unavailable),
                      RouteDecision, RankedLLM
    locus_router.py   LocusRouter: the LOCUS predictor over a pool
    workspace.py      WorkspaceRouter: artifact + pool + costs + text encoder, loaded once

Baseline routers (random, best single LLM, per task, kNN, ...) implement the same `Router`.
"""

from typing import TYPE_CHECKING, Any

from locus.routing.base import RankedLLM, RouteDecision, Router
from locus.routing.workspace import DEFAULT_ARTIFACT, WorkspaceRouter, artifact_path

if TYPE_CHECKING:
    from locus.routing.locus_router import LocusRouter

__all__ = [
    "DEFAULT_ARTIFACT",
    "LocusRouter",
    "RankedLLM",
    "RouteDecision",
    "Router",
    "WorkspaceRouter",
    "artifact_path",
]


def __getattr__(name: str) -> Any:
    """`LocusRouter` imports torch (the facade): load it only when asked for."""
    if name == "LocusRouter":
        from locus.routing.locus_router import LocusRouter

        return LocusRouter
    raise AttributeError(f"module 'locus.routing' has no attribute {name!r}")
