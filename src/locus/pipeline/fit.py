"""Train LOCUS on a workspace: save the artifact, make its pool the workspace's.

>>> report = fit_workspace(store, TrainingConfig(anchors=1024))     # doctest: +SKIP
>>> report.best_step, report.artifact
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from locus import metrics
from locus.calibration import Calibration, sigmoid
from locus.data.table import ScoreTable
from locus.errors import LocusNotFoundError
from locus.locus import Locus
from locus.nn.config import TrainingConfig
from locus.nn.training import ProgressCallback
from locus.pipeline.data import workspace_table
from locus.routing.costs import COST_FOLDER, CostModel
from locus.routing.ensemble import ENSEMBLE_FOLDER, STACK_KS, fit_locus_knn_stack, knn_votes
from locus.routing.evidence import Evidence
from locus.routing.guard import Guard, fit_guard
from locus.routing.neighbours import KNNRouter
from locus.routing.workspace import (
    DEFAULT_ARTIFACT,
    artifact_path,
    publish_artifact,
    trained_artifact,
)
from locus.store import Store

__all__ = ["FitReport", "fit_workspace", "load_workspace_locus", "steps_for_epochs"]


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
    ensemble: dict[str, Any] | None = None

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
) -> FitReport:
    """Train on the workspace's training queries, save the artifact, store every embedding.

    `exclude_llms` keeps LLMs out of training entirely (to onboard them later, as a test of
    training-free onboarding). Test queries are never seen. The workspace's pool for `name`
    becomes exactly the trained LLMs, embedded from their anchors. With `ensemble` (the
    default), a kNN router over the training scores is kept in the artifact and stacked with
    LOCUS's P(correct) (`locus.routing.ensemble.Stack`, fitted on validation); the routing
    guard is chosen on the router's validation P(correct) either way.
    """
    started = time.perf_counter()
    path = artifact_path(store, name)
    data = workspace_table(store, split_seed=split_seed)
    table = data.table
    if exclude_llms:
        unknown = sorted(set(exclude_llms) - set(table.llm_ids))
        if unknown:
            raise LocusNotFoundError(
                f"cannot exclude unknown LLM {unknown[0]!r}; expected an LLM of the workspace "
                "(see `locus llms`)"
            )
        excluded = set(exclude_llms)
        table = table.select_llms([llm for llm in table.llm_ids if llm not in excluded])
    model = Locus(config, device=device)
    model.metadata = {
        "split_seed": split_seed,
        "excluded_llms": list(exclude_llms),
        "data_checksums": store.checksums(),
    }
    model.fit(
        table,
        data.vectors,
        data.rows("train"),
        data.rows("val"),
        text_encoder_name=data.encoder,
        progress=progress,
    )
    train_rows, val_rows = data.rows("train"), data.rows("val")
    knn, val_proba = None, None
    if (~np.isnan(table.scores[val_rows])).any():
        val_logits = model.predict_logits(data.vectors[val_rows], list(table.llm_ids))
        val_proba = sigmoid(val_logits)
        if ensemble:
            knn, val_proba = _fit_ensemble(
                model, table, data.vectors, train_rows, val_rows, val_logits
            )
    guard = None if val_proba is None else _fit_guard(val_proba, table, train_rows, val_rows)
    if guard is not None:
        model.metadata = {**model.metadata, "guard": guard.as_dict()}
    cost_model = _fit_cost_model(table, data.vectors, train_rows)

    def also(folder: Path) -> None:
        if knn is not None:
            knn.save(folder / ENSEMBLE_FOLDER)
        if cost_model is not None:
            cost_model.save(folder / COST_FOLDER)
        if len(val_rows):  # what a budget is tuned on, priced by the cost model or catalog
            (folder / COST_FOLDER).mkdir(exist_ok=True)
            CostModel.save_validation(folder / COST_FOLDER, data.vectors[val_rows])

    model.save(path, also=also)
    publish_artifact(store, name)
    model.pool_.bind(store, name, fit_id=model.metadata["fit_id"])
    best = max((h.get("val_routing_accuracy", math.nan) for h in model.history_), default=0.0)
    return FitReport(
        artifact=path,
        llms=len(model.llm_ids_),
        train_queries=len(data.rows("train")),
        val_queries=len(data.rows("val")),
        test_queries=len(data.rows("test")),
        best_step=model.best_step_,
        best_val_routing_accuracy=float(best),
        seconds=time.perf_counter() - started,
        guard=guard,
        calibration=model.calibration_ if "calibration" in model.metadata else None,
        ensemble=model.metadata.get("ensemble"),
    )


def _fit_ensemble(
    model: Locus,
    table: ScoreTable,
    vectors: np.ndarray,
    train_rows: np.ndarray,
    val_rows: np.ndarray,
    locus_logits: np.ndarray,
) -> tuple[KNNRouter, np.ndarray]:
    """A kNN router on the training scores (its own k chosen on validation) and the `Stack`
    that combines its votes with LOCUS's validation logits `locus_logits`: the mixture at that
    k for the level, the votes at `STACK_KS` beside LOCUS for which LLM, fitted on validation
    log-loss (`locus.routing.ensemble`), recorded in the model's metadata; returns the router
    and the stacked validation P(correct)."""
    knn = KNNRouter().fit(
        Evidence.from_table(table, vectors, train_rows),
        Evidence.from_table(table, vectors, val_rows),
    )
    ids, needed = list(table.llm_ids), sorted({*STACK_KS, knn.k_})
    rows = {"train": train_rows, "val": val_rows}
    votes = {split: knn_votes(knn, vectors[r], ids, needed) for split, r in rows.items()}
    logits = {"train": model.predict_logits(vectors[train_rows], ids), "val": locus_logits}
    truth = {split: table.scores[r] for split, r in rows.items()}
    stack = fit_locus_knn_stack(logits, votes, truth, mix_k=knn.k_)
    model.metadata = {
        **model.metadata,
        "ensemble": {
            "router": "knn",
            "folder": ENSEMBLE_FOLDER,
            "stack": stack.as_dict(),
            "k": knn.k_,
        },
    }
    return knn, sigmoid(stack.logits(locus_logits, votes["val"]))


def _fit_cost_model(
    table: ScoreTable, vectors: np.ndarray, train_rows: np.ndarray
) -> CostModel | None:
    """Each LLM's per-query cost from the training queries' costs (`locus.routing.costs`);
    None where the workspace has no per-query costs."""
    if table.costs is None or np.isnan(table.costs[train_rows]).all():
        return None
    return CostModel().fit(vectors[train_rows], table.costs[train_rows], table.llm_ids)


def _fit_guard(
    val_proba: np.ndarray, table: ScoreTable, train_rows: np.ndarray, val_rows: np.ndarray
) -> Guard | None:
    """The routing guard (`locus.routing.guard`) on the router's validation P(correct): the
    default is the best LLM on the training queries; None if it has no validation score."""
    truth = table.scores[val_rows]
    if len(val_rows) < 2:
        return None
    default, _ = metrics.best_single_accuracy(table.scores[train_rows], truth)
    if np.isnan(truth[:, default]).all():
        return None
    return fit_guard(val_proba, truth, list(table.llm_ids), default)


def load_workspace_locus(store: Store, name: str = DEFAULT_ARTIFACT) -> Locus:
    """The artifact `name` with the workspace's current pool.

    Raises:
        LocusNotFoundError: no such artifact (run `locus fit`).
        LocusArtifactError: a damaged artifact, or one trained on another text encoder.
    """
    return Locus.load(trained_artifact(store, name), workspace=store)
