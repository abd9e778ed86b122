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
from locus.pipeline.savings import CostSavings, savings
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.routing.baselines import PerTaskRouter
from locus.routing.decision import RouteRequest, rank
from locus.routing.evidence import Evidence
from locus.store import Store

__all__ = [
    "Baselines",
    "CorrectnessMetrics",
    "CostSavings",
    "Evaluation",
    "RoutingMetrics",
    "TaskEvaluation",
    "evaluate_workspace",
]


@dataclass(frozen=True)
class RoutingMetrics:
    """hit@k: mean true score of the best of the k highest-ranked LLMs, over the queries.

    `hit_at_3` and `hit_at_5` are None (JSON null) where the pool has no more than k LLMs:
    there the k highest-ranked are every LLM, and hit@k is the oracle's, whatever the router.
    `hit_at_1` is what `locus route` does: with the artifact's guard when it has one
    (`unguarded_hit_at_1` without it); `task_given_hit_at_1`: the same where each query's task
    is given (`locus route --task`), None where the queries or the router have no tasks;
    `moved`: the share of queries the guarded router sends
    to another LLM than the guard's default (None without a guard). `hit_at_1_se`: one
    standard error of `hit_at_1` over the queries; `gain`: hit@1 less the best single LLM's
    on the queries both were scored on, with its paired standard error `gain_se` (a gain
    under two standard errors is noise).
    """

    hit_at_1: float
    hit_at_3: float | None
    hit_at_5: float | None
    unguarded_hit_at_1: float
    moved: float | None = None
    guard: dict[str, Any] | None = None
    hit_at_1_se: float | None = None
    gain: float | None = None
    gain_se: float | None = None
    task_given_hit_at_1: float | None = None

    @property
    def gain_is_noise(self) -> bool:
        """True where the gain over the best single LLM is within two standard errors."""
        if self.gain is None or self.gain_se is None:
            return True
        return abs(self.gain) <= 2 * self.gain_se

    def as_dict(self) -> dict[str, Any]:
        return {
            "hit@1": self.hit_at_1,
            "hit@1_se": self.hit_at_1_se,
            "hit@3": self.hit_at_3,
            "hit@5": self.hit_at_5,
            "unguarded_hit@1": self.unguarded_hit_at_1,
            "gain_over_best_single": self.gain,
            "gain_se": self.gain_se,
            "gain_is_noise": self.gain_is_noise,
            "moved": self.moved,
            "guard": self.guard,
            "task_given_hit@1": self.task_given_hit_at_1,
        }


