"""The artifact folder's files, and the torch-free readers and writers of what it holds.

    config.json           format, locus and torch versions, text encoder (name, dim), network
                          shapes, training hyper-parameters, the evidence bound, llm_ids,
                          evidence counts, best step, history, the manifest (`metadata`)
    anchors.json          per LLM, the text hashes of its anchor queries
    weights.safetensors   encoder.*, predictor.* (standardisation buffers included),
                          llm_embeddings (n_llms, d), reference_queries (R, dq)
    stacked.json          the fitted router's stack and guard, and where its kNN part is
    knn/                  the kNN router (a router folder: router.json + arrays.safetensors)
    costs/                the per-query cost model (a router folder; only where the workspace
                          had per-query costs) and validation.safetensors (the fit's validation
                          query vectors, which a budget is tuned on)

The whole folder is written and read by `locus.routing.router_artifact` (`save`, `load`);
each file's versions, and how an older one is read, are in `locus.artifact.formats`. No
pickle: loading reads JSON and tensors and runs no code from the artifact.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.artifact.formats import (
    ARTIFACT_FORMAT,
    READABLE_FORMATS,
    ROUTER_FOLDER_FORMAT,
    upgrade_config,
    upgrade_router_folder,
)
from locus.errors import LocusArtifactError

__all__ = [
    "ANCHORS_FILE",
    "ARRAYS_FILE",
    "ARTIFACT_FORMAT",
    "CONFIG_FILE",
    "COST_FOLDER",
    "FACTORS_FOLDER",
    "KNN_FOLDER",
    "READABLE_FORMATS",
    "REFERENCE_QUERIES",
    "ROUTER_FILE",
    "STACKED_FILE",
    "VALIDATION_FILE",
    "WEIGHTS_FILE",
    "artifact_is_current",
    "check_reference_queries",
    "check_same_encoder",
    "read_artifact_config",
    "read_json",
    "read_pool_header",
    "read_router_folder",
    "read_weights",
    "replaced_folder",
    "write_json",
    "write_router_folder",
]

CONFIG_FILE = "config.json"
ANCHORS_FILE = "anchors.json"
WEIGHTS_FILE = "weights.safetensors"
REFERENCE_QUERIES = "reference_queries"  # tensor name: the calibration's reference queries
STACKED_FILE = "stacked.json"
KNN_FOLDER = "knn"
FACTORS_FOLDER = "factors"  # the factor model a newcomer's "factor" reading onboards in
COST_FOLDER = "costs"  # the cost model (where the workspace had per-query costs), validation
VALIDATION_FILE = "validation.safetensors"  # inside COST_FOLDER
ROUTER_FILE = "router.json"  # a router folder's description
ARRAYS_FILE = "arrays.safetensors"  # a router folder's learned arrays


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


def write_json(path: Path, payload: Any) -> None:
    """A JSON file of an artifact, written whole (a temporary file renamed into place)."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(payload, indent=1) + "\n")
    temporary.replace(path)


@contextmanager
def replaced_folder(path: str | Path) -> Iterator[Path]:
    """A fresh staging folder to write into; when the block ends without an error, it takes the
    place of the folder `path` whole (a crash leaves the old folder or the new one, never a
    mix); on an error it is removed and `path` is left as it was."""
    folder = Path(path)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.with_name(f".{folder.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    retired = folder.with_name(f".{folder.name}.retired")
    shutil.rmtree(retired, ignore_errors=True)
    if folder.exists():
        folder.replace(retired)
    staging.replace(folder)
    shutil.rmtree(retired, ignore_errors=True)


def read_artifact_config(folder: Path) -> dict[str, Any]:
    """`config.json` of an artifact folder, upgraded to the current format's fields
    (`locus.artifact.formats.upgrade_config`; its `format` is the one the file has).

    Raises:
        LocusArtifactError: missing, unreadable, or of a format this version does not read.
    """
    return upgrade_config(read_json(folder / CONFIG_FILE), folder / CONFIG_FILE)


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
        return read_artifact_config(Path(folder))["format"] == ARTIFACT_FORMAT
    except LocusArtifactError:
        return False


def write_router_folder(
    path: str | Path,
    kind: str,
    llm_ids: Sequence[str],
    settings: Mapping[str, Any],
    arrays: Mapping[str, NDArray[Any]],
) -> Path:
    """Write a router folder (`ROUTER_FILE`: its format, `kind`, `llm_ids` and `settings`;
    `ARRAYS_FILE`: its learned `arrays`) into the folder `path`; return it."""
    from safetensors.numpy import save_file

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(folder / ARRAYS_FILE))
    description = {
        "format": ROUTER_FOLDER_FORMAT,
        "kind": kind,
        "llm_ids": list(llm_ids),
        **settings,
    }
    (folder / ROUTER_FILE).write_text(json.dumps(description, indent=2) + "\n")
    return folder


def read_router_folder(path: str | Path) -> tuple[dict[str, Any], dict[str, NDArray[Any]]]:
    """(description, arrays) of a folder written by `write_router_folder` (of any readable
    version: upgraded by `locus.artifact.formats.upgrade_router_folder`).

    Raises:
        LocusArtifactError: not a router folder, or one of a format this version does not read.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    folder = Path(path)
    try:
        description = json.loads((folder / ROUTER_FILE).read_text())
    except FileNotFoundError:
        raise LocusArtifactError(
            f"{folder}: not a saved router (no {ROUTER_FILE}); save one with router.save(path)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LocusArtifactError(f"{folder / ROUTER_FILE}: not valid JSON ({error})") from None
    try:
        arrays = load_file(str(folder / ARRAYS_FILE)) if (folder / ARRAYS_FILE).exists() else {}
    except (OSError, SafetensorError, ValueError) as error:
        raise LocusArtifactError(
            f"{folder / ARRAYS_FILE}: unreadable arrays ({error}); re-run locus fit"
        ) from error
    description, arrays = upgrade_router_folder(description, arrays, folder / ROUTER_FILE)
    missing = [key for key in ("kind", "llm_ids") if key not in description]
    if missing:
        raise LocusArtifactError(
            f"{folder / ROUTER_FILE}: damaged, no {missing[0]!r}; save the router again"
        )
    return description, arrays
