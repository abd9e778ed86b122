"""LOCUS's predictor over a pool of LLM embeddings, as a `Router`: with torch or without.

`LogitRouter` is a router that gives logits of P(correct), which is what the stack of
`locus.routing.stacked` combines. `LocusRouter` scores with a trained `Locus` (torch);
`NumpyLocusRouter` scores the same predictor in numpy (`locus.artifact.numpy_predictor`), so
routing a query never imports torch. Both read their pool live: an LLM onboarded since the fit
is a candidate for the next call.

>>> router = LocusRouter(Locus.load("artifacts/default"))          # doctest: +SKIP
>>> router.route(query_vectors, top=3)[0].llm_id  # doctest: +SKIP
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from locus.calibration import evidence_quality_of, sigmoid
from locus.routing.router import Router

if TYPE_CHECKING:
    from locus.artifact.numpy_predictor import NumpyPredictor
    from locus.locus import Locus
    from locus.pool import LLMPool

__all__ = ["LocusRouter", "LogitRouter", "NumpyLocusRouter"]


class LogitRouter(Router):
    """A router whose P(correct) is the sigmoid of calibrated logits it can give."""

    @abstractmethod
    def predict_logits(self, query_vectors: NDArray[np.float32]) -> NDArray[Any]:
        """Calibrated logits of P(correct) (n_queries, n_llms) for query vectors (n, dq)."""

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        """P(correct) (n_queries, n_llms): the sigmoid of `predict_logits`."""
        return sigmoid(self.predict_logits(query_vectors)).astype(np.float32)


class LocusRouter(LogitRouter):
    """Routes with a trained `Locus` (torch): P(correct) from its predictor, for every LLM
    of its pool.

    Args:
        model: a fitted or loaded `Locus`.
    """

    def __init__(self, model: Locus) -> None:
        model._check_fitted()
        self.model = model

    @property
    def llm_ids(self) -> Sequence[str]:  # type: ignore[override]
        return self.model.llm_ids_

    def predict_logits(self, query_vectors: NDArray[np.float32]) -> NDArray[Any]:
        return self.model.predict_logits(np.asarray(query_vectors, dtype=np.float32))

    def predict_proba(self, query_vectors: NDArray[np.float32]) -> NDArray[np.float32]:
        return self.model.predict_proba(np.asarray(query_vectors, dtype=np.float32))

    def thin_logits(
        self,
        evidence: Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]],
        query_vectors: NDArray[np.float32],
    ) -> NDArray[Any]:
        """Calibrated logits (n_queries, m) of m LLMs, each embedded from one (query vectors,
        scores) of `evidence`, none of them added to the pool: what LOCUS would predict for
        LLMs onboarded from that evidence (`locus.routing.thin` fits on them)."""
        embeddings = self.model.embed_many(evidence)
        stats = [(float(np.mean(scores)), len(scores)) for _, scores in evidence]
        return self.model.logits_of_embeddings(
            embeddings, stats, np.asarray(query_vectors, np.float32)
        )

    def save(self, path: str | Path) -> Path:
        """The model's artifact folder (networks and the pool as it is now)."""
        return self.model.save(path)

    @classmethod
    def load(cls, path: str | Path) -> LocusRouter:
        """Rebuild from an artifact folder (inside a workspace: with the workspace's pool)."""
        from locus.locus import Locus

        return cls(Locus.load(path))


class NumpyLocusRouter(LogitRouter):
    """LOCUS's predictor in numpy over a pool (`locus.pool.LLMPool`), without torch: the
    same P(correct) as `LocusRouter` on the same artifact to 1e-5.

    Args:
        predictor: the artifact's predictor (`locus.artifact.read_for_routing`).
        pool: the LLM embeddings it scores, with each LLM's evidence mean.
    """

    def __init__(self, predictor: NumpyPredictor, pool: LLMPool) -> None:
        self.predictor, self.pool = predictor, pool

    @property
    def llm_ids(self) -> Sequence[str]:  # type: ignore[override]
        return self.pool.llm_ids

    def predict_logits(self, query_vectors: NDArray[np.float32]) -> NDArray[Any]:
        return self.predictor.predict_logits(
            self.pool.embeddings,
            np.asarray(query_vectors, dtype=np.float32),
            evidence_quality_of(self.pool.evidence_means, self.pool.llm_ids),
        )
