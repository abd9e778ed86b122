"""Routing: the `Router` interface, the LOCUS router and the long-lived workspace router.

    base.py           Router (predict_proba -> route once: top-k, cost, budget, unavailable),
                      RouteDecision, RankedLLM
    locus_router.py   LocusRouter: the LOCUS predictor over a pool
    workspace.py      WorkspaceRouter: artifact + pool + costs + text encoder, loaded once

Baseline routers (random, best single LLM, per task, kNN, ...) implement the same `Router`.
"""

from locus.routing.base import RankedLLM, RouteDecision, Router
from locus.routing.locus_router import LocusRouter
from locus.routing.workspace import DEFAULT_ARTIFACT, WorkspaceRouter, artifact_path

__all__ = [
    "DEFAULT_ARTIFACT",
    "LocusRouter",
    "RankedLLM",
    "RouteDecision",
    "Router",
    "WorkspaceRouter",
    "artifact_path",
]
