"""Baseline routers beyond the shared contract: onboarding, choices on validation, the oracle's
and the per-task router's own rules, the saved format and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from locus.errors import (
    LocusArtifactError,
    LocusInputError,
    LocusNotFittedError,
    LocusNotFoundError,
)
from locus.nn.factor_models import LearnedBaselineConfig
from locus.pipeline import WorkspaceTable, workspace_table
from locus.routing import (
    Evidence,
    KNNRouter,
    OracleRouter,
    PerTaskRouter,
    load_router,
    make_baseline,
)
from locus.store import Store
from tests.planted_workspace import build_planted_workspace

SMALL = LearnedBaselineConfig(dim=16, hidden=32, min_steps=300, seed=0)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> WorkspaceTable:
    path = build_planted_workspace(tmp_path_factory.mktemp("baselines") / "ws")
    with Store.open(path) as store:
        return workspace_table(store)


def _split(data: WorkspaceTable, split: str, llms: list[int] | None = None) -> Evidence:
    evidence = Evidence.from_table(data.table, data.vectors, data.rows(split))
    if llms is None:
        return evidence
    return Evidence(
        evidence.vectors,
        evidence.scores[:, llms],
        tuple(evidence.llm_ids[i] for i in llms),
        evidence.tasks,
    )


@pytest.mark.parametrize(
    ("kind", "settings"),
    [("knn", {}), ("cluster", {}), ("mf", {"config": SMALL}), ("irt", {"config": SMALL})],
)
def test_onboarded_specialist_is_routed_its_task(
    data: WorkspaceTable, kind: str, settings: dict[str, object]
) -> None:
    llm_ids = list(data.table.llm_ids)
    newcomer = llm_ids.index("math-3")
    known = [i for i in range(len(llm_ids)) if i != newcomer]
    router = make_baseline(kind, **settings).fit(
        _split(data, "train", known), _split(data, "val", known)
    )
    assert "math-3" not in router.llm_ids
    # 64 of the newcomer's training scores (a random draw over the tasks), nothing else refitted
    train = np.random.default_rng(0).choice(data.rows("train"), size=64, replace=False)
    router.add_llm("math-3", data.vectors[train], data.table.scores[train, newcomer])
    assert router.llm_ids[-1] == "math-3"
    test = data.rows("test")
    tasks = np.array([data.table.tasks[i] for i in test])
    proba = router.predict_proba(data.vectors[test])[:, -1]
    assert proba[tasks == "math"].mean() > proba[tasks == "law"].mean() + 0.3
    with pytest.raises(LocusInputError, match="already in the router"):
        router.add_llm("math-3", data.vectors[train], data.table.scores[train, newcomer])
    with pytest.raises(LocusInputError, match="at least one score"):
        router.add_llm("other", data.vectors[:0], [])


def test_knn_chooses_k_on_validation_and_records_it(data: WorkspaceTable) -> None:
    router = KNNRouter(k_candidates=(1, 5, 50)).fit(_split(data, "train"), _split(data, "val"))
    assert router.k_ in (1, 5, 50) and set(router.validation_) == {"1", "5", "50"}
    assert router.validation_[str(router.k_)] == max(router.validation_.values())
    fixed = KNNRouter(k=7).fit(_split(data, "train"))
    assert fixed.k_ == 7 and fixed.validation_ == {}


def test_knn_candidates_from_one_search_equal_each_k_searched_alone() -> None:
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    scores = rng.random((300, 4)).astype(np.float32)
    scores[40:, 3] = np.nan  # one LLM with fewer scored queries than the largest k
    scores[rng.random(300) < 0.2, 1] = np.nan
    queries = rng.normal(size=(37, 8)).astype(np.float32)
    router = KNNRouter(k=1).fit(Evidence(vectors, scores, ("a", "b", "c", "d")))
    ks = [1, 5, 20, 50]
    together, _ = router._neighbour_means(queries, ks)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit.T
    for k, proba in zip(ks, together, strict=True):
        for llm in range(4):
            rows = np.flatnonzero(~np.isnan(scores[:, llm]))
            nearest = rows[np.argsort(-similarity[:, rows], axis=1)[:, : min(k, len(rows))]]
            np.testing.assert_allclose(proba[:, llm], scores[nearest, llm].mean(axis=1), rtol=1e-6)
        router.k_ = k  # routing (one k) takes the k nearest as a set: the same mean
        np.testing.assert_allclose(router.predict_proba(queries), proba, rtol=1e-6)


@pytest.mark.parametrize("vectorised", ["compiled", "numpy", "per-group"])
def test_knn_over_many_llms_each_on_its_own_queries_equals_a_search_per_llm(
    vectorised: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # logs that sampled each LLM's queries: every LLM its own group; a few LLMs with fewer
    # scored queries than the largest k, one with a single scored query, one with none
    from locus.routing import neighbours, vote_pass

    monkeypatch.setattr(neighbours, "_SINGLES_FROM", 10**9 if vectorised == "per-group" else 16)
    monkeypatch.setattr(vote_pass, "_SINGLES_CELLS", 5_000)  # several steps of numpy's pass
    if vectorised == "compiled":
        monkeypatch.setattr(vote_pass, "_KERNEL_NOW_FROM", 1)
    else:
        monkeypatch.setattr(vote_pass, "_compiled_pass", lambda load: None)
    rng = np.random.default_rng(11)
    n_train, n_llms = 400, 40
    vectors = rng.normal(size=(n_train, 8)).astype(np.float32)
    scores = rng.random((n_train, n_llms)).astype(np.float32)
    scores[rng.random((n_train, n_llms)) < 0.3] = np.nan
    scores[30:, 5] = np.nan
    scores[1:, 6] = np.nan
    scores[:, 7] = np.nan
    queries = rng.normal(size=(23, 8)).astype(np.float32)
    ids = tuple(f"m{i}" for i in range(n_llms))
    router = KNNRouter(k=1).fit(Evidence(vectors, scores, ids))
    ks = [1, 5, 20, 50]
    together, _ = router._neighbour_means(queries, ks)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit.T
    for k, proba in zip(ks, together, strict=True):
        for llm in range(n_llms):
            rows = np.flatnonzero(~np.isnan(scores[:, llm]))
            if not len(rows):
                np.testing.assert_allclose(proba[:, llm], router.prior_)
                continue
            nearest = rows[np.argsort(-similarity[:, rows], axis=1)[:, : min(k, len(rows))]]
            np.testing.assert_allclose(proba[:, llm], scores[nearest, llm].mean(axis=1), rtol=1e-5)
    assert (router._singles() is not None) == (vectorised != "per-group")


def test_the_compiled_and_numpy_vote_passes_agree_bit_for_bit() -> None:
    """Graded scores, goals beyond some LLMs' reach: the numpy pass (serving while the compiled
    one loads) gives the compiled one's figures exactly."""
    from locus.routing.vote_kernel import first_k_means
    from locus.routing.vote_pass import _numpy_first_k_means

    rng = np.random.default_rng(3)
    observed = rng.random((300, 25)) < 0.4
    filled = np.where(observed, rng.random((300, 25)), 0).astype(np.float32)
    ranked = np.stack([rng.permutation(300)[:120] for _ in range(7)])
    goals = np.minimum(np.array([60, 20, 5])[:, None], observed.sum(axis=0)[None, :])
    compiled, reached = first_k_means(ranked, observed, filled, goals)
    plain, plain_reached = _numpy_first_k_means(ranked, observed, filled, goals)
    np.testing.assert_array_equal(compiled, plain)  # NaN where a goal is out of reach
    np.testing.assert_array_equal(reached, plain_reached)
    assert np.isnan(compiled[0]).any() and not np.isnan(compiled[2]).all()


