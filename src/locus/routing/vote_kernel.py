"""The kNN votes of many one-LLM groups in one compiled pass (numba).

Each query's candidate training queries come nearest first; every LLM walks them keeping a
count of those it was scored on and the sum of its scores there, and its mean over its k
nearest is read off when the count reaches k. One pass over (candidate, LLM) cells, no
temporaries, and a query stops as soon as every LLM has its largest k: at 1,000 LLMs x 1,000
candidates the numpy version (cumulative sums over every cell, then a search per k) spent
9.7 ms per query where this spends 3.3 ms (benchmarks/README, "Leaderboard scale").

Compiled on first use and cached beside this file (numba's `cache=True`; where that folder is
not writable numba compiles it again in each process, about 0.6 s). `routing/neighbours.py`
loads it in a background thread and runs its numpy twin until then.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["first_k_means"]


@njit(cache=True, nogil=True)
def _walk(
    ranked: Any, observed: Any, filled: Any, goals: Any, out: Any, reached: Any
) -> None:  # pragma: no cover - compiled; run through first_k_means
    n_ks, n_llms = goals.shape
    for q in range(ranked.shape[0]):
        count = np.zeros(n_llms, np.int64)
        total = np.zeros(n_llms, np.float64)
        remaining = n_llms
        for t in range(ranked.shape[1]):
            row = ranked[q, t]
            for j in range(n_llms):
                c = count[j]
                if c < goals[0, j] and observed[row, j]:
                    c += 1
                    count[j] = c
                    total[j] += filled[row, j]
                    for i in range(n_ks):
                        if c == goals[i, j]:
                            out[i, q, j] = total[j] / c
                    if c == goals[0, j]:
                        remaining -= 1
            if remaining == 0:
                break
        reached[q, :] = count


def first_k_means(
    ranked: NDArray[np.integer[Any]],
    observed: NDArray[np.bool_],
    filled: NDArray[np.float32],
    goals: NDArray[np.int64],
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """Each LLM's mean score over its first `goals[i, j]` scored candidates, per query.

    Args:
        ranked: (b, T) training rows of each query's candidates, nearest first.
        observed: (n_train, n_llms) whether each LLM was scored on each training query.
        filled: (n_train, n_llms) the scores, 0 where not scored.
        goals: (n_ks, n_llms) how many scored candidates each mean is over, largest first
            (row 0 the largest for every LLM).

    Returns:
        means (n_ks, b, n_llms), NaN where an LLM has fewer scored candidates than the goal,
        and how many scored candidates each LLM reached per query (b, n_llms), at most its
        largest goal.
    """
    rows = np.ascontiguousarray(ranked, dtype=np.int64)
    out = np.full((goals.shape[0], len(rows), goals.shape[1]), np.nan, dtype=np.float32)
    reached = np.zeros((len(rows), goals.shape[1]), dtype=np.int64)
    _walk(
        rows,
        np.ascontiguousarray(observed),
        np.ascontiguousarray(filled),
        np.ascontiguousarray(goals, dtype=np.int64),
        out,
        reached,
    )
    return out, reached
