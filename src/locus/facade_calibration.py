"""`LogitCalibration`: the part of the `Locus` facade that calibrates the predictor's logits.

The predictor's raw logits are mapped by a `Calibration` (`locus.calibration`) fitted on
held-out cells: scales and a shift, per query and per LLM, the LLM's part read from its
*quality* (its mean raw logit over reference queries kept from training) and its *evidence
quality* (the smoothed logit of its mean score on the evidence it was embedded from). `Locus`
inherits these methods; the attributes and methods it provides are named below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact.manifest import Manifest
from locus.calibration import Calibration, evidence_quality, evidence_quality_of, fit_calibration
from locus.errors import LocusNotFittedError
from locus.pool import LLMPool

__all__ = ["LogitCalibration"]


class LogitCalibration:
    """Calibration of a predictor's logits, for a class that provides the pool, the manifest,
    the reference queries, `query_vectors`, `predict_logits` and `_raw_logits` (`Locus`)."""

    pool_: LLMPool
    manifest: Manifest
    reference_queries_: NDArray[np.float32] | None = None

    def query_vectors(self, queries: Any) -> np.ndarray:  # pragma: no cover - Locus's
        raise NotImplementedError

    def predict_logits(
        self, queries: Any, llm_ids: Sequence[str] | None = None, *, calibrated: bool = True
    ) -> np.ndarray:  # pragma: no cover - Locus's
        raise NotImplementedError

    def _raw_logits(
        self, embeddings: NDArray[np.float32], vectors: NDArray[Any]
    ) -> np.ndarray:  # pragma: no cover - Locus's
        raise NotImplementedError

    def _reference_queries(self) -> NDArray[np.float32]:
        if self.reference_queries_ is None:
            raise LocusNotFittedError(
                "this Locus keeps no reference queries; call set_reference_queries(vectors) "
                "with training query vectors"
            )
        return self.reference_queries_

    def logits_of_embeddings(
        self,
        embeddings: NDArray[np.float32],
        evidence: Sequence[tuple[float, int]],
        queries: NDArray[np.float32],
    ) -> np.ndarray:
        """Calibrated logits (n_queries, m) for m LLM `embeddings` (m, d) that are not in the
        pool, each with its evidence's (mean score, count), as `predict_logits` gives them for
        an LLM of the pool: what an LLM embedded from that evidence would be predicted
        (`locus.routing.thin` fits on such LLMs). Nothing is added to the pool."""
        z = np.asarray(embeddings, dtype=np.float32).reshape(len(evidence), -1)
        logits = self._raw_logits(z, self.query_vectors(queries))
        calibration = self.calibration_
        if calibration.quality_scale is None:
            return calibration.apply(logits)
        quality = self._raw_logits(z, self._reference_queries()).mean(axis=0)
        means, counts = (np.array(side, np.float64) for side in zip(*evidence, strict=True))
        return calibration.apply(logits, quality, evidence_quality(means, counts))

    def evidence_quality(self, llm_ids: Sequence[str] | None = None) -> np.ndarray:
        """Each LLM's evidence quality (n_llms,): the smoothed logit of its mean score on the
        evidence its embedding was computed from (its anchors at fit time, the scores it was
        onboarded from since; `locus.calibration.evidence_quality`); NaN where the pool does
        not know it, which the calibration reads through `quality` instead."""
        ids = self.pool_.llm_ids if llm_ids is None else llm_ids
        return evidence_quality_of(self.pool_.evidence_means, ids)

    def quality(self, llm_ids: Sequence[str] | None = None) -> np.ndarray:
        """Each LLM's quality (n_llms,): its mean raw logit over the reference queries (a set
        of training queries kept in the artifact), what calibration scales apart from the
        per-query part.

        Raises:
            LocusNotFittedError: a Locus without reference queries (an artifact fitted before
                they were kept: call `set_reference_queries`).
        """
        logits = self.predict_logits(self._reference_queries(), llm_ids, calibrated=False)
        return np.asarray(logits.mean(axis=0))

    def set_reference_queries(self, query_vectors: NDArray[np.float32]) -> None:
        """The queries (R, dq) over which `quality` averages; `fit` keeps up to
        `REFERENCE_QUERIES` of its training queries. Calibrate again after changing them."""
        self.reference_queries_ = self.query_vectors(np.asarray(query_vectors, np.float32))

    @property
    def calibration_(self) -> Calibration:
        """The map from the predictor's logits to calibrated ones (identity if none)."""
        return self.manifest.calibration or Calibration()

    def calibrate(
        self,
        query_vectors: NDArray[np.float32],
        scores: NDArray[np.float32],
        llm_ids: Sequence[str] | None = None,
    ) -> Calibration:
        """Fit `calibration_` on held-out cells: query vectors (n, dq), their scores (n,
        n_llms) for `llm_ids` (default: the pool's order; NaN: not scored). Returns it; it is
        saved with the artifact. `fit` calls this on the validation queries."""
        logits = self.predict_logits(query_vectors, llm_ids, calibrated=False)
        quality = None if self.reference_queries_ is None else self.quality(llm_ids)
        evidence = None
        if quality is not None and self.manifest.evidence_means:
            evidence = self.evidence_quality(llm_ids)
        calibration = fit_calibration(
            logits, np.asarray(scores, dtype=np.float64), quality, evidence
        )
        self.manifest = self.manifest.with_(calibration=calibration)
        return calibration
