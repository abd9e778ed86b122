"""Mixing two routers' P(correct), and choosing the mix on validation."""

from __future__ import annotations

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.routing import Router
from locus.routing.ensemble import EnsembleRouter, choose_weight, mix


class _Table(Router):
    def __init__(self, llm_ids: list[str], row: list[float]) -> None:
        self.llm_ids, self.row = llm_ids, row

    def predict_proba(self, query_vectors: np.ndarray) -> np.ndarray:
        return np.tile(self.row, (len(query_vectors), 1)).astype(np.float32)


def test_an_ensemble_mixes_by_llm_whatever_the_column_order() -> None:
    first = _Table(["a", "b", "c"], [0.9, 0.5, 0.1])
    second = _Table(["c", "a", "b"], [0.3, 0.1, 0.7])  # a 0.1, b 0.7, c 0.3
    both = EnsembleRouter(first, second, weight=0.25)
    np.testing.assert_allclose(
        both.predict_proba(np.zeros((2, 4)))[0], [0.3, 0.65, 0.25], atol=1e-6
    )
    assert list(both.llm_ids) == ["a", "b", "c"]
    assert both.route(np.zeros((1, 4)))[0].llm_id == "b"
    with pytest.raises(LocusInputError, match="same LLMs"):
        EnsembleRouter(first, _Table(["a", "b", "d"], [0.1, 0.2, 0.3]), 0.5)
    with pytest.raises(LocusInputError, match=r"in \[0, 1\]"):
        EnsembleRouter(first, second, 1.5)


def test_the_weight_goes_to_the_better_calibrated_router() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, (3000, 4))
    truth = (rng.random(p.shape) < p).astype(np.float64)
    informed, noise = p, rng.uniform(0.05, 0.95, p.shape)
    assert choose_weight(informed, noise, truth) >= 0.8
    assert choose_weight(noise, informed, truth) <= 0.2
    # two halves of the truth, each knowing a different part: the mix beats both
    half = np.where(rng.random(p.shape) < 0.5, p, 0.5)
    other = np.where(half == 0.5, p, 0.5)
    weight = choose_weight(half, other, truth)
    assert 0.3 <= weight <= 0.7
    np.testing.assert_allclose(mix(half, other, 0.5), (half + other) / 2)
    with pytest.raises(LocusInputError, match="differ"):
        choose_weight(p, p[:, :2], truth)
    with pytest.raises(LocusInputError, match="no scored cell"):
        choose_weight(p, p, np.full(p.shape, np.nan))


def test_a_damaged_ensemble_folder_is_a_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from locus.errors import LocusArtifactError
    from locus.routing import load_router

    folder = tmp_path / "ens"
    folder.mkdir()
    (folder / "ensemble.json").write_text('{"format": "locus-ensemble/1"}')
    with pytest.raises(LocusArtifactError, match="not a saved ensemble"):
        load_router(folder)
    (folder / "ensemble.json").write_text('{"format": "other", "weight": 0.5}')
    with pytest.raises(LocusArtifactError, match="expected 'locus-ensemble/1'"):
        load_router(folder)
