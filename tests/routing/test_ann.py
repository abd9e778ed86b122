"""The kNN router's graph search (an HNSW index from `ANN_FROM` training queries on): it finds
the neighbours exact search finds, is saved with the router and read back without a rebuild,
and takes onboarded LLMs' queries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.routing import Evidence, KNNRouter, load_router
from locus.routing import ann as ann_module
from locus.routing.ann import Graph


def _clustered(rng: np.random.Generator, n: int, dim: int = 16, centres: int = 12) -> np.ndarray:
    """Query vectors in topics, as text embeddings are."""
    middle = rng.normal(size=(centres, dim))
    return (middle[rng.integers(centres, size=n)] + 0.4 * rng.normal(size=(n, dim))).astype(
        np.float32
    )


def _pool(layout: str, seed: int = 0) -> tuple[Evidence, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_train, n_llms = 3000, 20 if layout == "singles" else 6
    vectors = _clustered(rng, n_train + 60)
    queries, vectors = vectors[:60], vectors[60:]
    taste = rng.normal(size=(vectors.shape[1], n_llms))
    chance = 1 / (1 + np.exp(-(vectors @ taste)))
    scores = (rng.random(chance.shape) < chance).astype(np.float32)
    if layout == "singles":  # each LLM scored on queries of its own: the vote pass
        scores[rng.random(scores.shape) < 0.3] = np.nan
    if layout == "short":  # an LLM scored on too few candidates: a search over all its rows
        scores[rng.random(n_train) < 0.95, 2] = np.nan
    ids = tuple(f"llm-{i}" for i in range(n_llms))
    return Evidence(vectors, scores, ids), queries


@pytest.mark.parametrize("layout", ["dense", "singles", "short"])
def test_graph_search_finds_what_exact_search_finds(layout: str) -> None:
    train, queries = _pool(layout)
    ks = [5, 20, 50]
    exact = KNNRouter(k=20, search="exact").fit(train)
    graph = KNNRouter(k=20, search="graph").fit(train)
    assert exact._graph() is None and graph._graph() is not None
    # the candidates: recall of the 100 nearest training queries (2 x the largest k)
    unit = exact.vectors_
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    truth = np.argsort(-(q @ unit.T), axis=1)[:, :100]
    found = graph._graph().search(q, 100)
    assert found is not None
    recall = np.mean([len(set(a) & set(b)) / 100 for a, b in zip(truth, found[0], strict=True)])
    assert recall >= 0.97
    np.testing.assert_allclose(found[1], np.take_along_axis(q @ unit.T, found[0], 1), atol=1e-5)
    # what routing reads: the k-means of every LLM, and the routed LLM
    for near, approx in zip(
        exact._neighbour_means(queries, ks)[0], graph._neighbour_means(queries, ks)[0], strict=True
    ):
        assert np.abs(near - approx).mean() < 0.01
        assert (near.argmax(axis=1) == approx.argmax(axis=1)).mean() >= 0.9


def test_auto_search_uses_the_graph_from_the_threshold_on(tmp_path: Path) -> None:
    train, queries = _pool("dense")
    assert KNNRouter(k=5).fit(train)._graph() is None  # 3,000 training queries: exact
    router = KNNRouter(k=5, ann_from=2000).fit(train)
    assert router._graph() is not None
    # the threshold is saved with the router: read back, it searches the same graph
    router.save(tmp_path / "knn")
    loaded = load_router(tmp_path / "knn")
    assert isinstance(loaded, KNNRouter) and loaded.ann_from == 2000
    np.testing.assert_array_equal(loaded.predict_proba(queries), router.predict_proba(queries))
    with pytest.raises(LocusInputError, match="one of auto, exact, graph"):
        KNNRouter(search="hnsw")


def test_a_saved_graph_is_read_back_not_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train, queries = _pool("singles")
    router = KNNRouter(k=20, search="graph").fit(train)
    before = router.predict_proba(queries)
    router.save(tmp_path / "knn")

    def no_rebuild(cls: type, vectors: np.ndarray) -> Graph:
        raise AssertionError("the saved graph was rebuilt")

    monkeypatch.setattr(ann_module.Graph, "build", classmethod(no_rebuild))
    loaded = load_router(tmp_path / "knn")
    assert isinstance(loaded, KNNRouter) and loaded.search == "graph"
    np.testing.assert_array_equal(loaded.predict_proba(queries), before)


def test_an_onboarded_llm_is_searched_in_the_graph() -> None:
    train, queries = _pool("dense")
    rng = np.random.default_rng(9)
    own = queries + 0.01 * rng.normal(size=queries.shape).astype(np.float32)  # near the queries
    routed = {}
    for search in ("exact", "graph"):
        router = KNNRouter(k=5, search=search).fit(train)
        router.add_llm("newcomer", own, np.ones(len(own)))
        routed[search] = router.predict_proba(queries)
        assert len(router.vectors_) == 3060
    graph_router = KNNRouter(k=5, search="graph").fit(train)
    graph_router.add_llm("newcomer", own, np.ones(len(own)))
    assert len(graph_router._graph()) == 3060  # the graph took the newcomer's rows
    np.testing.assert_allclose(routed["graph"][:, -1], 1.0)  # its own perfect scores found
    np.testing.assert_allclose(routed["exact"][:, -1], 1.0)
    assert np.abs(routed["exact"] - routed["graph"]).mean() < 0.01


def test_routers_saved_before_the_graph_load_with_auto_search(tmp_path: Path) -> None:
    import json

    train, queries = _pool("dense")
    router = KNNRouter(k=5).fit(train)
    router.save(tmp_path / "old")
    description = json.loads((tmp_path / "old" / "router.json").read_text())
    for added in ("search", "ann_from"):  # router folder format 1, as written before them
        description.pop(added)
    (tmp_path / "old" / "router.json").write_text(json.dumps({**description, "format": 1}))
    loaded = load_router(tmp_path / "old")
    assert isinstance(loaded, KNNRouter) and loaded.search == "auto"
    assert loaded.ann_from == 100_000
    np.testing.assert_array_equal(loaded.predict_proba(queries), router.predict_proba(queries))


def test_the_cost_model_searches_a_graph_from_the_threshold_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from locus.routing import CostModel

    rng = np.random.default_rng(4)
    vectors = _clustered(rng, 3060)
    queries, vectors = vectors[:60], vectors[60:]
    prices = np.exp(vectors[:, :3] @ rng.normal(size=(3, 3))) * 1e-3  # smooth in the vector
    exact = CostModel().fit(vectors, prices, ("a", "b", "c"))
    assert exact._graph() is None
    near = CostModel(ann_from=2000).fit(vectors, prices, ("a", "b", "c"))
    assert near._graph() is not None
    relative = np.abs(near.predict(queries) - exact.predict(queries)) / exact.predict(queries)
    assert relative.mean() < 0.01
    near.save(tmp_path / "costs")

    def no_rebuild(cls: type, vectors: np.ndarray) -> Graph:
        raise AssertionError("the saved graph was rebuilt")

    monkeypatch.setattr(ann_module.Graph, "build", classmethod(no_rebuild))
    loaded = CostModel.load(tmp_path / "costs")
    np.testing.assert_array_equal(loaded.predict(queries), near.predict(queries))


def test_an_llm_onboarded_into_a_loaded_router_joins_its_saved_graph(tmp_path: Path) -> None:
    train, queries = _pool("dense")
    KNNRouter(k=5, search="graph").fit(train).save(tmp_path / "knn")
    loaded = load_router(tmp_path / "knn")
    assert isinstance(loaded, KNNRouter)
    loaded.add_llm("newcomer", queries, np.ones(len(queries)))  # before any search
    graph = loaded._graph()
    assert graph is not None and len(graph) == len(loaded.vectors_) == 3060
    np.testing.assert_allclose(loaded.predict_proba(queries)[:, -1], 1.0)
