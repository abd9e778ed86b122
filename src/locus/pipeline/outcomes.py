"""The production outcomes of a workspace read against the fit: each LLM's outcome count and
rate beside the P(correct) the fitted router predicted for them, and the drift test over them
in the order they came (`locus.routing.drift`): what `locus outcomes` prints. The gateway's
decision log summed up (`decision_report`), and the logging probabilities it recorded, which
`locus evaluate`'s off-policy estimates read on a log (`decision_propensities`).

>>> report = outcome_report(store)                                   # doctest: +SKIP
>>> report["llms"]["claude-mid"]["alarm"]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from locus.offpolicy import inclusion
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT
from locus.pipeline.workspace_router import OUTCOMES_SOURCE, WorkspaceRouter
from locus.routing.drift import DriftMonitor
from locus.store import Store

__all__ = ["decision_propensities", "decision_report", "logged_propensities", "outcome_report"]


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


def decision_report(store: Store) -> dict[str, Any]:
    """The gateway's decision log (`locus.store.decisions`) summed up: per LLM its requests,
    their mean logging probability, outcomes posted and their rate; and, where the log holds
    outcomes with their logging probabilities, the inverse-propensity estimate (95% interval)
    of each LLM's rate had every logged request gone to it (`locus.offpolicy.ips`): valid
    where routing could have chosen it (exploration on, `locus serve --explore`), biased
    towards 0 where it could not."""
    from locus.offpolicy import ips

    rows = store.decisions()
    report: dict[str, Any] = {"decisions": len(rows), "llms": {}, "outcomes": 0}
    if not rows:
        return report
    report["first"], report["last"] = rows[0]["asked_at"], rows[-1]["asked_at"]
    report["explored"] = sum(r["explored"] for r in rows) / len(rows)
    llms = sorted({r["llm_id"] for r in rows})
    graded = [r for r in rows if r["outcome"] is not None and r["propensity"]]
    report["outcomes"] = sum(r["outcome"] is not None for r in rows)
    report["outcomes_with_propensity"] = len(graded)
    if graded:
        truth = np.full((len(graded), len(llms)), np.nan)
        propensity = np.ones_like(truth)
        for i, r in enumerate(graded):
            j = llms.index(r["llm_id"])
            truth[i, j], propensity[i, j] = r["outcome"], r["propensity"]
    for j, llm in enumerate(llms):
        mine = [r for r in rows if r["llm_id"] == llm]
        logged = [r["propensity"] for r in mine if r["propensity"] is not None]
        scored = [r["outcome"] for r in mine if r["outcome"] is not None]
        entry: dict[str, Any] = {
            "requests": len(mine),
            "share": len(mine) / len(rows),
            "propensity": float(np.mean(logged)) if logged else None,
            "outcomes": len(scored),
            "rate": float(np.mean(scored)) if scored else None,
        }
        if graded:
            every = np.full(len(graded), j)
            entry["if_every_request"] = ips(every, truth, propensity).as_dict()
        report["llms"][llm] = entry
    return report


def decision_propensities(
    store: Store, text_hashes: Sequence[str], llm_ids: Sequence[str]
) -> np.ndarray | None:
    """(n, n_llms) the probability with which the gateway's routing chose each LLM for each
    text, where its decision log recorded one (the mean over requests of the same text and
    LLM), NaN elsewhere; None where the log holds none."""
    if not store.decision_count():
        return None
    rows = [d for d in store.decisions() if d.get("propensity") is not None and d.get("text_hash")]
    if not rows:
        return None
    place = {h: i for i, h in enumerate(text_hashes)}
    column = {llm: j for j, llm in enumerate(llm_ids)}
    totals = np.zeros((len(text_hashes), len(llm_ids)))
    counts = np.zeros_like(totals)
    for d in rows:
        i, j = place.get(str(d["text_hash"])), column.get(str(d["llm_id"]))
        if i is not None and j is not None:
            totals[i, j] += float(d["propensity"])
            counts[i, j] += 1
    if not counts.any():
        return None
    return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)


def logged_propensities(
    truth: np.ndarray, logged: np.ndarray | None
) -> tuple[np.ndarray | None, str | None]:
    """The logging probability of each cell: the decision log's where it has one, each LLM's
    share of the queries elsewhere; and how to say where they came from (None: the shares
    alone, `OffPolicy`'s default)."""
    scored = ~np.isnan(truth)
    if logged is None or not (scored & ~np.isnan(logged)).any():
        return None, None
    known = scored & ~np.isnan(logged) & (logged > 0)
    shares = np.broadcast_to(inclusion(truth), truth.shape)
    propensity = np.where(known, np.nan_to_num(logged), shares)
    n, total = int(known.sum()), int(scored.sum())
    if n == total:
        return propensity, "the gateway's decision log (the probability routing chose each answer)"
    return propensity, (
        f"the gateway's decision log for {n:,} of {total:,} answers; each LLM's share of "
        "these queries for the rest"
    )
