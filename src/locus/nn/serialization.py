"""Network weights <-> safetensors (no pickle: loading executes nothing from the file).

Several modules go into one file under prefixed keys, `"<name>.<parameter>"`, e.g.
`{"encoder": encoder, "predictor": predictor}` -> `encoder.token.weight`, `predictor.hidden.bias`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from os import PathLike

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load as _load_bytes
from safetensors.torch import load_file as _load_file
from safetensors.torch import save as _save_bytes
from safetensors.torch import save_file as _save_file
from torch import Tensor, nn

from locus.errors import LocusArtifactError, LocusInputError

__all__ = ["load_state", "load_state_from_safetensors", "save_state", "state_to_safetensors"]


def _flatten(modules: Mapping[str, nn.Module]) -> dict[str, Tensor]:
    tensors: dict[str, Tensor] = {}
    for name, module in modules.items():
        if not name or "." in name:
            raise LocusInputError(f"module names must be non-empty and dot-free; got {name!r}")
        for key, tensor in module.state_dict().items():
            # Own, contiguous CPU copies: safetensors refuses shared or strided storage.
            tensors[f"{name}.{key}"] = tensor.detach().to("cpu").contiguous().clone()
    return tensors


def _check_metadata(metadata: Mapping[str, str] | None) -> dict[str, str] | None:
    if metadata is None:
        return None
    bad = [key for key, value in metadata.items() if not isinstance(value, str)]
    if bad or not all(isinstance(key, str) for key in metadata):
        raise LocusInputError(
            f"safetensors metadata must map str to str; non-string values under {bad}. "
            "Serialise structured values with json.dumps first."
        )
    return dict(metadata)


def _restore(modules: Mapping[str, nn.Module], tensors: Mapping[str, Tensor], where: str) -> None:
    expected = _flatten(modules)
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise LocusArtifactError(
            f"{where}: weights do not match the networks built from the config; "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for key, tensor in expected.items():
        if tensors[key].shape != tensor.shape or tensors[key].dtype != tensor.dtype:
            raise LocusArtifactError(
                f"{where}: tensor {key} is {tensors[key].dtype} {tuple(tensors[key].shape)}, "
                f"the network expects {tensor.dtype} {tuple(tensor.shape)}"
            )
    for name, module in modules.items():
        prefix = f"{name}."
        state = {key[len(prefix) :]: t for key, t in tensors.items() if key.startswith(prefix)}
        with torch.no_grad():
            module.load_state_dict(state, strict=True)


def state_to_safetensors(
    modules: Mapping[str, nn.Module], metadata: Mapping[str, str] | None = None
) -> bytes:
    """Serialise the weights of named modules into safetensors bytes.

    Args:
        modules: name -> module, e.g. {"encoder": encoder, "predictor": predictor}.
        metadata: optional str -> str pairs stored in the safetensors header.

    Example:
        >>> data = state_to_safetensors({"predictor": CorrectnessPredictor(query_dim=8)})
        >>> load_state_from_safetensors({"predictor": CorrectnessPredictor(query_dim=8)}, data)
        {}
    """
    return _save_bytes(_flatten(modules), metadata=_check_metadata(metadata))


def load_state_from_safetensors(modules: Mapping[str, nn.Module], data: bytes) -> dict[str, str]:
    """Load safetensors bytes written by `state_to_safetensors` into the same-shaped modules.

    Returns:
        the metadata of the header (empty dict if none).

    Raises:
        LocusArtifactError: corrupt data, or keys / shapes that do not match the modules.
    """
    try:
        tensors = _load_bytes(data)
    except (SafetensorError, ValueError) as error:
        raise LocusArtifactError(f"not a readable safetensors payload: {error}") from error
    _restore(modules, tensors, "safetensors payload")
    return _header_metadata(data)


def save_state(
    modules: Mapping[str, nn.Module],
    path: str | PathLike[str],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write the weights of named modules to a `.safetensors` file (see `state_to_safetensors`)."""
    _save_file(_flatten(modules), str(path), metadata=_check_metadata(metadata))


def load_state(modules: Mapping[str, nn.Module], path: str | PathLike[str]) -> dict[str, str]:
    """Load a `.safetensors` file written by `save_state` into the modules; returns its metadata.

    Raises:
        LocusArtifactError: unreadable file, or keys / shapes that do not match the modules.
    """
    try:
        tensors = _load_file(str(path))
        with safe_open(str(path), framework="pt") as handle:
            header = dict(handle.metadata() or {})
    except (OSError, SafetensorError, ValueError) as error:
        raise LocusArtifactError(f"{path}: not a readable safetensors file: {error}") from error
    _restore(modules, tensors, str(path))
    return header


def _header_metadata(data: bytes) -> dict[str, str]:
    # Layout: 8-byte little-endian header length, then the JSON header.
    size = int.from_bytes(data[:8], "little")
    metadata = json.loads(data[8 : 8 + size]).get("__metadata__") or {}
    return {str(key): str(value) for key, value in metadata.items()}
