"""The production outcomes of a workspace read against the fit: each LLM's outcome count and
rate beside the P(correct) the fitted router predicted for them, and the drift test over them
in the order they came (`locus.routing.drift`): what `locus outcomes` prints.

>>> report = outcome_report(store)                                   # doctest: +SKIP
>>> report["llms"]["claude-mid"]["alarm"]  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT
from locus.pipeline.workspace_router import OUTCOMES_SOURCE, WorkspaceRouter
from locus.routing.drift import DriftMonitor
from locus.store import Store

__all__ = ["outcome_report"]


def outcome_report(store: Store, *, name: str = DEFAULT_ARTIFACT) -> dict[str, Any]:
    """Per LLM with outcomes (the store's source `OUTCOMES_SOURCE`): `DriftState.as_dict()`
    of its outcomes read in the order they were stored against the P(correct) the artifact
    `name` predicts for them from the fit's evidence alone (outcomes not read in); and the
    LLMs whose alarm is raised. An outcome of an LLM the artifact does not hold is counted
    under `unknown`."""
    rows = store.scores_in_order(OUTCOMES_SOURCE)
    monitor = DriftMonitor()
    if rows.empty:
        return {"outcomes": 0, "llms": {}, "alarms": [], "unknown": 0}
    router = WorkspaceRouter(store, name, outcomes=False)
    ids = list(router.llm_ids)
    known = rows["llm_id"].isin(ids).to_numpy()
    held = rows[known]
    vectors = store.get_vectors(router.text_encoder_name, list(held["text_hash"]))
    proba = np.asarray(router.predict_proba(vectors), np.float64)
    columns = [ids.index(llm) for llm in held["llm_id"]]
    predicted = proba[np.arange(len(held)), columns]
    for llm, p, score in zip(held["llm_id"], predicted, held["score"], strict=True):
        monitor.update(str(llm), float(p), float(score))
    return {
        "outcomes": len(rows),
        "llms": monitor.as_dict(),
        "alarms": monitor.alarms(),
        "unknown": int((~known).sum()),
    }
