"""Weights round-trip through safetensors and load into freshly built networks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from locus.errors import LocusArtifactError, LocusInputError
from locus.nn import (
    CorrectnessPredictor,
    LLMEncoder,
    load_state,
    load_state_from_safetensors,
    save_state,
    state_to_safetensors,
)


def networks(seed: int) -> dict[str, torch.nn.Module]:
    """Seeded networks whose query standardisation is not the identity (it must travel too)."""
    torch.manual_seed(seed)
    encoder, predictor = LLMEncoder(8).eval(), CorrectnessPredictor(8).eval()
    training_vectors = torch.randn(50, 8) * (seed + 1) + seed
    for network in (encoder, predictor):
        network.standardize.fit_statistics(training_vectors)
    return {"encoder": encoder, "predictor": predictor}


def outputs(modules: dict[str, torch.nn.Module]) -> torch.Tensor:
    generator = torch.Generator().manual_seed(5)
    phi = torch.randn(2, 30, 8, generator=generator)
    y = torch.randint(0, 2, (2, 30), generator=generator).float()
    with torch.no_grad():
        z = modules["encoder"](phi, y)
        return modules["predictor"].score_matrix(z, phi[0])


def test_bytes_round_trip_reproduces_outputs() -> None:
    source, target = networks(0), networks(1)
    assert not torch.equal(outputs(source), outputs(target))
    data = state_to_safetensors(source, metadata={"format": "1"})
    assert load_state_from_safetensors(target, data) == {"format": "1"}
    assert torch.equal(outputs(source), outputs(target))


def test_file_round_trip_reproduces_outputs(tmp_path: Path) -> None:
    source, target = networks(0), networks(1)
    save_state(source, tmp_path / "weights.safetensors", metadata={"llms": "3"})
    assert load_state(target, tmp_path / "weights.safetensors") == {"llms": "3"}
    assert torch.equal(outputs(source), outputs(target))


def test_mismatched_networks_are_an_artifact_error(tmp_path: Path) -> None:
    data = state_to_safetensors(networks(0))
    with pytest.raises(LocusArtifactError, match="the network expects"):
        load_state_from_safetensors(
            {"encoder": LLMEncoder(16), "predictor": CorrectnessPredictor(8)}, data
        )
    with pytest.raises(LocusArtifactError, match="missing"):
        load_state_from_safetensors({"encoder": LLMEncoder(8)}, data)
    with pytest.raises(LocusArtifactError, match="readable"):
        load_state_from_safetensors(networks(0), b"not safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"\x00" * 20)
    with pytest.raises(LocusArtifactError, match="readable"):
        load_state(networks(0), tmp_path / "bad.safetensors")


def test_metadata_must_be_strings() -> None:
    with pytest.raises(LocusInputError, match="str to str"):
        state_to_safetensors(networks(0), metadata={"count": 3})  # type: ignore[dict-item]
