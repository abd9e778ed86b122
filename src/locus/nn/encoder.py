"""The LLM encoder: a set of (query vector, score) evidence pairs -> one LLM embedding.

Architecture (LOCUS, after the Set Transformer):

    token  = Linear([phi, y, phi * (2y - 1)])            # (B, K, d)   one per evidence pair
    X      = ISAB(ISAB(token))                           # (B, K, d)   2 induced-set blocks
    z      = Linear(PMA(X))                              # (B, d)      one learned seed

No positional encodings, so z is invariant to the order of the evidence; key-padding masks make it
invariant to padding, so one batch can hold LLMs with different evidence counts.

The token layer is affine in phi for a fixed score y:

    W [phi, y, phi (2y - 1)] + b = (phi (W_phi - W_x) + b) + y (w_y + 2 phi W_x) = P + y Q

so `project_queries` computes (P, Q) once per query and `forward_projected` forms tokens as
P + y Q. Training projects each query once per step and gathers, instead of running the
(2 dq + 1) x d product once per (query, LLM) pair.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from locus.errors import LocusInputError
from locus.nn.standardize import QueryStandardizer

__all__ = ["LLMEncoder"]


class _AttentionBlock(nn.Module):
    """Post-LN multihead attention block (MAB of the Set Transformer).

    H = LN(X + MHA(X, Y, Y));  out = LN(H + FF(H)),  FF = Linear(d, ff) - ReLU - Linear(ff, d).
    """

    def __init__(self, dim: int, heads: int, feed_forward: int) -> None:
        super().__init__()
        if dim % heads != 0:
            raise LocusInputError(f"dim must be divisible by heads; got dim={dim}, heads={heads}")
        self.heads = heads
        self.query = nn.Linear(dim, dim)
        self.key_value = nn.Linear(dim, 2 * dim)  # keys and values in one GEMM
        self.out = nn.Linear(dim, dim)
        self.norm_attention = nn.LayerNorm(dim)
        self.feed_forward = nn.Sequential(
            nn.Linear(dim, feed_forward), nn.ReLU(), nn.Linear(feed_forward, dim)
        )
        self.norm_feed_forward = nn.LayerNorm(dim)

    def forward(self, x: Tensor, y: Tensor, key_mask: Tensor | None = None) -> Tensor:
        """Attend from x to y.

        Args:
            x: queries (B, Nq, d), or (1, Nq, d) for learned points shared by the batch.
            y: keys and values (B, Nk, d).
            key_mask: (B, Nk) bool, True where y holds a real element; None = all real.

        Returns:
            (B, Nq, d).
        """
        batch, n_keys, dim = y.shape
        n_queries = x.shape[1]
        head_dim = dim // self.heads
        q = self.query(x).view(x.shape[0], n_queries, self.heads, head_dim).transpose(1, 2)
        q = q.expand(batch, -1, -1, -1)  # (B, h, Nq, dh)
        k, v = (
            self.key_value(y).view(batch, n_keys, 2, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        )  # each (B, h, Nk, dh)
        attn_mask = None if key_mask is None else key_mask[:, None, None, :]  # (B, 1, 1, Nk)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (B, h, Nq, dh)
        attended = attended.transpose(1, 2).reshape(batch, n_queries, dim)  # (B, Nq, d)
        h = self.norm_attention(x + self.out(attended))
        return self.norm_feed_forward(h + self.feed_forward(h))


class _InducedSetBlock(nn.Module):
    """ISAB: X -> MAB(X, MAB(I, X)) with m learned inducing points I; cost O(K m), not O(K^2)."""

    def __init__(self, dim: int, inducing: int, heads: int, feed_forward: int) -> None:
        super().__init__()
        self.inducing_points = nn.Parameter(torch.empty(1, inducing, dim))
        nn.init.xavier_uniform_(self.inducing_points)
        self.summarise = _AttentionBlock(dim, heads, feed_forward)
        self.broadcast = _AttentionBlock(dim, heads, feed_forward)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """x (B, K, d), mask (B, K) bool or None -> (B, K, d); padded rows hold junk."""
        summary = self.summarise(self.inducing_points, x, mask)  # (B, m, d)
        return self.broadcast(x, summary)  # (B, K, d)


class LLMEncoder(nn.Module):
    """Evidence set of one or more LLMs -> LLM embeddings.

    Args:
        query_dim: dimension dq of the query vectors.
        dim: token and embedding dimension d (128 in LOCUS).
        inducing: inducing points per ISAB layer (64).
        heads: attention heads (4).
        feed_forward: hidden width of the attention blocks' feed-forward (256).
        layers: number of ISAB layers (2).

    Example:
        >>> encoder = LLMEncoder(query_dim=32).eval()
        >>> phi = torch.randn(2, 50, 32)                 # (B, K, dq) query vectors
        >>> y = torch.randint(0, 2, (2, 50)).float()     # (B, K) scores
        >>> encoder(phi, y).shape                        # (B, d) LLM embeddings
        torch.Size([2, 128])
    """

    def __init__(
        self,
        query_dim: int,
        dim: int = 128,
        inducing: int = 64,
        heads: int = 4,
        feed_forward: int = 256,
        layers: int = 2,
    ) -> None:
        super().__init__()
        for name, value in [
            ("query_dim", query_dim),
            ("dim", dim),
            ("inducing", inducing),
            ("heads", heads),
            ("feed_forward", feed_forward),
            ("layers", layers),
        ]:
            if int(value) != value or value < 1:
                raise LocusInputError(f"LLMEncoder {name} must be a positive integer; got {value}")
        self.query_dim = query_dim
        self.dim = dim
        self.standardize = QueryStandardizer(query_dim)  # identity until training sets it
        # Stored as in the paper, Linear([phi, y, phi (2y - 1)]); used through the P + y Q form.
        self.token = nn.Linear(2 * query_dim + 1, dim)
        self.blocks = nn.ModuleList(
            [_InducedSetBlock(dim, inducing, heads, feed_forward) for _ in range(layers)]
        )
        self.seed = nn.Parameter(torch.empty(1, 1, dim))
        nn.init.xavier_uniform_(self.seed)
        self.pool = _AttentionBlock(dim, heads, feed_forward)
        self.head = nn.Linear(dim, dim)

    def project_queries(self, phi: Tensor) -> tuple[Tensor, Tensor]:
        """Per-query halves of the token layer.

        Args:
            phi: query vectors (..., dq).

        Returns:
            (P, Q), each (..., d), with token(phi, y) = P + y Q.
        """
        self._check_query_dim(phi)
        phi = self.standardize(phi)
        dq = self.query_dim
        weight = self.token.weight  # (d, 2 dq + 1): columns phi | y | phi (2y - 1)
        w_phi, w_score, w_cross = weight[:, :dq], weight[:, dq], weight[:, dq + 1 :]
        stacked_weight = torch.cat([w_phi - w_cross, 2.0 * w_cross], dim=0)  # (2d, dq)
        stacked_bias = torch.cat([self.token.bias, w_score], dim=0)  # (2d,)
        projected = F.linear(phi, stacked_weight, stacked_bias)  # (..., 2d)
        return projected[..., : self.dim], projected[..., self.dim :]

    def tokens_naive(self, phi: Tensor, y: Tensor) -> Tensor:
        """Reference token layer, Linear([phi, y, phi (2y - 1)]): (B, K, dq), (B, K) -> (B, K, d).

        Kept for tests and the benchmark ablation; `forward` uses the projected form.
        """
        phi = self.standardize(phi)
        y = y.unsqueeze(-1)  # (B, K, 1)
        return self.token(torch.cat([phi, y, phi * (2.0 * y - 1.0)], dim=-1))

    def forward(self, phi: Tensor, y: Tensor, mask: Tensor | None = None) -> Tensor:
        """Embed a batch of evidence sets.

        Args:
            phi: query vectors of the evidence (B, K, dq).
            y: scores (B, K) in [0, 1].
            mask: (B, K) bool, True = real evidence, False = padding; None = all real.

        Returns:
            LLM embeddings (B, d).
        """
        if phi.dim() != 3:
            raise LocusInputError(f"phi must be (B, K, dq); got shape {tuple(phi.shape)}")
        p, q = self.project_queries(phi)  # (B, K, d) each
        return self.forward_projected(p, q, y, mask)

    def forward_projected(
        self, p: Tensor, q: Tensor, y: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        """Embed evidence whose query vectors were already projected by `project_queries`.

        Args:
            p, q: (B, K, d) each, gathered from `project_queries`.
            y: scores (B, K).
            mask: (B, K) bool, True = real evidence; None = all real. Every row needs one True.

        Returns:
            LLM embeddings (B, d).
        """
        if p.dim() != 3 or p.shape != q.shape or p.shape[-1] != self.dim:
            raise LocusInputError(
                f"P and Q must both be (B, K, {self.dim}); got {tuple(p.shape)}, {tuple(q.shape)}"
            )
        if y.shape != p.shape[:2]:
            raise LocusInputError(f"y must be (B, K) = {tuple(p.shape[:2])}; got {tuple(y.shape)}")
        if mask is not None:
            if mask.shape != y.shape or mask.dtype != torch.bool:
                raise LocusInputError(
                    f"mask must be a bool tensor of shape {tuple(y.shape)}; "
                    f"got {mask.dtype} {tuple(mask.shape)}"
                )
            if not bool(mask.any(dim=1).all()):
                raise LocusInputError("every evidence set needs at least one real (unmasked) pair")
        tokens = p + y.unsqueeze(-1) * q  # (B, K, d)
        if mask is not None:
            # Padded rows never reach a real output, but junk there (NaN, inf) would leak via 0 * x.
            tokens = tokens.masked_fill(~mask.unsqueeze(-1), 0.0)
        x = tokens
        for block in self.blocks:
            x = block(x, mask)  # (B, K, d)
        pooled = self.pool(self.seed, x, mask)  # (B, 1, d)
        return self.head(pooled.squeeze(1))  # (B, d)

    def _check_query_dim(self, phi: Tensor) -> None:
        if phi.shape[-1] != self.query_dim:
            raise LocusInputError(
                f"query vectors must have dimension {self.query_dim} (the encoder's query_dim); "
                f"got {phi.shape[-1]}. Use the same text encoder as at training time."
            )
