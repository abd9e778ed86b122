"""`Locus`: the facade over the LOCUS networks: fit, embed, onboard, predict, save, load.

    >>> from locus import Locus, TrainingConfig                             # doctest: +SKIP
    >>> model = Locus(TrainingConfig(anchors=256))                          # doctest: +SKIP
    >>> model.fit(table, query_vectors, train_rows, val_rows)               # doctest: +SKIP
    >>> model.predict_proba(query_vectors[:5]).shape  # (5, n_llms)         # doctest: +SKIP
    >>> model.add_llm("new-llm", evidence_vectors, evidence_scores)         # doctest: +SKIP
    >>> model.save("artifacts/default"); Locus.load("artifacts/default")  # doctest: +SKIP

The networks and the fit-time pool travel in an artifact folder (`locus.artifact`); the LLM
embeddings live in an `LLMPool` (`locus.pool`), which inside a workspace is the workspace's: an
artifact loaded from `<workspace>/artifacts/<name>/` sees every LLM onboarded since the fit, and
`add_llm` writes there. Routing is `locus.routing.LocusRouter` over a `Locus`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from numpy.typing import NDArray

from locus.artifact.manifest import Manifest
from locus.artifact.torch_io import Artifact, load_artifact, save_artifact
from locus.calibration import reference_rows, sigmoid
from locus.data.table import ScoreTable
from locus.errors import LocusInputError, LocusNotFittedError
from locus.facade_calibration import LogitCalibration
from locus.nn.config import TrainingConfig
from locus.nn.embedding import embed_many
from locus.pool import LLMPool, workspace_pools
from locus.text.protocol import TextEncoder, encode_texts

if TYPE_CHECKING:
    from locus.nn.training import ProgressCallback
    from locus.store import Store

__all__ = ["Locus"]


class Locus(LogitCalibration):
    """LLM embeddings from evaluation results, and P(correct) for any LLM on any query.

    Args:
        config: hyper-parameters of the networks and training (`TrainingConfig`).
        text_encoder: turns query text into query vectors; needed only to pass raw texts to
            `predict_proba`. Its `name` is recorded in the artifact.
        device: torch device for training and inference ("cpu", "cuda", ...).

    Learned attributes (after `fit` or `load`): `encoder_`, `predictor_`, `pool_` (the LLM
    embeddings: `llm_ids_`, `llm_embeddings_` (n_llms, d), `evidence_counts_` (n_llms,)),
    `anchors_` (llm_id -> anchor text hashes), `history_`, `best_step_`, `query_dim_`,
    `text_encoder_name_`, `evidence_bound_` (the most evidence pairs the encoder reads at once),
    `calibration_` (the map of the predictor's logits fitted on validation cells,
    `locus.calibration`), `reference_queries_` (the training queries `quality` averages over).
    """

    def __init__(
        self,
        config: TrainingConfig | None = None,
        *,
        text_encoder: TextEncoder | None = None,
        device: str = "cpu",
    ) -> None:
        self.config = config or TrainingConfig()
        self.text_encoder = text_encoder
        self.device = device
        self.manifest = Manifest()
        self._owned_store: Store | None = None

    # -- training --------------------------------------------------------------------------

    def fit(
        self,
        table: ScoreTable,
        query_vectors: NDArray[np.float32],
        train_rows: Sequence[int] | NDArray[np.integer[Any]],
        val_rows: Sequence[int] | NDArray[np.integer[Any]],
        *,
        text_encoder_name: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> Locus:
        """Meta-train on `table` (rows = queries, columns = LLMs) and embed every LLM.

        Args:
            table: the score table; its `text_hashes` name the anchors in the artifact.
            query_vectors: (table.n_queries, dq) float32, row-aligned with `table`.
            train_rows: rows used for anchors, evidence and targets (never test rows).
            val_rows: rows for early stopping.
            text_encoder_name: name of the encoder that made `query_vectors` (default: the
                `text_encoder` given at construction).
        """
        from locus.nn.training import train

        vectors = np.asarray(query_vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != table.n_queries:
            raise LocusInputError(
                f"query_vectors must be (n_queries, dq) = ({table.n_queries}, dq), found "
                f"{vectors.shape}"
            )
        name = text_encoder_name or (self.text_encoder.name if self.text_encoder else None)
        if name is None:
            raise LocusInputError(
                "fit needs the name of the text encoder that made the query vectors; pass "
                "text_encoder_name= or construct Locus(text_encoder=...)"
            )
        result = train(
            vectors,
            table.scores,
            np.asarray(train_rows, dtype=np.int64),
            np.asarray(val_rows, dtype=np.int64),
            self.config,
            progress=progress,
            device=self.device,
        )
        self.encoder_, self.predictor_ = result.encoder, result.predictor
        self.pool_ = LLMPool.from_anchors(table, result.llm_embeddings, result.anchor_query_idx)
        self.anchors_ = {
            llm_id: [table.text_hashes[int(i)] for i in rows]
            for llm_id, rows in zip(table.llm_ids, result.anchor_query_idx, strict=True)
        }
        self.history_ = list(result.history)
        self.best_step_ = int(result.best_step)
        self.query_dim_ = int(vectors.shape[1])
        self.text_encoder_name_ = name
        self.evidence_bound_ = self.config.evidence_bound
        # names this fit: a workspace's pool rows count for this artifact only if written for it
        self.manifest = self.manifest.with_(
            fit_id=uuid.uuid4().hex,
            calibration=None,
            evidence_means=dict(self.pool_.evidence_means),
        )
        trained_on = np.asarray(train_rows, dtype=np.int64)
        self.reference_queries_ = (
            vectors[reference_rows(trained_on, self.config.seed)] if len(trained_on) else None
        )
        val = np.asarray(val_rows, dtype=np.int64)
        if (~np.isnan(table.scores[val])).sum() >= 10:
            self.calibrate(vectors[val], table.scores[val])
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "encoder_"):
            raise LocusNotFittedError(
                "this Locus is not trained; call fit(...) or Locus.load(artifact) first"
            )

    # -- the pool --------------------------------------------------------------------------

    @property
    def llm_ids_(self) -> list[str]:
        self._check_fitted()
        return self.pool_.llm_ids

    @property
    def llm_embeddings_(self) -> NDArray[np.float32]:
        self._check_fitted()
        return self.pool_.embeddings

    @property
    def evidence_counts_(self) -> NDArray[np.int64]:
        self._check_fitted()
        return self.pool_.evidence_counts

    def embed(self, query_vectors: NDArray[np.float32], scores: NDArray[np.float32]) -> np.ndarray:
        """One LLM embedding (d,) from its evidence: query vectors (K, dq), scores (K,)."""
        return self.embed_many([(query_vectors, scores)])[0]

    def embed_many(
        self, evidence: Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]]
    ) -> np.ndarray:
        """LLM embeddings (n, d), one per (query vectors (K_i, dq), scores (K_i,)) pair.

        Deterministic and independent of the order of the evidence. Evidence beyond the
        encoder's training sizes (`evidence_bound_`) is read in chunks whose embeddings are
        averaged, so more scores refine an embedding rather than move it off its training
        distribution.
        """
        self._check_fitted()
        for i, (_, scores) in enumerate(evidence):
            if len(np.asarray(scores)) == 0:
                raise LocusInputError(
                    f"evidence {i}: no scores; an LLM embedding needs at least one (query, score) "
                    "pair (about 100 give a usable embedding)"
                )
        return embed_many(self.encoder_, evidence, max_evidence=self.evidence_bound_)

    def add_llm(
        self, llm_id: str, query_vectors: NDArray[np.float32], scores: NDArray[np.float32]
    ) -> np.ndarray:
        """Onboard (or refresh) one LLM from its evidence, without retraining anything.

        Other LLMs' embeddings do not move. Inside a workspace the new embedding is written
        there. Returns the new embedding (d,).
        """
        vector = self.embed(query_vectors, scores)
        self.pool_.upsert(llm_id, vector, len(scores), float(np.mean(scores)))
        return vector

    def set_embeddings(
        self,
        llm_ids: Sequence[str],
        embeddings: NDArray[np.float32],
        evidence_counts: Sequence[int],
        evidence_means: Sequence[float | None] | None = None,
    ) -> None:
        """Replace the pool: (n, d) embeddings computed earlier (written through when bound);
        `evidence_means`: each LLM's mean score on its evidence (None: unknown; without the
        argument, those known for LLMs that stay are kept)."""
        self._check_fitted()
        array = np.asarray(embeddings, dtype=np.float32)
        if array.shape != (len(llm_ids), self.encoder_.dim):
            raise LocusInputError(
                f"embeddings must be ({len(llm_ids)}, {self.encoder_.dim}), found {array.shape}"
            )
        means = None
        if evidence_means is not None:
            means = {
                llm: (float(mean), int(count))
                for llm, mean, count in zip(llm_ids, evidence_means, evidence_counts, strict=True)
                if mean is not None
            }
        self.pool_.replace_all(llm_ids, array, evidence_counts, means)

    def refresh(self) -> None:
        """Re-read the workspace's pool (LLMs onboarded by other processes since loading)."""
        self._check_fitted()
        self.pool_.refresh(self._snapshot)

    # -- prediction ------------------------------------------------------------------------

    def query_vectors(self, queries: str | Sequence[str] | NDArray[np.float32]) -> np.ndarray:
        """Texts (encoded with the text encoder) or vectors, checked: -> (n_queries, dq)."""
        self._check_fitted()
        if isinstance(queries, str) or (
            isinstance(queries, Sequence) and len(queries) and isinstance(queries[0], str)
        ):
            texts = [queries] if isinstance(queries, str) else [str(t) for t in queries]
            return encode_texts(self.text_encoder, texts, self.text_encoder_name_)
        vectors = np.asarray(queries, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors[None, :]
        if vectors.ndim != 2 or vectors.shape[1] != self.query_dim_:
            raise LocusInputError(
                f"query vectors must be (n_queries, {self.query_dim_}), found {vectors.shape}"
            )
        return vectors

    def predict_proba(
        self,
        queries: str | Sequence[str] | NDArray[np.float32],
        llm_ids: Sequence[str] | None = None,
    ) -> np.ndarray:
        """P(correct) (n_queries, n_llms) for query texts or vectors (n_queries, dq).

        Columns follow `llm_ids` (default: every embedded LLM, in `llm_ids_` order). Runs on
        the device the networks are on.
        """
        return sigmoid(self.predict_logits(queries, llm_ids)).astype(np.float32)

    def predict_logits(
        self,
        queries: str | Sequence[str] | NDArray[np.float32],
        llm_ids: Sequence[str] | None = None,
        *,
        calibrated: bool = True,
    ) -> np.ndarray:
        """Logits of P(correct) (n_queries, n_llms), calibrated (`calibration_`) unless
        `calibrated` is False: then the predictor's own."""
        vectors = self.query_vectors(queries)  # an unfitted Locus says so here
        logits = self._raw_logits(self.pool_.vectors(llm_ids), vectors)
        if not calibrated:
            return logits
        calibration = self.calibration_
        if calibration.quality_scale is None:
            return calibration.apply(logits)
        return calibration.apply(logits, self.quality(llm_ids), self.evidence_quality(llm_ids))

    def _raw_logits(self, embeddings: NDArray[np.float32], vectors: NDArray[Any]) -> np.ndarray:
        """The predictor's logits (n_queries, n_llms) of LLM `embeddings` on query `vectors`."""
        device = next(self.predictor_.parameters()).device
        z = torch.from_numpy(np.ascontiguousarray(embeddings)).to(device)
        phi = torch.from_numpy(np.ascontiguousarray(vectors)).to(device)
        self.predictor_.eval()
        with torch.inference_mode():
            return self.predictor_.score_matrix(z, phi).cpu().numpy()

    # -- persistence (`locus.artifact`) ----------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write the networks' artifact folder (config.json, anchors.json,
        weights.safetensors), replacing the folder whole. The fitted router beside them (kNN
        part, stack, guard, costs) is saved with them by `locus.routing.router_artifact.save`,
        which `locus fit` calls."""
        self._check_fitted()
        artifact = Artifact(
            encoder=self.encoder_,
            predictor=self.predictor_,
            training=self.config,
            text_encoder_name=self.text_encoder_name_,
            query_dim=self.query_dim_,
            evidence_bound=self.evidence_bound_,
            llm_ids=self.llm_ids_,
            llm_embeddings=self.llm_embeddings_,
            evidence_counts=self.evidence_counts_,
            anchors=self.anchors_,
            history=self.history_,
            best_step=self.best_step_,
            manifest=self.manifest,
            reference_queries=self.reference_queries_,
        )
        return save_artifact(artifact, path)

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        text_encoder: TextEncoder | None = None,
        device: str = "cpu",
        workspace: Store | str | os.PathLike[str] | Literal["auto"] | None = "auto",
    ) -> Locus:
        """Rebuild a trained Locus from an artifact folder written by `save`.

        Args:
            path: the artifact folder.
            text_encoder: to pass texts to `predict_proba`.
            device: torch device for the networks.
            workspace: where the live pool is. "auto": the workspace the artifact sits in
                (`<workspace>/artifacts/<name>/`), if any; a `Store` or a workspace path: that
                one; None: the artifact's fit-time pool only.

        Raises:
            LocusArtifactError: missing files, a foreign or newer format, corrupt weights, or
                weights that do not fit the recorded configuration; an artifact trained with
                another text encoder than the workspace's.
        """
        folder = Path(path)
        artifact = load_artifact(folder, device=device)
        model = cls(artifact.training, text_encoder=text_encoder, device=device)
        model.encoder_, model.predictor_ = artifact.encoder, artifact.predictor
        model.anchors_, model.history_ = artifact.anchors, artifact.history
        model.best_step_, model.query_dim_ = artifact.best_step, artifact.query_dim
        model.text_encoder_name_ = artifact.text_encoder_name
        model.evidence_bound_, model.manifest = artifact.evidence_bound, artifact.manifest
        model.reference_queries_ = artifact.reference_queries
        model._snapshot, model.pool_, model._owned_store = workspace_pools(
            folder,
            workspace,
            (artifact.llm_ids, artifact.llm_embeddings, artifact.evidence_counts),
            artifact.manifest,
            artifact.text_encoder_name,
        )
        return model

    _snapshot: LLMPool | None = None

    def close(self) -> None:
        """Close the workspace this Locus opened itself (a `Store` passed in stays open)."""
        if self._owned_store is not None:
            self._owned_store.close()
            self._owned_store = None

    def __enter__(self) -> Locus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
