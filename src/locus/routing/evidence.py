"""`Evidence`: what a baseline router is fitted on; `Votes`: what the kNN router reads of it
near a query.

Evidence is the (query vector, score) pairs each LLM was evaluated on: a (n_queries, n_llms)
score matrix with NaN where an LLM has no score on a query, the queries' vectors and, where
known, their tasks. Fitting every router, LOCUS included, on one `Evidence` is what makes a
comparison like for like: the same queries, the same cells.

A fitted baseline is saved as a router folder: `router.json` (kind, format, LLM ids, settings
and learned scalars) and `arrays.safetensors` (learned arrays, read with `safetensors.numpy`;
no pickle anywhere), written and read by `locus.artifact.layout` (`write_router_folder`,
`read_router_folder`, re-exported here), its versions in `locus.artifact.formats`.

    >>> import numpy as np
    >>> evidence = Evidence(np.eye(3, dtype=np.float32),
    ...                     np.array([[1, 0], [0, 1], [1, np.nan]], dtype=np.float32), ("a", "b"))
    >>> evidence.n_queries, evidence.n_llms, int(evidence.observed.sum())
    (3, 2, 5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact.layout import ROUTER_FILE, read_router_folder, write_router_folder
from locus.data.table import ScoreTable
from locus.errors import LocusInputError

__all__ = [
    "ROUTER_FILE",
    "Evidence",
    "Votes",
    "read_router_folder",
    "unit_rows",
    "write_router_folder",
]


def unit_rows(vectors: NDArray[np.floating[Any]]) -> NDArray[np.float32]:
    """Rows scaled to unit L2 norm (zero rows stay zero): cosine similarity is then a dot."""
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


@dataclass(frozen=True)
class Evidence:
    """Scored queries to fit a router on.

    Attributes:
        vectors: (n_queries, dq) query vectors.
        scores: (n_queries, n_llms) in [0, 1]; NaN = this LLM has no score on this query.
        llm_ids: (n_llms,) column names.
        tasks: (n_queries,) task per query, or () when unknown.
    """

    vectors: NDArray[np.float32]
    scores: NDArray[np.float32]
    llm_ids: tuple[str, ...]
    tasks: tuple[str | None, ...] = field(default=())

    def __post_init__(self) -> None:
        vectors = np.asarray(self.vectors, dtype=np.float32)
        scores = np.asarray(self.scores, dtype=np.float32)
        if vectors.ndim != 2 or scores.ndim != 2 or len(vectors) != len(scores):
            raise LocusInputError(
                f"evidence needs vectors (n_queries, dq) and scores (n_queries, n_llms) with "
                f"one row per query; got {vectors.shape} and {scores.shape}"
            )
        if scores.shape[1] != len(self.llm_ids):
            raise LocusInputError(
                f"evidence has {scores.shape[1]} score columns but {len(self.llm_ids)} llm_ids"
            )
        observed = scores[~np.isnan(scores)]
        if observed.size and (observed.min() < 0 or observed.max() > 1):
            raise LocusInputError(
                f"evidence scores must lie in [0, 1]; found {observed.min():g}..{observed.max():g}"
            )
        if self.tasks and len(self.tasks) != len(scores):
            raise LocusInputError(
                f"evidence has {len(self.tasks)} tasks for {len(scores)} queries; give one per "
                "query or none"
            )
        object.__setattr__(self, "vectors", vectors)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "llm_ids", tuple(self.llm_ids))
        object.__setattr__(self, "tasks", tuple(self.tasks))

    @property
    def n_queries(self) -> int:
        return int(self.scores.shape[0])

    @property
    def n_llms(self) -> int:
        return int(self.scores.shape[1])

    @property
    def observed(self) -> NDArray[np.bool_]:
        """(n_queries, n_llms) True where a score exists."""
        return ~np.isnan(self.scores)

    @classmethod
    def from_table(
        cls,
        table: ScoreTable,
        vectors: NDArray[np.float32],
        rows: Sequence[int] | NDArray[np.integer[Any]] | None = None,
    ) -> Evidence:
        """The `rows` (default: all) of a score table with their query vectors."""
        index = np.arange(table.n_queries) if rows is None else np.asarray(rows, dtype=np.int64)
        tasks = tuple(table.tasks[i] for i in index)
        return cls(
            vectors=np.asarray(vectors, dtype=np.float32)[index],
            scores=table.scores[index],
            llm_ids=tuple(table.llm_ids),
            tasks=tasks if any(t is not None for t in tasks) else (),
        )

    def take(self, rows: Sequence[int] | NDArray[np.integer[Any]]) -> Evidence:
        """The queries at `rows`, in that order."""
        index = np.asarray(rows, dtype=np.int64)
        tasks = tuple(self.tasks[i] for i in index) if self.tasks else ()
        return Evidence(self.vectors[index], self.scores[index], self.llm_ids, tasks)

    def joined(self, other: Evidence) -> Evidence:
        """This evidence's queries, then `other`'s (over the same LLMs, in the same order).

        Raises:
            LocusInputError: other LLMs, or other columns' order.
        """
        if other.llm_ids != self.llm_ids:
            raise LocusInputError("evidence to join must be over the same LLMs in one order")
        tasks: tuple[str | None, ...] = ()
        if self.tasks or other.tasks:
            tasks = (self.tasks or (None,) * self.n_queries) + (
                other.tasks or (None,) * other.n_queries
            )
        return Evidence(
            np.vstack([self.vectors, other.vectors]),
            np.vstack([self.scores, other.scores]),
            self.llm_ids,
            tasks,
        )

    def masked(self, keep: NDArray[np.bool_]) -> Evidence:
        """The same queries with only the cells where `keep` (n_queries, n_llms) is True."""
        return Evidence(self.vectors, np.where(keep, self.scores, np.nan), self.llm_ids, self.tasks)

    def column_means(self, prior: float = 0.5) -> NDArray[np.float64]:
        """(n_llms,) each LLM's mean score (`prior` for an LLM without evidence)."""
        observed = self.observed
        counts = observed.sum(axis=0)
        totals = np.where(observed, self.scores, 0.0).sum(axis=0, dtype=np.float64)
        return np.where(counts > 0, totals / np.maximum(counts, 1), prior)


@dataclass(frozen=True)
class Votes:
    """The kNN router's votes on some queries, from one neighbour search (`KNNRouter.votes`).

    Attributes:
        by_k: {k: P(correct) (n_queries, n_llms), each LLM's mean score on the k nearest
            training queries it was scored on}.
        tasks: the task vote (n_queries, n_llms) where it was asked for
            (`locus.routing.task_vote`), else None.
    """

    by_k: dict[int, NDArray[np.float32]]
    tasks: NDArray[np.float32] | None = None

    def columns(self, index: Sequence[int] | NDArray[np.integer[Any]]) -> Votes:
        """The same votes over the LLM columns `index`, in that order."""
        index = np.asarray(index, dtype=np.int64)
        return Votes(
            {k: vote[:, index] for k, vote in self.by_k.items()},
            None if self.tasks is None else self.tasks[:, index],
        )
