"""Workspace workflows: fit, embed (onboard / refine), evaluate and route against a `Store`.

The facade (`Locus`) works on arrays; these functions connect it to a workspace: they read the
score table and cached query vectors, assign the hash split, save the artifact under
`<workspace>/artifacts/<name>/` and keep the pool of LLM embeddings in the workspace.

    data.py                  WorkspaceTable, workspace_table: scores, vectors, split
    fit.py                   fit_workspace -> FitReport; load_workspace_locus
    embed.py                 embed_workspace_llms -> [EmbedReport]
    evaluate.py              evaluate_workspace -> Evaluation (evaluation_results.py)
    evaluate_folds.py        evaluate_folds: every query routed once, k-fold (--folds)
    savings.py               savings -> CostSavings: what each decision rule costs (evaluate's)
    outcomes.py              outcome_report: production outcomes against the fit, drift test;
                             decision_report: the gateway's decision log summed up;
                             decision_propensities: its logging probabilities (evaluate's)
    llm_costs.py             each LLM's known cost per query: observed, catalog, token prices
    canary.py                record_canaries, check_canaries: the same probes asked again,
                             compared with each endpoint's own earlier answers
    probes.py                probe_order, choose_probes: the queries to evaluate a new LLM on
    endpoint.py              check_endpoint, ask_all: an OpenAI-compatible endpoint asked prompts
    onboard.py               onboard_llm -> OnboardReport: probe, grade, import, embed, place
    placement.py             where an onboarded LLM landed: nearest LLMs, per task, share
    workspace_artifacts.py   where artifacts live: DEFAULT_ARTIFACT, artifact_path,
                             trained_artifact, publish_artifact
    workspace_router.py      WorkspaceRouter: query vectors + the fitted router + costs,
                             loaded once (`locus route`, evaluate, the atlas, the server)

    >>> from locus.store import Store                            # doctest: +SKIP
    >>> with Store.open(".locus") as store:  # doctest: +SKIP
    ...     report = fit_workspace(store, TrainingConfig(anchors=1024))
    ...     evaluate_workspace(store).routing.hit_at_1
"""

from typing import TYPE_CHECKING, Any

from locus.pipeline.data import WorkspaceTable, workspace_table
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT

if TYPE_CHECKING:
    from locus.pipeline.embed import EmbedReport, embed_workspace_llms
    from locus.pipeline.evaluate import Evaluation, evaluate_workspace
    from locus.pipeline.fit import FitReport, fit_workspace, load_workspace_locus, steps_for_epochs

__all__ = [
    "DEFAULT_ARTIFACT",
    "EmbedReport",
    "Evaluation",
    "FitReport",
    "WorkspaceTable",
    "embed_workspace_llms",
    "evaluate_workspace",
    "fit_workspace",
    "load_workspace_locus",
    "steps_for_epochs",
    "workspace_table",
]


# fit and embed import torch (the facade): load them only when asked for, so that reading a
# workspace's table (`workspace_table`, which the atlas uses) stays torch-free
_LAZY = {
    "EmbedReport": "embed",
    "embed_workspace_llms": "embed",
    "Evaluation": "evaluate",
    "evaluate_workspace": "evaluate",
    "FitReport": "fit",
    "fit_workspace": "fit",
    "load_workspace_locus": "fit",
    "steps_for_epochs": "fit",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"locus.pipeline.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'locus.pipeline' has no attribute {name!r}")
