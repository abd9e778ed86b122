"""Graders on the answer formats models write, and against MMLU-Pro's own extracted letters."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from locus.data.graders import extract_choice, extract_number, grade, normalise_answer
from locus.errors import LocusInputError


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("Let's think step by step. ... The answer is (C).", "C"),
        ("the answer is D", "D"),
        ("Answer: B", "B"),
        ("Some reasoning.\nAnswer: (E) because ...", "E"),
        ("I pick **F**.", "F"),
        ("Therefore (A)", "A"),
        ("G", "G"),
        ("the answer is:\nB. Gas B has the highest critical temperature", "B"),
        ("Thus, the answer is:\n\\[\n\\boxed{C}\n\\]", "C"),
        ("", None),
        ("I cannot decide between these options.", None),
    ],
)
def test_the_choice_in_the_formats_models_write(text: str, letter: str | None) -> None:
    assert extract_choice(text) == letter


def test_numbers_exact_and_unknown_graders() -> None:
    assert extract_number("so 3 + 4 = 7.\n#### 7") == 7.0
    assert extract_number("The answer is $1,250.") == 1250.0
    assert extract_number("\\boxed{-0.5}") == -0.5
    assert extract_number("no number here") is None
    assert grade("number", "we get 12 apples", "12") == 1.0
    assert grade("number", "we get 13 apples", "12") == 0.0
    assert grade("number", "many apples", "12") is None
    assert normalise_answer("The  Eiffel Tower!") == "eiffel tower"
    assert grade("exact", "the eiffel tower.", "Eiffel Tower") == 1.0
    assert grade("choice", "The answer is (C).", "c") == 1.0
    with pytest.raises(LocusInputError, match="unknown grader 'fuzzy'"):
        grade("fuzzy", "a", "b")


def test_the_choice_grader_agrees_with_mmlu_pros_own_extraction(shared_data: Path) -> None:
    """On real generated answers of three models (an API model, an instruct and a base model),
    the letter read agrees with the file's `pred` on >= 99% of the answers both read."""
    folder = shared_data / "mmlu_pro" / "eval_results"
    both = agree = 0
    for name in ("gemini-1.5-pro-002", "Meta-Llama-3_1-8B-Instruct", "Mistral-7B-v0.1"):
        with zipfile.ZipFile(folder / f"model_outputs_{name}_5shots.zip") as archive:
            records = json.loads(archive.read(archive.namelist()[0]))
        for record in records[:3000]:
            if not isinstance(record, dict):
                continue
            text = record.get("model_outputs") or record.get("generated_text") or ""
            ours, theirs = extract_choice(str(text)), record.get("pred") or None
            if ours and theirs:
                both += 1
                agree += ours == theirs
    assert both > 5000 and agree / both >= 0.99, (agree, both)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Paris", 1.0),
        ("The answer is Paris.", 1.0),
        ("Let me think.\nAnswer: paris\nThat is the capital.", 1.0),
        ("I think Paris is nice", 0.0),
        ("The answer is Lyon.", 0.0),
        ("", None),
    ],
)
def test_exact_match_reads_the_marked_answer(answer: str, expected: float | None) -> None:
    assert grade("exact", answer, "Paris") == expected
