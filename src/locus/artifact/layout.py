"""The artifact folder's files, its format versions, and the torch-free checks of what it holds.

    config.json           format, locus and torch versions, text encoder (name, dim), network
                          shapes, training hyper-parameters, the evidence bound, llm_ids,
                          evidence counts, best step, history, the manifest (`metadata`)
    anchors.json          per LLM, the text hashes of its anchor queries
    weights.safetensors   encoder.*, predictor.* (standardisation buffers included),
                          llm_embeddings (n_llms, d), reference_queries (R, dq)
    stacked.json, knn/    the fitted router's stack, guard and kNN part
                          (`locus.routing.stacked`)
    costs/                the per-query cost model and validation query vectors
                          (`locus.routing.costs`)

No pickle: loading reads JSON and tensors and runs no code from the artifact.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusArtifactError

__all__ = [
    "ANCHORS_FILE",
    "ARTIFACT_FORMAT",
    "CONFIG_FILE",
    "READABLE_FORMATS",
    "REFERENCE_QUERIES",
    "WEIGHTS_FILE",
    "artifact_is_current",
    "check_reference_queries",
    "check_same_encoder",
    "read_artifact_config",
    "read_json",
    "read_pool_header",
    "read_weights",
]

ARTIFACT_FORMAT = "locus-artifact/3"
# format 1: network fields flat inside "training" and no recorded evidence bound; format 2: the
# fitted router's stack and guard inside the metadata (`ensemble`, `guard`), not stacked.json
READABLE_FORMATS = ("locus-artifact/1", "locus-artifact/2", ARTIFACT_FORMAT)
CONFIG_FILE = "config.json"
ANCHORS_FILE = "anchors.json"
WEIGHTS_FILE = "weights.safetensors"
REFERENCE_QUERIES = "reference_queries"  # tensor name: the calibration's reference queries


def read_json(path: Path) -> Any:
    """A JSON file of an artifact; a missing or unreadable one is a `LocusArtifactError`."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise LocusArtifactError(
            f"{path}: missing; expected a locus artifact folder ({CONFIG_FILE}, {ANCHORS_FILE}, "
            f"{WEIGHTS_FILE}) written by locus fit"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LocusArtifactError(f"{path}: unreadable ({error}); re-run locus fit") from error


def read_artifact_config(folder: Path) -> dict[str, Any]:
    """`config.json` of an artifact folder, with its format checked."""
    config = read_json(folder / CONFIG_FILE)
    if not isinstance(config, dict) or config.get("format") not in READABLE_FORMATS:
        found = config.get("format") if isinstance(config, dict) else type(config).__name__
        raise LocusArtifactError(
            f"{folder / CONFIG_FILE}: expected format {ARTIFACT_FORMAT!r}, found {found!r}; "
            "this is not a locus artifact (or one from an incompatible version)"
        )
    return config


def read_pool_header(
    folder: Path, config: Mapping[str, Any]
) -> tuple[str, int, list[str], NDArray[np.int64]]:
    """(text encoder name, query dim, llm_ids, evidence counts) of an artifact's config."""
    try:
        encoder_name = str(config["text_encoder"]["name"])
        query_dim = int(config["text_encoder"]["dim"])
        llm_ids = [str(x) for x in config["llm_ids"]]
        counts = np.asarray(config["evidence_counts"], dtype=np.int64)
    except (KeyError, TypeError, ValueError) as error:
        raise LocusArtifactError(
            f"{folder / CONFIG_FILE}: incomplete or invalid configuration ({error}); re-run "
            "locus fit"
        ) from error
    return encoder_name, query_dim, llm_ids, counts


def read_weights(folder: Path, load_file: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """The artifact's tensors through a safetensors loader (`safetensors.numpy` or `.torch`)."""
    from safetensors import SafetensorError

    try:
        return load_file(str(folder / WEIGHTS_FILE))
    except (OSError, SafetensorError, ValueError) as error:
        raise LocusArtifactError(
            f"{folder / WEIGHTS_FILE}: unreadable weights ({error}); re-run locus fit"
        ) from error


def check_reference_queries(array: NDArray[Any], query_dim: int, folder: Path) -> NDArray[Any]:
    """The artifact's reference query vectors (R, query_dim) as float32, checked."""
    vectors = np.asarray(array, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != query_dim or len(vectors) == 0:
        raise LocusArtifactError(
            f"{folder / WEIGHTS_FILE}: reference queries are {vectors.shape}, expected (R, "
            f"{query_dim}); re-run locus fit"
        )
    return vectors


def check_same_encoder(artifact: str, trained_with: str, workspace_encoder: str | None) -> None:
    """An artifact routes only the vectors it was trained on: same text encoder name."""
    if workspace_encoder is not None and workspace_encoder != trained_with:
        raise LocusArtifactError(
            f"artifact {artifact!r} was trained with text encoder {trained_with!r} but the "
            f"workspace's queries are encoded with {workspace_encoder!r}; re-run locus fit"
        )


def artifact_is_current(folder: str | Path) -> bool:
    """True where the folder holds an artifact in this version's format (`ARTIFACT_FORMAT`);
    an older one still loads, but `locus fit` would write it otherwise."""
    try:
        return read_artifact_config(Path(folder)).get("format") == ARTIFACT_FORMAT
    except LocusArtifactError:
        return False
