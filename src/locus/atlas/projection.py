"""The map: 2-D projections of the LLM embeddings (scikit-learn PCA and t-SNE), and how much
of the true neighbourhood each keeps.

    >>> import numpy as np
    >>> points = np.random.default_rng(0).normal(size=(12, 8))
    >>> project(points, "pca").shape
    (12, 2)
    >>> 0.0 <= neighbours_kept(points, project(points, "pca"), k=3) <= 1.0
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.atlas.geometry import distance_matrix, nearest
from locus.errors import LocusInputError

__all__ = ["PROJECTIONS", "neighbours_kept", "project"]

PROJECTIONS = ("tsne", "pca")


def project(
    embeddings: NDArray[Any], method: str = "tsne", *, seed: int = 0
) -> NDArray[np.float64]:
    """(n_llms, 2) coordinates of the embeddings (n_llms, d), centred, in unit-ish scale.

    t-SNE's perplexity is min(30, (n - 1) / 3), as small pools need (scikit-learn requires it
    below n); it is seeded, so the same pool gives the same map.
    """
    array = np.asarray(embeddings, dtype=np.float64)
    if array.ndim != 2 or len(array) < 3:
        raise LocusInputError(f"a map needs at least 3 LLM embeddings; found {array.shape}")
    if method == "pca":
        from sklearn.decomposition import PCA

        coords = PCA(n_components=2, random_state=seed).fit_transform(array)
    elif method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = max(1.0, min(30.0, (len(array) - 1) / 3))
        coords = TSNE(
            n_components=2, perplexity=perplexity, init="pca", random_state=seed, metric="cosine"
        ).fit_transform(array)
    else:
        raise LocusInputError(f"projection {method!r}: expected one of {', '.join(PROJECTIONS)}")
    coords = np.asarray(coords, dtype=np.float64) - np.mean(coords, axis=0)
    scale = float(np.abs(coords).max()) or 1.0
    return coords / scale


def neighbour_k(n_llms: int, k: int = 10) -> int:
    """The neighbourhood size `neighbours_kept` measures for a pool of `n_llms`: `k`, at most
    half the other LLMs (at n - 1 every neighbourhood is the whole pool and the share is 100%
    whatever the map), at least 1; 0 for a pool of one."""
    return 0 if n_llms < 2 else max(1, min(k, (n_llms - 1) // 2))


def neighbours_kept(
    embeddings: NDArray[Any], coords: NDArray[Any], *, k: int = 10, metric: str = "cosine"
) -> float:
    """Mean share of each LLM's `neighbour_k(n, k)` nearest neighbours in embedding space
    (`metric`) that are also among its as many nearest on the map (Euclidean); NaN for a pool
    of one."""
    high = distance_matrix(embeddings, metric)
    low = distance_matrix(coords, "euclidean")
    n = len(high)
    k = neighbour_k(n, k)
    if k < 1:
        return float("nan")
    kept = [
        len(set(nearest(high, i, k).tolist()) & set(nearest(low, i, k).tolist())) / k
        for i in range(n)
    ]
    return float(np.mean(kept))
