"""`ScoreTable`: the dense (n_queries, n_llms) matrix of scores, NaN where not evaluated.

>>> import numpy as np
>>> table = ScoreTable(
...     scores=np.array([[1.0, np.nan], [0.0, 1.0]], dtype=np.float32),
...     llm_ids=("a", "b"), query_ids=("q1", "q2"),
... )
>>> table.observed.sum(), table.accuracy().round(2).tolist()
(np.int64(3), [0.5, 1.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from locus.errors import LocusInputError, LocusNotFoundError, did_you_mean

__all__ = ["ScoreTable"]


@dataclass(frozen=True)
class ScoreTable:
    """Scores of `n_llms` LLMs on `n_queries` queries.

    Attributes:
        scores: (n_queries, n_llms) float32 in [0, 1]; NaN = not evaluated.
        llm_ids: (n_llms,) LLM names, column order.
        query_ids: (n_queries,) unique query keys, row order.
        text_hashes: (n_queries,) sha256 of each query's normalised text ("" = no text).
        query_texts: (n_queries,) the texts (None = no text).
        tasks: (n_queries,) task or category per query (None = unknown).
        splits: (n_queries,) split given by the data ("train"/"val"/"test") or None.
        costs: (n_queries, n_llms) float32 dollar cost per query, NaN = unknown; None if no cost
            was ever given.
    """

    scores: np.ndarray
    llm_ids: tuple[str, ...]
    query_ids: tuple[str, ...]
    text_hashes: tuple[str, ...] = field(default=())
    query_texts: tuple[str | None, ...] = field(default=())
    tasks: tuple[str | None, ...] = field(default=())
    splits: tuple[str | None, ...] = field(default=())
    costs: np.ndarray | None = None

    def __post_init__(self) -> None:
        n_queries, n_llms = len(self.query_ids), len(self.llm_ids)
        if self.scores.shape != (n_queries, n_llms):
            raise LocusInputError(
                f"scores must have shape (n_queries, n_llms) = ({n_queries}, {n_llms}), "
                f"found {self.scores.shape}"
            )
        for name in ("text_hashes", "query_texts", "tasks", "splits"):
            value = getattr(self, name)
            if value == ():
                default: tuple[str | None, ...] = (
                    ("",) * n_queries if name == "text_hashes" else ((None,) * n_queries)
                )
                object.__setattr__(self, name, default)
            elif len(value) != n_queries:
                raise LocusInputError(
                    f"{name} must have one entry per query ({n_queries}), found {len(value)}"
                )
        if len(set(self.llm_ids)) != n_llms:
            raise LocusInputError("llm_ids must be unique")
        if len(set(self.query_ids)) != n_queries:
            raise LocusInputError("query_ids must be unique")
        if self.costs is not None and self.costs.shape != self.scores.shape:
            raise LocusInputError(
                f"costs must have the shape of scores {self.scores.shape}, found {self.costs.shape}"
            )

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def n_llms(self) -> int:
        return len(self.llm_ids)

    @property
    def observed(self) -> np.ndarray:
        """(n_queries, n_llms) bool: True where the LLM was evaluated on the query."""
        return ~np.isnan(self.scores)

    def accuracy(self) -> np.ndarray:
        """(n_llms,) mean score over each LLM's evaluated queries (NaN if none)."""
        observed = self.observed
        counts = observed.sum(axis=0)
        totals = np.where(observed, self.scores, 0.0).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)

    def llm_index(self, llm_id: str) -> int:
        try:
            return self.llm_ids.index(llm_id)
        except ValueError:
            raise LocusNotFoundError(
                f"unknown LLM {llm_id!r}{did_you_mean(llm_id, self.llm_ids)}; expected one of "
                f"{len(self.llm_ids)} LLMs, e.g. {', '.join(self.llm_ids[:3])}"
            ) from None

    def select_queries(self, rows: np.ndarray | Sequence[int]) -> ScoreTable:
        """A table of the given query rows (indices or a boolean mask)."""
        index = np.asarray(rows)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        return ScoreTable(
            scores=self.scores[index],
            llm_ids=self.llm_ids,
            query_ids=tuple(self.query_ids[i] for i in index),
            text_hashes=tuple(self.text_hashes[i] for i in index),
            query_texts=tuple(self.query_texts[i] for i in index),
            tasks=tuple(self.tasks[i] for i in index),
            splits=tuple(self.splits[i] for i in index),
            costs=None if self.costs is None else self.costs[index],
        )

    def select_llms(self, llm_ids: Sequence[str]) -> ScoreTable:
        """A table of the given LLM columns, in the given order."""
        columns = [self.llm_index(llm_id) for llm_id in llm_ids]
        return ScoreTable(
            scores=self.scores[:, columns],
            llm_ids=tuple(llm_ids),
            query_ids=self.query_ids,
            text_hashes=self.text_hashes,
            query_texts=self.query_texts,
            tasks=self.tasks,
            splits=self.splits,
            costs=None if self.costs is None else self.costs[:, columns],
        )
