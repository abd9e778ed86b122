"""Anchors: the queries each LLM is embedded from at fit time, one shared probe order for all.

Torch-free, so that baselines fitted on "the same evidence" as LOCUS choose exactly its anchors.

    >>> import numpy as np
    >>> observed = np.array([[True, True], [True, False], [True, True]])  # (n_queries, n_llms)
    >>> [a.tolist() for a in choose_anchors(observed, np.arange(3), 2, np.random.default_rng(0))]
    [[2, 0], [2, 0]]
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["choose_anchors"]


def choose_anchors(
    observed: NDArray[np.bool_],
    train_rows: NDArray[np.int64],
    count: int,
    rng: np.random.Generator,
) -> list[NDArray[np.int64]]:
    """Per LLM, the first `count` of its observed training rows in one shared random order.

    LLMs evaluated on the same queries get the same anchors (a common probe set, so their
    embeddings compare like for like). `observed` is (n_queries, n_llms); `train_rows` indexes
    its rows. `TrainingConfig(seed=s)` trains with `rng = np.random.default_rng(s)`.
    """
    order = rng.permutation(len(train_rows))
    observed_in_order = observed[train_rows[order]]  # (n_train, n_llms)
    return [
        train_rows[order[np.flatnonzero(observed_in_order[:, llm])[:count]]]
        for llm in range(observed.shape[1])
    ]
