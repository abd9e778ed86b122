"""Embedding LLMs with a trained encoder: numpy evidence in, numpy LLM embeddings out.

All three functions run the encoder in eval mode under `torch.inference_mode`, add no noise and
restore the encoder's previous mode, so the same evidence always gives the same vector.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray
from torch import nn

from locus.errors import LocusInputError
from locus.nn.encoder import LLMEncoder

__all__ = ["embed", "embed_indexed", "embed_many", "evidence_chunks", "pad_rows"]


@contextmanager
def evaluating(*modules: nn.Module) -> Iterator[None]:
    """Put modules in eval mode for the block, then restore each one's previous mode."""
    previous = [module.training for module in modules]
    try:
        for module in modules:
            module.eval()
        yield
    finally:
        for module, mode in zip(modules, previous, strict=True):
            module.train(mode)


def _device(module: nn.Module) -> torch.device:
    return next(module.parameters()).device


def _check_scores(scores: NDArray[np.float32], where: str) -> None:
    if scores.size == 0:
        raise LocusInputError(f"{where}: an LLM needs at least one evidence score; got none")
    if not np.all(np.isfinite(scores)) or scores.min() < 0.0 or scores.max() > 1.0:
        raise LocusInputError(
            f"{where}: evidence scores must be finite and in [0, 1] (only evaluated queries are "
            f"evidence); got min {np.nanmin(scores)}, max {np.nanmax(scores)}, "
            f"{int(np.isnan(scores).sum())} NaN"
        )