def test_knn_reads_only_cells_each_llm_was_scored_on() -> None:
    # LLM b was scored on the far query only: its neighbours are that query, whatever k
    vectors = np.array([[1, 0], [0.9, 0.1], [0, 1]], dtype=np.float32)
    scores = np.array([[1, np.nan], [1, np.nan], [0, 0.25]], dtype=np.float32)
    router = KNNRouter(k=2).fit(Evidence(vectors, scores, ("a", "b")))
    proba = router.predict_proba(np.array([[1, 0]], dtype=np.float32))
    np.testing.assert_allclose(proba, [[1.0, 0.25]])


def test_learned_routers_keep_the_best_validation_epoch(data: WorkspaceTable) -> None:
    router = make_baseline("mf", config=SMALL).fit(_split(data, "train"), _split(data, "val"))
    losses = [entry["val_log_loss"] for entry in router.history_]
    assert router.best_epoch_ == int(np.argmin(losses)) + 1
    assert router.fit_seconds_ > 0


def test_batches_of_whole_queries_hold_every_cell_once_with_its_query() -> None:
    """`batches="queries"`: an epoch's batches cover every training cell once, each batch whole
    queries (a cell's query is the batch's query at its position), about `cells` cells each."""
    import torch

    from locus.nn.factor_models import _cells, _QueryBatches

    rng = np.random.default_rng(0)
    scores = np.where(rng.random((300, 9)) < 0.6, rng.random((300, 9)), np.nan).astype(np.float32)
    scores[17] = np.nan  # a query no LLM was scored on
    rows, _, _ = _cells(scores)
    batches = _QueryBatches(rows, len(scores), cells=64)
    seen: list[int] = []
    sizes: list[int] = []
    for unique, local, cells in batches.epoch(torch.Generator().manual_seed(0)):
        np.testing.assert_array_equal(rows[cells].numpy(), unique[local].numpy())
        assert len(set(unique.tolist())) == len(unique) and 17 not in unique.tolist()
        seen.extend(cells.tolist())
        sizes.append(len(cells))
    assert sorted(seen) == list(range(len(rows)))
    assert 48 < np.mean(sizes[:-1]) < 80  # about 64 cells a batch
    assert batches.steps == -(-299 // batches.per_batch)


def test_a_learned_router_trained_on_whole_queries_learns_and_checks_its_setting(
    data: WorkspaceTable,
) -> None:
    """MF and IRT trained in batches of whole queries read held-out cells better than each
    LLM's training rate; an unknown batching is a clear error."""
    from locus.metrics import log_loss

    train, val, test = (_split(data, s) for s in ("train", "val", "test"))
    rates = np.nanmean(train.scores, axis=0)
    floor = log_loss(np.broadcast_to(rates, test.scores.shape), test.scores)
    for kind in ("mf", "irt"):
        config = replace(SMALL, batches="queries")
        router = make_baseline(kind, config=config).fit(train, val)
        assert log_loss(router.predict_proba(test.vectors), test.scores) < floor, kind
    with pytest.raises(LocusInputError, match="batches 'rows'"):
        make_baseline("mf", config=replace(SMALL, batches="rows")).fit(train, val)


def test_oracle_knows_only_its_queries(data: WorkspaceTable) -> None:
    oracle = OracleRouter().fit(_split(data, "test"))
    test = data.rows("test")
    chosen = [d.llm_id for d in oracle.route(data.vectors[test], top=1)]
    column = {llm: i for i, llm in enumerate(data.table.llm_ids)}
    truth = data.table.scores[test]
    best = np.nanmax(truth, axis=1)
    np.testing.assert_array_equal([truth[i, column[c]] for i, c in enumerate(chosen)], best)
    with pytest.raises(LocusNotFoundError, match="only the queries it was fitted on"):
        oracle.predict_proba(data.vectors[data.rows("train")[:3]])


def test_per_task_router_with_and_without_tasks(data: WorkspaceTable) -> None:
    router = PerTaskRouter().fit(_split(data, "train"))
    assert router.tasks_ == ["biology", "law", "math"]
    test = data.rows("test")
    tasks = [data.table.tasks[i] for i in test]
    given = router.predict_proba_for_tasks(tasks)
    guessed = router.predict_proba(data.vectors[test])
    # the planted tasks are plain in the vectors: the nearest centroid finds every one
    np.testing.assert_array_equal(given, guessed)
    assert router.predict_proba_for_tasks(["poetry"])[0].tolist() == router.overall_.tolist()
    # a query told another task than its text says takes that task's row; an unknown task or
    # None, the text's
    vectors = data.vectors[test[:2]]
    told = router.predict_proba_given_tasks(vectors, ["law", "poetry"])
    np.testing.assert_array_equal(told[0], router.table_[router.tasks_.index("law")])
    np.testing.assert_array_equal(told[1], router.predict_proba(vectors)[1])
    np.testing.assert_array_equal(
        router.predict_proba_given_tasks(vectors, None), router.predict_proba(vectors)
    )
    with pytest.raises(LocusInputError, match="one per query"):
        router.predict_proba_given_tasks(vectors, ["law"])
    no_tasks = Evidence(data.vectors[:5], data.table.scores[:5], tuple(data.table.llm_ids))
    with pytest.raises(LocusInputError, match="needs the training queries' tasks"):
        PerTaskRouter().fit(no_tasks)


def test_unfitted_unknown_and_bad_folders_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(LocusNotFittedError, match="not fitted"):
        KNNRouter().predict_proba(np.zeros((1, 2), dtype=np.float32))
    with pytest.raises(LocusInputError, match="unknown router 'svm'"):
        make_baseline("svm")
    with pytest.raises(LocusArtifactError, match="not a saved router"):
        load_router(tmp_path)
    folder = tmp_path / "r"
    KNNRouter(k=1).fit(
        Evidence(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32), ("a", "b"))
    ).save(folder)
    description = json.loads((folder / "router.json").read_text())
    (folder / "router.json").write_text(json.dumps({**description, "format": 99}))
    with pytest.raises(LocusArtifactError, match="format 99"):
        load_router(folder)
    with pytest.raises(LocusArtifactError, match="not 'cluster'"):
        (folder / "router.json").write_text(json.dumps(description))
        make_baseline("cluster").load(folder)


