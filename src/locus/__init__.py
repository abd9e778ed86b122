"""locus: map a pool of LLMs from their evaluation results.

Nothing heavy is imported here: `import locus` is fast and has no side effects. `Locus` and
`TrainingConfig` need torch, so they are loaded on first use (`locus.Locus`,
`from locus import Locus`).
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
