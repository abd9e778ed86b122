"""The Locus facade on planted data: fit, embed, onboard, predict, route, save, load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from locus.data.splits import assign_splits
from locus.errors import LocusArtifactError, LocusInputError, LocusNotFittedError
from locus.locus import Locus
from locus.nn import embed_many, evidence_chunks
from locus.pipeline import workspace_table
from locus.routing import LocusRouter
from locus.store import Store
from locus.text import HashingEncoder
from tests.nn.conftest import small_config
from tests.planted_workspace import ENCODER_DIM, VOCABULARY, build_planted_workspace


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Locus, object]:
    path = build_planted_workspace(tmp_path_factory.mktemp("planted") / "ws")
    with Store.open(path) as store:
        data = workspace_table(store)
    model = Locus(small_config(), text_encoder=HashingEncoder(ENCODER_DIM))
    model.fit(data.table, data.vectors, data.rows("train"), data.rows("val"))
    return model, data


def test_unfitted_use_is_a_clear_error() -> None:
    with pytest.raises(LocusNotFittedError, match="call fit"):
        Locus().predict_proba(np.zeros((1, 4), dtype=np.float32))


def test_predict_and_route_texts(fitted: tuple[Locus, object]) -> None:
    model, _ = fitted
    router = LocusRouter(model)
    rng = np.random.default_rng(7)
    for task in ("math", "law", "biology"):
        words = VOCABULARY[task].split()
        texts = [" ".join(rng.choice(words, size=5)) + " item" for _ in range(20)]
        proba = model.predict_proba(texts)
        assert proba.shape == (20, 12) and ((proba > 0) & (proba < 1)).all()
        decisions = router.route(model.query_vectors(texts), top=3)
        assert all(len(d.runners_up) == 2 for d in decisions)
        right = sum(d.llm_id.startswith(f"{task}-") for d in decisions)
        assert right >= 16, f"{task}: {right}/20 routed to its specialists"
    with pytest.raises(LocusInputError, match="empty"):
        model.predict_proba([""])


def test_evidence_beyond_the_bound_is_read_in_chunks(fitted: tuple[Locus, object]) -> None:
    model, data = fitted
    column = data.table.scores[:, data.table.llm_index("law-0")]  # type: ignore[attr-defined]
    rows = np.flatnonzero(~np.isnan(column))
    assert len(rows) > 2 * model.evidence_bound_  # several chunks
    vectors, scores = data.vectors[rows], column[rows]  # type: ignore[attr-defined]
    vector = model.embed(vectors, scores)
    # deterministic and independent of the order of the evidence
    order = np.random.default_rng(3).permutation(len(rows))
    np.testing.assert_allclose(model.embed(vectors[order], scores[order]), vector, atol=1e-5)
    # the mean of the chunk embeddings, weighted by chunk size
    chunks = evidence_chunks(vectors, scores, model.evidence_bound_)
    assert sorted(np.concatenate(chunks).tolist()) == list(range(len(rows)))
    assert max(map(len, chunks)) <= model.evidence_bound_
    parts = embed_many(model.encoder_, [(vectors[c], scores[c]) for c in chunks])
    weights = np.array([len(c) for c in chunks], dtype=float)
    np.testing.assert_allclose(vector, weights @ parts / weights.sum(), atol=1e-5)


def test_onboarding_moves_nobody_else(fitted: tuple[Locus, object]) -> None:
    model, data = fitted
    before = model.llm_embeddings_.copy()
    column = data.table.scores[:, data.table.llm_index("law-0")]  # type: ignore[attr-defined]
    # 64 scores drawn across tasks (the table is sorted by query id, i.e. by task)
    rng = np.random.default_rng(0)
    rows = rng.choice(np.flatnonzero(~np.isnan(column)), size=64, replace=False)
    vector = model.embed(data.vectors[rows], column[rows])  # type: ignore[attr-defined]
    names = list(model.llm_ids_)
    model.add_llm("newcomer", data.vectors[rows], column[rows])  # type: ignore[attr-defined]
    try:
        np.testing.assert_array_equal(model.llm_embeddings_[: len(before)], before)
        np.testing.assert_allclose(model.llm_embeddings_[-1], vector, atol=1e-6)
        distances = np.linalg.norm(before - vector[None], axis=1)
        nearest = names[int(np.argmin(distances))]
        assert nearest.startswith("law-")
    finally:
        model.set_embeddings(names, before, model.evidence_counts_[: len(names)])
    with pytest.raises(LocusInputError, match="no scores"):
        model.embed(np.zeros((0, ENCODER_DIM), dtype=np.float32), np.zeros(0, dtype=np.float32))


def test_fit_keeps_each_llms_mean_score_on_its_anchors(fitted: tuple[Locus, object]) -> None:
    from locus.calibration import evidence_quality

    model, data = fitted
    table = data.table  # type: ignore[attr-defined]
    row_of = {h: i for i, h in enumerate(table.text_hashes)}
    for llm in model.llm_ids_:
        rows = [row_of[h] for h in model.anchors_[llm]]
        mean, count = model.manifest.evidence_means[llm]
        assert count == len(rows) and mean == pytest.approx(
            float(np.nanmean(table.scores[rows, table.llm_index(llm)]))
        )
    first = model.llm_ids_[0]
    expected = evidence_quality(np.array([model.manifest.evidence_means[first][0]]),
                                np.array([model.manifest.evidence_means[first][1]]))  # fmt: skip
    np.testing.assert_allclose(model.evidence_quality([first]), expected)
    assert model.calibration_.evidence_scale is not None


def test_save_load_identical(fitted: tuple[Locus, object], tmp_path: Path) -> None:
    model, data = fitted
    model.save(tmp_path / "artifact")
    loaded = Locus.load(tmp_path / "artifact", text_encoder=HashingEncoder(ENCODER_DIM))
    vectors = data.vectors[:50]  # type: ignore[attr-defined]
    np.testing.assert_array_equal(loaded.predict_proba(vectors), model.predict_proba(vectors))
    assert loaded.llm_ids_ == model.llm_ids_ and loaded.anchors_ == model.anchors_
    # the calibration and the reference queries its LLM qualities are taken over travel along
    assert model.calibration_.quality_scale is not None and model.calibration_.cells > 0
    assert loaded.calibration_ == model.calibration_
    np.testing.assert_array_equal(loaded.reference_queries_, model.reference_queries_)
    np.testing.assert_allclose(loaded.quality(), model.quality(), atol=1e-6)
    np.testing.assert_array_equal(loaded.evidence_quality(), model.evidence_quality())
    # saving again over the same folder replaces it whole
    model.save(tmp_path / "artifact")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artifact"]


def test_corrupt_and_foreign_artifacts(fitted: tuple[Locus, object], tmp_path: Path) -> None:
    model, _ = fitted
    folder = model.save(tmp_path / "artifact")
    weights = folder / "weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(LocusArtifactError, match="unreadable weights"):
        Locus.load(folder)
    (folder / "config.json").write_text('{"format": "something-else"}')
    with pytest.raises(LocusArtifactError, match="not a locus artifact"):
        Locus.load(folder)
    with pytest.raises(LocusArtifactError, match="missing"):
        Locus.load(tmp_path / "nowhere")


def test_encoder_mismatch_is_refused(fitted: tuple[Locus, object]) -> None:
    model, _ = fitted
    model.text_encoder = HashingEncoder(16)
    try:
        with pytest.raises(LocusArtifactError, match="differs from the one"):
            model.predict_proba("integral")
    finally:
        model.text_encoder = HashingEncoder(ENCODER_DIM)


def test_split_is_hash_of_text(fitted: tuple[Locus, object]) -> None:
    _, data = fitted
    expected = assign_splits(list(data.table.text_hashes), seed=0)  # type: ignore[attr-defined]
    assert list(data.splits) == list(expected)  # type: ignore[attr-defined]


@pytest.mark.gpu
def test_predicts_on_the_device_the_networks_are_on(
    fitted: tuple[Locus, object], tmp_path: Path
) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine")
    model, data = fitted
    folder = model.save(tmp_path / "artifact")
    on_gpu = Locus.load(folder, device="cuda", workspace=None)
    assert next(on_gpu.predictor_.parameters()).device.type == "cuda"
    vectors = data.vectors[:50]  # type: ignore[attr-defined]
    np.testing.assert_allclose(
        on_gpu.predict_proba(vectors), model.predict_proba(vectors), atol=1e-5
    )
    column = data.table.scores[:, 0]  # type: ignore[attr-defined]
    rows = np.flatnonzero(~np.isnan(column))[:100]
    np.testing.assert_allclose(
        on_gpu.embed(data.vectors[rows], column[rows]),  # type: ignore[attr-defined]
        model.embed(data.vectors[rows], column[rows]),  # type: ignore[attr-defined]
        atol=1e-4,
    )
