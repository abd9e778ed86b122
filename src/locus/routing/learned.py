"""Learned baseline routers: EmbedLLM-style matrix factorisation (`MFRouter`) and IRT-style
(`IRTRouter`). Fitting trains in torch (`locus.nn.factor_models`); predicting and onboarding run in
numpy, so a saved baseline routes without torch.

Onboarding a new LLM fits only its own vector, everything else frozen: both baselines are linear
in the LLM's parameters given the query, so that is a ridge-regularised logistic regression on
its k scores (Newton's method, `locus.calibration.fit_logistic`), pulled towards the mean of
the known LLMs' vectors.

    >>> router = MFRouter().fit(train, val)                          # doctest: +SKIP
    >>> router.add_llm("new-llm", vectors[:128], scores[:128])       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.calibration import fit_logistic
from locus.routing.baselines import BaselineRouter, _check_vectors
from locus.routing.evidence import Evidence

__all__ = ["IRTRouter", "MFRouter"]


def _sigmoid(x: NDArray[np.floating[Any]]) -> NDArray[np.float32]:
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)


def _fit_llm_vector(
    features: NDArray[np.float64],
    offset: NDArray[np.float64],
    targets: NDArray[np.float64],
    centre: NDArray[np.float64],
    strength: float,
) -> NDArray[np.float32]:
    """argmin_v sum BCE(sigmoid(features v + offset), targets) + strength/2 |v - centre|^2."""
    found = fit_logistic(features, targets, offset=offset, prior=centre, strength=strength)
    return found.astype(np.float32)


class _LearnedRouter(BaselineRouter):
    """Shared fit / save plumbing of MF and IRT."""

    def __init__(self, config: Any = None, onboarding_strength: float = 1.0) -> None:
        self.config = config
        self.onboarding_strength = onboarding_strength

    def _train(self, train: Evidence, val: Evidence | None) -> Any:
        from locus.nn.factor_models import train_baseline

        return train_baseline(
            self.kind,
            train.vectors,
            train.scores,
            None if val is None else val.vectors,
            None if val is None else val.scores,
            self._config(),
        )

    def _config(self) -> Any:
        """The training settings as a `LearnedBaselineConfig` (a loaded router holds a dict)."""
        from locus.nn.factor_models import LearnedBaselineConfig

        if self.config is None:
            self.config = LearnedBaselineConfig()
        elif isinstance(self.config, dict):
            self.config = LearnedBaselineConfig(**self.config)
        return self.config

    def fit(self, train: Evidence, val: Evidence | None = None) -> _LearnedRouter:
        trained = self._train(train, val)
        self.llm_ids = list(train.llm_ids)
        self.arrays_ = trained.arrays
        self.history_ = trained.history
        self.best_epoch_ = trained.best_epoch
        self.fit_seconds_ = trained.seconds
        return self

    def _settings(self) -> dict[str, Any]:
        config = self.config.to_dict() if hasattr(self.config, "to_dict") else self.config
        return {
            "config": config,
            "onboarding_strength": self.onboarding_strength,
            "best_epoch": self.best_epoch_,
            "history": self.history_,
        }

    def _arrays(self) -> dict[str, NDArray[Any]]:
        return self.arrays_

    def _restore(self, settings: dict[str, Any], arrays: dict[str, NDArray[Any]]) -> None:
        self.config = settings["config"]
        self.onboarding_strength = float(settings["onboarding_strength"])
        self.best_epoch_ = int(settings["best_epoch"])
        self.history_ = list(settings["history"])
        self.arrays_ = dict(arrays)

    _per_llm: str  # the array with one row per LLM (logit = features @ row + offset)

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        return _sigmoid(self.logits_of(query_vectors, self.arrays_[self._per_llm]))

    def add_llm(self, llm_id: str, vectors: NDArray[np.float32], scores: Sequence[float]) -> None:
        new = self._new_llm(llm_id, vectors, scores)
        vector = self.onboarded_vector(new.vectors, new.scores[:, 0])
        self.arrays_[self._per_llm] = np.vstack([self.arrays_[self._per_llm], vector[None, :]])
        self.llm_ids.append(llm_id)

    def onboarded_vector(
        self, vectors: NDArray[np.float32], scores: NDArray[np.floating[Any]]
    ) -> NDArray[np.float32]:
        """The parameters (p,) of an LLM onboarded from its `scores` (n,) on queries of
        `vectors` (n, dq) (NaN: not scored), as `add_llm` fits them, without adding it."""
        self._check_fitted()
        values = np.asarray(scores, np.float64).reshape(-1)
        kept = ~np.isnan(values)
        features, offset = self._linear_in_llm(np.asarray(vectors, np.float32)[kept])
        return _fit_llm_vector(
            features.astype(np.float64),
            offset.astype(np.float64),
            values[kept],
            self.arrays_[self._per_llm].astype(np.float64).mean(axis=0),
            self.onboarding_strength,
        )

    def logits_of(
        self, query_vectors: NDArray[np.float32], llm_vectors: NDArray[np.floating[Any]]
    ) -> NDArray[np.float64]:
        """(n_queries, m) the logits of LLMs of parameters `llm_vectors` (m, p)
        (`onboarded_vector`'s) on queries of `query_vectors` (n_queries, dq)."""
        self._check_fitted()
        features, offset = self._linear_in_llm(np.asarray(query_vectors, np.float32))
        rows = np.asarray(llm_vectors, np.float64).reshape(-1, features.shape[1])
        return np.asarray(features, np.float64) @ rows.T + np.asarray(offset, np.float64)[:, None]

    def _linear_in_llm(
        self, vectors: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """(features (n, p), offset (n,)) with logit = features @ llm_vector + offset."""
        raise NotImplementedError


class MFRouter(_LearnedRouter):
    """EmbedLLM-style matrix factorisation: a learned vector P_m per LLM, a linear projection of
    the query vector, their elementwise product, a linear head.

    Args:
        config: `locus.nn.factor_models.LearnedBaselineConfig` (default: EmbedLLM's settings).
        onboarding_strength: L2 pull of a new LLM's vector towards the known LLMs' mean.
    """

    kind = "mf"
    _per_llm = "llm_vectors"

    def _linear_in_llm(
        self, vectors: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        a = self.arrays_
        vectors = _check_vectors(vectors, a["project_weight"].shape[1], "MF router")
        projected = vectors @ a["project_weight"].T + a["project_bias"]  # (n, d)
        features = projected * a["head_weight"]
        return features, np.full(len(vectors), a["head_bias"][0], dtype=np.float32)


class IRTRouter(_LearnedRouter):
    """IRT-style: P(correct) = sigmoid(a(q) . theta_m - b(q)); a(q) (discrimination, 32-d) and
    b(q) (difficulty) from a one-hidden-layer network over the query vector, a learned ability
    theta_m per LLM.

    Args:
        config: `locus.nn.factor_models.LearnedBaselineConfig`.
        onboarding_strength: L2 pull of a new LLM's ability towards the known LLMs' mean.
    """

    kind = "irt"
    _per_llm = "ability"

    def _linear_in_llm(
        self, vectors: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        a = self.arrays_
        vectors = _check_vectors(vectors, a["hidden_weight"].shape[1], "IRT router")
        hidden = np.maximum(vectors @ a["hidden_weight"].T + a["hidden_bias"], 0.0)
        discrimination = hidden @ a["discrimination_weight"].T + a["discrimination_bias"]
        difficulty = hidden @ a["difficulty_weight"] + a["difficulty_bias"][0]
        return discrimination, -difficulty
