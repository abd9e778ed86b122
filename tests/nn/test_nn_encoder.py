"""LLMEncoder: shapes, the projected token layer, permutation and padding invariance."""

from __future__ import annotations

import pytest
import torch

from locus.errors import LocusInputError
from locus.nn import LLMEncoder

QUERY_DIM = 32


@pytest.fixture
def encoder() -> LLMEncoder:
    torch.manual_seed(0)
    return LLMEncoder(QUERY_DIM).eval()


def evidence(batch: int, size: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    phi = torch.randn(batch, size, QUERY_DIM, generator=generator)  # (B, K, dq)
    y = torch.randint(0, 2, (batch, size), generator=generator).float()  # (B, K)
    return phi, y


def test_embedding_has_paper_shape(encoder: LLMEncoder) -> None:
    phi, y = evidence(3, 40)
    with torch.no_grad():
        assert encoder(phi, y).shape == (3, 128)


def test_projected_tokens_equal_the_concatenated_linear(encoder: LLMEncoder) -> None:
    phi, _ = evidence(2, 50)
    y = torch.rand(2, 50)  # soft scores too, not only 0/1
    with torch.no_grad():
        p, q = encoder.project_queries(phi)
        projected = p + y.unsqueeze(-1) * q
        naive = encoder.tokens_naive(phi, y)
    assert torch.allclose(projected, naive, atol=1e-5)


def test_forward_projected_matches_forward(encoder: LLMEncoder) -> None:
    phi, y = evidence(2, 30)
    with torch.no_grad():
        p, q = encoder.project_queries(phi)
        assert torch.allclose(encoder.forward_projected(p, q, y), encoder(phi, y), atol=1e-6)


def test_embedding_ignores_evidence_order(encoder: LLMEncoder) -> None:
    phi, y = evidence(1, 100)
    order = torch.randperm(100, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        original = encoder(phi, y)
        shuffled = encoder(phi[:, order], y[:, order])
    assert (original - shuffled).abs().max() < 1e-6
    assert not torch.equal(phi, phi[:, order])  # the test really permuted something


def test_embedding_ignores_padding_even_with_junk(encoder: LLMEncoder) -> None:
    phi, y = evidence(1, 60)
    padded_phi = torch.cat([phi, torch.full((1, 25, QUERY_DIM), float("nan"))], dim=1)
    padded_y = torch.cat([y, torch.ones(1, 25)], dim=1)
    mask = torch.arange(85).unsqueeze(0) < 60  # (1, 85)
    with torch.no_grad():
        plain = encoder(phi, y)
        padded = encoder(padded_phi, padded_y, mask)
    assert (plain - padded).abs().max() < 1e-6


def test_batch_with_different_evidence_counts(encoder: LLMEncoder) -> None:
    phi, y = evidence(2, 50)
    mask = torch.ones(2, 50, dtype=torch.bool)
    mask[1, 20:] = False
    with torch.no_grad():
        batched = encoder(phi, y, mask)
        alone = encoder(phi[1:, :20], y[1:, :20])
    assert (batched[1] - alone[0]).abs().max() < 1e-6


def test_scores_change_the_embedding(encoder: LLMEncoder) -> None:
    phi, y = evidence(1, 50)
    with torch.no_grad():
        assert (encoder(phi, y) - encoder(phi, 1.0 - y)).abs().max() > 1e-3


def test_rejects_empty_evidence_and_wrong_dimension(encoder: LLMEncoder) -> None:
    phi, y = evidence(2, 10)
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[0] = False
    with pytest.raises(LocusInputError, match="at least one"):
        encoder(phi, y, mask)
    with pytest.raises(LocusInputError, match="dimension 32"):
        encoder(torch.randn(2, 10, 16), y)
    with pytest.raises(LocusInputError, match="mask"):
        encoder(phi, y, mask.float())


def test_gradients_reach_every_parameter(encoder: LLMEncoder) -> None:
    phi, y = evidence(2, 20)
    encoder.train()
    encoder(phi, y).sum().backward()
    missing = [name for name, p in encoder.named_parameters() if p.grad is None]
    assert missing == []
