"""embed / embed_many / embed_indexed: deterministic, order- and padding-invariant numpy API."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.nn import LLMEncoder, embed, embed_indexed, embed_many

QUERY_DIM = 16


@pytest.fixture
def encoder() -> LLMEncoder:
    torch.manual_seed(0)
    return LLMEncoder(QUERY_DIM)  # left in train mode: embedding must switch to eval itself


@pytest.fixture
def table() -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(200, QUERY_DIM)).astype(np.float32)  # (n_queries, dq)
    scores = (rng.random((200, 5)) < 0.5).astype(np.float32)  # (n_queries, n_llms)
    return vectors, scores


def test_same_evidence_gives_the_same_vector(encoder: LLMEncoder, table: tuple) -> None:
    vectors, scores = table
    first = embed(encoder, vectors[:64], scores[:64, 0])
    second = embed(encoder, vectors[:64].copy(), scores[:64, 0].copy())
    assert first.shape == (128,) and first.dtype == np.float32
    np.testing.assert_array_equal(first, second)
    assert encoder.training  # the caller's mode is restored


def test_embedding_ignores_evidence_order(encoder: LLMEncoder, table: tuple) -> None:
    vectors, scores = table
    order = np.random.default_rng(3).permutation(64)
    original = embed(encoder, vectors[:64], scores[:64, 0])
    shuffled = embed(encoder, vectors[:64][order], scores[:64, 0][order])
    assert np.abs(original - shuffled).max() < 1e-6


def test_embed_many_pads_without_changing_results(encoder: LLMEncoder, table: tuple) -> None:
    vectors, scores = table
    sizes = [10, 64, 33, 150, 1]
    evidence = [(vectors[:k], scores[:k, i]) for i, k in enumerate(sizes)]
    together = embed_many(encoder, evidence, batch_size=3)
    alone = np.stack([embed(encoder, phi, y) for phi, y in evidence])
    assert together.shape == (5, 128)
    assert np.abs(together - alone).max() < 1e-5


def test_embed_indexed_matches_embed_many(encoder: LLMEncoder, table: tuple) -> None:
    vectors, scores = table
    rng = np.random.default_rng(1)
    rows = [np.sort(rng.choice(200, size=k, replace=False)) for k in (20, 80, 80, 5)]
    values = [scores[r, i] for i, r in enumerate(rows)]
    indexed = embed_indexed(encoder, vectors, rows, values, batch_size=2)
    direct = embed_many(encoder, [(vectors[r], v) for r, v in zip(rows, values, strict=True)])
    assert np.abs(indexed - direct).max() < 1e-5


def test_rejects_bad_evidence(encoder: LLMEncoder, table: tuple) -> None:
    vectors, scores = table
    with pytest.raises(LocusInputError, match="at least one"):
        embed(encoder, vectors[:0], scores[:0, 0])
    with pytest.raises(LocusInputError, match=r"\[0, 1\]"):
        embed(encoder, vectors[:3], np.array([0.0, np.nan, 1.0]))
    with pytest.raises(LocusInputError, match="must be \\(K, 16\\)"):
        embed(encoder, vectors[:3, :8], scores[:3, 0])
    with pytest.raises(LocusInputError, match="match"):
        embed(encoder, vectors[:3], scores[:4, 0])
    with pytest.raises(LocusInputError, match="indices must be integers"):
        embed_indexed(encoder, vectors, [np.array([0, 500])], [np.array([1.0, 0.0])])
