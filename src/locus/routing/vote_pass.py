"""The kNN votes of many LLMs that each have a group of their own (every LLM scored on queries
of its own), in one pass per block of queries: `Singles`, used by `KNNRouter` where there are
at least 16 such LLMs.

The pass runs compiled (`locus.routing.vote_kernel`, numba: 0.2 s to import, 0.3 s to load its
cached code, 0.6 s to compile where nothing is cached) for a block of `_KERNEL_NOW_FROM` or
more queries, and for any block once the compiled pass is loaded in the process; a single query
before that runs its numpy twin (the same figures bit for bit), so a process that routes one
query never waits for numba. Without numba (the `fast` extra) the numpy twin serves every query.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["Singles"]

_SINGLES_CELLS = 8_000_000  # (query, candidate, LLM) cells per step of the numpy pass
_KERNEL_NOW_FROM = 16  # queries in a block from which the compiled pass is loaded and used
_KERNEL_MODULE = "locus.routing.vote_kernel"

FirstKMeans = Callable[..., tuple[NDArray[np.float32], NDArray[np.int64]]]


def _compiled_pass(load: bool) -> FirstKMeans | None:
    """`vote_kernel.first_k_means`: loaded where `load` (None where numba is not installed),
    else only where the process has loaded it already."""
    if not load and _KERNEL_MODULE not in sys.modules:
        return None
    try:
        from locus.routing.vote_kernel import first_k_means
    except ImportError:
        return None
    return first_k_means


def _numpy_first_k_means(
    ranked: NDArray[np.intp],
    observed: NDArray[np.bool_],
    filled: NDArray[np.float32],
    goals: NDArray[np.int64],
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """`locus.routing.vote_kernel.first_k_means` in numpy, the same figures bit for bit (sums
    in float64 in the same order): running counts and sums over every (candidate, LLM) cell,
    then where each count reaches each goal. 3x slower at 1,000 x 1,000; it serves while the
    compiled pass loads."""
    out = np.full((len(goals), len(ranked), goals.shape[1]), np.nan, dtype=np.float32)
    reached = np.zeros((len(ranked), goals.shape[1]), dtype=np.int64)
    step = max(1, _SINGLES_CELLS // max(ranked.shape[1] * goals.shape[1], 1))
    for start in range(0, len(ranked), step):
        part = ranked[start : start + step]
        count = np.cumsum(observed[part], axis=1, dtype=np.int64)  # (s, T, n)
        total = np.cumsum(filled[part], axis=1, dtype=np.float64)
        for i, goal in enumerate(goals):
            hit = count >= goal
            reach = np.argmax(hit, axis=1)  # (s, n)
            sums = np.take_along_axis(total, reach[:, None, :], axis=1)[:, 0, :]
            out[i, start : start + len(part)] = np.where(hit.any(axis=1), sums / goal, np.nan)
        reached[start : start + len(part)] = np.minimum(count[:, -1, :], goals[0])
    return out, reached


class Singles:
    """The kNN means of many LLMs that each have a group of their own, in one pass: each
    query's candidates put in order of similarity once, then per LLM a running count of the
    candidates it was scored on and a running sum of its scores there; its k nearest are the
    candidates up to where its count reaches k (`locus.routing.vote_kernel`). The same sets
    the per-group search finds (but for ties in similarity), summed in another order."""

    def __init__(self, scores: NDArray[np.float32], columns: NDArray[np.int64]) -> None:
        self.columns = columns
        # usually every LLM: no fancy-indexed copy then (1.5 s at 80,000 x 1,000, cold)
        every = len(columns) == scores.shape[1] and bool((columns == np.arange(len(columns))).all())
        picked = scores if every else scores[:, columns]
        self.observed = ~np.isnan(picked)  # (n_train, n_singles)
        # scores lie in [0, 1], so fmax(score, 0) is the score, and 0 for NaN: one fast pass
        self.filled = np.fmax(picked, np.float32(0)).astype(np.float32, copy=False)
        self.rows = self.observed.sum(axis=0)  # (n_singles,) training queries per LLM

    def means(
        self,
        candidates: NDArray[np.intp],
        similarity: NDArray[np.float32],
        ordered: Sequence[int],
        ks: Sequence[int],
        outs: list[NDArray[np.float32]],
        block: slice,
    ) -> set[int]:
        """Write each k's means into `outs` (rows `block`, the singles' columns); the columns
        for which some query has fewer than k of its candidates scored, which the per-group
        search must redo over all their rows."""
        order = np.argsort(-similarity, axis=1, kind="stable")
        ranked = np.take_along_axis(candidates, order, axis=1)  # (b, T) nearest first
        goals = np.minimum(np.asarray(ordered, dtype=np.int64)[:, None], self.rows[None, :])
        # a batch: loading the compiled pass here (at most ~1 s) beats numpy's pass
        first_k_means = _compiled_pass(load=len(ranked) >= _KERNEL_NOW_FROM)
        if first_k_means is not None:
            means, reached = first_k_means(ranked, self.observed, self.filled, goals)
        else:
            means, reached = _numpy_first_k_means(ranked, self.observed, self.filled, goals)
        short = (reached < goals[0]).any(axis=0)
        rows = slice(block.start or 0, (block.start or 0) + len(ranked))
        for i, k in enumerate(ordered):
            for out, asked in zip(outs, ks, strict=True):
                if asked == k:
                    out[rows, self.columns] = means[i]
        return set(self.columns[short].tolist())