def test_evidence_is_validated() -> None:
    with pytest.raises(LocusInputError, match="one row per query"):
        Evidence(np.zeros((3, 2), np.float32), np.zeros((2, 1), np.float32), ("a",))
    with pytest.raises(LocusInputError, match="llm_ids"):
        Evidence(np.zeros((2, 2), np.float32), np.zeros((2, 1), np.float32), ("a", "b"))
    with pytest.raises(LocusInputError, match=r"in \[0, 1\]"):
        Evidence(np.zeros((1, 2), np.float32), np.array([[2.0]], np.float32), ("a",))


def test_a_saved_learned_router_routes_without_torch(data: WorkspaceTable, tmp_path: Path) -> None:
    router = make_baseline("irt", config=SMALL).fit(_split(data, "train"), _split(data, "val"))
    router.save(tmp_path / "irt")
    queries = data.vectors[data.rows("test")[:4]]
    np.save(tmp_path / "queries.npy", queries)
    script = (
        "import sys, numpy as np\n"
        "from locus.routing import load_router\n"
        f"router = load_router({str(tmp_path / 'irt')!r})\n"
        f"proba = router.predict_proba(np.load({str(tmp_path / 'queries.npy')!r}))\n"
        "print(proba.shape, 'torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["(4,", f"{len(router.llm_ids)})", "False"]
