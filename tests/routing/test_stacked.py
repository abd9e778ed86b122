"""`StackedRouter`: the fitted router's recipe, its guard, its files, its numpy twin."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from locus.artifact import read_for_routing
from locus.errors import LocusInputError
from locus.locus import Locus
from locus.pipeline import WorkspaceTable, workspace_table
from locus.pool import artifact_pools
from locus.routing import (
    Evidence,
    KNNRouter,
    LocusRouter,
    NumpyLocusRouter,
    StackedRouter,
    load_router,
    router_artifact,
)
from locus.store import Store
from tests.nn.conftest import small_config
from tests.planted_workspace import build_planted_workspace


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> WorkspaceTable:
    path = build_planted_workspace(tmp_path_factory.mktemp("stacked") / "ws")
    with Store.open(path) as store:
        return workspace_table(store)


@pytest.fixture(scope="module")
def locus(data: WorkspaceTable) -> LocusRouter:
    model = Locus(small_config(max_steps=60)).fit(
        data.table,
        data.vectors,
        data.rows("train"),
        data.rows("val"),
        text_encoder_name=data.encoder,
    )
    return LocusRouter(model)


def _evidence(data: WorkspaceTable, split: str) -> Evidence:
    return Evidence.from_table(data.table, data.vectors, data.rows(split))


def test_fit_stacks_knn_votes_and_chooses_a_guard(data: WorkspaceTable, locus: LocusRouter) -> None:
    router = StackedRouter.fit(locus, _evidence(data, "train"), _evidence(data, "val"))
    assert router.knn is not None and router.stack is not None and router.guard is not None
    assert router.guard.default in router.llm_ids
    assert router.stack.mix_k == router.knn.k_
    test = data.rows("test")
    vectors, truth = data.vectors[test], data.table.scores[test]
    proba = router.predict_proba(vectors)
    np.testing.assert_allclose(proba, 1 / (1 + np.exp(-router.predict_logits(vectors))), atol=1e-6)
    # the planted specialists: the stack finds the group each query belongs to
    chosen = proba.argmax(axis=1)
    hit = float(np.nanmean(truth[np.arange(len(test)), chosen]))
    assert hit > 0.8
    # the guard binds accuracy routing: every query it holds stays on the default
    for decision in router.route(vectors[:30]):
        if decision.held:
            assert decision.llm_id == router.guard.default
    assert not any(d.held for d in router.route(vectors[:30], guarded=False))


def test_a_pool_over_the_bound_reads_votes_on_a_sample_and_keeps_every_neighbour(
    data: WorkspaceTable, locus: LocusRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from locus.routing import stacked_fit

    train, val = _evidence(data, "train"), _evidence(data, "val")
    read: list[int] = []
    real_votes = stacked_fit.knn_votes

    def counting(knn, vectors, ids, ks):  # type: ignore[no-untyped-def]
        read.append(len(vectors))
        return real_votes(knn, vectors, ids, ks)

    monkeypatch.setattr(stacked_fit, "knn_votes", counting)
    router = StackedRouter.fit(  # the validation path
        locus, train, val, cross_fit_below=0, max_cells=30 * train.n_llms, min_rows=20
    )
    assert val.n_queries > 30 and read == [30, 30]  # votes of 30 training, 30 validation queries
    assert router.knn is not None and len(router.knn.vectors_) == train.n_queries
    # the default is still the best LLM over every training query
    assert router.guard is not None
    means = np.nanmean(train.scores, axis=0)
    assert means[list(train.llm_ids).index(router.guard.default)] == pytest.approx(means.max())
    test = data.rows("test")
    proba = router.predict_proba(data.vectors[test])
    truth = data.table.scores[test]
    assert float(np.nanmean(truth[np.arange(len(test)), proba.argmax(axis=1)])) > 0.8
    # under the bound nothing is sampled
    read.clear()
    StackedRouter.fit(locus, train, val, cross_fit_below=0)
    assert read == [train.n_queries, val.n_queries]


def test_without_the_stack_it_is_locus_alone(data: WorkspaceTable, locus: LocusRouter) -> None:
    router = StackedRouter.fit(
        locus, _evidence(data, "train"), _evidence(data, "val"), stacked=False
    )
    assert router.knn is None and router.stack is None and router.guard is not None
    vectors = data.vectors[data.rows("test")]
    np.testing.assert_array_equal(router.predict_proba(vectors), locus.predict_proba(vectors))


def test_no_validation_score_means_no_stack_and_no_guard(
    data: WorkspaceTable, locus: LocusRouter
) -> None:
    val = _evidence(data, "val")
    unscored = Evidence(val.vectors, np.full_like(val.scores, np.nan), val.llm_ids)
    router = StackedRouter.fit(locus, _evidence(data, "train"), unscored)
    assert router.stack is None and router.guard is None


def test_bad_inputs_are_clear_errors(data: WorkspaceTable, locus: LocusRouter) -> None:
    train = _evidence(data, "train")
    with pytest.raises(LocusInputError, match="a kNN router and a stack, or neither"):
        StackedRouter(locus, knn=KNNRouter().fit(train))
    partial = Evidence(train.vectors, train.scores[:, 1:], train.llm_ids[1:])
    with pytest.raises(LocusInputError, match=repr(train.llm_ids[0])):
        StackedRouter.fit(locus, partial, _evidence(data, "val"))


def test_saved_into_an_artifact_and_read_back_with_or_without_torch(
    data: WorkspaceTable, locus: LocusRouter, tmp_path: Path
) -> None:
    router = StackedRouter.fit(locus, _evidence(data, "train"), _evidence(data, "val"))
    folder = router_artifact.save(tmp_path / "artifact", router)
    parts = json.loads((folder / "stacked.json").read_text())
    assert parts["stack"] == router.stack.as_dict() and parts["knn"] == "knn"  # type: ignore[union-attr]
    vectors = data.vectors[data.rows("test")]
    loaded = load_router(folder)
    assert isinstance(loaded, StackedRouter) and loaded.guard == router.guard
    np.testing.assert_array_equal(loaded.predict_proba(vectors), router.predict_proba(vectors))
    # the numpy twin: LOCUS's predictor read without torch, the same stack and guard
    routing = read_for_routing(folder)
    _, pool = artifact_pools(
        routing.llm_ids, routing.llm_embeddings, routing.evidence_counts, routing.manifest
    )
    twin = router_artifact.load(folder, NumpyLocusRouter(routing.predictor, pool)).router
    np.testing.assert_allclose(
        twin.predict_proba(vectors), router.predict_proba(vectors), atol=1e-5
    )
    assert [d.llm_id for d in twin.route(vectors)] == [d.llm_id for d in router.route(vectors)]
    with pytest.raises(LocusInputError, match="cannot save its LOCUS part"):
        router_artifact.save(tmp_path / "again", twin)


def test_the_reading_of_a_newcomer_is_fitted_saved_and_read_back(
    data: WorkspaceTable, locus: LocusRouter, tmp_path: Path
) -> None:
    """`fit_thin` embeds the fitted LLMs from a few of their scores with the torch LOCUS (none
    enters the pool) and keeps weights per evidence size that the pool can fill, and the factor
    model the newcomer's "factor" reading onboards it in; the artifact keeps both, and a router
    read back without torch reads a newcomer the same way."""
    router = StackedRouter.fit(locus, _evidence(data, "train"), _evidence(data, "val"))
    pool = list(locus.llm_ids)
    router.fit_thin(_evidence(data, "train"), _evidence(data, "val"), factors=True)
    assert router.factors is not None and sorted(router.factors.llm_ids) == sorted(pool)
    assert list(locus.llm_ids) == pool
    assert router.thin is not None and router.thin.sizes[0] == 16
    train = data.rows("train")
    fewest = int((~np.isnan(data.table.scores[train])).sum(axis=0).min())
    assert 2 * router.thin.sizes[-1] <= fewest  # each size drawn twice from every LLM's scores
    folder = router_artifact.save(tmp_path / "artifact", router)
    parts = json.loads((folder / "stacked.json").read_text())
    assert parts["thin"] == router.thin.as_dict() and parts["factors"] == "factors"
    routing = read_for_routing(folder)
    _, numpy_pool = artifact_pools(
        routing.llm_ids, routing.llm_embeddings, routing.evidence_counts, routing.manifest
    )
    twin = router_artifact.load(folder, NumpyLocusRouter(routing.predictor, numpy_pool)).router
    assert twin.thin == router.thin and twin.factors is not None
    probes = data.rows("train")[:32]
    scores = data.table.scores[probes, 0]
    vectors = data.vectors[data.rows("test")]
    read = []
    for r in (router, twin):
        assert r.factors is not None
        rows = r.factors.onboarded(data.vectors[probes], scores)
        read.append(r.factors.logits_of(vectors, {k: v[None] for k, v in rows.items()}))
    assert set(read[0]) == set(read[1]) == {"factor", "ability"}
    for name in read[0]:
        np.testing.assert_array_equal(read[0][name], read[1][name])
    # fitted again without one, the router keeps none and its artifact names none
    router.fit_thin(_evidence(data, "train"), _evidence(data, "val"), factors=False)
    assert router.factors is None and router.thin is not None
    again = router_artifact.save(tmp_path / "again", router)
    assert json.loads((again / "stacked.json").read_text())["factors"] is None
    assert not (again / "factors").exists()


def test_logits_of_embeddings_are_the_pools_own_for_a_pool_llm(
    data: WorkspaceTable, locus: LocusRouter
) -> None:
    """An LLM's embedding and evidence given outside the pool (what the reading of a newcomer
    is fitted on) are read exactly as the pool reads them."""
    model = locus.model
    vectors = data.vectors[data.rows("test")]
    llm = model.llm_ids_[1]
    mean, count = model.pool_.evidence_means[llm]
    outside = model.logits_of_embeddings(model.pool_.vectors([llm]), [(mean, count)], vectors)
    np.testing.assert_allclose(outside[:, 0], model.predict_logits(vectors, [llm])[:, 0], atol=1e-5)
    before = (list(model.llm_ids_), model.pool_.embeddings.copy())
    evidence = [(data.vectors[:40], data.table.scores[:40, 0].astype(np.float32))]
    assert locus.thin_logits(evidence, vectors).shape == (len(vectors), 1)
    assert list(model.llm_ids_) == before[0]  # nothing joined the pool, nothing moved
    np.testing.assert_array_equal(model.pool_.embeddings, before[1])


def test_the_factor_models_train_on_a_bounded_sample_of_a_large_pool(
    data: WorkspaceTable, locus: LocusRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond `FACTOR_MAX_CELLS` training cells the factor models see a sample of the training
    queries (every LLM's column), not all of them."""
    from locus.routing import stacked_fit
    from locus.routing.factors import Factors

    seen: list[tuple[int, int]] = []
    fit = Factors.fit

    def spy(train: Evidence, val: Evidence | None = None, **options: object) -> Factors:
        seen.append((train.n_queries, len(train.llm_ids)))
        return fit(train, val, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(Factors, "fit", staticmethod(spy))
    monkeypatch.setattr(stacked_fit, "THIN_MAX_QUERIES", 10)
    monkeypatch.setattr(stacked_fit, "FACTOR_MAX_CELLS", 300)
    router = StackedRouter.fit(locus, _evidence(data, "train"), _evidence(data, "val"))
    router.fit_thin(_evidence(data, "train"), _evidence(data, "val"), factors=True)
    n_llms = len(locus.llm_ids)
    assert seen and seen[-1] == (max(10, 300 // n_llms), n_llms)
    assert len(data.rows("train")) > seen[-1][0]
    assert router.factors is not None and sorted(router.factors.llm_ids) == sorted(locus.llm_ids)
