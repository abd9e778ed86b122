"""Evaluate an artifact on a workspace split: routing, correctness, baselines, per task.

>>> result = evaluate_workspace(store, split="test")                # doctest: +SKIP
>>> result.routing.hit_at_1, result.baselines.best_single_llm  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from locus import metrics
from locus.data.table import ScoreTable
from locus.errors import LocusInputError
from locus.offpolicy import doubly_robust, ips, overlap_of
from locus.pipeline.data import workspace_table
from locus.pipeline.evaluation_results import (
    Baselines,
    CorrectnessMetrics,
    Evaluation,
    Floor,
    OffPolicy,
    RoutingMetrics,
    TaskEvaluation,
)
from locus.pipeline.outcomes import decision_propensities, logged_propensities
from locus.pipeline.savings import CostSavings, savings
from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT
from locus.pipeline.workspace_router import WorkspaceRouter, tasks_read_by
from locus.routing.baselines import PerTaskRouter
from locus.routing.decision import RouteRequest, rank
from locus.routing.evidence import Evidence
from locus.routing.stack import smoothed_vote
from locus.routing.stacked import StackedRouter
from locus.store import Store

__all__ = [
    "Baselines",
    "CorrectnessMetrics",
    "CostSavings",
    "Evaluation",
    "Routed",
    "RoutingMetrics",
    "TaskEvaluation",
    "evaluate_workspace",
    "evaluation",
]


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
    table = data.table.select_llms([llm for llm in data.table.llm_ids if llm in pooled])
    rows = data.rows(split)
    routed = Routed.of(router.router, table, data.vectors, rows, data.rows("train"))
    guard = router.router.guard
    hashes = [table.text_hashes[i] for i in rows]
    result = evaluation(
        routed, list(table.llm_ids), artifact=name, split=split,
        guard=None if guard is None else guard.as_dict(),
        logged=decision_propensities(store, hashes, list(table.llm_ids)),
    )  # fmt: skip
    columns = [list(router.llm_ids).index(llm) for llm in table.llm_ids]
    spent = savings(
        router, table, data.vectors[rows], rows, columns, routed.proba, routed.order[:, 0],
        routed.truth,
    )  # fmt: skip
    return replace(result, savings=spent)


@dataclass(frozen=True)
class Routed:
    """A fitted router's decisions on some queries, beside the simple baselines chosen on the
    same training queries, query by query (so that the folds of a k-fold evaluation join).

    Attributes:
        truth: (n, n_llms) the queries' scores (NaN: not scored).
        proba: (n, n_llms) the router's P(correct).
        order: (n, <= 5) the LLMs as `locus route` ranks them (guarded; -1: none).
        unguarded: (n,) the router's choice without the guard.
        best: (n,) the best single LLM's choice (the training ranking's first scored LLM).
        table: (n,) the per-task table's, reading the true task.
        tasks: each query's task (None: none).
        default: (n,) the guard's default LLM (-1: no guard).
        given: (n,) the router's choice told each query's task, None where it reads none.
        given_proba: (n, n_llms) its P(correct) told the task (with `given`).
        from_text: (n,) the per-task table's choice reading the task from the text (None:
            the queries carry no tasks).
        floors: simple predictors' P(correct) (n, n_llms) on the same cells, by name
            (`locus.pipeline.evaluation_results.FLOORS`): each LLM's training rate, its rate on
            the query's task (the queries carry tasks), the router's own kNN vote (smoothed
            as the stack reads it; a router with one).
        knn: (n,) the router's own kNN vote's choice, None without one.
        free: by router name, (n,) its choice among every LLM, scored on the query or not:
            what off-policy estimates read on sparse evidence (`locus.offpolicy`).
    """

    truth: np.ndarray
    proba: np.ndarray
    order: np.ndarray
    unguarded: np.ndarray
    best: np.ndarray
    table: np.ndarray
    tasks: list[str | None]
    default: np.ndarray
    given: np.ndarray | None = None
    given_proba: np.ndarray | None = None
    from_text: np.ndarray | None = None
    floors: dict[str, np.ndarray] = field(default_factory=dict)
    knn: np.ndarray | None = None
    free: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        router: StackedRouter,
        table: ScoreTable,
        vectors: np.ndarray,
        rows: np.ndarray,
        train_rows: np.ndarray,
    ) -> Routed:
        """`router`'s decisions on `rows` of `table` (its LLMs, in its order), the baselines
        chosen on `train_rows`."""
        llm_ids = list(table.llm_ids)
        columns = [list(router.llm_ids).index(llm) for llm in llm_ids]
        truth, queries = table.scores[rows], vectors[rows]
        proba = np.asarray(router.predict_proba(queries), dtype=np.float64)[:, columns]
        tasks = [table.tasks[i] for i in rows]
        train_tasks = [table.tasks[i] for i in train_rows]
        trained = table.scores[train_rows]
        guard = router.guard
        bound = None
        if guard is not None and guard.default in llm_ids:
            bound = (llm_ids.index(guard.default), guard.margin)
        scored = ~np.isnan(truth)
        # accuracy routing as `locus route` decides it, among the LLMs scored on each query
        order = rank(proba, None, RouteRequest(top=5), allowed=scored, guard=bound).order
        given, given_proba, from_text = None, None, None
        known = set(tasks_read_by(router))
        if known and any(t in known for t in tasks):
            named = [t if t in known else None for t in tasks]
            given_proba = np.asarray(router.predict_proba_given_tasks(queries, named), np.float64)[
                :, columns
            ]
            request = RouteRequest(top=1)
            given = rank(given_proba, None, request, allowed=scored, guard=bound).order[:, 0]
        rates = metrics.column_means(trained)
        pooled = float(np.nanmean(trained)) if (~np.isnan(trained)).any() else 0.5
        floors = {"llm_rate": np.tile(np.where(np.isnan(rates), pooled, rates), (len(rows), 1))}
        if any(t is not None for t in train_tasks) and any(t is not None for t in tasks):
            train = Evidence.from_table(table, vectors, train_rows)
            per_task = PerTaskRouter().fit(train)
            read = per_task.tasks_of(queries)
            from_text = metrics.best_per_task_choices(trained, train_tasks, truth, read)
            floors["task_rate"] = per_task.predict_proba_for_tasks(tasks).astype(np.float64)
        # every LLM open to every router: a table scored nowhere restricts no choice
        anything = np.zeros_like(truth)
        free = {
            "LOCUS, guarded": rank(proba, None, RouteRequest(top=1), guard=bound).order[:, 0],
            "LOCUS, unguarded": metrics.routing_choices(proba, anything),
            "best single LLM": metrics.best_single_choices(trained, anything),
        }
        if any(t is not None for t in train_tasks) and any(t is not None for t in tasks):
            free["best LLM per task, the task given"] = metrics.best_per_task_choices(
                trained, train_tasks, anything, tasks
            )
        knn = None
        if router.knn is not None and set(llm_ids) <= set(router.knn.llm_ids):
            own = [list(router.knn.llm_ids).index(llm) for llm in llm_ids]
            vote = np.asarray(router.knn.predict_proba(queries), np.float64)[:, own]
            floors["knn"] = smoothed_vote(vote, router.knn.k_)
            knn = metrics.routing_choices(vote, truth)
            free["kNN vote"] = metrics.routing_choices(vote, anything)
        return cls(
            truth=truth,
            proba=proba,
            order=order,
            unguarded=metrics.routing_choices(proba, truth),
            best=metrics.best_single_choices(trained, truth),
            table=metrics.best_per_task_choices(trained, train_tasks, truth, tasks),
            tasks=tasks,
            default=np.full(len(rows), -1 if bound is None else bound[0]),
            given=given,
            given_proba=given_proba,
            from_text=from_text,
            floors=floors,
            knn=knn,
            free=free,
        )

    @classmethod
    def joined(cls, parts: Sequence[Routed]) -> Routed:
        """The decisions of `parts` (one per fold, the same LLMs) as one; `given` and
        `from_text` where every part has them."""

        def join(name: str) -> Any:
            values = [getattr(part, name) for part in parts]
            return None if any(v is None for v in values) else np.concatenate(values)

        given = join("given")
        shared = set.intersection(*(set(part.floors) for part in parts)) if parts else set()
        return cls(
            **{
                name: join(name)
                for name in ("truth", "proba", "order", "unguarded", "best", "table", "default")
            },
            tasks=[task for part in parts for task in part.tasks],
            given=given,
            given_proba=None if given is None else join("given_proba"),
            from_text=join("from_text"),
            floors={
                name: np.concatenate([part.floors[name] for part in parts])
                for name in sorted(shared)
            },
            knn=join("knn"),
            free={
                name: np.concatenate([part.free[name] for part in parts])
                for name in (parts[0].free if parts else ())
                if all(name in part.free for part in parts)
            },
        )


def evaluation(
    routed: Routed,
    llm_ids: Sequence[str],
    *,
    artifact: str,
    split: str,
    guard: dict[str, Any] | None,
    folds: int | None = None,
    logged: np.ndarray | None = None,
) -> Evaluation:
    """The `Evaluation` of `routed` (its columns: `llm_ids`); `guard`: the guard as said;
    `logged`: the logging probability of each cell where the decision log knows it (NaN
    elsewhere: `decision_propensities`), read by the off-policy estimates on sparse evidence."""
    truth, order = routed.truth, routed.order
    choice = order[:, 0]
    guarded = routed.default >= 0
    given_auroc = None
    if routed.given_proba is not None:
        auroc = metrics.correctness_metrics(routed.given_proba, truth)["auroc"]
        given_auroc = None if np.isnan(auroc) else float(auroc)
    per_task: dict[str, TaskEvaluation] = {}
    task_array = np.asarray(routed.tasks, dtype=object)
    for task in sorted({t for t in routed.tasks if t is not None}):
        mask = task_array == task
        per_task[task] = TaskEvaluation(
            queries=int(mask.sum()),
            hit_at_1=_hit(order[mask], truth[mask], 1),
            best_single_llm=metrics.chosen_accuracy(routed.best[mask], truth[mask]),
            oracle=metrics.oracle_accuracy(truth[mask]),
        )
    correctness = metrics.correctness_metrics(routed.proba, truth)
    floors = {}
    for name, proba in routed.floors.items():
        # like against like: the rate on the true task against the router told the task
        router_proba, router_loss, told = routed.proba, correctness["log_loss"], False
        if name == "task_rate" and routed.given_proba is not None:
            router_proba, told = routed.given_proba, True
            router_loss = metrics.log_loss(router_proba, truth)
        loss_gain, loss_se = metrics.log_loss_gain(router_proba, proba, truth)
        floors[name] = Floor(
            brier=metrics.brier_score(proba, truth),
            log_loss=metrics.log_loss(proba, truth),
            gain=loss_gain,
            gain_se=loss_se,
            router_log_loss=router_loss,
            router_told=told,
        )
    found = overlap_of(truth)
    offpolicy = None
    if found.sparse:
        propensity, said = logged_propensities(truth, logged)
        # the reward model of the doubly robust estimates: the router's own P(correct)
        offpolicy = OffPolicy(
            overlap=found,
            estimates={
                name: {
                    "ips": ips(chosen, truth, propensity),
                    "dr": doubly_robust(chosen, truth, routed.proba, propensity),
                }
                for name, chosen in routed.free.items()
            },
            **({} if said is None else {"propensity": said}),
        )
    se, gain, gain_se = _noise(choice, truth, routed.best)
    picked = routed.best[routed.best >= 0]
    best_id = llm_ids[int(np.bincount(picked).argmax())] if len(picked) else llm_ids[0]
    return Evaluation(
        artifact=artifact,
        split=split,
        queries=len(truth),
        llms=len(llm_ids),
        folds=folds,
        routing=RoutingMetrics(
            hit_at_1=_hit(order, truth, 1),
            hit_at_3=_hit(order, truth, 3) if len(llm_ids) > 3 else None,
            hit_at_5=_hit(order, truth, 5) if len(llm_ids) > 5 else None,
            unguarded_hit_at_1=metrics.chosen_accuracy(routed.unguarded, truth),
            moved=float(np.mean(choice[guarded] != routed.default[guarded]))
            if guarded.any()
            else None,
            guard=guard,
            hit_at_1_se=se,
            gain=gain,
            gain_se=gain_se,
            task_given_hit_at_1=None
            if routed.given is None
            else metrics.chosen_accuracy(routed.given, truth),
        ),
        correctness=CorrectnessMetrics(
            accuracy=correctness["accuracy"],
            auroc=None if np.isnan(correctness["auroc"]) else correctness["auroc"],
            task_given_auroc=given_auroc,
            brier=correctness["brier"],
            ece=correctness["ece"],
            cells=int(correctness["cells"]),
            log_loss=correctness["log_loss"],
            floors=floors,
        ),
        baselines=Baselines(
            best_single_llm=metrics.chosen_accuracy(routed.best, truth),
            best_single_llm_id=best_id,
            best_llm_per_task=metrics.chosen_accuracy(routed.table, truth),
            oracle=metrics.oracle_accuracy(truth),
            random=float(np.nanmean(np.nanmean(truth, axis=1))),
            best_llm_per_task_from_text=None
            if routed.from_text is None
            else metrics.chosen_accuracy(routed.from_text, truth),
            knn=None if routed.knn is None else metrics.chosen_accuracy(routed.knn, truth),
        ),
        per_task=per_task,
        offpolicy=offpolicy,
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
    choice: np.ndarray, truth: np.ndarray, best: np.ndarray
) -> tuple[float | None, float | None, float | None]:
    """(standard error of hit@1, gain over the best single LLM's choice `best` (n,), the
    gain's paired standard error) over the queries (`choice`: the routed column of each, -1:
    none); None where fewer than two queries allow one."""
    rows = np.flatnonzero(choice >= 0)
    if len(rows) < 2:
        return None, None, None
    got = truth[rows, choice[rows]].astype(np.float64)
    se = float(got.std(ddof=1) / np.sqrt(len(got)))
    both = best[rows] >= 0
    if both.sum() < 2:
        return se, None, None
    diff = got[both] - truth[rows[both], best[rows[both]]]
    return se, float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(len(diff)))
