"""Training objectives beside the per-cell BCE of `locus.nn.training`."""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.typing import NDArray

__all__ = ["listwise_loss"]


def listwise_loss(
    ranked: list[tuple[NDArray[np.intp], torch.Tensor]],
    target_positions: list[NDArray[np.intp]],
    target_scores: list[NDArray[np.float32]],
    n_rows: int,
    device: torch.device,
) -> torch.Tensor:
    """Listwise softmax cross-entropy across LLMs, per target query that several LLMs share.

    Args:
        ranked: per micro-batch, (its LLMs as indices into the step's batch, logits (g, T)).
        target_positions, target_scores: per LLM of the batch, its targets as rows of the step's
            distinct queries (T_i,) and its scores on them (T_i,).
        n_rows: number of distinct queries in the step.

    Returns:
        the mean over informative queries (two or more LLMs, not all scoring the same) of
        -sum_j p_j log softmax(logits)_j, with p the LLMs' scores on the query normalised to
        sum 1; zero when no query is informative.
    """
    n_batch = len(target_positions)
    llm_index, query_index, cell_scores, cell_logits = [], [], [], []
    for group, logits in ranked:
        for row, llm in enumerate(group):
            count = len(target_positions[llm])
            llm_index.append(np.full(count, llm))
            query_index.append(target_positions[llm])
            cell_scores.append(target_scores[llm])
            cell_logits.append(logits[row, :count])
    llms = torch.from_numpy(np.concatenate(llm_index)).to(device)
    queries = torch.from_numpy(np.concatenate(query_index)).to(device)
    scores = torch.from_numpy(np.concatenate(cell_scores).astype(np.float32)).to(device)
    observed = torch.zeros((n_batch, n_rows), dtype=torch.bool, device=device)
    observed[llms, queries] = True
    dense_logits = torch.full((n_batch, n_rows), -math.inf, device=device)
    dense_logits = dense_logits.index_put((llms, queries), torch.cat(cell_logits))
    dense_scores = torch.zeros((n_batch, n_rows), device=device)
    dense_scores[llms, queries] = scores
    high = dense_scores.masked_fill(~observed, -math.inf).amax(dim=0)
    low = dense_scores.masked_fill(~observed, math.inf).amin(dim=0)
    informative = (observed.sum(dim=0) >= 2) & (high > low)
    if not bool(informative.any()):
        return torch.zeros((), device=device)
    seen = observed[:, informative]
    target = dense_scores[:, informative] * seen
    target = target / target.sum(dim=0, keepdim=True)
    log_p = torch.log_softmax(dense_logits[:, informative], dim=0)
    return -(torch.where(seen, target * log_p, 0.0)).sum(dim=0).mean()
