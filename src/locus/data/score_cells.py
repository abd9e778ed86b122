"""Score and number cells as people write them: `parse_scores` reads a number in [0, 1], a
percentage (``87%`` -> 0.87), ``true``/``false`` or ``yes``/``no`` in any case, each cell by
its own form; `parse_numbers` a plain numeric column. Blank cells are NaN ("not evaluated"),
never an error; what cannot be read is flagged for the caller to report
(`locus.data.batch`, the importers).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from locus._lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

__all__ = ["SCORE_FORMS", "ParsedScores", "parse_numbers", "parse_scores"]

SCORE_FORMS = (
    "a number in [0, 1], a percentage (87%), true/false, yes/no, up/down, good/bad, pass/fail "
    "or correct/incorrect (any case)"
)
# a score cell written as a word, compared lowercased: what pandas writes for a bool column
# (True/False) and what people type
_SCORE_WORDS = {
    "true": 1.0, "false": 0.0, "yes": 1.0, "no": 0.0,
    # feedback and grades as logs write them
    "up": 1.0, "down": 0.0, "thumbs_up": 1.0, "thumbs_down": 0.0, "👍": 1.0, "👎": 0.0,
    "good": 1.0, "bad": 0.0, "positive": 1.0, "negative": 0.0, "pass": 1.0, "fail": 0.0,
    "correct": 1.0, "incorrect": 0.0, "right": 1.0, "wrong": 0.0,
}  # fmt: skip
_PERCENT = re.compile(r"^-?(?:\d+(?:\.\d*)?|\.\d+)\s*%$")


def parse_numbers(
    raw: pd.Series, *, low: float | None, high: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse a column of numbers: (values with NaN for blanks, unparsable mask, out-of-range mask).

    Blank cells ("", "nan", "None", "null", "NA", missing) are NaN, never an error; infinities
    are out of range.
    """
    if raw.dtype == bool:
        raw = raw.astype(float)
    text = raw.astype(str).str.strip()
    blank = raw.isna().to_numpy() | text.isin(["", "nan", "NaN", "None", "null", "NA"]).to_numpy()
    parsed = pd.to_numeric(raw.where(~blank), errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(parsed) & ~blank
    finite = ~np.isnan(parsed)
    outside = np.isinf(parsed)
    if low is not None:
        outside = outside | (finite & (parsed < low))
    if high is not None:
        outside = outside | (finite & (parsed > high))
    return parsed, bad, outside


class ParsedScores(NamedTuple):
    """A parsed score column (`parse_scores`), every array of shape (n_rows,)."""

    values: np.ndarray  # float, NaN where blank or unusable
    unparsable: np.ndarray  # bool: neither blank nor in one of `SCORE_FORMS`
    outside: np.ndarray  # bool: parsed but outside [0, 1] (a percentage outside 0-100%)
    percent: np.ndarray  # bool: written as a percentage
    notes: tuple[str, ...]  # what was read as what, e.g. "score: percentages read as ..."


def parse_scores(raw: pd.Series) -> ParsedScores:
    """Parse a score column, each cell by its own form (`SCORE_FORMS`).

    A number is itself, ``87%`` is 0.87, ``true``/``yes`` (any case) is 1 and ``false``/``no``
    is 0; a column may mix the forms. Blank cells are NaN (not evaluated), never an error.

    >>> parse_scores(pd.Series(["1", "87%", "False", "YES", ""])).values.tolist()
    [1.0, 0.87, 0.0, 1.0, nan]
    """
    values, unparsable, outside = parse_numbers(raw, low=0.0, high=1.0)
    percent = np.zeros(len(raw), dtype=bool)
    if not unparsable.any():
        return ParsedScores(values, unparsable, outside, percent, ())
    values, unparsable, outside = values.copy(), unparsable.copy(), outside.copy()
    where = np.flatnonzero(unparsable)
    text = raw.iloc[where].astype(str).str.strip()
    words = text.str.lower().map(_SCORE_WORDS).to_numpy(dtype=float)
    is_word = ~np.isnan(words)
    is_percent = text.str.match(_PERCENT).to_numpy(dtype=bool)
    percents = pd.to_numeric(text.str[:-1].str.strip().where(is_percent), errors="coerce")
    fractions = percents.to_numpy(dtype=float) / 100.0
    values[where] = np.where(is_word, words, np.where(is_percent, fractions, np.nan))
    unparsable[where] = ~(is_word | is_percent)
    outside[where] = is_percent & ((fractions < 0.0) | (fractions > 1.0))
    percent[where] = is_percent
    notes = []
    if is_percent.any():
        example = text[is_percent].iloc[0]
        notes.append(
            f"score: percentages read as fractions ({example} -> {fractions[is_percent][0]:g})"
        )
    if is_word.any():
        found = sorted(set(text[is_word]), key=lambda word: (-_SCORE_WORDS[word.lower()], word))
        read = ", ".join(f"{word} -> {_SCORE_WORDS[word.lower()]:g}" for word in found)
        notes.append(f"score: words read as numbers ({read})")
    return ParsedScores(values, unparsable, outside, percent, tuple(notes))
