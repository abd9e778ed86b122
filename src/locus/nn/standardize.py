"""Query-vector standardisation shared by the encoder and the predictor.

Sentence-embedding vectors are unit-norm with a common component: a 384-d all-MiniLM-L6-v2
vector has coordinates of about 0.05, and 0.30 of its norm is the mean direction every query
shares. Fed raw, the query's content is a small input next to the score and the biases, and the
networks learn LLM quality and query difficulty but little of which LLM suits which query. Both
networks therefore see phi' = (phi - mean) / rms, with the mean over the training queries and
rms the root mean square coordinate of the centred training vectors (one scalar, so directions
are kept). The statistics are buffers: fixed at training time, saved with the weights, and the
identity until training sets them. Measured in the closing note of issue 3
(`TrainingConfig.standardise_queries`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["QueryStandardizer"]


class QueryStandardizer(nn.Module):
    """phi -> (phi - shift) / scale; the identity until `fit_statistics` is called.

    Example:
        >>> standardizer = QueryStandardizer(3)
        >>> standardizer.fit_statistics(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
        >>> standardizer(torch.tensor([[1.0, 0.0, 0.0]])).shape
        torch.Size([1, 3])
    """

    shift: Tensor
    scale: Tensor

    def __init__(self, query_dim: int) -> None:
        super().__init__()
        self.register_buffer("shift", torch.zeros(query_dim))
        self.register_buffer("scale", torch.ones(1))

    def forward(self, phi: Tensor) -> Tensor:
        return (phi - self.shift) / self.scale

    @torch.no_grad()
    def fit_statistics(self, vectors: Tensor) -> None:
        """Set shift = mean of `vectors` (n, dq) and scale = RMS coordinate after centring."""
        mean = vectors.mean(dim=0)
        rms = (vectors - mean).square().mean().sqrt().clamp_min(1e-12)
        self.shift.copy_(mean)
        self.scale.fill_(float(rms))
