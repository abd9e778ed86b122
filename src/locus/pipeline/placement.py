"""Where an onboarded LLM landed (`locus.pipeline.onboard`'s report): the nearest LLMs of the
pool, each embedded from its own scores on the same probes (like against like) with their
measured agreement there; the predicted accuracy per task beside the probes' measured one; the
share of the workspace's test queries routing would now send to it (accuracy rule, unguarded),
the tasks of those queries and three of them; its scores beside the guard's default LLM's on
the same probes (`beside_default`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from locus.pipeline.data import WorkspaceTable
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.routing.guard import BEYOND_NOISE_Z, paired_gain
from locus.store.references import ProbeAnswer

__all__ = ["beside_default", "placement"]


def beside_default(
    router: WorkspaceRouter, data: WorkspaceTable, rows: np.ndarray, mine: np.ndarray, llm_id: str
) -> dict[str, Any] | None:
    """The new LLM's scores `mine` on the probe `rows` beside the guard's default LLM's on the
    same probes (the default it replaced, where it became the default): the mean paired gain,
    its standard error and whether it clears `BEYOND_NOISE_Z` of them (`rechosen_default`'s
    rule). None without a guard
    or two shared probes. On 32 probes the gain's standard error is 0.04-0.09, and within it
    a newcomer may be far better or worse: ZeroEval's o1-mini (0.975) was level with the
    default on its probes and is 4 points above the router without it; split2_model7's
    weaker LLMs on lucky probes were ahead of theirs (docs/decisions.md, "Newcomers": a
    prior from the pool, tried and not kept)."""
    guard = router.router.guard
    if guard is None:
        return None
    became = guard.default == llm_id
    default = str(guard.validation.get("rechosen_from", "")) if became else guard.default
    if default not in data.table.llm_ids:
        return None
    gain, se, pairs = paired_gain(mine, data.table.scores[rows, data.table.llm_index(default)])
    if pairs < 2:
        return None
    return {
        "llm_id": default,
        "probes": pairs,
        "gain": gain,
        "se": se,
        "beyond_noise": bool(gain > BEYOND_NOISE_Z * se or gain < -BEYOND_NOISE_Z * se),
        "became_default": became,
    }


def _same_probe_distances(
    model: Any, data: WorkspaceTable, rows: np.ndarray, mine: np.ndarray, llm_id: str
) -> dict[str, float]:
    """Distance from the new LLM's embedding to each pool LLM's embedding computed from its own
    scores on the same probes: like against like. The pool's embeddings come from ~1,000 anchors
    each, and an embedding from 32 scores sits elsewhere whatever the LLM: on real MMLU-Pro
    answers replayed, the pool distance put the replayed LLM itself first in 5 of 30 runs, the
    same-probe distance in 27 of 30 (benchmarks/README, "Onboarding an endpoint")."""
    table = data.table
    evidence, names = [], []
    for j, other in enumerate(table.llm_ids):
        if other == llm_id:
            continue
        theirs = table.scores[rows, j]
        seen = ~np.isnan(theirs)
        if seen.sum() >= max(4, len(rows) // 2):  # scored on most of the probes
            evidence.append((data.vectors[rows][seen], theirs[seen].astype(np.float32)))
            names.append(other)
    if not names:
        return {}
    z = model.embed_many([(data.vectors[rows], mine.astype(np.float32)), *evidence])
    return {name: float(np.linalg.norm(z[i + 1] - z[0])) for i, name in enumerate(names)}


def placement(
    router: WorkspaceRouter,
    model: Any,
    data: WorkspaceTable,
    llm_id: str,
    graded: list[tuple[int, ProbeAnswer]],
) -> dict[str, Any]:
    """Nearest LLMs, predicted accuracy per task, and the routing share (see the module)."""
    table = data.table
    ids = list(router.llm_ids)
    me = ids.index(llm_id)
    vectors = router.pool.vectors(ids)
    distance = np.linalg.norm(vectors - vectors[me], axis=1)
    rows = np.asarray([r for r, _ in graded])
    mine = np.asarray([a.score for _, a in graded], dtype=float)
    same = _same_probe_distances(model, data, rows, mine, llm_id)
    nearest = []
    for other in sorted(same, key=lambda other: same[other])[:5]:
        theirs = table.scores[rows, table.llm_index(other)].astype(float)
        seen = ~np.isnan(theirs)
        agreement = float(np.mean(np.abs(theirs[seen] - mine[seen]) < 0.5)) if seen.any() else None
        nearest.append(
            {
                "llm_id": other,
                "distance_on_probes": same[other],
                "distance": float(distance[ids.index(other)]) if other in ids else None,
                "agreement_on_probes": agreement,
                "shared_probes": int(seen.sum()),
            }
        )
    test = data.rows("test")
    evaluated = test if len(test) else np.arange(len(data.splits))
    p = router.predict_proba(data.vectors[evaluated])
    tasks = np.asarray([t or "(no task)" for t in table.tasks], dtype=object)
    probe_tasks = tasks[rows]
    per_task = []
    for task in sorted(set(tasks[evaluated])):
        in_task = tasks[evaluated] == task
        measured = mine[probe_tasks == task]
        per_task.append(
            {"task": task, "queries": int(in_task.sum()),
             "predicted": float(p[in_task, me].mean()),
             "probes": len(measured),
             "measured_on_probes": float(measured.mean()) if len(measured) else None}
        )  # fmt: skip
    chosen = np.argmax(p, axis=1) == me
    routed_tasks: dict[str, float] = {}
    for task in sorted(set(tasks[evaluated][chosen])):
        routed_tasks[task] = float(np.mean(tasks[evaluated][chosen] == task))
    margin = p[:, me] - np.max(np.delete(p, me, axis=1), axis=1) if p.shape[1] > 1 else p[:, me]
    best = [int(i) for i in np.argsort(-margin)[:3] if chosen[i]]
    examples = [" ".join(str(table.query_texts[evaluated[i]]).split())[:100] for i in best]
    return {
        "nearest": nearest,
        "beside_default": beside_default(router, data, rows, mine, llm_id),
        "per_task": per_task,
        "routing_share": float(chosen.mean()),
        "routed_tasks": dict(sorted(routed_tasks.items(), key=lambda kv: -kv[1])),
        "routed_examples": examples,
    }
