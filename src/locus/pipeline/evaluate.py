"""Evaluate an artifact on a workspace split: routing, correctness, baselines, per task.

>>> result = evaluate_workspace(store, split="test")                # doctest: +SKIP
>>> result.routing.hit_at_1, result.baselines.best_single_llm
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from locus import metrics
from locus.errors import LocusInputError
from locus.pipeline.data import workspace_table
from locus.routing.guard import guarded_proba
from locus.routing.workspace import DEFAULT_ARTIFACT, WorkspaceRouter
from locus.store import Store

__all__ = [
    "Baselines",
    "CorrectnessMetrics",
    "Evaluation",
    "RoutingMetrics",
    "TaskEvaluation",
    "evaluate_workspace",
]


@dataclass(frozen=True)
class RoutingMetrics:
    """hit@k: mean true score of the best of the k highest-ranked LLMs, over the queries.

    `hit_at_1` is what `locus route` does: with the artifact's guard when it has one
    (`unguarded_hit_at_1` without it); `moved`: the share of queries the guarded router sends
    to another LLM than the guard's default (None without a guard).
    """

    hit_at_1: float
    hit_at_3: float
    hit_at_5: float
    unguarded_hit_at_1: float
    moved: float | None = None
    guard: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "hit@1": self.hit_at_1,
            "hit@3": self.hit_at_3,
            "hit@5": self.hit_at_5,
            "unguarded_hit@1": self.unguarded_hit_at_1,
            "moved": self.moved,
            "guard": self.guard,
        }


@dataclass(frozen=True)
class CorrectnessMetrics:
    """P(correct) as a classifier over every evaluated (query, LLM) cell."""

    accuracy: float
    auroc: float
    brier: float
    ece: float
    cells: int

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Baselines:
    """Routers chosen on the training split, scored on the same queries."""

    best_single_llm: float
    best_single_llm_id: str
    best_llm_per_task: float
    oracle: float
    random: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TaskEvaluation:
    queries: int
    hit_at_1: float
    best_single_llm: float
    oracle: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "hit@1": self.hit_at_1,
            "best_single_llm": self.best_single_llm,
            "oracle": self.oracle,
        }


@dataclass(frozen=True)
class Evaluation:
    """`evaluate_workspace`'s result; `as_dict()` is the `--json` form."""

    artifact: str
    split: str
    queries: int
    llms: int
    routing: RoutingMetrics
    correctness: CorrectnessMetrics
    baselines: Baselines
    per_task: dict[str, TaskEvaluation] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "artifact": self.artifact,
            "split": self.split,
            "queries": self.queries,
            "llms": self.llms,
            "routing": self.routing.as_dict(),
            "correctness": self.correctness.as_dict(),
            "baselines": self.baselines.as_dict(),
            "per_task": {task: row.as_dict() for task, row in self.per_task.items()},
        }


def evaluate_workspace(
    store: Store, *, name: str = DEFAULT_ARTIFACT, split: str = "test"
) -> Evaluation:
    """Routing hit@1/3/5 and correctness metrics on a split, next to baselines, per task.

    P(correct) is what `locus route` uses (`WorkspaceRouter`): every LLM by its embedding in
    the workspace's pool (from its anchors, or its onboarding evidence), stacked with the
    artifact's kNN router where it has one. Baselines (best single LLM, best LLM per task) are
    chosen on the training split.
    """
    if split not in ("val", "test"):
        raise LocusInputError(f"split must be 'val' or 'test', found {split!r}")
    router = WorkspaceRouter(store, name)  # what `locus route` routes with
    data = workspace_table(store, split_seed=int(router.metadata.get("split_seed", 0)))
    pooled = set(router.llm_ids)
    llm_ids = [llm for llm in data.table.llm_ids if llm in pooled]
    table = data.table.select_llms(llm_ids)
    rows, train_rows = data.rows(split), data.rows("train")
    truth = table.scores[rows]
    columns = [list(router.llm_ids).index(llm) for llm in llm_ids]
    proba = np.asarray(router.predict_proba(data.vectors[rows]), dtype=np.float64)[:, columns]
    tasks = [table.tasks[i] for i in rows]
    train_tasks = [table.tasks[i] for i in train_rows]
    best_index, best_single = metrics.best_single_accuracy(table.scores[train_rows], truth)
    unguarded = metrics.routing_accuracy(proba, truth)
    guard = router.guard
    routed, moved = proba, None
    if guard is not None and guard.default in llm_ids:
        default = llm_ids.index(guard.default)
        routed = guarded_proba(proba, default, guard.margin)
        moved = float(np.mean(metrics.routing_choices(routed, truth) != default))
    per_task: dict[str, TaskEvaluation] = {}
    task_array = np.asarray(tasks, dtype=object)
    for task in sorted({t for t in tasks if t is not None}):
        mask = task_array == task
        per_task[task] = TaskEvaluation(
            queries=int(mask.sum()),
            hit_at_1=metrics.routing_accuracy(routed[mask], truth[mask]),
            best_single_llm=metrics.best_single_accuracy(table.scores[train_rows], truth[mask])[1],
            oracle=metrics.oracle_accuracy(truth[mask]),
        )
    correctness = metrics.correctness_metrics(proba, truth)
    return Evaluation(
        artifact=name,
        split=split,
        queries=len(rows),
        llms=len(llm_ids),
        routing=RoutingMetrics(
            hit_at_1=metrics.routing_accuracy(routed, truth),
            hit_at_3=metrics.top_k_hit(routed, truth, 3),
            hit_at_5=metrics.top_k_hit(routed, truth, 5),
            unguarded_hit_at_1=unguarded,
            moved=moved,
            guard=None if guard is None else guard.as_dict(),
        ),
        correctness=CorrectnessMetrics(
            accuracy=correctness["accuracy"],
            auroc=correctness["auroc"],
            brier=correctness["brier"],
            ece=correctness["ece"],
            cells=int(correctness["cells"]),
        ),
        baselines=Baselines(
            best_single_llm=best_single,
            best_single_llm_id=llm_ids[best_index],
            best_llm_per_task=metrics.best_per_task_accuracy(
                table.scores[train_rows], train_tasks, truth, tasks
            ),
            oracle=metrics.oracle_accuracy(truth),
            random=float(np.nanmean(np.nanmean(truth, axis=1))),
        ),
        per_task=per_task,
    )
