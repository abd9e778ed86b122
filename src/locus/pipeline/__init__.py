"""Workspace workflows: fit, embed (onboard / refine) and evaluate against a `Store`.

The facade (`Locus`) works on arrays; these functions connect it to a workspace: they read the
score table and cached query vectors, assign the hash split, save the artifact under
`<workspace>/artifacts/<name>/` and keep the pool of LLM embeddings in the workspace.

    data.py       WorkspaceTable, workspace_table: scores, vectors, split as arrays
    fit.py        fit_workspace -> FitReport; load_workspace_locus
    embed.py      embed_workspace_llms -> [EmbedReport]
    evaluate.py   evaluate_workspace -> Evaluation

    >>> from locus.store import Store                            # doctest: +SKIP
    >>> with Store.open(".locus") as store:
    ...     report = fit_workspace(store, TrainingConfig(anchors=1024))
    ...     evaluate_workspace(store).routing.hit_at_1
"""

from locus.pipeline.data import WorkspaceTable, workspace_table
from locus.pipeline.embed import EmbedReport, embed_workspace_llms
from locus.pipeline.evaluate import Evaluation, evaluate_workspace
from locus.pipeline.fit import FitReport, fit_workspace, load_workspace_locus, steps_for_epochs
from locus.routing.workspace import DEFAULT_ARTIFACT

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
