"""`CostModel`: what each LLM will cost on a query, predicted from the query before answering.

An LLM's cost on a query follows its input and output tokens, and the output follows the task
more than the prompt's length: on the RouterBench subset GPT-4's cost per query falls as the
prompt grows (-0.53 correlation: short coding prompts get long answers). The model predicts an
LLM's cost on a query as the mean of its observed costs on the `k` training queries nearest by
query vector (cosine), the LLM's mean cost where it has none near. On RouterBench (11 LLMs, test
queries of hash split 0) its mean absolute error is 5.4% of the mean cost, against 21% for each
LLM's mean cost per query (benchmarks/README, "Routing that saves money").

    >>> import numpy as np
    >>> vectors = np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1]], dtype=np.float32)
    >>> costs = np.array([[1.0, 5.0], [1.0, 5.0], [3.0, 9.0], [3.0, 9.0]])
    >>> model = CostModel(k=2).fit(vectors, costs, ("cheap", "dear"))
    >>> model.predict(np.array([[0, 1]], dtype=np.float32)).round(2).tolist()
    [[3.0, 9.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact.layout import (
    COST_FOLDER,
    VALIDATION_FILE,
    read_router_folder,
    write_router_folder,
)
from locus.errors import LocusArtifactError, LocusInputError, LocusNotFittedError
from locus.routing.ann import ANN_FROM, Graph, GraphSlot
from locus.routing.evidence import unit_rows

__all__ = ["COST_FOLDER", "VALIDATION_FILE", "CostModel"]

# an artifact keeps its cost model (only when the workspace had per-query costs) and the fit's
# validation query vectors, which a budget is tuned on, in COST_FOLDER
# (`locus.routing.router_artifact` writes and reads them)
_KIND = "cost-model"


class CostModel:
    """Per-query USD cost of each LLM, by the nearest training queries' observed costs.

    Args:
        k: neighbours whose costs are averaged (20: within 0.2% of 5 on RouterBench).
        ann_from: from this many priced training queries on, their nearest are searched in an
            HNSW graph (`locus.routing.ann`) rather than exactly.

    Attributes (after `fit`):
        llm_ids_: the columns of `predict`.
        mean_costs_: (n_llms,) each LLM's mean observed cost per query (NaN: none observed).
    """

    def __init__(self, k: int = 20, *, ann_from: int = ANN_FROM) -> None:
        if k < 1:
            raise LocusInputError(f"a cost model's k must be >= 1, found {k}")
        if ann_from < 1:
            raise LocusInputError(f"a cost model's ann_from must be >= 1, found {ann_from}")
        self.k = int(k)
        self.ann_from = int(ann_from)
        self.llm_ids_: tuple[str, ...] = ()
        self.mean_costs_: NDArray[np.float64] | None = None
        self._vectors: NDArray[np.float32] | None = None
        self._costs: NDArray[np.float64] | None = None
        self._graphs = GraphSlot()

    def fit(
        self,
        vectors: NDArray[np.floating[Any]],
        costs: NDArray[np.floating[Any]],
        llm_ids: Sequence[str],
    ) -> CostModel:
        """Keep the queries (n, dq) on which any LLM has a cost; `costs` (n, n_llms) USD with
        NaN where unknown.

        Raises:
            LocusInputError: shapes that disagree, negative costs, or no cost at all.
        """
        v = np.asarray(vectors, dtype=np.float32)
        c = np.asarray(costs, dtype=np.float64)
        if v.ndim != 2 or c.ndim != 2 or len(v) != len(c) or c.shape[1] != len(llm_ids):
            raise LocusInputError(
                f"a cost model needs vectors (n, dq) and costs (n, {len(llm_ids)}); got "
                f"{v.shape} and {c.shape}"
            )
        known = ~np.isnan(c)
        if not known.any():
            raise LocusInputError("a cost model needs per-query costs; none is known")
        if (c[known] < 0).any():
            raise LocusInputError(f"costs must be >= 0 USD, found {float(np.nanmin(c)):g}")
        rows = known.any(axis=1)
        self._vectors = unit_rows(v[rows])
        self._graphs = GraphSlot()
        self._costs = c[rows]
        self.llm_ids_ = tuple(llm_ids)
        counts = known.sum(axis=0)
        totals = np.where(known, c, 0.0).sum(axis=0)
        self.mean_costs_ = np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)
        return self

    def predict(self, query_vectors: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
        """(n_queries, n_llms) predicted USD per query; NaN for an LLM never priced."""
        if self._vectors is None or self._costs is None or self.mean_costs_ is None:
            raise LocusNotFittedError("this CostModel is not fitted; call fit() first")
        queries = unit_rows(np.atleast_2d(np.asarray(query_vectors, dtype=np.float32)))
        k = min(self.k, len(self._vectors))
        out = np.empty((len(queries), len(self.llm_ids_)), dtype=np.float64)
        graph = self._graph()
        for start in range(0, len(queries), 1024):  # bounded memory for a large batch
            found = graph.search(queries[start : start + 1024], k) if graph is not None else None
            if found is not None:
                nearest = found[0]
            else:
                similarity = queries[start : start + 1024] @ self._vectors.T  # (b, n_train)
                nearest = np.argpartition(-similarity, k - 1, axis=1)[:, :k]  # (b, k)
            near = self._costs[nearest]  # (b, k, n_llms)
            seen = ~np.isnan(near)
            total = np.where(seen, near, 0.0).sum(axis=1)
            count = seen.sum(axis=1)
            out[start : start + 1024] = np.where(
                count > 0, total / np.maximum(count, 1), self.mean_costs_[None, :]
            )
        return out

    def _graph(self) -> Graph | None:
        """The graph over the priced queries from `ann_from` of them on (None: exact search)."""
        if self._vectors is None:
            return None
        return self._graphs.get(self._vectors, len(self._vectors) >= self.ann_from)

    def save(self, path: str | Path) -> Path:
        """The folder `path` (router.json + arrays.safetensors, no pickle)."""
        if self._vectors is None or self._costs is None:
            raise LocusNotFittedError("this CostModel is not fitted; nothing to save")
        arrays: dict[str, NDArray[Any]] = {"vectors": self._vectors, "costs": self._costs}
        self._graph()  # built now where wanted, so the saved model carries it
        saved = self._graphs.saved()
        if saved is not None:
            arrays["graph"] = saved
        settings = {"k": self.k, "ann_from": self.ann_from}
        return write_router_folder(path, _KIND, self.llm_ids_, settings, arrays)

    @staticmethod
    def save_validation(path: str | Path, vectors: NDArray[np.floating[Any]]) -> None:
        """Keep the fit's validation query vectors (n, dq) beside a saved cost model: what a
        budget is tuned on (`locus.routing.decision.tune_cost_weight`)."""
        from safetensors.numpy import save_file

        array = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        save_file({"vectors": array}, str(Path(path) / VALIDATION_FILE))

    @staticmethod
    def validation_vectors(path: str | Path) -> NDArray[np.float32] | None:
        """The validation query vectors kept by `save_validation` (None: none kept)."""
        from safetensors.numpy import load_file

        file = Path(path) / VALIDATION_FILE
        if not file.exists():
            return None
        return np.asarray(load_file(str(file))["vectors"], dtype=np.float32)

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        """Rebuild from a folder written by `save`.

        Raises:
            LocusArtifactError: not a saved cost model.
        """
        description, arrays = read_router_folder(path)
        if description["kind"] != _KIND or not {"vectors", "costs"} <= set(arrays):
            raise LocusArtifactError(f"{path}: not a saved cost model")
        model = cls(k=int(description["k"]), ann_from=int(description["ann_from"]))
        costs = np.asarray(arrays["costs"], dtype=np.float64)
        model.fit(arrays["vectors"], costs, description["llm_ids"])
        model._graphs = GraphSlot(arrays.get("graph"))
        return model
