"""The query vector service: the store's cache, then memory, then the encoder."""

from __future__ import annotations

import numpy as np
import pytest

from locus.data.query_identity import text_hash
from locus.errors import LocusInputError
from locus.text import HashingEncoder
from locus.text.query_vectors import QueryVectors


def test_stored_then_remembered_then_encoded() -> None:
    encoder = HashingEncoder(8)
    stored = {text_hash("known question"): np.ones(8, np.float32)}
    asked: list[list[str]] = []

    def lookup(name: str, hashes: list[str]) -> dict[str, np.ndarray]:
        asked.append(hashes)
        return {h: stored[h] for h in hashes if h in stored}

    vectors = QueryVectors(encoder.name, lookup, text_encoder=encoder, cache_size=10)
    first = vectors(["  known question ", "a new one", "a new one"])
    assert first.shape == (3, 8) and np.allclose(first[0], 1.0)
    assert vectors.encoded == 1  # the new text once, though asked twice
    again = vectors(["known question", "a new one"])
    np.testing.assert_array_equal(again, first[:2])
    assert len(asked) == 1  # both now come from memory: the store is not asked again
    assert vectors.cache_hits == 1 + 2  # the stored text first, then both from memory
    with pytest.raises(LocusInputError, match="query 0 is empty"):
        vectors([" "])
    with pytest.raises(LocusInputError, match="differs from the artifact's"):
        QueryVectors("another-encoder", None, text_encoder=encoder)(["x"])
