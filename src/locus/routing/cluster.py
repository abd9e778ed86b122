"""The cluster router: k-means on the training queries' vectors, per cluster the LLMs' mean
scores (numpy at routing, scikit-learn's k-means at the fit); the number of clusters is chosen
on `val` routing accuracy when it is given.

    >>> import numpy as np
    >>> from locus.routing.evidence import Evidence
    >>> train = Evidence(np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1]], dtype=np.float32),
    ...                  np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32), ("a", "b"))
    >>> ClusterRouter(clusters=2, shrink=0).fit(train).route(np.array([[0.0, 1.0]]))[0].llm_id
    'b'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.offpolicy import selection_hit
from locus.routing.baselines import BaselineRouter, _check_vectors, _shrunk_means
from locus.routing.evidence import Evidence, unit_rows

__all__ = ["ClusterRouter"]


class ClusterRouter(BaselineRouter):
    """k-means on the training queries' unit vectors; P(correct) of an LLM on a query = its mean
    score on the training queries of the query's cluster (shrunk towards its overall mean).
    Training-free routing that matched learned routers on LLMRouterBench (arXiv 2601.07206).

    Args:
        clusters: number of clusters; None chooses it on validation from `cluster_candidates`.
        shrink: pseudo-queries of the LLM's overall mean added to each cluster's mean.
        seed: k-means initialisation.
    """

    kind = "cluster"

    def __init__(
        self,
        clusters: int | None = None,
        cluster_candidates: Sequence[int] = (4, 8, 16, 32, 64),
        shrink: float = 5.0,
        seed: int = 0,
    ) -> None:
        self.clusters = clusters
        self.cluster_candidates = tuple(cluster_candidates)
        self.shrink = shrink
        self.seed = seed

    def _fit_clusters(self, count: int) -> None:
        from sklearn.cluster import KMeans

        count = max(1, min(count, self._train.n_queries))
        model = KMeans(n_clusters=count, n_init=3, random_state=self.seed)
        labels = model.fit_predict(unit_rows(self._train.vectors)).astype(np.int64)
        self.centroids_ = unit_rows(model.cluster_centers_)
        self.table_ = _shrunk_means(labels, count, self._train, self.shrink)

    def fit(self, train: Evidence, val: Evidence | None = None) -> ClusterRouter:
        if train.n_queries == 0:
            raise LocusInputError("the cluster router needs at least one training query")
        self.llm_ids = list(train.llm_ids)
        self._train = train
        self.validation_: dict[str, float] = {}
        if self.clusters is None and val is not None and val.n_queries:
            for count in sorted(set(self.cluster_candidates)):
                self._fit_clusters(count)
                self.validation_[str(count)] = selection_hit(
                    self.predict_proba(val.vectors), val.scores
                )
            best = max(self.validation_, key=lambda c: (self.validation_[c], -int(c)))
            self.clusters_ = int(best)
        else:
            candidates = sorted(set(self.cluster_candidates))
            self.clusters_ = self.clusters or candidates[len(candidates) // 2]
        self._fit_clusters(self.clusters_)
        del self._train
        return self

    def _assign(self, vectors: NDArray[np.float32]) -> NDArray[np.int64]:
        queries = unit_rows(_check_vectors(vectors, self.centroids_.shape[1], "cluster router"))
        return np.argmax(queries @ self.centroids_.T, axis=1)

    def add_llm(self, llm_id: str, vectors: NDArray[np.float32], scores: Sequence[float]) -> None:
        new = self._new_llm(llm_id, vectors, scores)
        column = _shrunk_means(self._assign(new.vectors), len(self.centroids_), new, self.shrink)
        self.table_ = np.hstack([self.table_, column])
        self.llm_ids.append(llm_id)

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        self._check_fitted()
        return self.table_[self._assign(query_vectors)]

    def _settings(self) -> dict[str, Any]:
        return {
            "clusters": self.clusters_,
            "cluster_candidates": list(self.cluster_candidates),
            "shrink": self.shrink,
            "seed": self.seed,
            "validation": self.validation_,
        }

    def _arrays(self) -> dict[str, NDArray[Any]]:
        return {"centroids": self.centroids_, "table": self.table_}

    def _restore(self, settings: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> None:
        self.clusters = self.clusters_ = int(settings["clusters"])
        self.cluster_candidates = tuple(settings["cluster_candidates"])
        self.shrink, self.seed = float(settings["shrink"]), int(settings["seed"])
        self.validation_ = dict(settings["validation"])
        self.centroids_, self.table_ = arrays["centroids"], arrays["table"]
