"""The correctness predictor: (LLM embedding, query vector) -> logit of P(LLM answers correctly).

    u     = Linear(dq -> d)(phi)                          # (B, d)
    logit = MLP([z, u, z * u])                            # hidden 64, ReLU, dropout, -> 1

For many queries x many LLMs the first layer splits as

    W1 [z, u, z u] = z W_z + u W_u + (z u) W_zu,

and (z u) W_zu = u (diag(z) W_zu): a per-LLM scaling of W_zu's rows. Stacking the scaled copies
side by side turns every (query, LLM) pair into one GEMM, u (nq, d) @ (d, n_llms h).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from locus.errors import LocusInputError
from locus.nn.standardize import QueryStandardizer

__all__ = ["CorrectnessPredictor"]


class CorrectnessPredictor(nn.Module):
    """Predicts the logit of P(correct) for an LLM embedding and a query vector.

    Args:
        query_dim: dimension dq of the query vectors.
        dim: LLM embedding dimension d (128).
        hidden: hidden width of the MLP (64).
        dropout: dropout after the hidden ReLU (0.1; inactive in eval mode).

    Example:
        >>> predictor = CorrectnessPredictor(query_dim=32).eval()
        >>> z, phi = torch.randn(5, 128), torch.randn(7, 32)
        >>> predictor.score_matrix(z, phi).shape          # (n_queries, n_llms) logits
        torch.Size([7, 5])
        >>> predictor(z[:3], phi[:3]).shape               # paired: (B,) logits
        torch.Size([3])
    """

    def __init__(
        self, query_dim: int, dim: int = 128, hidden: int = 64, dropout: float = 0.1
    ) -> None:
        super().__init__()
        for name, value in [("query_dim", query_dim), ("dim", dim), ("hidden", hidden)]:
            if int(value) != value or value < 1:
                raise LocusInputError(
                    f"CorrectnessPredictor {name} must be a positive integer; got {value}"
                )
        if not 0.0 <= dropout < 1.0:
            raise LocusInputError(f"dropout must be in [0, 1); got {dropout}")
        self.query_dim = query_dim
        self.dim = dim
        self.standardize = QueryStandardizer(query_dim)  # identity until training sets it
        self.query_projection = nn.Linear(query_dim, dim)
        self.hidden = nn.Linear(3 * dim, hidden)  # input [z, u, z * u]
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(hidden, 1)

    def project_queries(self, phi: Tensor) -> Tensor:
        """u = Linear(standardised phi): (..., dq) -> (..., d)."""
        if phi.shape[-1] != self.query_dim:
            raise LocusInputError(
                f"query vectors must have dimension {self.query_dim} (the predictor's query_dim); "
                f"got {phi.shape[-1]}"
            )
        return self.query_projection(self.standardize(phi))

    def forward(self, z: Tensor, phi: Tensor) -> Tensor:
        """Paired logits.

        Args:
            z: LLM embeddings (B, d).
            phi: query vectors (B, dq); row i is scored against z[i].

        Returns:
            logits (B,).
        """
        if z.dim() != 2 or phi.dim() != 2 or z.shape[0] != phi.shape[0]:
            raise LocusInputError(
                f"z (B, d) and phi (B, dq) must be paired row by row; "
                f"got {tuple(z.shape)} and {tuple(phi.shape)}"
            )
        return self.forward_projected(z, self.project_queries(phi))

    def forward_projected(self, z: Tensor, u: Tensor) -> Tensor:
        """Paired logits from projected queries.

        Args:
            z: LLM embeddings (..., d), e.g. (B, 1, d) for B LLMs.
            u: projected queries (..., d), broadcastable with z, e.g. (B, T, d).

        Returns:
            logits of the broadcast shape without the last axis, e.g. (B, T).
        """
        if z.shape[-1] != self.dim or u.shape[-1] != self.dim:
            raise LocusInputError(
                f"z and u must end in dimension {self.dim}; got {tuple(z.shape)}, {tuple(u.shape)}"
            )
        d = self.dim
        weight = self.hidden.weight  # (h, 3d): columns z | u | z u
        # Split first layer: z W_z is computed once per LLM, not once per (LLM, query) pair.
        hidden = (
            F.linear(z, weight[:, :d], self.hidden.bias)
            + F.linear(u, weight[:, d : 2 * d])
            + F.linear(z * u, weight[:, 2 * d :])
        )  # (..., h)
        return self.output(self.dropout(F.relu(hidden))).squeeze(-1)  # (...)

    def score_matrix(self, z: Tensor, phi: Tensor, query_chunk: int = 256) -> Tensor:
        """Logits for every (query, LLM) pair, as batched GEMMs (no loop over LLMs).

        Args:
            z: LLM embeddings (n_llms, d).
            phi: query vectors (n_queries, dq).
            query_chunk: queries per block; keeps the (chunk, n_llms h) hidden block in cache.

        Returns:
            logits (n_queries, n_llms).
        """
        if z.dim() != 2 or z.shape[-1] != self.dim:
            raise LocusInputError(f"z must be (n_llms, {self.dim}); got {tuple(z.shape)}")
        if phi.dim() != 2:
            raise LocusInputError(f"phi must be (n_queries, dq); got {tuple(phi.shape)}")
        if query_chunk < 1:
            raise LocusInputError(f"query_chunk must be >= 1; got {query_chunk}")
        d = self.dim
        n_llms = z.shape[0]
        weight = self.hidden.weight  # (h, 3d): columns z | u | z u
        n_hidden = weight.shape[0]
        w_z, w_u, w_zu = weight[:, :d].T, weight[:, d : 2 * d].T, weight[:, 2 * d :].T  # (d, h)
        # Column block l of `stacked` is diag(z_l) W_zu + W_u, so u @ stacked gives
        # u W_u + (z_l u) W_zu for every LLM l at once; z_l W_z + b1 becomes a per-column bias.
        stacked = z.unsqueeze(-1) * w_zu.unsqueeze(0) + w_u.unsqueeze(0)  # (n_llms, d, h)
        stacked = stacked.permute(1, 0, 2).reshape(d, n_llms * n_hidden)  # (d, n_llms h)
        per_llm_bias = torch.addmm(self.hidden.bias, z, w_z).reshape(-1)  # (n_llms h,)
        w_out = self.output.weight.reshape(n_hidden, 1)  # (h, 1)
        u = self.project_queries(phi)  # (n_queries, d)
        logits = [z.new_zeros(0, n_llms)]
        for start in range(0, phi.shape[0], query_chunk):
            hidden = torch.addmm(per_llm_bias, u[start : start + query_chunk], stacked)
            hidden = self.dropout(hidden.relu_())  # (c, n_llms h)
            logits.append((hidden.view(-1, n_hidden) @ w_out).view(-1, n_llms))  # (c, n_llms)
        return torch.cat(logits, dim=0) + self.output.bias  # (n_queries, n_llms)
