"""Routing: the `Router` interface, the LOCUS router and the long-lived workspace router.

base.py           Router (predict_proba -> route once: top-k, the decision rules, max cost,
                  unavailable), RouteDecision, RankedLLM
rules.py          DecisionRule (accuracy, cost weight, quality, budget), tune_cost_weight
costs.py          CostModel: each LLM's cost on a query, from the nearest training queries
frontier.py       accuracy against cost: sweeps, hull, AIQ / cost shares / APGR, the plot
guard.py          Guard: stay with the best single LLM unless another clears a margin
ensemble.py       the Stack of LOCUS and kNN votes `locus fit` keeps; EnsembleRouter
locus_router.py   LocusRouter: the LOCUS predictor over a pool
workspace.py      WorkspaceRouter: artifact + pool + costs + text encoder, loaded once
evidence.py       Evidence (what baselines are fitted on), the router folder format
baselines.py      random, best single, per task, oracle (numpy)
neighbours.py     kNN (votes of the nearest training queries), cluster (k-means) routers
learned.py        EmbedLLM-style MF and IRT (trained in torch, run in numpy)
registry.py       BASELINE_ROUTERS by kind, make_baseline, load_router
"""

from typing import TYPE_CHECKING, Any

from locus.routing.base import RankedLLM, RouteDecision, Router
from locus.routing.baselines import (
    BaselineRouter,
    BestSingleRouter,
    OracleRouter,
    PerTaskRouter,
    RandomRouter,
)
from locus.routing.costs import CostModel
from locus.routing.evidence import Evidence
from locus.routing.learned import IRTRouter, MFRouter
from locus.routing.neighbours import ClusterRouter, KNNRouter
from locus.routing.registry import BASELINE_ROUTERS, load_router, make_baseline
from locus.routing.rules import DecisionRule, tune_cost_weight
from locus.routing.workspace import DEFAULT_ARTIFACT, WorkspaceRouter, artifact_path

if TYPE_CHECKING:
    from locus.routing.locus_router import LocusRouter

__all__ = [
    "BASELINE_ROUTERS",
    "DEFAULT_ARTIFACT",
    "BaselineRouter",
    "BestSingleRouter",
    "ClusterRouter",
    "CostModel",
    "DecisionRule",
    "Evidence",
    "IRTRouter",
    "KNNRouter",
    "LocusRouter",
    "MFRouter",
    "OracleRouter",
    "PerTaskRouter",
    "RandomRouter",
    "RankedLLM",
    "RouteDecision",
    "Router",
    "WorkspaceRouter",
    "artifact_path",
    "load_router",
    "make_baseline",
    "tune_cost_weight",
]


def __getattr__(name: str) -> Any:
    """`LocusRouter` imports torch (the facade): load it only when asked for."""
    if name == "LocusRouter":
        from locus.routing.locus_router import LocusRouter

        return LocusRouter
    raise AttributeError(f"module 'locus.routing' has no attribute {name!r}")
