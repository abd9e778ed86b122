"""CorrectnessPredictor: the batched score matrix equals the paired forward."""

from __future__ import annotations

import pytest
import torch

from locus.errors import LocusInputError
from locus.nn import CorrectnessPredictor


@pytest.fixture
def predictor() -> CorrectnessPredictor:
    torch.manual_seed(0)
    return CorrectnessPredictor(query_dim=32).eval()


@pytest.mark.parametrize("query_chunk", [1, 5, 256])
def test_score_matrix_equals_paired_forward(
    predictor: CorrectnessPredictor, query_chunk: int
) -> None:
    generator = torch.Generator().manual_seed(1)
    z = torch.randn(6, 128, generator=generator)  # (n_llms, d)
    phi = torch.randn(11, 32, generator=generator)  # (n_queries, dq)
    with torch.no_grad():
        matrix = predictor.score_matrix(z, phi, query_chunk=query_chunk)  # (11, 6)
        paired = predictor(
            z.unsqueeze(0).expand(11, -1, -1).reshape(-1, 128),
            phi.unsqueeze(1).expand(-1, 6, -1).reshape(-1, 32),
        ).view(11, 6)
    assert matrix.shape == (11, 6)
    assert (matrix - paired).abs().max() < 1e-5


def test_score_matrix_with_no_queries(predictor: CorrectnessPredictor) -> None:
    assert predictor.score_matrix(torch.randn(4, 128), torch.randn(0, 32)).shape == (0, 4)


def test_score_matrix_is_differentiable(predictor: CorrectnessPredictor) -> None:
    z = torch.randn(3, 128, requires_grad=True)
    predictor.train()
    predictor.score_matrix(z, torch.randn(5, 32)).sum().backward()
    assert z.grad is not None and z.grad.abs().sum() > 0


def test_rejects_mismatched_inputs(predictor: CorrectnessPredictor) -> None:
    with pytest.raises(LocusInputError, match="paired"):
        predictor(torch.randn(3, 128), torch.randn(4, 32))
    with pytest.raises(LocusInputError, match="dimension 32"):
        predictor.score_matrix(torch.randn(3, 128), torch.randn(4, 16))
    with pytest.raises(LocusInputError, match="n_llms, 128"):
        predictor.score_matrix(torch.randn(3, 64), torch.randn(4, 32))
