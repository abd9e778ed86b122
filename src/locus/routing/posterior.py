"""The arithmetic of thin evidence: an LLM's own votes against LOCUS's prior, and how sure a
prediction is. Used by `locus.routing.stacked.StackedRouter` for LLMs onboarded since the fit.

A vote that read c scores of an LLM, beside LOCUS's P(correct) p counted as m scores, is the
posterior mean (c v + m p) / (c + m) of a Beta prior at p with m pseudo-scores. A prediction p
that rests on n scores has the Beta posterior's standard deviation sqrt(p (1 - p) / (n + 1)).

    >>> import numpy as np
    >>> posterior_votes(np.array([[1.0, 0.2]]), np.array([[0.5, 0.5]]), np.array([32.0, -1]), 32)
    array([[0.75, 0.2 ]])
    >>> round(spread(0.5, 24), 3)
    0.1
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["posterior_votes", "spread"]


def posterior_votes(
    votes: NDArray[Any], prior: NDArray[Any], counts: NDArray[Any], strength: float
) -> NDArray[np.float64]:
    """Votes (n_queries, n_cols) with the columns whose `counts` (n_cols,) are >= 0 shrunk
    towards `prior` (n_queries, n_cols): (c v + m p) / (c + m), c the column's count and m
    `strength`; columns with a negative count as they are."""
    out = np.array(votes, dtype=np.float64)
    shrunk = np.asarray(counts) >= 0
    if shrunk.any() and strength > 0:
        c = np.asarray(counts, np.float64)[shrunk]
        out[:, shrunk] = (c * out[:, shrunk] + strength * np.asarray(prior)[:, shrunk]) / (
            c + strength
        )
    return out


def spread(p: float, n: float) -> float | None:
    """The standard deviation of a P(correct) `p` that rests on `n` scores; None for a p
    outside [0, 1] (NaN: unknown)."""
    if not 0.0 <= p <= 1.0:
        return None
    return math.sqrt(p * (1.0 - p) / (n + 1.0))
