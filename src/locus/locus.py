"""`Locus`: the facade over the LOCUS networks: fit, embed, predict, route, save, load.

    >>> from locus import Locus                                              # doctest: +SKIP
    >>> model = Locus(TrainingConfig(anchors=256)).fit(table, query_vectors, train_rows, val_rows)
    >>> model.predict_proba(query_vectors[:5]).shape                        # (5, n_llms)
    >>> model.add_llm("new-llm", evidence_vectors, evidence_scores)          # no retraining
    >>> model.save("artifacts/default"); Locus.load("artifacts/default")

An artifact folder holds `config.json` (format version, library versions, text encoder, all
hyper-parameters, llm_ids, evidence counts), `anchors.json` (per LLM, the text hashes of its anchor
queries) and `weights.safetensors` (networks + LLM embeddings). No pickle: loading runs no code
from the artifact.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from locus.data.table import ScoreTable
from locus.errors import (
    LocusArtifactError,
    LocusInputError,
    LocusNotFittedError,
    LocusNotFoundError,
)
from locus.nn import (
    CorrectnessPredictor,
    LLMEncoder,
    ProgressCallback,
    TrainingConfig,
    build_networks,
    embed_many,
    train,
)
from locus.text.base import TextEncoder

__all__ = ["ARTIFACT_FORMAT", "Locus", "RouteDecision"]

ARTIFACT_FORMAT = "locus-artifact/1"
_CONFIG = "config.json"
_ANCHORS = "anchors.json"
_WEIGHTS = "weights.safetensors"


@dataclass(frozen=True)
class RouteDecision:
    """Where one query goes.

    Attributes:
        llm_id: the chosen LLM.
        p_correct: its predicted P(correct).
        cost_usd: its expected cost per query (None when unknown).
        runners_up: the next best (llm_id, p_correct) pairs, best first.
    """

    llm_id: str
    p_correct: float
    cost_usd: float | None = None
    runners_up: tuple[tuple[str, float], ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "llm_id": self.llm_id,
            "p_correct": self.p_correct,
            "cost_usd": self.cost_usd,
            "runners_up": [{"llm_id": llm, "p_correct": p} for llm, p in self.runners_up],
        }


class Locus:
    """LLM embeddings from evaluation results, and P(correct) for any LLM on any query.

    Args:
        config: hyper-parameters of the networks and training (`TrainingConfig`).
        text_encoder: turns query text into query vectors; needed only to pass raw texts to
            `predict_proba` / `route`. Its `name` is recorded in the artifact.
        device: torch device for training and inference.

    Learned attributes (after `fit` or `load`): `encoder_`, `predictor_`, `llm_ids_`,
    `llm_embeddings_` (n_llms, 128), `evidence_counts_` (n_llms,), `anchors_` (llm_id -> anchor
    text hashes), `history_`, `best_step_`, `query_dim_`, `text_encoder_name_`.
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
        self.metadata: dict[str, Any] = {}

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
        self.encoder_ = result.encoder
        self.predictor_ = result.predictor
        self.llm_ids_ = list(table.llm_ids)
        self.llm_embeddings_ = np.asarray(result.llm_embeddings, dtype=np.float32)
        self.evidence_counts_ = np.array([len(a) for a in result.anchor_query_idx], dtype=np.int64)
        self.anchors_ = {
            llm_id: [table.text_hashes[int(i)] for i in rows]
            for llm_id, rows in zip(table.llm_ids, result.anchor_query_idx, strict=True)
        }
        self.history_ = list(result.history)
        self.best_step_ = int(result.best_step)
        self.query_dim_ = int(vectors.shape[1])
        self.text_encoder_name_ = name
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "encoder_"):
            raise LocusNotFittedError(
                "this Locus is not trained; call fit(...) or Locus.load(artifact) first"
            )

    # -- embeddings ------------------------------------------------------------------------

    def embed(self, query_vectors: NDArray[np.float32], scores: NDArray[np.float32]) -> np.ndarray:
        """One LLM embedding (128,) from its evidence: query vectors (K, dq), scores (K,)."""
        return self.embed_many([(query_vectors, scores)])[0]

    def embed_many(
        self, evidence: Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]]
    ) -> np.ndarray:
        """LLM embeddings (n, 128), one per (query vectors (K_i, dq), scores (K_i,)) pair."""
        self._check_fitted()
        for i, (_, scores) in enumerate(evidence):
            if len(np.asarray(scores)) == 0:
                raise LocusInputError(
                    f"evidence {i}: no scores; an LLM embedding needs at least one (query, score) "
                    "pair (about 100 give a usable embedding)"
                )
        return embed_many(self.encoder_, evidence)

    def add_llm(
        self, llm_id: str, query_vectors: NDArray[np.float32], scores: NDArray[np.float32]
    ) -> np.ndarray:
        """Onboard (or refresh) one LLM from its evidence, without retraining anything.

        Other LLMs' embeddings do not move. Returns the new embedding (128,).
        """
        vector = self.embed(query_vectors, scores)
        if llm_id in self.llm_ids_:
            index = self.llm_ids_.index(llm_id)
            self.llm_embeddings_[index] = vector
            self.evidence_counts_[index] = len(scores)
        else:
            self.llm_ids_.append(llm_id)
            self.llm_embeddings_ = np.vstack([self.llm_embeddings_, vector[None]])
            self.evidence_counts_ = np.append(self.evidence_counts_, len(scores))
        return vector

    def set_embeddings(
        self,
        llm_ids: Sequence[str],
        embeddings: NDArray[np.float32],
        evidence_counts: Sequence[int],
    ) -> None:
        """Replace the pool: (n, 128) embeddings computed earlier (e.g. read from a workspace)."""
        self._check_fitted()
        array = np.asarray(embeddings, dtype=np.float32)
        if array.shape != (len(llm_ids), self.encoder_.dim):
            raise LocusInputError(
                f"embeddings must be ({len(llm_ids)}, {self.encoder_.dim}), found {array.shape}"
            )
        self.llm_ids_ = list(llm_ids)
        self.llm_embeddings_ = array.copy()
        self.evidence_counts_ = np.asarray(evidence_counts, dtype=np.int64)

    # -- prediction ------------------------------------------------------------------------

    def _vectors(self, queries: str | Sequence[str] | NDArray[np.float32]) -> np.ndarray:
        if isinstance(queries, str) or (
            isinstance(queries, Sequence) and queries and isinstance(queries[0], str)
        ):
            texts = [queries] if isinstance(queries, str) else list(queries)
            empty = [i for i, text in enumerate(texts) if not str(text).strip()]
            if empty:
                raise LocusInputError(
                    f"query {empty[0]} is empty; expected query text to route or score"
                )
            if self.text_encoder is None:
                raise LocusInputError(
                    "texts need a text encoder: construct Locus(text_encoder=...) or pass query "
                    "vectors"
                )
            if self.text_encoder.name != self.text_encoder_name_:
                raise LocusArtifactError(
                    f"text encoder {self.text_encoder.name!r} differs from the one this Locus "
                    f"was trained with ({self.text_encoder_name_!r}); use that encoder"
                )
            return np.asarray(self.text_encoder.encode(texts), dtype=np.float32)
        vectors = np.asarray(queries, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors[None, :]
        if vectors.ndim != 2 or vectors.shape[1] != self.query_dim_:
            raise LocusInputError(
                f"query vectors must be (n_queries, {self.query_dim_}), found {vectors.shape}"
            )
        return vectors

    def _columns(self, llm_ids: Sequence[str] | None) -> list[int]:
        if llm_ids is None:
            return list(range(len(self.llm_ids_)))
        known = {llm: i for i, llm in enumerate(self.llm_ids_)}
        missing = [llm for llm in llm_ids if llm not in known]
        if missing:
            raise LocusNotFoundError(
                f"LLM {missing[0]!r} has no embedding; expected one of "
                f"{', '.join(self.llm_ids_[:5])}{', ...' if len(self.llm_ids_) > 5 else ''}; "
                "onboard it first (locus embed)"
            )
        return [known[llm] for llm in llm_ids]

    def predict_proba(
        self,
        queries: str | Sequence[str] | NDArray[np.float32],
        llm_ids: Sequence[str] | None = None,
    ) -> np.ndarray:
        """P(correct) (n_queries, n_llms) for query texts or vectors (n_queries, dq).

        Columns follow `llm_ids` (default: every embedded LLM, in `llm_ids_` order).
        """
        self._check_fitted()
        vectors = self._vectors(queries)
        columns = self._columns(llm_ids)
        z = torch.from_numpy(self.llm_embeddings_[columns])
        phi = torch.from_numpy(vectors)
        self.predictor_.eval()
        with torch.inference_mode():
            logits = self.predictor_.score_matrix(z, phi)  # (n_queries, n_llms)
        return torch.sigmoid(logits).numpy().astype(np.float32)

    def route(
        self,
        queries: str | Sequence[str] | NDArray[np.float32],
        *,
        llm_ids: Sequence[str] | None = None,
        costs: Mapping[str, float] | None = None,
        cost_weight: float = 0.0,
        max_cost: float | None = None,
        top: int = 3,
    ) -> list[RouteDecision]:
        """Send each query to the LLM with the best P(correct) - cost_weight x cost.

        Args:
            queries: texts or query vectors.
            llm_ids: candidate LLMs (default: all embedded).
            costs: expected USD cost per query of each LLM (needed for cost_weight / max_cost).
            cost_weight: dollars traded per unit of P(correct); 0 ignores cost.
            max_cost: LLMs costing more per query are not candidates.
            top: how many candidates to report (the chosen one plus runners-up).
        """
        if cost_weight < 0 or (max_cost is not None and max_cost < 0):
            raise LocusInputError(
                f"cost_weight and max_cost must be >= 0, found {cost_weight} and {max_cost}"
            )
        if top < 1:
            raise LocusInputError(f"top must be >= 1, found {top}")
        candidates = list(llm_ids) if llm_ids is not None else list(self.llm_ids_)
        cost_of = dict(costs or {})
        if (cost_weight > 0 or max_cost is not None) and not cost_of:
            raise LocusInputError(
                "cost_weight / max_cost need per-LLM costs; import data with cost_usd or pass "
                "costs={llm_id: usd}"
            )
        if max_cost is not None:
            candidates = [llm for llm in candidates if cost_of.get(llm, math.inf) <= max_cost]
            if not candidates:
                raise LocusInputError(
                    f"no LLM costs at most {max_cost} USD per query; the cheapest costs "
                    f"{min(cost_of.values()):.6g}; raise --max-cost"
                )
        proba = self.predict_proba(queries, candidates)  # (n_queries, n_candidates)
        penalty = np.array([cost_weight * cost_of.get(llm, 0.0) for llm in candidates])
        utility = proba - penalty[None, :]
        order = np.argsort(-utility, axis=1, kind="stable")[:, :top]
        decisions = []
        for row, ranked in enumerate(order):
            best = int(ranked[0])
            decisions.append(
                RouteDecision(
                    llm_id=candidates[best],
                    p_correct=float(proba[row, best]),
                    cost_usd=cost_of.get(candidates[best]),
                    runners_up=tuple(
                        (candidates[int(c)], float(proba[row, int(c)])) for c in ranked[1:]
                    ),
                )
            )
        return decisions

    # -- persistence -----------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write the artifact folder (config.json, anchors.json, weights.safetensors)."""
        from safetensors.torch import save_file

        import locus

        self._check_fitted()
        folder = Path(path)
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = folder.with_name(f".{folder.name}.staging")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        config = {
            "format": ARTIFACT_FORMAT,
            "locus_version": locus.__version__,
            "torch_version": torch.__version__,
            "text_encoder": {"name": self.text_encoder_name_, "dim": self.query_dim_},
            "training": self.config.to_dict(),
            "llm_ids": self.llm_ids_,
            "evidence_counts": [int(c) for c in self.evidence_counts_],
            "best_step": self.best_step_,
            "history": self.history_,
            "metadata": self.metadata,
        }
        tensors = {
            f"encoder.{k}": v.detach().cpu().contiguous()
            for k, v in self.encoder_.state_dict().items()
        }
        tensors |= {
            f"predictor.{k}": v.detach().cpu().contiguous()
            for k, v in self.predictor_.state_dict().items()
        }
        tensors["llm_embeddings"] = torch.from_numpy(np.ascontiguousarray(self.llm_embeddings_))
        save_file(tensors, str(staging / _WEIGHTS), metadata={"format": ARTIFACT_FORMAT})
        _write_json(staging / _ANCHORS, self.anchors_)
        _write_json(staging / _CONFIG, config)
        # swap whole folders: a crash leaves either the old artifact or the new one, never a mix
        retired = folder.with_name(f".{folder.name}.retired")
        shutil.rmtree(retired, ignore_errors=True)
        if folder.exists():
            folder.replace(retired)
        staging.replace(folder)
        shutil.rmtree(retired, ignore_errors=True)
        return folder

    @classmethod
    def load(
        cls, path: str | Path, *, text_encoder: TextEncoder | None = None, device: str = "cpu"
    ) -> Locus:
        """Rebuild a trained Locus from an artifact folder written by `save`.

        Raises:
            LocusArtifactError: missing files, a foreign or newer format, corrupt weights, or
                weights that do not fit the recorded configuration.
        """
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        folder = Path(path)
        config = _read_json(folder / _CONFIG)
        if not isinstance(config, dict) or config.get("format") != ARTIFACT_FORMAT:
            found = config.get("format") if isinstance(config, dict) else type(config).__name__
            raise LocusArtifactError(
                f"{folder / _CONFIG}: expected format {ARTIFACT_FORMAT!r}, found {found!r}; "
                "this is not a locus artifact (or one from an incompatible version)"
            )
        try:
            training = TrainingConfig.from_dict(config["training"])
            encoder_name = str(config["text_encoder"]["name"])
            query_dim = int(config["text_encoder"]["dim"])
            llm_ids = [str(x) for x in config["llm_ids"]]
            counts = np.asarray(config["evidence_counts"], dtype=np.int64)
        except (KeyError, TypeError, ValueError, LocusInputError) as error:
            raise LocusArtifactError(
                f"{folder / _CONFIG}: incomplete or invalid configuration ({error}); re-run "
                "locus fit"
            ) from error
        try:
            tensors = load_file(str(folder / _WEIGHTS))
        except (OSError, SafetensorError, ValueError) as error:
            raise LocusArtifactError(
                f"{folder / _WEIGHTS}: unreadable weights ({error}); re-run locus fit"
            ) from error
        model = cls(training, text_encoder=text_encoder, device=device)
        encoder, predictor = build_networks(query_dim, training)
        _load_module(encoder, tensors, "encoder.", folder)
        _load_module(predictor, tensors, "predictor.", folder)
        embeddings = tensors.get("llm_embeddings")
        if embeddings is None or tuple(embeddings.shape) != (len(llm_ids), training.dim):
            raise LocusArtifactError(
                f"{folder / _WEIGHTS}: LLM embeddings missing or not ({len(llm_ids)}, "
                f"{training.dim}); re-run locus fit"
            )
        anchors = _read_json(folder / _ANCHORS)
        model.encoder_ = encoder.eval()
        model.predictor_ = predictor.eval()
        model.llm_ids_ = llm_ids
        model.llm_embeddings_ = embeddings.numpy().astype(np.float32)
        model.evidence_counts_ = counts
        model.anchors_ = {str(k): list(v) for k, v in dict(anchors).items()}
        model.history_ = list(config.get("history", []))
        model.best_step_ = int(config.get("best_step", 0))
        model.query_dim_ = query_dim
        model.text_encoder_name_ = encoder_name
        model.metadata = dict(config.get("metadata") or {})
        return model


def _load_module(
    module: LLMEncoder | CorrectnessPredictor,
    tensors: dict[str, torch.Tensor],
    prefix: str,
    folder: Path,
) -> None:
    state = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as error:
        first = str(error).splitlines()[0]
        raise LocusArtifactError(
            f"{folder / _WEIGHTS}: weights do not fit the configured networks ({first}); the "
            "artifact is damaged or from another version"
        ) from error


def _write_json(path: Path, payload: Any) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(payload, indent=1) + "\n")
    temporary.replace(path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise LocusArtifactError(
            f"{path}: missing; expected a locus artifact folder (config.json, anchors.json, "
            "weights.safetensors) written by locus fit"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LocusArtifactError(f"{path}: unreadable ({error}); re-run locus fit") from error
