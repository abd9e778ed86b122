"""locus: map a pool of LLMs from their evaluation results.

Nothing heavy is imported here: `import locus` is fast and has no side effects. `Locus` and
`TrainingConfig` need torch, so they are loaded on first use (`locus.Locus`,
`from locus import Locus`).

Top-level modules (the packages below them say what they hold: data, store, text, nn,
artifact, routing, pipeline, benchmark, atlas, server, cli):

    locus.py         Locus: the facade over the networks: fit, embed, onboard, predict, save,
                     load (the artifact format: the `locus.artifact` package)
    facade_calibration.py  LogitCalibration: the facade's calibration of the predictor's
                     logits (quality, evidence quality, reference queries), which Locus inherits
    pool.py          LLMPool: the LLM embeddings of one artifact, in memory or in a workspace
    calibration.py   Calibration: scales and a shift of the predictor's logits; fit_logistic,
                     the one logistic fit every part of the router is weighted by
    metrics.py       routing and correctness metrics on numpy arrays
    offpolicy.py     sparse evidence (a log, one LLM per query): its overlap, and off-policy
                     estimates of a router's hit@1 with intervals (IPS, doubly robust)
    palette.py       one colour per routing method and per LLM family, for every plot
    errors.py        LocusError and its kinds (input, not found, artifact, store, not fitted)
    ray_cluster.py   ray_session: Ray for `--ray` (a local instance, or a cluster's head)
    extras.py        the optional extras, and the error naming the one a call needs
    _progress.py     progress callbacks injected into long library calls
    _plotting.py     matplotlib, loaded only when a picture is asked for
    _lazy.py         lazy_module: pandas named by the store and data modules, loaded on first use
    _version.py      the package version (the one place: pyproject.toml reads it)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from locus._version import __version__
from locus.data.batch import ImportBatch
from locus.data.table import ScoreTable
from locus.errors import (
    LocusArtifactError,
    LocusConflictError,
    LocusError,
    LocusInputError,
    LocusNotFittedError,
    LocusNotFoundError,
    LocusStoreError,
)

if TYPE_CHECKING:
    from locus.locus import Locus
    from locus.nn.training import TrainingConfig

_LAZY = {"Locus": "locus.locus", "TrainingConfig": "locus.nn.training"}


def __getattr__(name: str) -> Any:
    """Load the torch-backed names on first access (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'locus' has no attribute {name!r}")


__all__ = [
    "ImportBatch",
    "Locus",
    "LocusArtifactError",
    "LocusConflictError",
    "LocusError",
    "LocusInputError",
    "LocusNotFittedError",
    "LocusNotFoundError",
    "LocusStoreError",
    "ScoreTable",
    "TrainingConfig",
    "__version__",
]