@dataclass(frozen=True)
class CorrectnessMetrics:
    """P(correct) as a classifier over every evaluated (query, LLM) cell; `auroc` is None
    (JSON null) where it is undefined: every cell right, or every cell wrong.
    `task_given_auroc`: the same where each query's task is given (None where not known)."""

    accuracy: float
    auroc: float | None
    brier: float
    ece: float
    cells: int
    task_given_auroc: float | None = None

    def as_dict(self) -> dict[str, float | None]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Baselines:
    """Routers chosen on the training split, scored on the same queries. The best LLM per
    task reads each query's true task; `best_llm_per_task_from_text` reads it from the text
    as a router of texts must (the nearest task centroid of the training queries' vectors),
    None where the queries carry no tasks."""

    best_single_llm: float
    best_single_llm_id: str
    best_llm_per_task: float
    oracle: float
    random: float
    best_llm_per_task_from_text: float | None = None

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
    """`evaluate_workspace`'s result; `as_dict()` is the `--json` form, where a figure that
    means nothing on these queries is null (see `RoutingMetrics`, `CorrectnessMetrics`).
    `few_queries`: fewer than `locus.metrics.FEW_QUERIES` queries, so every figure is mostly
    noise."""

    artifact: str
    split: str
    queries: int
    llms: int
    routing: RoutingMetrics
    correctness: CorrectnessMetrics
    baselines: Baselines
    per_task: dict[str, TaskEvaluation] = field(default_factory=dict)
    savings: CostSavings | None = None

    @property
    def few_queries(self) -> bool:
        return self.queries < metrics.FEW_QUERIES

    @property
    def winning_baseline(self) -> tuple[str, float, float] | None:
        """(name, its hit@1, the router's hit@1 it is set against) of the simple baseline
        that routes these queries better than the router by the most: the best LLM per task
        against the router told each query's task, the best single LLM and the per-task
        table reading the task from the text against the router of texts; None for none."""
        routing, base = self.routing, self.baselines
        given = routing.task_given_hit_at_1
        # like against like: the table that reads the true task against the router told it
        candidates = [
            ("the best LLM per task (the task given)", base.best_llm_per_task,
             routing.hit_at_1 if given is None else given),
            (f"the best single LLM ({base.best_single_llm_id})", base.best_single_llm,
             routing.hit_at_1),
        ]  # fmt: skip
        if base.best_llm_per_task_from_text is not None:
            candidates.append(
                ("the best LLM per task (the task read from the text)",
                 base.best_llm_per_task_from_text, routing.hit_at_1)
            )  # fmt: skip
        best = max(candidates, key=lambda c: c[1] - c[2])
        return best if best[1] > best[2] else None

    def as_dict(self) -> dict[str, Any]:
        winner = self.winning_baseline
        return {
            "winning_baseline": None
            if winner is None
            else {"name": winner[0], "hit@1": winner[1], "router_hit@1": winner[2]},
            "savings": None if self.savings is None else self.savings.as_dict(),
            "artifact": self.artifact,
            "split": self.split,
            "queries": self.queries,
            "few_queries": self.few_queries,
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
    chosen on the training split. On a workspace with per-query costs, `savings` says what
    each decision rule costs and keeps (`CostSavings`).
    """
    if split not in ("val", "test"):
        raise LocusInputError(f"split must be 'val' or 'test', found {split!r}")
    router = WorkspaceRouter(store, name)  # what `locus route` routes with
    data = workspace_table(store, split_seed=router.manifest.split_seed)
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
    guard = router.router.guard
    bound, moved = None, None
    if guard is not None and guard.default in llm_ids:
        bound = (llm_ids.index(guard.default), guard.margin)
    # accuracy routing as `locus route` decides it (the guard where the artifact has one),
    # among the LLMs evaluated on each query
    order = rank(proba, None, RouteRequest(top=5), allowed=~np.isnan(truth), guard=bound).order
    choice = order[:, 0]
    if bound is not None:
        moved = float(np.mean(choice != bound[0]))
    given_hit, given_auroc, from_text = None, None, None
    known = set(router.task_names)
    if known and any(t in known for t in tasks):
        given = [t if t in known else None for t in tasks]
        given_proba = np.asarray(router.predict_proba(data.vectors[rows], given), np.float64)
        given_order = rank(
            given_proba[:, columns], None, RouteRequest(top=1), allowed=~np.isnan(truth),
            guard=bound,
        ).order  # fmt: skip
        given_hit = _hit(given_order, truth, 1)
        auroc = metrics.correctness_metrics(given_proba[:, columns], truth)["auroc"]
        given_auroc = None if np.isnan(auroc) else float(auroc)
    if any(t is not None for t in train_tasks) and any(t is not None for t in tasks):
        train = Evidence.from_table(table, data.vectors, train_rows)
        read = PerTaskRouter().fit(train).tasks_of(data.vectors[rows])
        from_text = metrics.best_per_task_accuracy(
            table.scores[train_rows], train_tasks, truth, read
        )
    per_task: dict[str, TaskEvaluation] = {}
    task_array = np.asarray(tasks, dtype=object)
    for task in sorted({t for t in tasks if t is not None}):
        mask = task_array == task
        per_task[task] = TaskEvaluation(
            queries=int(mask.sum()),
            hit_at_1=_hit(order[mask], truth[mask], 1),
            best_single_llm=metrics.best_single_accuracy(table.scores[train_rows], truth[mask])[1],
            oracle=metrics.oracle_accuracy(truth[mask]),
        )
    correctness = metrics.correctness_metrics(proba, truth)
    se, gain, gain_se = _noise(choice, truth, best_index)
    return Evaluation(
        artifact=name,
        split=split,
        queries=len(rows),
        llms=len(llm_ids),
        routing=RoutingMetrics(
            hit_at_1=_hit(order, truth, 1),
            hit_at_3=_hit(order, truth, 3) if len(llm_ids) > 3 else None,
            hit_at_5=_hit(order, truth, 5) if len(llm_ids) > 5 else None,
            unguarded_hit_at_1=unguarded,
            moved=moved,
            guard=None if guard is None else guard.as_dict(),
            hit_at_1_se=se,
            gain=gain,
            gain_se=gain_se,
            task_given_hit_at_1=given_hit,
        ),
        correctness=CorrectnessMetrics(
            accuracy=correctness["accuracy"],
            auroc=None if np.isnan(correctness["auroc"]) else correctness["auroc"],
            task_given_auroc=given_auroc,
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
            best_llm_per_task_from_text=from_text,
        ),
        per_task=per_task,
        savings=savings(router, table, data.vectors[rows], rows, columns, proba, choice, truth),
    )


def _hit(order: np.ndarray, truth: np.ndarray, k: int) -> float:
    """hit@k: the mean best true score among each query's first k candidates of `order`
    (n_queries, >= k; -1: none), over the queries with a candidate."""
    top = order[:, :k]
    valid = top[:, 0] >= 0
    if not valid.any():
        return float("nan")
    picked = np.take_along_axis(truth[valid], np.maximum(top[valid], 0), axis=1)
    picked = np.where((top[valid] >= 0) & ~np.isnan(picked), picked, -np.inf)
    return float(np.mean(picked.max(axis=1)))


def _noise(
    choice: np.ndarray, truth: np.ndarray, best: int
) -> tuple[float | None, float | None, float | None]:
    """(standard error of hit@1, gain over the LLM `best`, the gain's paired standard error)
    over the queries (`choice`: the routed column of each, -1: none); None where fewer than
    two queries allow one."""
    rows = np.flatnonzero(choice >= 0)
    if len(rows) < 2:
        return None, None, None
    got = truth[rows, choice[rows]].astype(np.float64)
    se = float(got.std(ddof=1) / np.sqrt(len(got)))
    both = ~np.isnan(truth[rows, best])
    if both.sum() < 2:
        return se, None, None
    diff = got[both] - truth[rows[both], best]
    return se, float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(len(diff)))
