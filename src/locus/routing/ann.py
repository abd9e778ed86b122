"""An approximate index of the training queries for the kNN router's neighbour search, used from
`ANN_FROM` training queries on: an HNSW graph (faiss `IndexHNSWFlat`, inner product on unit
vectors = cosine). Below that, one product with every training vector is as fast and exact.

Measured on 2 cores (`benchmarks/bench_ann.py`, static-encoder vectors of synthetic queries in
20 tasks, the 1,000 nearest of each query, the stack's depth): at 80,000 training queries exact
search 1.8 ms per query against the graph's 1.9 ms (recall 0.99); at 300,000 exact 11.2 ms
against 3.4 ms (recall 0.987), the graph built in 39 s.

    >>> import numpy as np
    >>> vectors = np.eye(3, dtype=np.float32)
    >>> graph = Graph.build(vectors)
    >>> graph.search(vectors[1:2], 1)[0].tolist()
    [[1]]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusArtifactError
from locus.extras import needs_extra

__all__ = ["ANN_FROM", "SEARCH_MODES", "Graph", "GraphSlot"]

# training queries from which the kNN router searches a graph instead of every vector; the
# crossover of single-query search time on 2 cores lies near 80,000 (benchmarks/README,
# "Nearest training queries at scale")
ANN_FROM = 100_000
SEARCH_MODES = ("auto", "exact", "graph")  # auto: exact below ANN_FROM, the graph from there
_LINKS = 32  # HNSW neighbours per node (M)
_BUILD_BREADTH = 80  # efConstruction
_MIN_BREADTH = 64  # efSearch is the depth asked, at least this


def _faiss() -> Any:
    with needs_extra(f"the approximate neighbour index (from {ANN_FROM:,} training queries)"):
        import faiss  # imported when first needed: the pools under ANN_FROM never load it

    return faiss


class Graph:
    """An HNSW graph over unit training vectors; row i of the vectors is id i."""

    def __init__(self, index: Any) -> None:
        self._index = index

    @classmethod
    def build(cls, vectors: NDArray[np.float32]) -> Graph:
        """Index `vectors` (n, d), unit rows (39 s for 300,000 x 256 on 2 cores)."""
        faiss = _faiss()
        index = faiss.IndexHNSWFlat(vectors.shape[1], _LINKS, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = _BUILD_BREADTH
        graph = cls(index)
        graph.add(vectors)
        return graph

    @classmethod
    def from_bytes(cls, blob: NDArray[np.uint8]) -> Graph:
        """The graph `to_bytes` wrote (as saved in a router's arrays)."""
        try:
            return cls(_faiss().deserialize_index(np.ascontiguousarray(blob, dtype=np.uint8)))
        except RuntimeError as error:
            raise LocusArtifactError(f"a saved search graph cannot be read: {error}") from None

    def to_bytes(self) -> NDArray[np.uint8]:
        return np.asarray(_faiss().serialize_index(self._index), dtype=np.uint8)

    def add(self, vectors: NDArray[np.float32]) -> None:
        """Append rows: their ids continue from `len(self)`."""
        self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def search(
        self, queries: NDArray[np.float32], depth: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]] | None:
        """The `depth` training rows nearest each query (b, depth), nearest first, and their
        cosine similarity; None where the graph found fewer for some query (the caller then
        searches exactly)."""
        breadth = _faiss().SearchParametersHNSW(efSearch=max(int(depth), _MIN_BREADTH))
        similarity, ids = self._index.search(
            np.ascontiguousarray(queries, np.float32), int(depth), params=breadth
        )
        if (ids < 0).any():
            return None
        return ids.astype(np.int64, copy=False), similarity.astype(np.float32, copy=False)


class GraphSlot:
    """A router's graph, kept lazily: built the first time it is wanted or read from the bytes
    a saved router holds, and its bytes made once for saving.

    Args:
        saved: the bytes of a saved graph (`Graph.to_bytes`), read when first wanted.
    """

    def __init__(self, saved: NDArray[np.uint8] | None = None) -> None:
        self._graph: Graph | None = None
        self._saved = saved

    def get(self, vectors: NDArray[np.float32], wanted: bool) -> Graph | None:
        """The graph over `vectors` (unit rows) where `wanted` (None otherwise)."""
        if wanted and self._graph is None:
            saved = self._saved
            self._graph = Graph.from_bytes(saved) if saved is not None else Graph.build(vectors)
        return self._graph if wanted else None

    def add(self, vectors: NDArray[np.float32]) -> None:
        """Append rows to the graph, if there is one (a saved one is read first)."""
        if self._graph is None and self._saved is not None:
            self._graph = Graph.from_bytes(self._saved)
        if self._graph is not None:
            self._graph.add(vectors)
            self._saved = None

    def saved(self) -> NDArray[np.uint8] | None:
        """The bytes to save (None: no graph)."""
        if self._saved is None and self._graph is not None:
            self._saved = self._graph.to_bytes()
        return self._saved
