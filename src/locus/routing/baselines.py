"""Baseline routers: what LOCUS is compared against, each a `Router` fitted on `Evidence`.

    random        a uniformly random LLM per query (seeded by the query vector: reproducible)
    best-single   every query to the LLM with the best mean training score
    per-task      the best LLM of the query's task (task guessed from the vector when not given)
    oracle        the truth: an upper bound, for queries whose scores it was given
    knn, cluster  query neighbourhoods: see `locus.routing.neighbours`
    mf, irt       learned: see `locus.routing.learned`

Estimator style: `__init__` stores settings, `fit(train, val)` returns the router, learned
attributes end in `_`. `add_llm` onboards an LLM from its own scores, nothing else refitted.

    >>> import numpy as np
    >>> train = Evidence(np.eye(4, dtype=np.float32),
    ...                  np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32), ("a", "b"))
    >>> BestSingleRouter().fit(train).predict_proba(np.eye(4)[:1]).tolist()
    [[0.5, 0.5]]
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from locus.errors import (
    LocusArtifactError,
    LocusInputError,
    LocusNotFittedError,
    LocusNotFoundError,
)
from locus.offpolicy import selection_hit
from locus.routing.evidence import Evidence, read_router_folder, unit_rows, write_router_folder
from locus.routing.router import Router

__all__ = [
    "BaselineRouter",
    "BestSingleRouter",
    "OracleRouter",
    "PerTaskRouter",
    "RandomRouter",
]


class BaselineRouter(Router):
    """Shared plumbing: fitted check, save/load through `router.json` + `arrays.safetensors`."""

    kind: ClassVar[str]
    llm_ids: list[str]

    def _check_fitted(self) -> None:
        if not hasattr(self, "llm_ids"):
            raise LocusNotFittedError(f"{type(self).__name__} is not fitted; call fit() first")

    def fit(self, train: Evidence, val: Evidence | None = None) -> BaselineRouter:
        raise NotImplementedError

    def add_llm(self, llm_id: str, vectors: NDArray[np.float32], scores: Sequence[float]) -> None:
        """Onboard a new LLM from its scores on `vectors` (n, dq), nothing else refitted."""
        raise NotImplementedError(f"{type(self).__name__} cannot onboard LLMs")

    def _new_llm(
        self, llm_id: str, vectors: NDArray[np.float32], scores: Sequence[float]
    ) -> Evidence:
        """Validate an onboarding request; the new LLM's evidence as one column."""
        self._check_fitted()
        if llm_id in self.llm_ids:
            raise LocusInputError(f"LLM {llm_id!r} is already in the router")
        values = np.asarray(scores, dtype=np.float32).reshape(-1, 1)
        if len(values) == 0:
            raise LocusInputError(f"LLM {llm_id!r}: onboarding needs at least one score")
        return Evidence(np.asarray(vectors, dtype=np.float32), values, (llm_id,))

    # save/load: subclasses describe themselves with these two and rebuild in `_restore`
    def _settings(self) -> dict[str, Any]:
        return {}

    def _arrays(self) -> dict[str, NDArray[Any]]:
        return {}

    def _restore(self, settings: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> None:
        pass

    def save(self, path: str | Path) -> Path:
        self._check_fitted()
        return write_router_folder(path, self.kind, self.llm_ids, self._settings(), self._arrays())

    @classmethod
    def load(cls, path: str | Path) -> BaselineRouter:
        description, arrays = read_router_folder(path)
        if description.get("kind") != cls.kind:
            raise LocusArtifactError(
                f"{path}: a {description.get('kind')!r} router, not {cls.kind!r}; load it with "
                "locus.routing.load_router"
            )
        router = cls.__new__(cls)
        router.llm_ids = list(description.pop("llm_ids"))
        router._restore(description, arrays)
        return router


def _check_vectors(vectors: NDArray[Any], dim: int, owner: str) -> NDArray[np.float32]:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise LocusInputError(
            f"{owner}: query vectors must be (n_queries, {dim}); got {vectors.shape}"
        )
    return vectors


class RandomRouter(BaselineRouter):
    """A random LLM per query: P(correct) is uniform noise drawn from the query vector's bytes
    and `seed`, so one query always gets the same draw (save -> load gives the same choices)."""

    kind = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def fit(self, train: Evidence, val: Evidence | None = None) -> RandomRouter:
        self.llm_ids = list(train.llm_ids)
        return self

    def add_llm(self, llm_id: str, vectors: NDArray[np.float32], scores: Sequence[float]) -> None:
        self._new_llm(llm_id, vectors, scores)
        self.llm_ids.append(llm_id)

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        self._check_fitted()
        rows = np.ascontiguousarray(query_vectors, dtype=np.float32)
        out = np.empty((len(rows), len(self.llm_ids)), dtype=np.float32)
        for i, row in enumerate(rows):
            rng = np.random.default_rng([self.seed, zlib.crc32(row.tobytes())])
            out[i] = rng.random(len(self.llm_ids))
        return out

    def _settings(self) -> dict[str, Any]:
        return {"seed": self.seed}

    def _restore(self, settings: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> None:
        self.seed = int(settings["seed"])


class BestSingleRouter(BaselineRouter):
    """P(correct) = each LLM's mean training score, the same for every query: routes everything
    to the best LLM on average (and is the per-LLM-mean predictor of correctness)."""

    kind = "best-single"

    def fit(self, train: Evidence, val: Evidence | None = None) -> BestSingleRouter:
        self.llm_ids = list(train.llm_ids)
        self.means_ = train.column_means().astype(np.float32)
        return self

    def add_llm(self, llm_id: str, vectors: NDArray[np.float32], scores: Sequence[float]) -> None:
        new = self._new_llm(llm_id, vectors, scores)
        self.means_ = np.append(self.means_, new.column_means().astype(np.float32))
        self.llm_ids.append(llm_id)

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        self._check_fitted()
        return np.tile(self.means_, (len(np.asarray(query_vectors)), 1))

    def _arrays(self) -> dict[str, NDArray[Any]]:
        return {"means": self.means_}

    def _restore(self, settings: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> None:
        self.means_ = arrays["means"]


def _shrunk_means(
    groups: NDArray[np.int64], n_groups: int, evidence: Evidence, shrink: float
) -> NDArray[np.float32]:
    """(n_groups, n_llms) mean score per group of queries, each pulled towards the LLM's
    overall mean with the weight of `shrink` queries (a group an LLM barely answered keeps
    close to its overall mean instead of 0 or 1 from two scores)."""
    observed = evidence.observed
    values = np.where(observed, evidence.scores, 0.0)
    totals = np.zeros((n_groups, evidence.n_llms))
    counts = np.zeros((n_groups, evidence.n_llms))
    np.add.at(totals, groups, values)
    np.add.at(counts, groups, observed)
    overall = evidence.column_means()
    return ((totals + shrink * overall) / (counts + shrink)).astype(np.float32)


class PerTaskRouter(BaselineRouter):
    """The best LLM per task: P(correct) = the LLM's mean score on training queries of the
    query's task. `predict_proba_for_tasks` takes the tasks; `predict_proba` (vectors only, as
    in deployment) takes each vector's nearest task centroid (cosine).

    Args:
        shrink: pseudo-queries of the LLM's overall mean added to each task's mean.
    """

    kind = "per-task"

    def __init__(self, shrink: float = 5.0) -> None:
        self.shrink = shrink

    def fit(self, train: Evidence, val: Evidence | None = None) -> PerTaskRouter:
        if not train.tasks or all(t is None for t in train.tasks):
            raise LocusInputError(
                "the per-task router needs the training queries' tasks; import a task column"
            )
        names = sorted({t for t in train.tasks if t is not None})
        index = {t: i for i, t in enumerate(names)}
        known = np.array([t is not None for t in train.tasks])
        groups = np.array([index[t] for t in train.tasks if t is not None], dtype=np.int64)
        evidence = Evidence(train.vectors[known], train.scores[known], train.llm_ids)
        self.llm_ids = list(train.llm_ids)
        self.tasks_ = names
        self.table_ = _shrunk_means(groups, len(names), evidence, self.shrink)
        self.overall_ = train.column_means().astype(np.float32)
        unit = unit_rows(evidence.vectors)
        centroids = np.zeros((len(names), unit.shape[1]), dtype=np.float32)
        np.add.at(centroids, groups, unit)
        self.centroids_ = unit_rows(centroids)
        return self

    def predict_proba_for_tasks(self, tasks: Sequence[str | None]) -> NDArray[np.float32]:
        """(n_queries, n_llms) for queries of known tasks (an unknown task: overall means)."""
        self._check_fitted()
        index = {t: i for i, t in enumerate(self.tasks_)}
        out = np.tile(self.overall_, (len(tasks), 1))
        for row, task in enumerate(tasks):
            if task in index:
                out[row] = self.table_[index[task]]
        return out

    def tasks_of(self, query_vectors: NDArray[np.float32]) -> list[str]:
        """Each query's task as its vector tells it: the task of the nearest centroid."""
        self._check_fitted()
        vectors = _check_vectors(query_vectors, self.centroids_.shape[1], "per-task router")
        nearest = np.argmax(unit_rows(vectors) @ self.centroids_.T, axis=1)
        return [self.tasks_[i] for i in nearest]

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        return self.predict_proba_for_tasks(self.tasks_of(query_vectors))

    def predict_proba_given_tasks(
        self, query_vectors: NDArray[np.float32], tasks: Sequence[str | None] | None
    ) -> NDArray[np.float32]:
        """The table's row of each query's task where `tasks` names one it knows, else the
        nearest task centroid's (as `predict_proba`)."""
        read = self.tasks_of(query_vectors)
        if tasks is None:
            return self.predict_proba_for_tasks(read)
        if len(tasks) != len(read):
            raise LocusInputError(
                f"tasks: expected one per query ({len(read)}), found {len(tasks)}"
            )
        known = set(self.tasks_)
        return self.predict_proba_for_tasks(
            [told if told in known else guess for told, guess in zip(tasks, read, strict=True)]
        )

    def _settings(self) -> dict[str, Any]:
        return {"shrink": self.shrink, "tasks": self.tasks_}

    def _arrays(self) -> dict[str, NDArray[Any]]:
        return {"table": self.table_, "overall": self.overall_, "centroids": self.centroids_}

    def _restore(self, settings: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> None:
        self.shrink = float(settings["shrink"])
        self.tasks_ = list(settings["tasks"])
        self.table_, self.overall_ = arrays["table"], arrays["overall"]
        self.centroids_ = arrays["centroids"]


class OracleRouter(BaselineRouter):
    """The truth, as a router: P(correct) = the real score (0 where the LLM was not scored), so
    it picks a right LLM whenever one exists. An upper bound, not a router to deploy: it knows
    only the queries it was fitted on (by the exact vector) and refuses any other."""

    kind = "oracle"

    def fit(self, train: Evidence, val: Evidence | None = None) -> OracleRouter:
        self.llm_ids = list(train.llm_ids)
        self.vectors_ = train.vectors
        self.scores_ = np.nan_to_num(train.scores, nan=0.0)
        self._index()
        return self

    def _index(self) -> None:
        self._row_of = {row.tobytes(): i for i, row in enumerate(self.vectors_)}

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        self._check_fitted()
        rows = np.ascontiguousarray(query_vectors, dtype=np.float32)
        found = [self._row_of.get(row.tobytes()) for row in rows]
        missing = sum(i is None for i in found)
        if missing:
            raise LocusNotFoundError(
                f"the oracle knows only the queries it was fitted on; {missing} of {len(rows)} "
                "query vectors are not among them"
            )
        return self.scores_[np.array(found, dtype=np.int64)]

    def _arrays(self) -> dict[str, NDArray[Any]]:
        return {"vectors": self.vectors_, "scores": self.scores_}

    def _restore(self, settings: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> None:
        self.vectors_, self.scores_ = arrays["vectors"], arrays["scores"]
        self._index()


def _choose_on_validation(
    router: BaselineRouter, name: str, candidates: Sequence[int], val: Evidence | None
) -> tuple[int, dict[str, float]]:
    """The candidate value of `name` with the best validation routing accuracy (ties: the
    first, i.e. smallest); with no validation set, the middle candidate."""
    if val is None or val.n_queries == 0:
        return candidates[len(candidates) // 2], {}
    results: dict[str, float] = {}
    for value in candidates:
        setattr(router, name, value)
        results[str(value)] = selection_hit(router.predict_proba(val.vectors), val.scores)
    best = max(candidates, key=lambda v: (results[str(v)], -v))
    return best, results
