"""Graders: a model's raw answer text against a reference answer -> a score in [0, 1], or None
when the answer cannot be read (counted and shown by the caller, never scored as wrong).

- `extract_choice`: the option letter a multiple-choice answer gives, in the formats models
  write: "The answer is (C)", "Answer: C", "**C**", "(C)", "C) ...", a bare "C". The rules run
  in order and the first that finds a letter wins: an explicit "answer is X" (its first
  occurrence), then the last "Answer: X", then a final bolded or bracketed letter, then the
  last letter standing alone among the options.
- `extract_number`: the final number of a worked answer ("#### 42", "the answer is 3.5",
  "\\boxed{12}", else the last number in the text), thousands separators and a trailing
  period tolerated.
- `normalise_answer`: lower case, no punctuation, articles or extra spaces; `exact` compares
  the whole answer, or what follows its last "answer is" / "Answer:" / "####", with the
  reference.
- `guess_grader`: the grader for a reference answer when its source names none: `choice` for
  a lone option letter of a query that lists lettered options, `number` for a number (or a
  worked answer ending "#### N"), `exact` otherwise.

    >>> extract_choice("Let's think. ... The answer is (C).")
    'C'
    >>> grade("choice", "**B**", "B"), grade("number", "so it costs $1,250.", "1250")
    (1.0, 1.0)
    >>> grade("choice", "I cannot tell.", "A") is None
    True
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable

from locus.errors import LocusInputError

__all__ = [
    "GRADERS",
    "extract_choice",
    "extract_number",
    "grade",
    "guess_grader",
    "normalise_answer",
    "row_graders",
]

LETTERS = "ABCDEFGHIJ"


def extract_choice(text: str, letters: str = LETTERS) -> str | None:
    """The option letter `text` answers with, or None (see the module's rules)."""
    if not isinstance(text, str) or not text.strip():
        return None
    span = f"[{re.escape(letters)}]"
    explicit = re.search(rf"answer is:?\s*\(?\**\s*({span})\b\)?", text, re.IGNORECASE)
    if explicit and explicit.group(1).upper() in letters:
        return explicit.group(1).upper()
    labelled = re.findall(rf"[aA]nswer\s*:\s*\**\(?\s*({span})\b", text)
    if labelled:
        return labelled[-1]
    marked = re.findall(rf"(?:\*\*\(?({span})\)?\*\*|\(({span})\))", text)
    if marked:
        last = marked[-1]
        return last[0] or last[1]
    # a letter standing alone; "I" followed by a lower-case word is the pronoun, not option I
    others = re.escape(letters.replace("I", ""))
    pronoun_free = r"(?<![\w'])I(?![\w'])(?!\s+[a-z])"
    alone = re.findall(rf"(?<![\w'])[{others}](?![\w'])|{pronoun_free}", text)
    return alone[-1] if alone else None


_NUMBER = r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+"


def extract_number(text: str) -> float | None:
    """The final number of `text` (see the module's rules), or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    for pattern in (
        rf"####\s*\$?\s*({_NUMBER})",
        rf"\\boxed\{{\s*\$?\s*({_NUMBER})",
        rf"answer is:?\s*\$?\s*({_NUMBER})",
    ):
        found = re.findall(pattern, text, re.IGNORECASE)
        if found:
            return _to_float(found[-1])
    found = re.findall(_NUMBER, text)
    return _to_float(found[-1]) if found else None


def _to_float(raw: str) -> float | None:
    try:
        return float(raw.replace(",", "").rstrip("."))
    except ValueError:
        return None


def normalise_answer(text: str) -> str:
    """Lower case; no punctuation, no articles (a, an, the), single spaces."""
    lowered = "".join(ch for ch in str(text).lower() if ch not in string.punctuation)
    return " ".join(word for word in lowered.split() if word not in ("a", "an", "the"))


def _choice(answer: str, reference: str) -> float | None:
    found = extract_choice(answer)
    return None if found is None else float(found == str(reference).strip().upper())


def _number(answer: str, reference: str, rel_tol: float = 1e-6) -> float | None:
    found, expected = extract_number(answer), extract_number(str(reference))
    if found is None or expected is None:
        return None
    return float(math.isclose(found, expected, rel_tol=rel_tol, abs_tol=1e-9))


_ANSWER_MARK = re.compile(r"(?:answer is|answer\s*:|####)\s*", re.IGNORECASE)


def _exact(answer: str, reference: str) -> float | None:
    """The whole answer, or what follows its last "answer is" / "Answer:" / "####" (its first
    line), equals the reference once normalised."""
    if not isinstance(answer, str) or not answer.strip():
        return None
    expected = normalise_answer(reference)
    candidates = [answer]
    marks = list(_ANSWER_MARK.finditer(answer))
    if marks:
        candidates.append(answer[marks[-1].end() :].strip().split("\n")[0])
    return float(any(normalise_answer(c) == expected for c in candidates))


GRADERS: dict[str, Callable[[str, str], float | None]] = {
    "choice": _choice,
    "number": _number,
    "exact": _exact,
}


_OPTION_LINE = re.compile(r"(?m)^\s*\(?[A-J][.):]\s")
_WHOLE_NUMBER = re.compile(rf"^\s*(?:####\s*)?\$?\s*(?:{_NUMBER})\s*\.?\s*$")


def guess_grader(reference: str, query_text: str = "") -> str:
    """The grader for `reference` (see the module): `choice`, `number` or `exact`.

    >>> guess_grader("C", "Which?\\nA. one\\nB. two\\nC. three"), guess_grader("1,250")
    ('choice', 'number')
    >>> guess_grader("Paris"), guess_grader("so 6 + 6 = 12\\n#### 12")
    ('exact', 'number')
    """
    answer = str(reference).strip()
    if len(answer) == 1 and answer.upper() in LETTERS and _OPTION_LINE.search(query_text):
        return "choice"
    if _WHOLE_NUMBER.match(answer) or re.search(rf"####\s*\$?\s*(?:{_NUMBER})\s*$", answer):
        return "number"
    return "exact"


def grade(kind: str, answer: str, reference: str) -> float | None:
    """`answer` graded against `reference` by the grader `kind` (one of `GRADERS`): 1.0, 0.0,
    or None where the answer cannot be read.

    Raises:
        LocusInputError: an unknown grader.
    """
    try:
        grader = GRADERS[kind]
    except KeyError:
        raise LocusInputError(
            f"unknown grader {kind!r}; expected one of {', '.join(GRADERS)}"
        ) from None
    return grader(answer, reference)


def row_graders(
    given: list[str | None],
    references: list[str | None],
    texts: list[str | None],
    origin: str,
    describe_row: Callable[[int], str],
) -> list[str | None]:
    """Each row's grader: the one given (checked), else guessed from its reference
    (`guess_grader`); None without a reference."""
    out: list[str | None] = []
    guessed: dict[tuple[str, str], str] = {}
    for position, (grader, reference, text) in enumerate(
        zip(given, references, texts, strict=True)
    ):
        if grader is not None:
            grader = grader.strip().lower()
            if grader not in GRADERS:
                raise LocusInputError(
                    f"{origin}: {describe_row(position)}, column 'grader': expected one of "
                    f"{', '.join(GRADERS)}, found {grader!r}; fix the cell or leave it blank "
                    "(the grader is then guessed from the reference)"
                )
        if reference is not None and grader is None:
            key = (reference, text or "")
            grader = guessed.get(key) or guessed.setdefault(key, guess_grader(*key))
        out.append(None if reference is None else grader)
    return out
