"""Workspace workflows: fit, embed (onboard), route and evaluate against a `Store`.

The facade (`Locus`) works on arrays; these functions connect it to a workspace: they read the
score table and cached query vectors, assign the hash split, save the artifact under
`<workspace>/artifacts/<name>/` and keep every LLM embedding in the store, keyed by artifact, so
onboarding a new LLM never moves the others.

    >>> from locus.store import Store                            # doctest: +SKIP
    >>> with Store.open(".locus") as store:
    ...     report = fit_workspace(store, TrainingConfig(anchors=1024))
    ...     evaluate_workspace(store)["routing"]["hit@1"]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from locus import metrics
from locus.data.splits import assign_splits
from locus.data.table import ScoreTable
from locus.errors import LocusArtifactError, LocusInputError, LocusNotFoundError
from locus.locus import Locus, RouteDecision
from locus.nn import ProgressCallback, TrainingConfig
from locus.store import Store
from locus.text.base import TextEncoder

__all__ = [
    "DEFAULT_ARTIFACT",
    "FitReport",
    "embed_workspace_llm",
    "evaluate_workspace",
    "fit_workspace",
    "load_workspace_locus",
    "route_workspace",
    "workspace_table",
]

DEFAULT_ARTIFACT = "default"


@dataclass(frozen=True)
class WorkspaceTable:
    """The encodable part of a workspace: score table, query vectors, splits."""

    table: ScoreTable
    vectors: np.ndarray  # (n_queries, dq)
    splits: np.ndarray  # (n_queries,) "train" / "val" / "test"
    encoder: str

    def rows(self, split: str) -> np.ndarray:
        return np.flatnonzero(self.splits == split)


def workspace_table(
    store: Store, *, split_seed: int = 0, llm_ids: Sequence[str] | None = None
) -> WorkspaceTable:
    """Score table of every query that has text, its cached vectors and its split.

    With `llm_ids`, only those LLMs' columns and the queries they were scored on are read (a
    query's split depends only on its text, so it is the same either way).

    Raises:
        LocusInputError: empty workspace, or queries not encoded yet (run `locus encode`).
    """
    encoder = store.text_encoder
    if encoder is None:
        raise LocusInputError(
            f"workspace {store.workspace}: queries are not encoded yet; run `locus encode` first"
        )
    table = store.score_table(llm_ids=llm_ids)
    if table.n_llms == 0:
        raise LocusInputError(
            f"workspace {store.workspace}: no scores; import evaluation results first"
        )
    has_text = np.array([h != "" for h in table.text_hashes], dtype=bool)
    if not has_text.any() and llm_ids is None:
        raise LocusInputError(
            f"workspace {store.workspace}: no query has text; LOCUS needs query texts (import "
            "with query_text or --queries)"
        )
    table = table.select_queries(has_text)
    vectors = store.get_vectors(encoder, list(table.text_hashes))
    splits = assign_splits(list(table.text_hashes), seed=split_seed, given=list(table.splits))
    return WorkspaceTable(table=table, vectors=vectors, splits=splits, encoder=encoder)


@dataclass(frozen=True)
class FitReport:
    artifact: Path
    llms: int
    train_queries: int
    val_queries: int
    test_queries: int
    best_step: int
    best_val_routing_accuracy: float
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "artifact": str(self.artifact)}


def _artifact_path(store: Store, name: str) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise LocusInputError(f"artifact name {name!r}: expected a plain name such as 'default'")
    return store.artifacts_dir / name


def fit_workspace(
    store: Store,
    config: TrainingConfig | None = None,
    *,
    name: str = DEFAULT_ARTIFACT,
    split_seed: int = 0,
    exclude_llms: Sequence[str] = (),
    progress: ProgressCallback | None = None,
    device: str = "cpu",
) -> FitReport:
    """Train on the workspace's training queries, save the artifact, store every embedding.

    `exclude_llms` keeps LLMs out of training entirely (to onboard them later, as a test of
    training-free onboarding). Test queries are never seen.
    """
    started = time.perf_counter()
    data = workspace_table(store, split_seed=split_seed)
    table = data.table
    if exclude_llms:
        kept = [llm for llm in table.llm_ids if llm not in set(exclude_llms)]
        unknown = sorted(set(exclude_llms) - set(table.llm_ids))
        if unknown:
            raise LocusNotFoundError(f"cannot exclude unknown LLM {unknown[0]!r}")
        table = table.select_llms(kept)
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
    path = model.save(_artifact_path(store, name))
    store.replace_embeddings(name, model.llm_ids_, model.llm_embeddings_, model.evidence_counts_)
    best = max((h.get("val_routing_accuracy", float("nan")) for h in model.history_), default=0)
    return FitReport(
        artifact=path,
        llms=len(model.llm_ids_),
        train_queries=len(data.rows("train")),
        val_queries=len(data.rows("val")),
        test_queries=len(data.rows("test")),
        best_step=model.best_step_,
        best_val_routing_accuracy=float(best),
        seconds=time.perf_counter() - started,
    )


def load_workspace_locus(
    store: Store, name: str = DEFAULT_ARTIFACT, *, text_encoder: TextEncoder | None = None
) -> Locus:
    """The artifact, with the pool of LLM embeddings the workspace holds for it."""
    path = _artifact_path(store, name)
    if not path.exists():
        raise LocusNotFoundError(
            f"no trained artifact {name!r} in {store.artifacts_dir}; run `locus fit` first"
        )
    model = Locus.load(path, text_encoder=text_encoder)
    workspace_encoder = store.text_encoder
    if workspace_encoder is not None and workspace_encoder != model.text_encoder_name_:
        raise LocusArtifactError(
            f"artifact {name!r} was trained with text encoder {model.text_encoder_name_!r} but "
            f"the workspace's queries are encoded with {workspace_encoder!r}; re-run locus fit"
        )
    llm_ids, vectors, counts = store.embeddings(name)
    if llm_ids:
        model.set_embeddings(llm_ids, vectors, counts)
    return model


def embed_workspace_llm(
    store: Store,
    llm_id: str,
    *,
    name: str = DEFAULT_ARTIFACT,
    include_test: bool = False,
) -> dict[str, Any]:
    """(Re)compute one LLM's embedding from the scores the workspace holds, in one forward pass.

    By default the LLM's scores on test-split queries are left out, so `evaluate` stays honest;
    `include_test=True` uses every score. Other LLMs' embeddings are not touched.
    """
    model = load_workspace_locus(store, name)
    if llm_id not in store.llm_ids():
        raise LocusNotFoundError(
            f"unknown LLM {llm_id!r}; expected an LLM of the workspace (see `locus llms`); "
            "import its scores first"
        )
    data = workspace_table(
        store, split_seed=int(model.metadata.get("split_seed", 0)), llm_ids=[llm_id]
    )
    column = data.table.scores[:, 0]
    usable = ~np.isnan(column)
    if not include_test:
        usable &= data.splits != "test"
    if not usable.any():
        raise LocusInputError(
            f"LLM {llm_id!r} has no usable scores (scored queries with text"
            f"{'' if include_test else ', outside the test split'}); import some first"
        )
    started = time.perf_counter()
    vector = model.embed(data.vectors[usable], column[usable])
    seconds = time.perf_counter() - started
    previous = (
        model.llm_embeddings_[model.llm_ids_.index(llm_id)] if llm_id in model.llm_ids_ else None
    )
    store.replace_embeddings(name, [llm_id], vector[None, :], [int(usable.sum())], only=True)
    return {
        "llm_id": llm_id,
        "artifact": name,
        "evidence": int(usable.sum()),
        "seconds": seconds,
        "moved": None if previous is None else float(np.linalg.norm(previous - vector)),
        "new": previous is None,
    }


def route_workspace(
    store: Store,
    texts: Sequence[str],
    *,
    name: str = DEFAULT_ARTIFACT,
    text_encoder: TextEncoder,
    top: int = 3,
    cost_weight: float = 0.0,
    max_cost: float | None = None,
) -> list[RouteDecision]:
    """Route query texts to the workspace's LLMs with the artifact `name`."""
    model = load_workspace_locus(store, name, text_encoder=text_encoder)
    costs = store.llm_costs() if (cost_weight > 0 or max_cost is not None) else None
    return model.route(
        list(texts), costs=costs, cost_weight=cost_weight, max_cost=max_cost, top=top
    )


