"""The online bandits the stream suite replays locus against (`locus.benchmark.stream`):
mabwiser's Thompson sampling, epsilon-greedy and LinUCB, each started from the fit's evidence
and fed each request's outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from locus.benchmark.stream import Stream

__all__ = ["BANDITS", "LINUCB_DIMENSIONS", "bandit_run"]

BANDITS = ("thompson", "epsilon-greedy", "linucb")
LINUCB_DIMENSIONS = 64  # principal components of the query vectors LinUCB reads


def _mab(name: str, arms: list[int], seed: int) -> Any:
    from locus.extras import needs_extra

    with needs_extra("the stream suite's bandits"):
        from mabwiser.mab import MAB, LearningPolicy

    policies = {
        "thompson": LearningPolicy.ThompsonSampling(binarizer=lambda arm, reward: reward >= 0.5),
        "epsilon-greedy": LearningPolicy.EpsilonGreedy(epsilon=0.0),  # drawn in the replay
        "linucb": LearningPolicy.LinUCB(alpha=1.0),
    }
    return MAB(arms, policies[name], seed=seed)


def bandit_run(
    name: str,
    stream: Stream,
    order: NDArray[np.int64],
    answers: NDArray[np.float64],
    *,
    explore: float,
    seed: int,
    chunk: int = 20_000,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """A mabwiser policy started from the training evidence (every scored cell one decision
    and its reward, in chunks), then fed each request's outcome; each request goes to the
    available LLM of the best expectation (mabwiser's `predict_expectations`: a Thompson
    draw, LinUCB's upper bound, epsilon-greedy's mean, which explores by a uniform draw
    among the available LLMs on `explore` of the requests)."""
    arms = list(range(len(stream.llm_ids)))
    bandit = _mab(name, arms, seed)
    rows, columns = np.nonzero(~np.isnan(stream.train_scores))
    contextual = name == "linucb"
    project = _projection(stream.train_vectors) if contextual else None
    for start in range(0, len(rows), chunk):
        r, c = rows[start : start + chunk], columns[start : start + chunk]
        rewards = stream.train_scores[r, c]
        contexts = None if project is None else project(stream.train_vectors[r])
        learn = bandit.fit if start == 0 else bandit.partial_fit
        if contexts is None:
            learn(c.tolist(), rewards)
        else:
            learn(c.tolist(), rewards, contexts)
    n = len(order)
    chosen = np.empty(n, np.int64)
    reward = np.empty(n, np.float64)
    rng = np.random.default_rng(seed)
    for t, row in enumerate(order):
        context = None if project is None else project(stream.vectors[row][None])
        available = np.flatnonzero(~np.isnan(answers[t]))
        if name == "epsilon-greedy" and rng.random() < explore:
            column = int(rng.choice(available))
        else:  # the best expectation (a Thompson draw, an upper bound, a mean) among them
            found = bandit.predict_expectations(context)
            expected = found[0] if isinstance(found, list) else found
            column = int(max(available, key=lambda arm: expected[int(arm)]))
        y = float(answers[t, column])
        chosen[t], reward[t] = column, y
        if contextual:
            bandit.partial_fit([column], [y], context)
        else:
            bandit.partial_fit([column], [y])
    return chosen, reward


def _projection(vectors: NDArray[np.float32]) -> Callable[[NDArray[Any]], NDArray[np.float64]]:
    """The query vectors' first `LINUCB_DIMENSIONS` principal components (fitted on the
    training vectors) and a constant: LinUCB's context. Its ridge inverts a matrix of the
    context's size at every update: 65 x 65 rather than 384 x 384 (ZeroEval's LinUCB replay
    of one seed: 58 s -> 10 s, hit@1 0.9152 -> 0.9435)."""
    from sklearn.decomposition import PCA

    pca = PCA(n_components=min(LINUCB_DIMENSIONS, *vectors.shape), random_state=0)
    pca.fit(vectors.astype(np.float64))

    def project(batch: NDArray[Any]) -> NDArray[np.float64]:
        reduced = pca.transform(np.asarray(batch, np.float64))
        return np.hstack([reduced, np.ones((len(reduced), 1))])

    return project
