"""LLMPool: embeddings and the evidence means the calibration reads, through a workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from locus.pool import LLMPool
from locus.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "ws") as opened:
        opened.upsert_llm_metadata([(llm, {}) for llm in ("a", "b", "c")])
        yield opened


def test_evidence_means_are_kept_with_the_embeddings(store: Store) -> None:
    snapshot = LLMPool(["a", "b"], np.eye(2, dtype=np.float32), [10, 20],
                       evidence_means={"a": (0.4, 10), "b": (0.9, 20)})  # fmt: skip
    pool = LLMPool.from_store(store, "art", snapshot)
    assert pool.evidence_means == {"a": (0.4, 10), "b": (0.9, 20)}  # from the snapshot
    pool.bind(store, "art")
    pool.upsert("c", np.ones(2, np.float32), 5, 0.6)  # onboarded with its mean
    pool.upsert("a", np.zeros(2, np.float32), 30)  # re-embedded without one: the old one goes
    other = LLMPool.from_store(store, "art", snapshot)  # another process
    assert other.evidence_means == {"b": (0.9, 20), "c": (0.6, 5)}
    assert store.evidence_means("art") == {"b": (0.9, 20), "c": (0.6, 5)}
    other.replace_all(["b"], np.eye(2, dtype=np.float32)[:1], [20])  # a new fit's pool
    assert store.evidence_means("art") == {"b": (0.9, 20)}
    assert LLMPool.from_store(store, "art").evidence_means == {"b": (0.9, 20)}


def test_a_failed_write_leaves_the_means_as_they_were(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = LLMPool(["a"], np.ones((1, 2), np.float32), [3], evidence_means={"a": (0.5, 3)})
    pool.bind(store, "art")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(store, "replace_embeddings", broken)
    with pytest.raises(RuntimeError):
        pool.replace_all(["a", "b"], np.ones((2, 2), np.float32), [3, 4], {"b": (0.1, 4)})
    assert pool.llm_ids == ["a"] and pool.evidence_means == {"a": (0.5, 3)}