def evaluate_workspace(
    store: Store, *, name: str = DEFAULT_ARTIFACT, split: str = "test"
) -> dict[str, Any]:
    """Routing hit@1/3/5 and correctness metrics on a split, next to baselines, per task.

    Every LLM is represented by its stored embedding (from its anchors, or its onboarding
    evidence). Baselines (best single LLM, best LLM per task) are chosen on the training split.
    """
    if split not in ("val", "test"):
        raise LocusInputError(f"split must be 'val' or 'test', found {split!r}")
    model = load_workspace_locus(store, name)
    data = workspace_table(store, split_seed=int(model.metadata.get("split_seed", 0)))
    llm_ids = [llm for llm in data.table.llm_ids if llm in set(model.llm_ids_)]
    table = data.table.select_llms(llm_ids)
    rows = data.rows(split)
    train_rows = data.rows("train")
    truth = table.scores[rows]
    proba = model.predict_proba(data.vectors[rows], llm_ids)
    tasks = [table.tasks[i] for i in rows]
    train_tasks = [table.tasks[i] for i in train_rows]
    best_index, best_single = metrics.best_single_accuracy(table.scores[train_rows], truth)
    result: dict[str, Any] = {
        "artifact": name,
        "split": split,
        "queries": len(rows),
        "llms": len(llm_ids),
        "routing": {
            "hit@1": metrics.routing_accuracy(proba, truth),
            "hit@3": metrics.top_k_hit(proba, truth, 3),
            "hit@5": metrics.top_k_hit(proba, truth, 5),
        },
        "correctness": metrics.correctness_metrics(proba, truth),
        "baselines": {
            "best_single_llm": best_single,
            "best_single_llm_id": llm_ids[best_index],
            "best_llm_per_task": metrics.best_per_task_accuracy(
                table.scores[train_rows], train_tasks, truth, tasks
            ),
            "oracle": metrics.oracle_accuracy(truth),
            "random": float(np.nanmean(np.nanmean(truth, axis=1))),
        },
    }
    per_task: dict[str, dict[str, float]] = {}
    task_array = np.asarray(tasks, dtype=object)
    for task in sorted({t for t in tasks if t is not None}):
        mask = task_array == task
        per_task[task] = {
            "queries": int(mask.sum()),
            "hit@1": metrics.routing_accuracy(proba[mask], truth[mask]),
            "best_single_llm": metrics.best_single_accuracy(table.scores[train_rows], truth[mask])[
                1
            ],
            "oracle": metrics.oracle_accuracy(truth[mask]),
        }
    result["per_task"] = per_task
    return result
