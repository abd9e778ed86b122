"""Routing: the `Router` interface, the fitted router `locus fit` keeps, and the baselines.

Routing works on query vectors and never imports the store; texts become vectors, and the
fitted router meets a workspace, in `locus.pipeline.workspace_router`.

request.py        RouteRequest (top, rule, max cost, unavailable, guarded), validated once
decision.py       the decision rule, once: rank / choose (P(correct) and costs -> the choice on
                  a RouteRequest), which route, every evaluation, sweep and benchmark call;
                  tune_cost_weight (a budget)
router.py         Router (predict_proba -> route once, through decision.py), RouteDecision,
                  RankedLLM
costs.py          CostModel: each LLM's cost on a query, from the nearest training queries
frontier.py       accuracy against cost: sweeps, hull, AIQ / cost shares / APGR, the plot
guard.py          Guard: stay with the best single LLM unless another clears a margin
stacked.py        StackedRouter: the router `locus fit` keeps (LOCUS + kNN stack + guard):
                  fit, predict, route, join (an onboarded LLM's own votes)
stacked_fit.py    the recipe behind StackedRouter.fit and fit_thin, returning parts
                  (fit_stacked -> StackParts, fit_thin_reading), learns_from
router_artifact.py  the router artifact (networks, stack, guard, kNN part, costs): one save,
                  one load (RouterArtifact)
stack.py          Stack: how LOCUS's logits and the kNN votes combine, fitted on validation
cross_fit.py      out-of-fold votes: the stack and guard of a pool with a small validation
posterior.py      an onboarded LLM's votes against LOCUS's prior; a prediction's uncertainty
thin.py           ThinEvidence: an onboarded LLM's P(correct) read beside the fitted LLMs'
level.py          an onboarded LLM's level, read against how easy the fitted LLMs found its
                  probes (a one-parameter IRT on their scores of the same queries)
factors.py        Factors: the MF and IRT models (two halves each) an onboarded LLM's factor
                  readings are onboarded in
explore.py        Exploration: a share of queries routed by a Thompson draw on the uncertainty
drift.py          DriftMonitor: each LLM's outcomes against its predicted P(correct), a CUSUM
                  and its alarm (an endpoint that changed behind its name)
locus_router.py   LocusRouter (torch) and NumpyLocusRouter: LOCUS's predictor over a pool
evidence.py       Evidence (what baselines are fitted on), Votes (what kNN reads near a query)
baselines.py      random, best single, per task, oracle (numpy)
neighbours.py     kNN (votes of the nearest training queries) router
cluster.py        the cluster router (k-means; per cluster the LLMs' mean scores)
ann.py            Graph: the HNSW index kNN searches from 100,000 training queries on (faiss)
task_vote.py      TaskVote: LLMs' task rates over the tasks of a query's nearest queries
task_reader.py    TaskReader: a query's task read by a classifier beside its neighbours
vote_pass.py      Singles: the kNN votes of many one-LLM groups in one pass per block
vote_kernel.py    that pass compiled (numba)
learned.py        EmbedLLM-style MF and IRT (trained in torch, run in numpy)
registry.py       BASELINE_ROUTERS by kind, make_baseline, load_router (any saved router)
"""

from locus.routing.baselines import (
    BaselineRouter,
    BestSingleRouter,
    OracleRouter,
    PerTaskRouter,
    RandomRouter,
)
from locus.routing.cluster import ClusterRouter
from locus.routing.costs import CostModel
from locus.routing.decision import RouteRequest, tune_cost_weight
from locus.routing.evidence import Evidence
from locus.routing.learned import IRTRouter, MFRouter
from locus.routing.locus_router import LocusRouter, LogitRouter, NumpyLocusRouter
from locus.routing.neighbours import KNNRouter
from locus.routing.registry import BASELINE_ROUTERS, load_router, make_baseline
from locus.routing.router import RankedLLM, RouteDecision, Router
from locus.routing.stacked import StackedRouter

__all__ = [
    "BASELINE_ROUTERS",
    "BaselineRouter",
    "BestSingleRouter",
    "ClusterRouter",
    "CostModel",
    "Evidence",
    "IRTRouter",
    "KNNRouter",
    "LocusRouter",
    "LogitRouter",
    "MFRouter",
    "NumpyLocusRouter",
    "OracleRouter",
    "PerTaskRouter",
    "RandomRouter",
    "RankedLLM",
    "RouteDecision",
    "RouteRequest",
    "Router",
    "StackedRouter",
    "load_router",
    "make_baseline",
    "tune_cost_weight",
]
