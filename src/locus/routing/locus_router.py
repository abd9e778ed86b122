"""`LocusRouter`: the LOCUS predictor over the pool's LLM embeddings, as a `Router`.

>>> router = LocusRouter(Locus.load("artifacts/default"))          # doctest: +SKIP
>>> router.route(query_vectors, top=3)[0].llm_id
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from locus.locus import Locus
from locus.routing.base import Router

__all__ = ["LocusRouter"]


class LocusRouter(Router):
    """Routes with a trained `Locus`: P(correct) from its predictor, for every LLM of its pool.

    The router reads the pool live: an LLM onboarded with `model.add_llm` is a candidate for
    the next call.

    Args:
        model: a fitted or loaded `Locus`.
    """

    def __init__(self, model: Locus) -> None:
        model._check_fitted()
        self.model = model

    @property
    def llm_ids(self) -> Sequence[str]:  # type: ignore[override]
        return self.model.llm_ids_

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        """P(correct) (n_queries, n_llms) for query vectors (n_queries, dq)."""
        return self.model.predict_proba(np.asarray(query_vectors, dtype=np.float32))

    def save(self, path: str | Path) -> Path:
        """The model's artifact folder (networks and the pool as it is now)."""
        return self.model.save(path)

    @classmethod
    def load(cls, path: str | Path) -> LocusRouter:
        """Rebuild from an artifact folder (inside a workspace: with the workspace's pool)."""
        return cls(Locus.load(path))
