"""A query's task read from its text by a linear classifier, beside its nearest queries' tasks.

The task vote (`locus.routing.task_vote`) blends each LLM's per-task rates by the tasks of a
query's 20 nearest training queries. Where a pool's tasks are kinds of request rather than
topics, the nearest queries share the topic and not the kind: on BFCL (12 tasks: simple,
parallel, multiple, java, rest, ...) the majority of a test query's 20 nearest training queries
names its task for 34% of the queries; a multinomial logistic regression on the same query
vectors names it for 58% (log-loss of the task 1.97 against 1.18), and the task vote read
through it ranks the LLMs' test cells at AUROC 0.788 against 0.745 (the true task: 0.847).
On MMLU-Pro (14 subjects) the neighbours read the task as well as the classifier (0.81 / 0.80).

`TaskReader.fit` fits the classifier on the training queries' tasks and chooses, on the
validation queries' tasks, the share of the task posterior it takes from the classifier
(`SHARES`; the rest from the neighbours) and its penalty: the pair with the lowest log-loss
of the validation queries' true tasks. None where the neighbours alone read them best.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> codes = np.repeat([0, 1], 50)
    >>> vectors = rng.normal(size=(100, 8)) + 3.0 * np.eye(8)[codes]
    >>> neighbours = np.full((100, 3), 1 / 3)           # neighbours that say nothing
    >>> reader = TaskReader.fit(vectors, codes, 2, vectors, codes, neighbours)
    >>> reader is not None and reader.share > 0.5
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.routing.evidence import unit_rows

__all__ = ["PENALTIES", "READER_ROWS", "SHARES", "TaskReader"]

# the classifier's share of the task posterior, tried on validation (0: the neighbours alone)
SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
# inverse L2 penalties tried (scikit-learn's C): 10 read BFCL's and MMLU-Pro's tasks best of
# 1 / 10 / 100, 1 ZeroEval's within 0.03 of it
PENALTIES = (1.0, 10.0)
READER_ROWS = 20_000  # training queries the classifier is fitted on at most (a seeded draw)
_CLIP = 1e-3  # a task share of 0 read as 0.001 in the validation log-loss


@dataclass(frozen=True, eq=False)
class TaskReader:
    """A linear classifier of a query's task from its unit vector, and its share of the task
    posterior the task vote reads.

    Attributes:
        weights: (d, n_tasks) the classifier's weights.
        bias: (n_tasks,) its intercepts (a task no training query had: -30).
        share: the classifier's share of the task posterior; the rest is the neighbours'.
    """

    weights: NDArray[np.float32]
    bias: NDArray[np.float32]
    share: float

    def posterior(self, units: NDArray[Any]) -> NDArray[np.float64]:
        """(n, n_tasks) the classifier's task posterior of unit query vectors `units`."""
        z = np.asarray(units, np.float32) @ self.weights + self.bias
        z = z.astype(np.float64) - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return np.asarray(p / p.sum(axis=1, keepdims=True))

    def blend(self, units: NDArray[Any], shares: NDArray[Any]) -> NDArray[np.float64]:
        """The neighbours' task `shares` (n, n_tasks + 1; the last column: no task) of the
        queries of `units`, with `share` of them the classifier's posterior instead."""
        out = (1.0 - self.share) * np.asarray(shares, np.float64)
        out[:, : self.weights.shape[1]] += self.share * self.posterior(units)
        return out

    @classmethod
    def fit(
        cls,
        vectors: NDArray[Any],
        codes: NDArray[np.integer[Any]],
        n_tasks: int,
        val_vectors: NDArray[Any],
        val_codes: NDArray[np.integer[Any]],
        val_shares: NDArray[Any],
        seed: int = 0,
    ) -> TaskReader | None:
        """The classifier fitted on training queries' `vectors` (n, d) and task `codes` (n,;
        `n_tasks` for a query without one), its share and penalty chosen by the log-loss of
        the validation queries' true tasks (`val_codes`, of `val_vectors`) under the blend with
        their neighbours' `val_shares` (n_val, n_tasks + 1); None with fewer than two tasks
        among the training queries or no validation query with a task, or where the
        neighbours alone read the validation tasks best."""
        from sklearn.linear_model import LogisticRegression

        labelled = np.flatnonzero(np.asarray(codes) < n_tasks)
        asked = np.flatnonzero(np.asarray(val_codes) < n_tasks)
        if len(np.unique(np.asarray(codes)[labelled])) < 2 or not len(asked):
            return None
        if len(labelled) > READER_ROWS:
            rng = np.random.default_rng([seed, 17])
            labelled = np.sort(rng.choice(labelled, READER_ROWS, replace=False))
        x, y = unit_rows(np.asarray(vectors)[labelled]), np.asarray(codes)[labelled]
        val_units = unit_rows(np.asarray(val_vectors)[asked])
        truth = np.asarray(val_codes)[asked]
        neighbours = np.asarray(val_shares, np.float64)[asked]
        rows = np.arange(len(asked))
        by_neighbours = neighbours[rows, truth]

        def loss(posterior: NDArray[np.float64], share: float) -> float:
            chosen = (1.0 - share) * by_neighbours + share * posterior[rows, truth]
            return float(-np.mean(np.log(np.clip(chosen, _CLIP, 1.0))))

        empty = np.zeros((x.shape[1], n_tasks), np.float32)
        best = cls(empty, np.zeros(n_tasks, np.float32), 0.0)
        best_loss = loss(np.zeros((len(asked), n_tasks)), 0.0)
        # each penalty's fit starts from the one before (PENALTIES rise): 1.6 s, not 2.5 s,
        # for MMLU-Pro's C=10 after C=1
        classifier = LogisticRegression(max_iter=1_000, warm_start=True)
        for penalty in PENALTIES:
            classifier.set_params(C=penalty).fit(x, y)
            weights, bias = empty.copy(), np.full(n_tasks, -30.0, np.float32)
            found = np.asarray(classifier.classes_, np.int64)
            if len(found) == 2:  # scikit-learn keeps one row for two classes: the second's
                weights[:, found[1]] = classifier.coef_[0]
                bias[found] = (0.0, float(classifier.intercept_[0]))
            else:
                weights[:, found] = classifier.coef_.T
                bias[found] = classifier.intercept_
            posterior = cls(weights, bias, 1.0).posterior(val_units)  # once per penalty
            for share in SHARES[1:]:
                if (value := loss(posterior, share)) < best_loss:
                    best, best_loss = cls(weights, bias, share), value
        return best if best.share > 0 else None

    def arrays(self) -> dict[str, NDArray[Any]]:
        return {
            "task_reader_weights": self.weights,
            "task_reader_bias": self.bias,
            "task_reader_share": np.array([self.share], np.float64),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, NDArray[Any]]) -> TaskReader | None:
        """The reader saved with `arrays`; None where there is none (a router fitted
        without one, or before readers)."""
        if "task_reader_weights" not in arrays:
            return None
        share = float(np.asarray(arrays["task_reader_share"]).reshape(-1)[0])
        return cls(
            np.asarray(arrays["task_reader_weights"], np.float32),
            np.asarray(arrays["task_reader_bias"], np.float32),
            share,
        )
