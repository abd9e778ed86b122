"""Train LOCUS on a workspace: save the artifact, make its pool the workspace's.

>>> report = fit_workspace(store, TrainingConfig(anchors=1024))     # doctest: +SKIP
>>> report.best_step, report.artifact  # doctest: +SKIP
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from locus._progress import ProgressFactory, no_progress
from locus.calibration import Calibration
from locus.data.table import ScoreTable
from locus.errors import LocusInputError, LocusNotFoundError, did_you_mean
from locus.locus import Locus
from locus.metrics import FEW_QUERIES
from locus.nn.config import TrainingConfig
from locus.nn.training import ProgressCallback
from locus.offpolicy import overlap_of
from locus.pipeline.data import workspace_table
from locus.pipeline.workspace_artifacts import (
    DEFAULT_ARTIFACT,
    artifact_path,
    publish_artifact,
    trained_artifact,
)
from locus.routing import router_artifact
from locus.routing.ann import ANN_FROM
from locus.routing.costs import CostModel
from locus.routing.evidence import Evidence
from locus.routing.guard import Guard
from locus.routing.locus_router import LocusRouter
from locus.routing.stacked import LEARN_MIN_PER_LLM, StackedRouter
from locus.store import Store

__all__ = [
    "CALIBRATION_MIN_PER_LLM",
    "MIN_LLMS",
    "MIN_TRAIN_QUERIES",
    "FitReport",
    "fit_router",
    "fit_workspace",
    "load_workspace_locus",
    "steps_for_epochs",
]

MIN_LLMS = 2  # routing chooses among LLMs
MIN_TRAIN_QUERIES = 8  # what training needs to run at all (evidence, targets, a validation)
# an LLM with fewer scored training queries than this leaves its validation split a handful of
# scores: too few to calibrate its P(correct) on, or to learn from (the stack's own floor)
CALIBRATION_MIN_PER_LLM = LEARN_MIN_PER_LLM


@dataclass(frozen=True)
class FitReport:
    """What one fit did: the artifact, data sizes, the kept step and its validation hit@1."""

    artifact: Path
    llms: int
    train_queries: int
    val_queries: int
    test_queries: int
    best_step: int
    best_val_routing_accuracy: float
    seconds: float
    guard: Guard | None = None
    calibration: Calibration | None = None
    stack: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    thin: dict[str, Any] | None = None  # how an LLM onboarded since is read (routing/thin.py)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "artifact": str(self.artifact),
            "guard": None if self.guard is None else self.guard.as_dict(),
            "calibration": None if self.calibration is None else self.calibration.as_dict(),
        }


def steps_for_epochs(epochs: int, n_llms: int, llms_per_step: int) -> int:
    """Training steps for `epochs` passes over `n_llms` LLMs, `llms_per_step` per step."""
    return max(1, epochs * math.ceil(n_llms / llms_per_step))


def fit_workspace(
    store: Store,
    config: TrainingConfig | None = None,
    *,
    name: str = DEFAULT_ARTIFACT,
    split_seed: int = 0,
    exclude_llms: Sequence[str] = (),
    progress: ProgressCallback | None = None,
    device: str = "cpu",
    ensemble: bool = True,
    stages: ProgressFactory = no_progress,
    ann_from: int = ANN_FROM,
) -> FitReport:
    """Train on the workspace's training queries, save the artifact, store every embedding.

    `exclude_llms` keeps LLMs out of training entirely (to onboard them later, as a test of
    training-free onboarding). Test queries are never seen. The workspace's pool for `name`
    becomes exactly the trained LLMs, embedded from their anchors. The artifact holds the
    fitted router (`locus.routing.stacked.StackedRouter`): with `ensemble` (the default), LOCUS
    stacked with a kNN router over the training scores, and the routing guard either way; and
    the per-query cost model with the validation queries a budget is tuned on
    (`locus.routing.router_artifact.save`). The kNN router and the cost model search their
    training queries in a graph from `ann_from` of them on (`locus.routing.ann`).

    `progress` hears every training step; `stages` opens one task for each other stage
    (reading the workspace, fitting the router, saving the artifact).
    """
    started = time.perf_counter()
    path = artifact_path(store, name)
    with stages("reading the workspace"):
        data = workspace_table(store, split_seed=split_seed)
    table = data.table
    if exclude_llms:
        unknown = sorted(set(exclude_llms) - set(table.llm_ids))
        if unknown:
            raise LocusNotFoundError(
                f"cannot exclude unknown LLM {unknown[0]!r}"
                f"{did_you_mean(unknown[0], table.llm_ids)}; expected an LLM of the workspace "
                "(see `locus llms`)"
            )
        excluded = set(exclude_llms)
        table = table.select_llms([llm for llm in table.llm_ids if llm not in excluded])
    train_rows, val_rows = data.rows("train"), data.rows("val")
    notes = size_notes(table, train_rows, val_rows, len(data.rows("test")), ensemble)
    model = Locus(config, device=device)
    model.manifest = model.manifest.with_(
        split_seed=split_seed,
        excluded_llms=tuple(exclude_llms),
        data_checksums=store.checksums(),
    )
    router = fit_router(
        model, table, data.vectors, train_rows, val_rows, encoder=data.encoder,
        progress=progress, ensemble=ensemble, stages=stages, ann_from=ann_from,
    )  # fmt: skip
    cost_model = _fit_cost_model(table, data.vectors, train_rows, ann_from)
    with stages("saving the artifact"):
        router_artifact.save(
            path,
            router,
            cost_model=cost_model,
            # what a budget is tuned on, priced by the cost model or the catalog
            validation_vectors=data.vectors[val_rows] if len(val_rows) else None,
        )
        publish_artifact(store, name)
        model.pool_.bind(store, name, fit_id=model.manifest.fit_id)
    best = max((h.get("val_routing_accuracy", math.nan) for h in model.history_), default=0.0)
    return FitReport(
        artifact=path,
        llms=len(model.llm_ids_),
        train_queries=len(train_rows),
        val_queries=len(val_rows),
        test_queries=len(data.rows("test")),
        best_step=model.best_step_,
        best_val_routing_accuracy=float(best),
        seconds=time.perf_counter() - started,
        guard=router.guard,
        calibration=model.manifest.calibration,
        stack=None if router.stack is None else router.stack.as_dict(),
        notes=notes,
        thin=None if router.thin is None else router.thin.as_dict(),
    )


def fit_router(
    model: Locus,
    table: ScoreTable,
    vectors: np.ndarray,
    train_rows: np.ndarray,
    val_rows: np.ndarray,
    *,
    encoder: str,
    progress: ProgressCallback | None = None,
    ensemble: bool = True,
    stages: ProgressFactory = no_progress,
    ann_from: int = ANN_FROM,
) -> StackedRouter:
    """`model` trained on `train_rows` of `table` (validated on `val_rows`), then the router
    `locus fit` saves: stacked with a kNN router over the training scores where `ensemble`,
    and guarded. What `fit_workspace` and `locus evaluate --folds` fit alike."""
    model.fit(table, vectors, train_rows, val_rows, text_encoder_name=encoder, progress=progress)
    stage = "fitting the router (kNN stack, guard, newcomers' readings)"
    with stages(stage if ensemble else "fitting the guard"):
        return StackedRouter.fit(
            LocusRouter(model),
            Evidence.from_table(table, vectors, train_rows),
            Evidence.from_table(table, vectors, val_rows),
            stacked=ensemble,
            ann_from=ann_from,
        )


def size_notes(
    table: ScoreTable, train_rows: np.ndarray, val_rows: np.ndarray, tests: int, ensemble: bool
) -> tuple[str, ...]:
    """Notes for the user on a pool this size (`StackedRouter.fit` acts on the same counts).

    Raises:
        LocusInputError: fewer than `MIN_LLMS` LLMs or `MIN_TRAIN_QUERIES` scored training
            queries, or no scored validation query.
    """
    scored = lambda rows: int((~np.isnan(table.scores[rows])).any(axis=1).sum())  # noqa: E731
    train, val = scored(train_rows), scored(val_rows)
    if table.n_llms < MIN_LLMS:
        raise LocusInputError(
            f"fit needs at least {MIN_LLMS} LLMs to route among; the workspace has "
            f"{table.n_llms}; import another LLM's scores (`locus import`)"
        )
    if train < MIN_TRAIN_QUERIES or val < 1:
        raise LocusInputError(
            f"fit needs at least {MIN_TRAIN_QUERIES} scored training queries and one "
            f"validation query (the workspace's split is 80/10/10 by query text); it has "
            f"{train} and {val}; import more queries (a few hundred to measure anything)"
        )
    notes = []
    found = overlap_of(table.scores[np.concatenate([train_rows, val_rows])])
    if found.sparse:
        notes.append(found.describe())
    per_llm = (~np.isnan(table.scores[train_rows])).sum(axis=0)
    if per_llm.min() < CALIBRATION_MIN_PER_LLM:
        fewest = int(per_llm.argmin())
        checked = int((~np.isnan(table.scores[val_rows, fewest])).sum())
        routed = "LOCUS alone"
        if ensemble:
            floor = "each LLM's per-task rates" if _has_tasks(table, train_rows) else "the best LLM"
            routed = f"{floor} and the nearest scored queries, not LOCUS"
        notes.append(
            f"{table.llm_ids[fewest]} has {int(per_llm.min())} scored training queries (and "
            f"{checked} validation {_plural(checked, 'score')}), fewer than "
            f"{CALIBRATION_MIN_PER_LLM}: too few to learn from or to calibrate P(correct) on, "
            f"so read a P(correct) near 0 or 1 as a guess, not a certainty; routing by {routed}"
        )
    if tests < FEW_QUERIES:
        error = 0.5 / np.sqrt(max(tests, 1))
        notes.append(
            f"a tiny pool: {tests} test {_plural(tests, 'query', 'queries')}, fewer than "
            f"{FEW_QUERIES}: locus evaluate's figures will be noise (one standard error of "
            f"hit@1 up to {error:.2f}); `locus evaluate --folds 5` tests every query instead"
        )
    elif tests < 200:
        error = 0.5 / np.sqrt(tests)
        notes.append(
            f"a small pool: {tests} test queries, so one standard error of hit@1 is up to "
            f"{error:.2f}; differences smaller than that are noise (`locus evaluate --folds "
            "5` tests every query)"
        )
    return tuple(notes)


def _plural(n: int, word: str, words: str | None = None) -> str:
    return word if n == 1 else (words or word + "s")


def _has_tasks(table: ScoreTable, rows: np.ndarray) -> bool:
    return len({table.tasks[i] for i in rows} - {None}) >= 2


def _fit_cost_model(
    table: ScoreTable, vectors: np.ndarray, train_rows: np.ndarray, ann_from: int
) -> CostModel | None:
    """Each LLM's per-query cost from the training queries' costs (`locus.routing.costs`);
    None where the workspace has no per-query costs."""
    if table.costs is None or np.isnan(table.costs[train_rows]).all():
        return None
    return CostModel(ann_from=ann_from).fit(
        vectors[train_rows], table.costs[train_rows], table.llm_ids
    )


def load_workspace_locus(store: Store, name: str = DEFAULT_ARTIFACT) -> Locus:
    """The artifact `name` with the workspace's current pool.

    Raises:
        LocusNotFoundError: no such artifact (run `locus fit`).
        LocusArtifactError: a damaged artifact, or one trained on another text encoder.
    """
    return Locus.load(trained_artifact(store, name), workspace=store)
