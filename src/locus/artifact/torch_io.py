"""The artifact with its networks, in torch: `save_artifact` writes a folder, `load_artifact`
reads it back (the files: `locus.artifact.layout`; the fitted router's files beside them:
`locus.routing.router_artifact`).

No pickle: loading reads JSON and tensors and runs no code from the artifact. Rebuilding the
networks needs only `NetworkConfig` (never the trainer). Inside a workspace the artifact's LLM
embeddings are the fit-time snapshot; the live pool is the workspace's (see `locus.pool`).

    >>> artifact = load_artifact("artifacts/default")               # doctest: +SKIP
    >>> artifact.llm_embeddings.shape  # (n_llms, 128)              # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

import locus
from locus.artifact.layout import (
    ANCHORS_FILE,
    ARTIFACT_FORMAT,
    CONFIG_FILE,
    REFERENCE_QUERIES,
    WEIGHTS_FILE,
    check_reference_queries,
    read_artifact_config,
    read_json,
    read_pool_header,
    read_weights,
    replaced_folder,
    write_json,
)
from locus.artifact.manifest import Manifest
from locus.errors import LocusArtifactError, LocusInputError
from locus.nn.config import NetworkConfig, TrainingConfig, build_networks
from locus.nn.encoder import LLMEncoder
from locus.nn.predictor import CorrectnessPredictor

__all__ = ["Artifact", "load_artifact", "save_artifact"]


@dataclass
class Artifact:
    """Everything an artifact folder holds, in memory.

    Attributes:
        encoder, predictor: the trained networks (eval mode).
        training: the configuration they were trained with (`training.network`: their shapes).
        text_encoder_name, query_dim: the text encoder that made the query vectors.
        evidence_bound: the most evidence pairs the encoder reads in one set: the largest
            evidence size it was trained on (the anchors per LLM).
        llm_ids, llm_embeddings (n_llms, d), evidence_counts (n_llms,): the fit-time pool.
        anchors: llm_id -> text hashes of its anchor queries.
        manifest: what the fit recorded (`locus.artifact.manifest`).
        reference_queries: (R, query_dim) training query vectors over which each LLM's quality
            (its mean logit) is taken for calibration; None in artifacts fitted before.
    """

    encoder: LLMEncoder
    predictor: CorrectnessPredictor
    training: TrainingConfig
    text_encoder_name: str
    query_dim: int
    evidence_bound: int
    llm_ids: list[str]
    llm_embeddings: np.ndarray
    evidence_counts: np.ndarray
    anchors: dict[str, list[str]] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)
    best_step: int = 0
    manifest: Manifest = field(default_factory=Manifest)
    reference_queries: np.ndarray | None = None


def save_artifact(artifact: Artifact, path: str | Path) -> Path:
    """Write `artifact` to the folder `path`, replacing it whole (never a half-written mix)."""
    with replaced_folder(path) as staging:
        _write_artifact(artifact, staging)
    return Path(path)


def _write_artifact(artifact: Artifact, folder: Path) -> None:
    """Write `artifact`'s files (`CONFIG_FILE`, `ANCHORS_FILE`, `WEIGHTS_FILE`) into `folder`."""
    from safetensors.torch import save_file

    config = {
        "format": ARTIFACT_FORMAT,
        "locus_version": locus.__version__,
        "torch_version": torch.__version__,
        "text_encoder": {"name": artifact.text_encoder_name, "dim": artifact.query_dim},
        "network": artifact.training.network.to_dict(),
        "training": artifact.training.to_dict(),
        "evidence_bound": artifact.evidence_bound,
        "llm_ids": list(artifact.llm_ids),
        "evidence_counts": [int(c) for c in artifact.evidence_counts],
        "best_step": artifact.best_step,
        "history": artifact.history,
        "metadata": artifact.manifest.as_dict(),
    }
    tensors = {
        f"encoder.{k}": v.detach().cpu().contiguous()
        for k, v in artifact.encoder.state_dict().items()
    }
    tensors |= {
        f"predictor.{k}": v.detach().cpu().contiguous()
        for k, v in artifact.predictor.state_dict().items()
    }
    tensors["llm_embeddings"] = torch.from_numpy(
        np.ascontiguousarray(artifact.llm_embeddings, dtype=np.float32)
    )
    if artifact.reference_queries is not None:
        tensors[REFERENCE_QUERIES] = torch.from_numpy(
            np.ascontiguousarray(artifact.reference_queries, dtype=np.float32)
        )
    save_file(tensors, str(folder / WEIGHTS_FILE), metadata={"format": ARTIFACT_FORMAT})
    write_json(folder / ANCHORS_FILE, artifact.anchors)
    write_json(folder / CONFIG_FILE, config)


def load_artifact(path: str | Path, *, device: str = "cpu") -> Artifact:
    """Read an artifact folder written by `save_artifact` (any of `READABLE_FORMATS`).

    Raises:
        LocusArtifactError: missing files, a foreign or newer format, corrupt weights, or
            weights that do not fit the recorded configuration.
    """
    from safetensors.torch import load_file

    folder = Path(path)
    config = read_artifact_config(folder)
    try:
        training = TrainingConfig.from_dict({**config["training"], "network": config["network"]})
        network: NetworkConfig = training.network
        evidence_bound = int(config["evidence_bound"])
        history = [dict(entry) for entry in config["history"]]
        best_step = int(config["best_step"])
        manifest = Manifest.from_dict(config["metadata"])
    except (KeyError, TypeError, ValueError, LocusInputError) as error:
        raise LocusArtifactError(
            f"{folder / CONFIG_FILE}: incomplete or invalid configuration ({error}); re-run "
            "locus fit"
        ) from error
    encoder_name, query_dim, llm_ids, counts = read_pool_header(folder, config)
    tensors = read_weights(folder, load_file)
    encoder, predictor = build_networks(query_dim, network)
    _load_module(encoder, tensors, "encoder.", folder)
    _load_module(predictor, tensors, "predictor.", folder)
    embeddings = tensors.get("llm_embeddings")
    if embeddings is None or tuple(embeddings.shape) != (len(llm_ids), network.dim):
        raise LocusArtifactError(
            f"{folder / WEIGHTS_FILE}: LLM embeddings missing or not ({len(llm_ids)}, "
            f"{network.dim}); re-run locus fit"
        )
    anchors = read_json(folder / ANCHORS_FILE)
    references = tensors.get(REFERENCE_QUERIES)
    return Artifact(
        encoder=encoder.to(device).eval(),
        predictor=predictor.to(device).eval(),
        training=training,
        text_encoder_name=encoder_name,
        query_dim=query_dim,
        evidence_bound=evidence_bound,
        llm_ids=llm_ids,
        llm_embeddings=embeddings.numpy().astype(np.float32),
        evidence_counts=counts,
        anchors={str(k): list(v) for k, v in dict(anchors).items()},
        history=history,
        best_step=best_step,
        manifest=manifest,
        reference_queries=None
        if references is None
        else check_reference_queries(references.numpy(), query_dim, folder),
    )


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
            f"{folder / WEIGHTS_FILE}: weights do not fit the configured networks ({first}); the "
            "artifact is damaged or from another version"
        ) from error