def _check_evidence(
    encoder: LLMEncoder, phi: ArrayLike, scores: ArrayLike, where: str
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    phi_array = np.asarray(phi, dtype=np.float32)
    score_array = np.asarray(scores, dtype=np.float32)
    if phi_array.ndim != 2 or phi_array.shape[1] != encoder.query_dim:
        raise LocusInputError(
            f"{where}: query vectors must be (K, {encoder.query_dim}); got {phi_array.shape}"
        )
    if score_array.shape != (phi_array.shape[0],):
        raise LocusInputError(
            f"{where}: scores must be (K,) = ({phi_array.shape[0]},) to match the query vectors; "
            f"got {score_array.shape}"
        )
    _check_scores(score_array, where)
    if not np.all(np.isfinite(phi_array)):
        raise LocusInputError(f"{where}: query vectors contain NaN or inf")
    return phi_array, score_array


def pad_rows(rows: Sequence[NDArray[Any]]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
    """Right-pad 1-D or 2-D arrays with zeros: -> (n, longest, ...) values, (n, longest) mask."""
    width = max(len(row) for row in rows)
    values = np.zeros((len(rows), width, *rows[0].shape[1:]), dtype=rows[0].dtype)
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, row in enumerate(rows):
        values[i, : len(row)] = row
        mask[i, : len(row)] = True
    return values, mask


def _padded(
    rows: Sequence[NDArray[Any]], dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """`pad_rows` as tensors on `device`."""
    values, mask = pad_rows(rows)
    return (
        torch.from_numpy(values).to(device=device, dtype=dtype),
        torch.from_numpy(mask).to(device),
    )


def evidence_chunks(
    query_vectors: NDArray[np.float32], scores: NDArray[np.float32], max_evidence: int
) -> list[NDArray[np.intp]]:
    """Split K evidence pairs into ceil(K / max_evidence) chunks of near-equal size.

    Rows are dealt to chunks in the order of a hash of their query vector, so the split is
    deterministic, independent of the order the evidence came in, random-like (each chunk is a
    spread sample, not a run of similar queries), and the same for every LLM evaluated on the
    same queries: they are compared on the same chunks.
    """
    count = len(scores)
    n_chunks = max(1, math.ceil(count / max_evidence))
    if n_chunks == 1:
        return [np.arange(count)]
    keys = np.array(
        [
            int.from_bytes(
                hashlib.blake2b(query_vectors[i].tobytes(), digest_size=8).digest(),
                "little",
            )
            for i in range(count)
        ],
        dtype=np.uint64,
    )
    order = np.argsort(keys, kind="stable")
    return [np.sort(order[c::n_chunks]) for c in range(n_chunks)]


def _batches(lengths: Sequence[int], batch_size: int) -> Iterator[NDArray[np.intp]]:
    """Indices grouped by similar length (less padding), in a deterministic order."""
    if batch_size < 1:
        raise LocusInputError(f"batch_size must be >= 1; got {batch_size}")
    order = np.argsort(np.asarray(lengths), kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def embed(
    encoder: LLMEncoder,
    query_vectors: ArrayLike,
    scores: ArrayLike,
    *,
    max_evidence: int | None = None,
) -> NDArray[np.float32]:
    """Embed one LLM from its evidence.

    Args:
        encoder: a trained `LLMEncoder`.
        query_vectors: query vectors of the evaluated queries (K, dq).
        scores: the LLM's scores on them (K,), in [0, 1].
        max_evidence: most pairs the encoder reads in one set (see `embed_many`).

    Returns:
        the LLM embedding (d,), float32.

    Example:
        >>> encoder = LLMEncoder(query_dim=8)
        >>> embed(encoder, np.random.rand(20, 8), np.random.rand(20) > 0.5).shape
        (128,)
    """
    return embed_many(encoder, [(query_vectors, scores)], max_evidence=max_evidence)[0]


def embed_many(
    encoder: LLMEncoder,
    evidence: Sequence[tuple[ArrayLike, ArrayLike]],
    batch_size: int = 32,
    *,
    max_evidence: int | None = None,
) -> NDArray[np.float32]:
    """Embed several LLMs, each from its own evidence; evidence counts may differ.

    Args:
        encoder: a trained `LLMEncoder`.
        evidence: one (query_vectors (K_i, dq), scores (K_i,)) pair per LLM.
        batch_size: evidence sets per forward pass (padded and masked together).
        max_evidence: the most pairs the encoder reads in one set, normally the largest
            evidence size it was trained on. An LLM with more evidence is embedded from
            `evidence_chunks` of at most that size and its embedding is their mean weighted by
            chunk size: the encoder stays on the set sizes it knows, and more evidence lowers
            the variance of the estimate instead of moving it off its training distribution.
            None reads every pair in one set.

    Returns:
        LLM embeddings (n_llms, d), float32, in the order of `evidence`.
    """
    if max_evidence is not None and max_evidence < 1:
        raise LocusInputError(f"max_evidence must be >= 1 or None; got {max_evidence}")
    checked = [
        _check_evidence(encoder, phi, y, f"evidence[{i}]") for i, (phi, y) in enumerate(evidence)
    ]
    sets: list[tuple[NDArray[np.float32], NDArray[np.float32]]] = []
    owner: list[int] = []
    for i, (phi, y) in enumerate(checked):
        chunks = (
            [np.arange(len(y))] if max_evidence is None else evidence_chunks(phi, y, max_evidence)
        )
        for rows in chunks:
            sets.append((phi[rows], y[rows]))
            owner.append(i)
    per_set = np.zeros((len(sets), encoder.dim), dtype=np.float32)
    device = _device(encoder)
    with evaluating(encoder), torch.inference_mode():
        for batch in _batches([len(y) for _, y in sets], batch_size):
            phi_t, mask = _padded([sets[i][0] for i in batch], torch.float32, device)
            y_t, _ = _padded([sets[i][1] for i in batch], torch.float32, device)
            per_set[batch] = encoder(phi_t, y_t, mask).float().cpu().numpy()  # (b, d)
    if len(sets) == len(checked):
        return per_set
    weights = np.array([len(y) for _, y in sets], dtype=np.float64)
    owners = np.asarray(owner)
    out = np.zeros((len(checked), encoder.dim), dtype=np.float64)
    np.add.at(out, owners, per_set * weights[:, None])
    totals = np.bincount(owners, weights=weights, minlength=len(checked))
    return (out / totals[:, None]).astype(np.float32)


def embed_indexed(
    encoder: LLMEncoder,
    query_vectors: ArrayLike,
    evidence_query_idx: Sequence[ArrayLike],
    evidence_scores: Sequence[ArrayLike],
    batch_size: int = 32,
) -> NDArray[np.float32]:
    """Embed several LLMs whose evidence are rows of one query-vector table.

    Each distinct query is projected once per batch and shared by every LLM evaluated on it, which
    is cheaper than `embed_many` when LLMs share queries (e.g. anchors).

    Args:
        encoder: a trained `LLMEncoder`.
        query_vectors: the table (n_queries, dq).
        evidence_query_idx: per LLM, row indices (K_i,) into `query_vectors`.
        evidence_scores: per LLM, scores (K_i,) on those rows, in [0, 1].
        batch_size: LLMs per forward pass.

    Returns:
        LLM embeddings (n_llms, d), float32, in input order.
    """
    table = np.asarray(query_vectors, dtype=np.float32)
    if table.ndim != 2 or table.shape[1] != encoder.query_dim:
        raise LocusInputError(
            f"query_vectors must be (n_queries, {encoder.query_dim}); got {table.shape}"
        )
    if len(evidence_query_idx) != len(evidence_scores):
        raise LocusInputError(
            f"one index array per score array expected; got {len(evidence_query_idx)} index "
            f"arrays and {len(evidence_scores)} score arrays"
        )
    indices, scores = [], []
    for i, (rows, values) in enumerate(zip(evidence_query_idx, evidence_scores, strict=True)):
        index_array = np.asarray(rows)
        score_array = np.asarray(values, dtype=np.float32)
        if index_array.ndim != 1 or index_array.shape != score_array.shape:
            raise LocusInputError(
                f"LLM {i}: indices and scores must be 1-D of equal length; "
                f"got {index_array.shape} and {score_array.shape}"
            )
        if index_array.size and (
            not np.issubdtype(index_array.dtype, np.integer)
            or index_array.min() < 0
            or index_array.max() >= len(table)
        ):
            raise LocusInputError(
                f"LLM {i}: evidence indices must be integers in [0, {len(table)}); "
                f"got {index_array.dtype} in [{index_array.min()}, {index_array.max()}]"
            )
        _check_scores(score_array, f"LLM {i}")
        indices.append(index_array.astype(np.int64))
        scores.append(score_array)
    out = np.zeros((len(indices), encoder.dim), dtype=np.float32)
    device = _device(encoder)
    with evaluating(encoder), torch.inference_mode():
        for batch in _batches([len(s) for s in scores], batch_size):
            unique, inverse = np.unique(
                np.concatenate([indices[i] for i in batch]), return_inverse=True
            )
            splits = np.cumsum([len(indices[i]) for i in batch])[:-1]
            positions = np.split(inverse, splits)
            p, q = encoder.project_queries(torch.from_numpy(table[unique]).to(device))  # (u, d)
            gather, mask = _padded(positions, torch.long, device)  # (b, K)
            y, _ = _padded([scores[i] for i in batch], torch.float32, device)
            z = encoder.forward_projected(p[gather], q[gather], y, mask)  # (b, d)
            out[batch] = z.float().cpu().numpy()  # float: also under a bf16 autocast
    return out
