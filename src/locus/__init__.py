"""locus: map a pool of LLMs from their evaluation results.

Nothing heavy is imported here: `import locus` is fast and has no side effects.
"""

from __future__ import annotations

__version__ = "0.1.0"

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

__all__ = [
    "ImportBatch",
    "LocusArtifactError",
    "LocusConflictError",
    "LocusError",
    "LocusInputError",
    "LocusNotFittedError",
    "LocusNotFoundError",
    "LocusStoreError",
    "ScoreTable",
    "__version__",
]
