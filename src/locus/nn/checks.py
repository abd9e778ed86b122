"""What training checks: its inputs at the boundary, and validation after each evaluation.

Kept apart from the training loop (`training.py`) so the loop reads as the algorithm.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.offpolicy import selection_hit

__all__ = ["better", "check_inputs", "validation_metrics"]


def check_inputs(
    query_vectors: NDArray[np.float32],
    scores: NDArray[np.float32],
    train_query_idx: NDArray[np.integer[Any]],
    val_query_idx: NDArray[np.integer[Any]],
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.int64], NDArray[np.int64]]:
    vectors = np.ascontiguousarray(query_vectors, dtype=np.float32)
    table = np.asarray(scores, dtype=np.float32)
    if vectors.ndim != 2 or not np.all(np.isfinite(vectors)):
        raise LocusInputError(
            f"query_vectors must be a finite (n_queries, dq) array; got shape {vectors.shape}"
        )
    if table.ndim != 2 or table.shape[0] != vectors.shape[0]:
        raise LocusInputError(
            f"scores must be (n_queries, n_llms) with n_queries = {vectors.shape[0]} (rows of "
            f"query_vectors); got shape {table.shape}"
        )
    observed = table[~np.isnan(table)]
    if observed.size and (observed.min() < 0.0 or observed.max() > 1.0):
        raise LocusInputError(
            f"scores must lie in [0, 1] (NaN = not evaluated); found values in "
            f"[{observed.min()}, {observed.max()}]"
        )
    indices = []
    for name, raw in [("train_query_idx", train_query_idx), ("val_query_idx", val_query_idx)]:
        array = np.asarray(raw)
        if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
            raise LocusInputError(
                f"{name} must be a 1-D integer array; got {array.dtype} {array.shape}"
            )
        if array.size and (array.min() < 0 or array.max() >= len(vectors)):
            raise LocusInputError(
                f"{name} must index rows in [0, {len(vectors)}); got [{array.min()}, {array.max()}]"
            )
        if len(np.unique(array)) != len(array):
            raise LocusInputError(f"{name} contains duplicate rows")
        indices.append(array.astype(np.int64))
    train_idx, val_idx = indices
    if train_idx.size == 0:
        raise LocusInputError("train_query_idx is empty; training needs training queries")
    overlap = np.intersect1d(train_idx, val_idx)
    if overlap.size:
        raise LocusInputError(
            f"train_query_idx and val_query_idx share {overlap.size} rows (e.g. {overlap[:5]}); "
            "validation queries must be held out of training"
        )
    unobserved = np.flatnonzero(np.isnan(table[train_idx]).all(axis=0))
    if unobserved.size:
        raise LocusInputError(
            f"LLM columns {unobserved[:10].tolist()} have no score on any training query; drop "
            "them from training (embed them later from their scores) or add training queries"
        )
    return vectors, table, train_idx, val_idx


def validation_metrics(
    logits: NDArray[np.float32], val_scores: NDArray[np.float32]
) -> tuple[float, float, float]:
    """(routing accuracy, correctness accuracy, log-loss) of (n_val, n_llms) logits.

    Routing sends each query to the evaluated LLM with the highest logit and counts that LLM's
    score (`locus.offpolicy.selection_hit`: on sparse evidence, an off-policy estimate; the
    logit ranks LLMs as P(correct) does); queries no LLM was evaluated on are skipped.
    Log-loss is the mean binary cross-entropy over evaluated cells (scores in between 0 and 1
    are soft targets).
    """
    observed = ~np.isnan(val_scores)
    if not observed.any():
        return math.nan, math.nan, math.nan
    routing = selection_hit(logits, val_scores)
    correctness = float(((logits > 0) == (val_scores >= 0.5))[observed].mean())
    cell_logits = torch.from_numpy(np.ascontiguousarray(logits[observed], dtype=np.float32))
    cell_targets = torch.from_numpy(np.ascontiguousarray(val_scores[observed], dtype=np.float32))
    log_loss = float(F.binary_cross_entropy_with_logits(cell_logits, cell_targets))
    return routing, correctness, log_loss


def better(candidate: tuple[float, float], best: tuple[float, float]) -> bool:
    """Higher routing accuracy wins; equal routing accuracy goes to the lower log-loss."""
    return candidate[0] > best[0] or (candidate[0] == best[0] and candidate[1] < best[1])
