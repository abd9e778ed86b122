"""Fingerprinting on shared queries: the probe was scored on queries the known LLMs were scored
on, so it is compared with their actual scores rather than with predictions.

Agreement on a query is 1 - |probe's score - the LLM's score| (1 or 0 for binary scores, graded
scores agree in part); an LLM's agreement is its mean over the probe's queries it was scored
on. The verdict needs no simulation: on the same queries, every pair of *distinct* known LLMs
also has an agreement, and the probe is called the same LLM as its best match only when it
agrees with it more than any two distinct known LLMs agree with each other (`pair_threshold`).
Held to less (say, all but 1% of the pairs), a stranger would be called some known LLM far
more often than 1%: it meets every known LLM, not one. Two pool LLMs indistinguishable on these
queries leave no room for a verdict, which is the honest answer.

    >>> import numpy as np
    >>> pool = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0]], dtype=float)
    >>> agreements(np.array([1.0, 1.0, 0.0, 1.0]), pool, min_shared=1)[0].round(2).tolist()
    [1.0, 0.25, 0.5]
    >>> pair_threshold(pool, min_shared=1)  # the pairs agree 0.25, 0.5 and 0.25: the highest
    0.5
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.atlas.geometry import agreement_matrix

__all__ = ["MIN_SHARED", "SharedMatch", "agreements", "pair_threshold", "shared_matches"]

MIN_SHARED = 16  # shared queries below which an agreement is not read


def agreements(
    probe: NDArray[Any], pool: NDArray[Any], *, min_shared: int = MIN_SHARED
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Each known LLM's agreement with the probe's scores (k,) on the queries both were scored
    on (`pool` (k, n_llms), NaN = not scored) and how many those are; NaN agreement below
    `min_shared` shared queries."""
    table = np.asarray(pool, dtype=np.float64)
    y = np.asarray(probe, dtype=np.float64)[:, None]
    shared = ~np.isnan(table) & ~np.isnan(y)
    counts = shared.sum(axis=0)
    agree = np.where(shared, 1.0 - np.abs(np.where(shared, table, 0.0) - y), 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = agree / counts
    return np.where(counts >= min_shared, mean, np.nan), counts


def pair_threshold(pool: NDArray[Any], *, min_shared: int = MIN_SHARED) -> float:
    """The highest agreement between two distinct known LLMs on these queries (`pool`
    (k, n_llms)), over pairs sharing at least `min_shared` of them (1.0 when none do)."""
    agreement, shared = agreement_matrix(pool)
    upper = np.triu_indices(len(shared), k=1)
    usable = shared[upper] >= min_shared
    if not usable.any():
        return 1.0
    return float(np.max(agreement[upper][usable]))


@dataclass(frozen=True)
class SharedMatch:
    """A known LLM's agreement with the probe on the `shared` queries both were scored on,
    and the verdict (`same` when above the pairs' threshold)."""

    llm_id: str
    agreement: float | None
    shared: int
    same: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "llm_id": self.llm_id,
            "agreement": self.agreement,
            "shared": self.shared,
            "same": self.same,
        }


def shared_matches(
    probe: NDArray[Any],
    pool: NDArray[Any],
    llm_ids: list[str],
    *,
    top: int = 5,
    min_shared: int = MIN_SHARED,
) -> tuple[list[SharedMatch], float]:
    """The `top` known LLMs agreeing most with the probe's scores (k,) on shared queries
    (`pool` (k, n_llms)), with verdicts, and the threshold they were held to. LLMs with fewer
    than `min_shared` shared queries come last, without an agreement."""
    agree, counts = agreements(probe, pool, min_shared=min_shared)
    threshold = pair_threshold(pool, min_shared=min_shared)
    key = np.where(np.isnan(agree), np.inf, -agree)
    order = np.lexsort((np.arange(len(agree)), key))[:top]
    matches = [
        SharedMatch(
            llm_ids[i],
            None if np.isnan(agree[i]) else float(agree[i]),
            int(counts[i]),
            bool(not np.isnan(agree[i]) and agree[i] > threshold),
        )
        for i in order
    ]
    return matches, threshold
