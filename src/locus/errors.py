"""Exceptions raised by locus.

Every error locus raises on purpose is a `LocusError`. Messages follow one pattern: where (file,
row, column), what was expected, what was found, and how to fix it. The CLI prints the message on
one line and exits with `exit_code`.
"""

from __future__ import annotations

__all__ = [
    "LocusArtifactError",
    "LocusConflictError",
    "LocusError",
    "LocusInputError",
    "LocusNotFittedError",
    "LocusNotFoundError",
    "LocusStoreError",
]


class LocusError(Exception):
    """Base class of every error locus raises on purpose."""

    exit_code: int = 1


class LocusInputError(LocusError, ValueError):
    """Bad user input: a file, a column, a value, an argument."""

    exit_code = 2


class LocusConflictError(LocusInputError):
    """New data contradicts what the store already holds (use `replace=True` to overwrite)."""


class LocusStoreError(LocusError):
    """The workspace cannot be opened or written (wrong path, foreign or newer schema)."""

    exit_code = 2


class LocusNotFoundError(LocusInputError, LookupError):
    """A named thing (LLM, query, artifact, encoder) is not in the workspace."""


class LocusArtifactError(LocusError):
    """A saved artifact is corrupt, foreign, or incompatible with this workspace."""

    exit_code = 2


class LocusNotFittedError(LocusError, RuntimeError):
    """A method that needs a trained instance was called before `fit` or `load`."""
