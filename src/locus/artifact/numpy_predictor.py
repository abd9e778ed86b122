"""Routing without torch: an artifact's predictor and fit-time pool, read into numpy.

Routing a query needs its vector, the pool's LLM embeddings and the correctness predictor; it
never needs the LLM encoder. `read_for_routing` reads `config.json` and the predictor's
tensors (`safetensors.numpy`, no torch import) and `NumpyPredictor.score_matrix` is the same
computation as `CorrectnessPredictor.score_matrix` (eval mode) in numpy:

    u       = (phi - shift) / scale @ W_proj.T + b_proj              # (n_q, d)
    hidden  = relu(z W_z + u W_u + (z * u) W_zu + b1)                # per (query, LLM)
    logit   = hidden @ w_out + b_out

with the per-LLM rows of W_zu folded into one (d, n_llms h) matrix, so every (query, LLM) pair
is one GEMM. Probabilities match the torch path to 1e-5 (tests/test_inference.py); cold
routing skips the ~1 s torch import and the encoder's weights.

    >>> routing = read_for_routing("artifacts/default")              # doctest: +SKIP
    >>> routing.predictor.predict_proba(  # doctest: +SKIP
    ...     routing.llm_embeddings, query_vectors
    ... ).shape
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact.layout import (
    CONFIG_FILE,
    REFERENCE_QUERIES,
    WEIGHTS_FILE,
    check_reference_queries,
    read_artifact_config,
    read_pool_header,
    read_weights,
)
from locus.artifact.manifest import Manifest
from locus.calibration import Calibration, sigmoid
from locus.errors import LocusArtifactError, LocusInputError

__all__ = ["NumpyPredictor", "RoutingArtifact", "read_for_routing"]

_PREDICTOR_KEYS = (
    "standardize.shift",
    "standardize.scale",
    "query_projection.weight",
    "query_projection.bias",
    "hidden.weight",
    "hidden.bias",
    "output.weight",
    "output.bias",
)


class NumpyPredictor:
    """The correctness predictor's eval-mode forward pass in numpy (float32).

    Args:
        tensors: the predictor's state (`CorrectnessPredictor.state_dict()` keys, numpy).
        calibration: the artifact's map of logits (`locus.calibration`; default identity).
        reference_queries: (R, dq) vectors over which an LLM's quality is its mean logit (needed
            by a calibration with `quality_scale`).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> tensors = {"standardize.shift": np.zeros(8), "standardize.scale": np.ones(1),
        ...            "query_projection.weight": rng.normal(size=(4, 8)),
        ...            "query_projection.bias": np.zeros(4),
        ...            "hidden.weight": rng.normal(size=(3, 12)), "hidden.bias": np.zeros(3),
        ...            "output.weight": rng.normal(size=(1, 3)),
        ...            "output.bias": np.zeros(1)}
        >>> NumpyPredictor(tensors).score_matrix(np.ones((2, 4)), np.ones((5, 8))).shape
        (5, 2)
    """

    def __init__(
        self,
        tensors: Mapping[str, NDArray[Any]],
        calibration: Calibration | None = None,
        reference_queries: NDArray[np.float32] | None = None,
    ) -> None:
        self.calibration = calibration or Calibration()
        self.reference_queries = reference_queries
        self._quality: tuple[bytes, NDArray[np.float32]] | None = None
        missing = [key for key in _PREDICTOR_KEYS if key not in tensors]
        if missing:
            raise LocusArtifactError(f"predictor weights lack {missing}; re-run locus fit")
        t = {key: np.asarray(tensors[key], dtype=np.float32) for key in _PREDICTOR_KEYS}
        self.dim, self.query_dim = t["query_projection.weight"].shape
        hidden = t["hidden.weight"]  # (h, 3d): columns z | u | z u
        if hidden.shape[1] != 3 * self.dim or t["output.weight"].shape != (1, hidden.shape[0]):
            raise LocusArtifactError(
                f"predictor weights do not fit together (hidden {hidden.shape}, output "
                f"{t['output.weight'].shape}); the artifact is damaged"
            )
        d = self.dim
        self.n_hidden = hidden.shape[0]
        self._shift = t["standardize.shift"]
        self._scale = float(t["standardize.scale"].reshape(-1)[0])
        # fold the standardisation into the projection: ((phi - s) / c) W.T + b
        self._proj_weight = np.ascontiguousarray(t["query_projection.weight"].T / self._scale)
        self._proj_bias = t["query_projection.bias"] - self._shift @ self._proj_weight
        self._w_z = np.ascontiguousarray(hidden[:, :d].T)  # (d, h)
        self._w_u = np.ascontiguousarray(hidden[:, d : 2 * d].T)
        self._w_zu = np.ascontiguousarray(hidden[:, 2 * d :].T)
        self._b1 = t["hidden.bias"]
        self._w_out = np.ascontiguousarray(t["output.weight"].reshape(self.n_hidden, 1))
        self._b_out = float(t["output.bias"].reshape(-1)[0])
        self._folded: tuple[bytes, NDArray[np.float32], NDArray[np.float32]] | None = None

    def project_queries(self, phi: NDArray[np.float32]) -> NDArray[np.float32]:
        """u = Linear(standardised phi): (n, dq) -> (n, d)."""
        if phi.ndim != 2 or phi.shape[1] != self.query_dim:
            raise LocusInputError(
                f"query vectors must be (n, {self.query_dim}) (the predictor's query_dim); got "
                f"{phi.shape}. Use the text encoder the artifact was trained with."
            )
        return phi @ self._proj_weight + self._proj_bias

    def _fold(self, z: NDArray[np.float32]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """(d, n_llms h) stacked weights and (n_llms h,) biases for the LLM embeddings z.

        Cached for the last pool seen (compared by content), since a router scores many queries
        against the same pool.
        """
        key = z.tobytes()
        if self._folded is not None and self._folded[0] == key:
            return self._folded[1], self._folded[2]
        n_llms = z.shape[0]
        stacked = z[:, :, None] * self._w_zu[None] + self._w_u[None]  # (n_llms, d, h)
        stacked = np.ascontiguousarray(
            stacked.transpose(1, 0, 2).reshape(self.dim, n_llms * self.n_hidden)
        )
        bias = (z @ self._w_z + self._b1).reshape(-1).astype(np.float32)  # (n_llms h,)
        self._folded = (key, stacked, bias)
        return stacked, bias

    def score_matrix(
        self, z: NDArray[np.float32], phi: NDArray[np.float32], query_chunk: int = 256
    ) -> NDArray[np.float32]:
        """Logits (n_queries, n_llms) for LLM embeddings z (n_llms, d) and query vectors phi."""
        z = np.ascontiguousarray(z, dtype=np.float32)
        phi = np.ascontiguousarray(phi, dtype=np.float32)
        if z.ndim != 2 or z.shape[1] != self.dim:
            raise LocusInputError(f"z must be (n_llms, {self.dim}); got {z.shape}")
        n_llms = z.shape[0]
        u = self.project_queries(phi)
        stacked, bias = self._fold(z)
        out = np.empty((len(u), n_llms), dtype=np.float32)
        for start in range(0, len(u), query_chunk):
            hidden = u[start : start + query_chunk] @ stacked
            hidden += bias
            np.maximum(hidden, 0.0, out=hidden)
            block = hidden.reshape(-1, self.n_hidden) @ self._w_out
            out[start : start + query_chunk] = block.reshape(-1, n_llms)
        out += self._b_out
        return out

    def predict_logits(
        self,
        z: NDArray[np.float32],
        phi: NDArray[np.float32],
        evidence_quality: NDArray[Any] | None = None,
    ) -> NDArray[Any]:
        """Calibrated logits (n_queries, n_llms) of `score_matrix`; `evidence_quality`
        (n_llms,; NaN where unknown) for a calibration that reads it
        (`locus.calibration.evidence_quality_of` gives it from the artifact's metadata)."""
        logits = self.score_matrix(z, phi)
        if self.calibration.quality_scale is None:
            return self.calibration.apply(logits)
        return self.calibration.apply(logits, self.quality(z), evidence_quality)

    def predict_proba(
        self,
        z: NDArray[np.float32],
        phi: NDArray[np.float32],
        evidence_quality: NDArray[Any] | None = None,
    ) -> NDArray[Any]:
        """P(correct) (n_queries, n_llms): the sigmoid of `predict_logits`."""
        return sigmoid(self.predict_logits(z, phi, evidence_quality)).astype(np.float32)

    def quality(self, z: NDArray[np.float32]) -> NDArray[np.float32]:
        """Each LLM's mean logit over the reference queries (n_llms,), cached for the last
        pool seen.

        Raises:
            LocusArtifactError: the artifact has no reference queries.
        """
        if self.reference_queries is None:
            raise LocusArtifactError(
                "the artifact's calibration needs reference queries it does not hold; re-run "
                "locus fit"
            )
        key = np.ascontiguousarray(z, dtype=np.float32).tobytes()
        if self._quality is None or self._quality[0] != key:
            scores = self.score_matrix(z, self.reference_queries)
            self._quality = (key, scores.mean(axis=0).astype(np.float32))
        return self._quality[1]


@dataclass
class RoutingArtifact:
    """What routing reads from an artifact folder: no encoder, no torch.

    Attributes:
        predictor: the correctness predictor, in numpy.
        text_encoder_name, query_dim: the text encoder that made the query vectors.
        llm_ids, llm_embeddings (n_llms, d), evidence_counts: the fit-time pool.
        manifest: what the fit recorded (`locus.artifact.manifest`).
    """

    predictor: NumpyPredictor
    text_encoder_name: str
    query_dim: int
    llm_ids: list[str]
    llm_embeddings: NDArray[np.float32]
    evidence_counts: NDArray[np.int64]
    manifest: Manifest = field(default_factory=Manifest)


def read_for_routing(path: str | Path) -> RoutingArtifact:
    """Read an artifact's predictor and fit-time pool without torch.

    Raises:
        LocusArtifactError: missing files, a foreign format, unreadable or inconsistent weights.
    """
    from safetensors.numpy import load_file

    folder = Path(path)
    config = read_artifact_config(folder)
    encoder_name, query_dim, llm_ids, counts = read_pool_header(folder, config)
    tensors = read_weights(folder, load_file)
    if "metadata" not in config:
        raise LocusArtifactError(f"{folder / CONFIG_FILE}: no metadata; re-run locus fit")
    manifest = Manifest.from_dict(config["metadata"])
    references = tensors.get(REFERENCE_QUERIES)
    predictor = NumpyPredictor(
        {k.removeprefix("predictor."): v for k, v in tensors.items() if k.startswith("predictor.")},
        manifest.calibration,
        None if references is None else check_reference_queries(references, query_dim, folder),
    )
    embeddings = tensors.get("llm_embeddings")
    if (
        embeddings is None
        or embeddings.shape != (len(llm_ids), predictor.dim)
        or predictor.query_dim != query_dim
    ):
        raise LocusArtifactError(
            f"{folder / WEIGHTS_FILE}: LLM embeddings or predictor do not fit the configuration "
            f"({len(llm_ids)} LLMs, d={predictor.dim}, dq={query_dim}); re-run locus fit"
        )
    return RoutingArtifact(
        predictor=predictor,
        text_encoder_name=encoder_name,
        query_dim=query_dim,
        llm_ids=llm_ids,
        llm_embeddings=np.asarray(embeddings, dtype=np.float32),
        evidence_counts=counts,
        manifest=manifest,
    )
