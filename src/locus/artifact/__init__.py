"""The artifact: what `locus fit` writes, its typed manifest, its readers with and without torch.

formats.py           every versioned file's format (locus-artifact/N, locus-stacked/N, the router
                     folder's N), what each version added, and the one upgrade step that reads
                     an older version as the current one (else a clear error)
layout.py            the folder's files; torch-free readers and writers: config.json (upgraded),
                     the weights, router folders (router.json + arrays.safetensors),
                     replaced_folder (a folder replaced whole); artifact_is_current
manifest.py          Manifest: what a fit records (fit id, split seed, calibration, evidence
                     means, checksums), typed; the only reader of config.json's metadata
numpy_predictor.py   NumpyPredictor, read_for_routing: the predictor and fit-time pool in numpy
                     (routing never imports torch)
torch_io.py          Artifact, save_artifact, load_artifact: the networks in torch

The whole folder, the fitted router's files (stacked.json, knn/, costs/) with the networks, is
written and read by `locus.routing.router_artifact` (`save`, `load`).

    >>> from locus.artifact import Manifest, read_for_routing             # doctest: +SKIP
    >>> read_for_routing("artifacts/default").manifest.split_seed  # doctest: +SKIP
"""

from typing import TYPE_CHECKING, Any

from locus.artifact.formats import ARTIFACT_FORMAT, READABLE_FORMATS
from locus.artifact.layout import artifact_is_current, check_same_encoder
from locus.artifact.manifest import Manifest
from locus.artifact.numpy_predictor import NumpyPredictor, RoutingArtifact, read_for_routing

if TYPE_CHECKING:
    from locus.artifact.torch_io import Artifact, load_artifact, save_artifact

__all__ = [
    "ARTIFACT_FORMAT",
    "READABLE_FORMATS",
    "Artifact",
    "Manifest",
    "NumpyPredictor",
    "RoutingArtifact",
    "artifact_is_current",
    "check_same_encoder",
    "load_artifact",
    "read_for_routing",
    "save_artifact",
]


def __getattr__(name: str) -> Any:
    """The torch side (`torch_io`) only when asked for: `import locus.artifact` stays
    torch-free."""
    if name in ("Artifact", "load_artifact", "save_artifact"):
        from locus.artifact import torch_io

        return getattr(torch_io, name)
    raise AttributeError(f"module 'locus.artifact' has no attribute {name!r}")
