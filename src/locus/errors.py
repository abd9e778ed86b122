"""Exceptions raised by locus.

Every error locus raises on purpose is a `LocusError`. Messages follow one pattern: where (file,
row, column), what was expected, what was found, and how to fix it. The CLI prints the message on
one line and exits with `exit_code`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "LocusArtifactError",
    "LocusConflictError",
    "LocusError",
    "LocusInputError",
    "LocusNotFittedError",
    "LocusNotFoundError",
    "LocusStoreError",
    "did_you_mean",
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


def did_you_mean(name: str, known: Iterable[str], n: int = 3) -> str:
    """' (did you mean ...?)' naming up to `n` of `known` nearest to `name`: those that hold it
    or that it holds, ignoring case, then the closest spellings (difflib); '' for none.

        >>> did_you_mean("gpt4", ["gpt-4", "gpt-4o", "claude-3"])
        " (did you mean 'gpt-4' or 'gpt-4o'?)"
    """
    import difflib

    choices = list(dict.fromkeys(known))
    lower = name.lower()
    held = [c for c in choices if lower and (lower in c.lower() or c.lower() in lower)]
    # get_close_matches' measure and cutoff, ties in the order given (it breaks them by name)
    matcher = difflib.SequenceMatcher(b=lower)
    ratios = []
    for choice in choices:
        matcher.set_seq1(choice.lower())
        ratios.append(matcher.ratio())
    ranked = sorted(range(len(choices)), key=lambda i: -ratios[i])
    spelt = [choices[i] for i in ranked if ratios[i] >= 0.6]
    near = list(dict.fromkeys([*spelt, *held]))[:n]
    if not near:
        return ""
    quoted = [repr(c) for c in near]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f" (did you mean {listed}?)"
