"""The task vote: each LLM's measured success rate on the tasks of a query's nearest training
queries, a part of the stack (`locus.routing.stack`) where the workspace's queries carry tasks.

A new query has no task label; its nearest training queries do. The vote of LLM j on a query is
sum over tasks t of share_t x rate(t, j): share_t the share of the query's `TASK_K` nearest
training queries in task t (any training query, whichever LLMs were scored on it), rate(t, j)
LLM j's mean training score on task t, smoothed towards its mean over every task by two
pseudo-queries. It is the per-task table for queries whose task the text gives away (on
RouterBench's coding, maths and multiple-choice tasks it does), and a blend of neighbouring
tasks where it does not; the kNN votes at 50 and 500 neighbours count scores near the query
instead, each LLM on its own scored queries.

    >>> import numpy as np
    >>> scores = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    >>> vote = TaskVote.fit(scores, ("maths", "maths", "law", "law"))
    >>> vote.proba(np.array([[0, 1]])).round(2).tolist()  # the nearest queries: maths
    [[0.75, 0.25]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.routing.task_reader import TaskReader

__all__ = ["TASK_K", "TaskVote", "voters"]

TASK_K = 20  # nearest training queries whose tasks vote (5, 20 and 50 alike on RouterBench)
_PSEUDO = 2.0  # pseudo-queries at the LLM's overall mean in each task's rate
# validation queries the task reader is chosen on at most (a seeded draw): each is compared
# with every training query for its neighbours' tasks (at 80,000 training queries, 2,000 of
# them take a few seconds)
READER_VAL_ROWS = 2_000


@dataclass(frozen=True)
class TaskVote:
    """Per task, each LLM's smoothed success rate; per training query, its task.

    Attributes:
        names: the tasks, in the order of `rates`' first rows.
        codes: (n_train,) each training query's task, len(names) where it has none.
        rates: (n_tasks + 1, n_llms) smoothed rates; the last row each LLM's overall mean, for
            queries whose neighbours have no task.
        voting_rows: the training rows whose tasks vote (those of the fit; None: all). The
            rows of an LLM onboarded since repeat known queries and never take a voter's
            place, so joining an LLM moves no other LLM's task vote.
        reader: the classifier that reads a query's task from its vector beside its nearest
            queries' tasks (`locus.routing.task_reader`); None: the neighbours alone.
    """

    def __post_init__(self) -> None:
        if self.voting_rows is None:
            object.__setattr__(self, "voting_rows", len(self.codes))

    names: tuple[str, ...]
    codes: NDArray[np.int32]
    rates: NDArray[np.float32]
    voting_rows: int | None = None
    reader: TaskReader | None = None

    @classmethod
    def fit(
        cls,
        scores: NDArray[np.float32],
        tasks: Sequence[str | None],
        vectors: NDArray[np.float32] | None = None,
        val: tuple[NDArray[np.float32], Sequence[str | None]] | None = None,
    ) -> TaskVote | None:
        """From training `scores` (n_train, n_llms, NaN unscored) and each query's task; None
        with fewer than two tasks (nothing for the vote to tell apart). With the training
        queries' unit `vectors` and `val` (the validation queries' unit vectors and tasks),
        the classifier that reads a query's task beside its neighbours (`TaskReader.fit`)."""
        names = tuple(sorted({t for t in tasks if t is not None}))
        if len(names) < 2 or len(tasks) != len(scores):
            return None
        place: dict[str | None, int] = {name: i for i, name in enumerate(names)}
        codes = np.array([place.get(t, len(names)) for t in tasks])  # None: no task
        observed = ~np.isnan(scores)
        filled = np.where(observed, scores, 0.0).astype(np.float64)
        counts = np.zeros((len(names) + 1, scores.shape[1]))
        totals = np.zeros_like(counts)
        np.add.at(counts, codes, observed)
        np.add.at(totals, codes, filled)
        overall = totals.sum(axis=0) / np.maximum(counts.sum(axis=0), 1)
        overall = np.where(counts.sum(axis=0) > 0, overall, 0.5)
        rates = (totals + _PSEUDO * overall) / (counts + _PSEUDO)
        rates[-1] = overall
        vote = cls(names, codes.astype(np.int32), rates.astype(np.float32))
        if vectors is None or val is None or len(val[1]) != len(val[0]) or not len(val[0]):
            return vote
        asked = np.arange(len(val[0]))  # the validation queries the reader is chosen on
        if len(asked) > READER_VAL_ROWS:
            asked = np.sort(np.random.default_rng(0).choice(asked, READER_VAL_ROWS, replace=False))
        val_vectors = np.asarray(val[0])[asked]
        val_codes = np.array([place.get(val[1][int(i)], len(names)) for i in asked])
        neighbours = vote.nearest_shares(val_vectors, vectors)
        reader = TaskReader.fit(vectors, vote.codes, len(names), val_vectors, val_codes, neighbours)
        return vote if reader is None else replace(vote, reader=reader)

    def shares(self, nearest: NDArray[np.integer[Any]]) -> NDArray[np.float64]:
        """(n_queries, n_tasks + 1) the share of each task among each query's `nearest`
        training rows (n_queries, k); all on the last column where none has a task."""
        codes = self.codes[nearest]  # (b, k)
        counts = np.zeros((len(codes), len(self.names) + 1))
        np.add.at(counts, (np.arange(len(codes))[:, None], codes), 1.0)
        known = counts[:, :-1].sum(axis=1, keepdims=True)
        shares = np.where(known > 0, counts / np.maximum(known, 1), 0.0)
        shares[:, -1] = (known[:, 0] == 0).astype(np.float64)
        return shares

    def nearest_shares(
        self, queries: NDArray[np.float32], training: NDArray[np.float32], block: int = 512
    ) -> NDArray[np.float64]:
        """(n_queries, n_tasks + 1) `shares` of each of `queries` (unit rows) among its
        `TASK_K` nearest voting rows of `training` (the training vectors, unit rows), by exact
        search, `block` queries at a time; blended with the reader's posterior where there is
        one (`TaskReader.blend`)."""
        rows = training[: self.voting_rows]
        count = min(TASK_K, len(rows))
        out = np.empty((len(queries), len(self.names) + 1))
        for start in range(0, len(queries), block):
            similarity = queries[start : start + block] @ rows.T
            nearest = np.argpartition(-similarity, count - 1, axis=1)[:, :count]
            found = self.shares(nearest)
            if self.reader is not None:
                found = self.reader.blend(queries[start : start + block], found)
            out[start : start + block] = found
        return out

    def proba(
        self, nearest: NDArray[np.integer[Any]], queries: NDArray[np.float32] | None = None
    ) -> NDArray[np.float32]:
        """(n_queries, n_llms) each LLM's task vote on queries whose nearest training rows are
        `nearest` (n_queries, k); with the queries' unit vectors `queries`, their task read
        beside the reader's (`TaskReader.blend`) where the vote has one."""
        shares = self.shares(nearest)
        if self.reader is not None and queries is not None:
            shares = self.reader.blend(queries, shares)
        return (shares @ self.rates).astype(np.float32)

    def given(self, tasks: Sequence[str | None], proba: NDArray[np.float32]) -> NDArray[np.float32]:
        """`proba` (n_queries, n_llms), the task votes read from the queries' neighbours, with
        the rows of queries whose task is known (`tasks`, one per query; None or a task the
        fit did not see: not known) replaced by that task's rates: the per-task table itself
        where the request says the task.

        Raises:
            LocusInputError: `tasks` not one per query.
        """
        if len(tasks) != len(proba):
            raise LocusInputError(
                f"tasks: expected one per query ({len(proba)}), found {len(tasks)}"
            )
        place = {name: i for i, name in enumerate(self.names)}
        out = np.array(proba, dtype=np.float32, copy=True)
        for row, task in enumerate(tasks):
            if task is not None and task in place:
                out[row] = self.rates[place[task]]
        return out

    def rates_of(
        self, scores: NDArray[np.floating[Any]], tasks: Sequence[str | None] = ()
    ) -> NDArray[np.float64]:
        """(n_tasks + 1,) an LLM's rates from its `scores` on queries of `tasks` (one per score,
        or none): per task smoothed towards its mean as every LLM's are, its mean in a task it
        has no score in (and in the last row, for queries whose neighbours have no task)."""
        values = np.asarray(scores, dtype=np.float64).reshape(-1)
        observed = ~np.isnan(values)
        mean = float(values[observed].mean()) if observed.any() else 0.5
        rates = np.full(len(self.rates), mean)
        if len(tasks) == len(values):
            place = {name: i for i, name in enumerate(self.names)}
            none = len(self.names)
            codes_of = np.array([place.get(t, none) if t else none for t in tasks])
            counts = np.bincount(codes_of[observed], minlength=len(self.rates)).astype(np.float64)
            totals = np.bincount(
                codes_of[observed], weights=values[observed], minlength=len(self.rates)
            )
            rates = (totals + _PSEUDO * mean) / (counts + _PSEUDO)
            rates[-1] = mean
        return rates

    def with_llm(
        self,
        scores: NDArray[np.float32],
        new_rows: int,
        tasks: Sequence[str | None] = (),
        *,
        column: int | None = None,
    ) -> TaskVote:
        """The vote with one more LLM (or with the LLM of `column` re-read), onboarded from
        `scores` on `new_rows` training rows of its own, whose tasks (one per score, or none)
        give its rates: per task smoothed towards its mean as every LLM's are, its mean in a
        task it has no score in. The new rows vote no task (they repeat queries the router
        already holds)."""
        rates = self.rates_of(scores, tasks)
        codes = np.concatenate([self.codes, np.full(new_rows, len(self.names), np.int32)])
        table = self.rates.copy()
        if column is None:
            table = np.hstack([table, rates[:, None].astype(np.float32)])
        else:
            table[:, column] = rates
        return TaskVote(self.names, codes, table, self.voting_rows, self.reader)

    def voting(
        self, candidates: NDArray[np.intp], similarity: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        """`similarity` (b, T) of `candidates` (b, T) with the rows that do not vote (those
        of LLMs onboarded since the fit) at -inf."""
        if self.voting_rows is None or self.voting_rows >= len(self.codes):
            return similarity
        return np.where(candidates < self.voting_rows, similarity, -np.inf).astype(np.float32)

    def arrays(self) -> dict[str, NDArray[Any]]:
        voting = np.array([self.voting_rows])  # set by __post_init__
        arrays = {"task_codes": self.codes, "task_rates": self.rates, "task_voting_rows": voting}
        return arrays if self.reader is None else {**arrays, **self.reader.arrays()}

    @classmethod
    def from_arrays(cls, names: Sequence[str], arrays: dict[str, NDArray[Any]]) -> TaskVote:
        voting = arrays.get("task_voting_rows")  # routers saved before it: every row votes
        return cls(
            tuple(names),
            np.asarray(arrays["task_codes"], np.int32),
            np.asarray(arrays["task_rates"], np.float32),
            None if voting is None else int(np.asarray(voting).reshape(-1)[0]),
            TaskReader.from_arrays(arrays),
        )


def voters(candidates: NDArray[np.intp], similarity: NDArray[np.float32]) -> NDArray[np.intp]:
    """(b, TASK_K) the nearest of each query's candidate training rows (b, T) by their
    `similarity` (b, T), in no order: the rows whose tasks vote."""
    count = min(TASK_K, candidates.shape[1])
    if count < candidates.shape[1]:
        top = np.argpartition(-similarity, count - 1, axis=1)[:, :count]
        return np.take_along_axis(candidates, top, axis=1)
    return np.asarray(candidates)
