"""Routing without torch: the numpy predictor matches the torch one; routing never imports torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from locus.artifact import NumpyPredictor, read_for_routing
from locus.calibration import sigmoid
from locus.errors import LocusArtifactError, LocusInputError
from locus.nn import CorrectnessPredictor
from locus.pipeline import fit_workspace
from locus.pipeline.workspace_router import WorkspaceRouter
from locus.routing.neighbours import KNNRouter
from locus.store import Store
from tests.nn.conftest import small_config
from tests.planted_workspace import build_planted_workspace, planted_rows


def _trained_like_predictor(query_dim: int, seed: int) -> CorrectnessPredictor:
    """A predictor with random (not initial) weights and non-trivial standardisation."""
    torch.manual_seed(seed)
    predictor = CorrectnessPredictor(query_dim, dim=32, hidden=16).eval()
    with torch.no_grad():
        for parameter in predictor.parameters():
            parameter.normal_(0.0, 0.3)
        predictor.standardize.fit_statistics(torch.randn(200, query_dim) * 0.05 + 0.1)
    return predictor


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numpy_predictor_matches_torch_to_1e_5(seed: int) -> None:
    predictor = _trained_like_predictor(query_dim=24, seed=seed)
    state = {k: v.numpy() for k, v in predictor.state_dict().items()}
    fast = NumpyPredictor(state)
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(13, 32)).astype(np.float32)
    phi = (rng.normal(size=(600, 24)) * 0.05 + 0.1).astype(np.float32)
    with torch.inference_mode():
        expected = torch.sigmoid(
            predictor.score_matrix(torch.from_numpy(z), torch.from_numpy(phi))
        ).numpy()
    got = fast.predict_proba(z, phi)
    assert got.shape == (600, 13) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    # the folded pool weights are cached: a new pool must not reuse the old fold
    z2 = z[::-1].copy()
    with torch.inference_mode():
        expected2 = torch.sigmoid(
            predictor.score_matrix(torch.from_numpy(z2), torch.from_numpy(phi))
        ).numpy()
    np.testing.assert_allclose(fast.predict_proba(z2, phi), expected2, atol=1e-5, rtol=0)


def test_numpy_predictor_rejects_wrong_shapes() -> None:
    state = {k: v.numpy() for k, v in _trained_like_predictor(8, 0).state_dict().items()}
    fast = NumpyPredictor(state)
    with pytest.raises(LocusInputError, match="query vectors must be"):
        fast.score_matrix(np.zeros((2, 32), np.float32), np.zeros((3, 9), np.float32))
    with pytest.raises(LocusInputError, match="z must be"):
        fast.score_matrix(np.zeros((2, 31), np.float32), np.zeros((3, 8), np.float32))
    del state["hidden.weight"]
    with pytest.raises(LocusArtifactError, match="lack"):
        NumpyPredictor(state)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = build_planted_workspace(tmp_path_factory.mktemp("inference") / "ws", planted_rows())
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=60))
    return path


def test_workspace_router_gives_the_facades_probabilities(workspace: Path) -> None:
    from locus.pipeline import load_workspace_locus

    with Store.open(workspace) as store:
        router = WorkspaceRouter(store)
        model = load_workspace_locus(store)
        found = store.find_vectors(model.text_encoder_name_, _some_hashes(store))
        phi = np.stack(list(found.values()))
        # the artifact stacks LOCUS with its kNN router; the numpy path gives the facade's part
        stack, knn = router.router.stack, router.router.knn
        assert stack is not None and isinstance(knn, KNNRouter)
        columns = [list(knn.llm_ids).index(llm) for llm in model.llm_ids_]
        found = knn.votes(phi, stack.needed_ks, tasks=stack.tasks).columns(columns)
        votes, tasks = found.by_k, found.tasks
        assert stack.tasks and tasks is not None  # the planted pool has tasks
        expected = sigmoid(stack.logits(model.predict_logits(phi), votes, tasks))
        np.testing.assert_allclose(router.predict_proba(phi), expected, atol=1e-5, rtol=0)
        assert list(router.llm_ids) == list(model.llm_ids_)
        # both apply the fit's calibration, fitted on the validation cells
        calibration = model.calibration_
        assert calibration.cells > 0 and (calibration.scale, calibration.shift) != (1.0, 0.0)
        assert router.router.locus.predictor.calibration == calibration  # type: ignore[attr-defined]
        # it reads each fit-time LLM's evidence quality: its mean score on its anchors
        assert calibration.evidence_scale is not None
        assert np.isfinite(model.evidence_quality()).all()
        raw = 1 / (1 + np.exp(-model.predict_logits(phi, calibrated=False)))
        assert not np.allclose(raw, model.predict_proba(phi), atol=1e-3)


def _some_hashes(store: Store) -> list[str]:
    return list(store.score_table().text_hashes[:40])


def test_routing_a_text_never_imports_torch(workspace: Path) -> None:
    script = (
        "import sys, json\n"
        "from locus.pipeline.workspace_router import WorkspaceRouter\n"
        "from locus.store import Store\n"
        "from locus.text import HashingEncoder\n"
        f"store = Store.open({str(workspace)!r}, create=False)\n"
        "router = WorkspaceRouter(store, text_encoder=HashingEncoder(48))\n"
        "decision = router.route_texts(['integral derivative matrix limit'])[0]\n"
        "print(json.dumps({'llm': decision.llm_id, 'torch': 'torch' in sys.modules}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["llm"].startswith("math-")
    assert result["torch"] is False


def test_damaged_weights_are_an_artifact_error(workspace: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(workspace / "artifacts" / "default", copy)
    (copy / "weights.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(LocusArtifactError, match="unreadable weights"):
        read_for_routing(copy)


def test_an_artifact_of_other_vectors_refuses_to_route(workspace: Path, tmp_path: Path) -> None:
    import shutil

    from locus.text import HashingEncoder
    from locus.text.cache import encode_missing

    copy = tmp_path / "ws"
    shutil.copytree(workspace, copy)
    with Store.open(copy) as store:
        encode_missing(store, HashingEncoder(32))  # the workspace switches to other vectors
        with pytest.raises(LocusArtifactError, match=r"hashing-48.*hashing-32.*re-run locus fit"):
            WorkspaceRouter(store)
