"""Distances between LLM embeddings, and how well they track measured behaviour.

The atlas's claim is geometric: LLMs that lie close answer alike. This module measures it on
numpy arrays: distances (scipy), agreement on shared test queries, nearest neighbours, and the
correlation of distance with disagreement over all pairs.

    >>> import numpy as np
    >>> embeddings = np.array([[0.0, 0.0], [0.1, 0.0], [3.0, 4.0]])
    >>> distance_matrix(embeddings).round(2)[0]
    array([0. , 0.1, 5. ])
    >>> nearest(distance_matrix(embeddings), 0, 1).tolist()
    [1]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from scipy.spatial.distance import pdist, squareform

from locus.errors import LocusInputError

__all__ = [
    "METRICS",
    "GeometryReport",
    "agreement_matrix",
    "distance_matrix",
    "geometry_report",
    "nearest",
]

Metric = Literal["euclidean", "cosine"]
METRICS: tuple[Metric, ...] = ("euclidean", "cosine")
# pairs sharing fewer test queries than this have too noisy an agreement to correlate with
MIN_SHARED = 20


def distance_matrix(embeddings: NDArray[Any], metric: str = "euclidean") -> NDArray[np.float64]:
    """(n_llms, n_llms) distances between the rows of `embeddings` (n_llms, d).

    Raises:
        LocusInputError: an unknown metric, or not a 2-D array of finite values.
    """
    if metric not in METRICS:
        raise LocusInputError(f"distance {metric!r}: expected one of {', '.join(METRICS)}")
    array = np.asarray(embeddings, dtype=np.float64)
    if array.ndim != 2 or not np.isfinite(array).all():
        raise LocusInputError(
            f"embeddings must be a finite (n_llms, d) array; found shape {array.shape}"
        )
    if len(array) < 2:
        return np.zeros((len(array), len(array)))
    return np.asarray(squareform(pdist(array, metric=metric)), dtype=np.float64)


def agreement_matrix(scores: NDArray[Any]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """How alike two LLMs answer: (agreement (n_llms, n_llms), shared (n_llms, n_llms)).

    `scores` is (n_queries, n_llms) with NaN where an LLM was not evaluated. Agreement of a pair
    is the mean of 1 - |s_a - s_b| over the queries both were scored on: for 0/1 scores, the
    share of those queries on which both are right or both wrong. `shared` counts them; a pair
    with none has agreement NaN.
    """
    array = np.asarray(scores, dtype=np.float64)
    if array.ndim != 2:
        raise LocusInputError(f"scores must be (n_queries, n_llms); found shape {array.shape}")
    observed = ~np.isnan(array)
    filled = np.where(observed, array, 0.0)
    mask = observed.astype(np.float64)
    shared = (mask.T @ mask).astype(np.int64)  # (n_llms, n_llms)
    n = array.shape[1]
    distance_sum = np.zeros((n, n))
    for a in range(n):
        both = observed[:, a : a + 1] & observed  # (n_queries, n_llms)
        distance_sum[a] = np.where(both, np.abs(filled[:, a : a + 1] - filled), 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        agreement = np.where(shared > 0, 1.0 - distance_sum / np.maximum(shared, 1), np.nan)
    return agreement, shared


def nearest(
    distances: NDArray[Any],
    index: int,
    k: int,
    *,
    allowed: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """The k LLMs nearest to LLM `index` (itself excluded), nearest first; ties by index.

    `allowed` (n_llms,) restricts the candidates (e.g. the LLMs still available)."""
    row = np.asarray(distances[index], dtype=np.float64)
    keep = np.ones(len(row), dtype=bool) if allowed is None else np.asarray(allowed, bool).copy()
    keep[index] = False
    candidates = np.flatnonzero(keep)
    order = candidates[np.lexsort((candidates, row[candidates]))]
    return order[:k].astype(np.int64)


@dataclass(frozen=True)
class GeometryReport:
    """Distance against measured disagreement, over every pair of LLMs.

    Attributes:
        metric: the distance used.
        pairs: pairs of LLMs correlated (those sharing at least `MIN_SHARED` test queries).
        pearson, spearman, kendall: correlation of distance with disagreement rate.
        neighbour_agreement: mean agreement of each LLM with its k-th nearest neighbour,
            k = 1, 2, ... (index 0 is k = 1).
        mean_agreement: mean agreement over all pairs (what a random neighbour gives).
    """

    metric: str
    pairs: int
    pearson: float
    spearman: float
    kendall: float
    neighbour_agreement: list[float]
    mean_agreement: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def geometry_report(
    distances: NDArray[Any],
    agreement: NDArray[Any],
    shared: NDArray[Any],
    *,
    metric: str = "euclidean",
    max_k: int = 20,
) -> GeometryReport:
    """Correlate embedding distance with disagreement (1 - agreement) over all pairs, and the
    k-th nearest neighbour's agreement for k = 1..max_k.

    Raises:
        LocusInputError: fewer than 3 LLMs, or fewer than 3 pairs that share test queries.
    """
    d = np.asarray(distances, dtype=np.float64)
    n = len(d)
    if n < 3:
        raise LocusInputError(f"geometry needs at least 3 LLMs; found {n}")
    upper = np.triu_indices(n, k=1)
    usable = (np.asarray(shared)[upper] >= MIN_SHARED) & np.isfinite(np.asarray(agreement)[upper])
    if usable.sum() < 3:
        raise LocusInputError(
            f"only {int(usable.sum())} pairs of LLMs share {MIN_SHARED}+ test queries; "
            "expected at least 3 to correlate distance with disagreement"
        )
    x = d[upper][usable]
    y = 1.0 - np.asarray(agreement)[upper][usable]
    curve = []
    for k in range(1, min(max_k, n - 1) + 1):
        values = []
        for i in range(n):
            j = int(nearest(d, i, k)[k - 1])
            if shared[i, j] >= MIN_SHARED and np.isfinite(agreement[i, j]):
                values.append(float(agreement[i, j]))
        curve.append(float(np.mean(values)) if values else float("nan"))
    return GeometryReport(
        metric=metric,
        pairs=int(usable.sum()),
        pearson=float(stats.pearsonr(x, y).statistic),
        spearman=float(stats.spearmanr(x, y).statistic),
        kendall=float(stats.kendalltau(x, y).statistic),
        neighbour_agreement=curve,
        mean_agreement=float(np.mean(1.0 - y)),
    )
