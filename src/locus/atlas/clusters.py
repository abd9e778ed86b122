"""Clusters of LLMs in embedding space: hierarchical (scipy) and k-means (scikit-learn).

>>> import numpy as np
>>> points = np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1]], dtype=float)
>>> hierarchical(points, k=2).labels.tolist()
[0, 0, 1, 1]
>>> family_agreement([0, 0, 1, 1], ["a", "a", "b", "b"])
1.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist

from locus.atlas.geometry import METRICS
from locus.errors import LocusInputError

__all__ = ["Clustering", "best_k", "family_agreement", "hierarchical", "kmeans"]

LINKAGES = ("average", "complete", "single", "ward")


@dataclass(frozen=True)
class Clustering:
    """Cluster labels (n_llms,) numbered 0.. in order of first appearance.

    Attributes:
        method: "hierarchical" or "kmeans".
        labels: (n_llms,) int.
        linkage: scipy's (n_llms - 1, 4) merge table for hierarchical clustering (the
            dendrogram), None for k-means.
        k: number of clusters.
    """

    method: str
    labels: NDArray[np.int64]
    linkage: NDArray[np.float64] | None

    @property
    def k(self) -> int:
        return int(self.labels.max()) + 1 if len(self.labels) else 0

    def members(self) -> list[list[int]]:
        """Row indices of each cluster, cluster 0 first."""
        return [np.flatnonzero(self.labels == c).tolist() for c in range(self.k)]


def _renumber(labels: NDArray[Any]) -> NDArray[np.int64]:
    order = {label: i for i, label in enumerate(dict.fromkeys(np.asarray(labels).tolist()))}
    return np.array([order[label] for label in np.asarray(labels).tolist()], dtype=np.int64)


def _check(embeddings: NDArray[Any], k: int | None) -> NDArray[np.float64]:
    array = np.asarray(embeddings, dtype=np.float64)
    if array.ndim != 2 or len(array) < 2:
        raise LocusInputError(f"clustering needs at least 2 LLM embeddings; found {array.shape}")
    if k is not None and not 1 <= k <= len(array):
        raise LocusInputError(f"--k {k}: expected 1 to {len(array)} (the pool's LLMs)")
    return array


def hierarchical(
    embeddings: NDArray[Any],
    *,
    k: int | None = None,
    threshold: float | None = None,
    metric: str = "cosine",
    method: str = "average",
) -> Clustering:
    """Agglomerative clustering cut into `k` clusters or at distance `threshold` (one of them).

    Ward linkage is Euclidean by definition, whatever `metric` says.
    """
    array = _check(embeddings, k)
    if (k is None) == (threshold is None):
        raise LocusInputError("hierarchical clustering: expected exactly one of k and threshold")
    if method not in LINKAGES:
        raise LocusInputError(f"linkage {method!r}: expected one of {', '.join(LINKAGES)}")
    if metric not in METRICS:
        raise LocusInputError(f"distance {metric!r}: expected one of {', '.join(METRICS)}")
    if method == "ward":
        merges = linkage(array, method="ward")
    else:
        merges = linkage(pdist(array, metric=metric), method=method)
    if k is not None:
        raw = fcluster(merges, t=k, criterion="maxclust")
    else:
        if threshold is None or threshold < 0:
            raise LocusInputError(f"--threshold {threshold}: expected a distance >= 0")
        raw = fcluster(merges, t=threshold, criterion="distance")
    return Clustering("hierarchical", _renumber(raw), np.asarray(merges, dtype=np.float64))


def kmeans(embeddings: NDArray[Any], k: int, *, seed: int = 0) -> Clustering:
    """k-means (scikit-learn, 10 restarts) on the embeddings."""
    from sklearn.cluster import KMeans

    array = _check(embeddings, k)
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(array)
    return Clustering("kmeans", _renumber(labels), None)


def best_k(embeddings: NDArray[Any], *, metric: str = "cosine", max_k: int = 12) -> int:
    """The number of clusters (2..max_k) with the best silhouette of the average-linkage cut:
    the default when neither k nor a threshold is given."""
    from sklearn.metrics import silhouette_score

    array = _check(embeddings, None)
    n = len(array)
    if n < 4:
        return 1 if n < 3 else 2
    best, best_score = 2, -np.inf
    for k in range(2, min(max_k, n - 1) + 1):
        labels = hierarchical(array, k=k, metric=metric).labels
        if len(set(labels.tolist())) < 2:
            continue
        score = float(silhouette_score(array, labels, metric=metric))
        if score > best_score + 1e-12:
            best, best_score = k, score
    return best


def family_agreement(labels: Sequence[int] | NDArray[Any], families: Sequence[str | None]) -> float:
    """Adjusted Rand index of the clusters against known families (LLMs whose family is
    unknown are left out); NaN with fewer than 2 such LLMs."""
    from sklearn.metrics import adjusted_rand_score

    known = [i for i, family in enumerate(families) if family]
    if len(known) < 2:
        return float("nan")
    chosen = np.asarray(labels)[known]
    return float(adjusted_rand_score([families[i] for i in known], chosen))
