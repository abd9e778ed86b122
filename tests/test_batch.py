"""ImportBatch.from_long: the one validation point every importer ends in."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from locus.data.batch import ImportBatch
from locus.data.query_identity import normalise_text, text_hash
from locus.errors import LocusInputError


def build(rows: dict[str, list[object]]) -> ImportBatch:
    return ImportBatch.from_long(pd.DataFrame(rows), source="s", origin="f.csv")


def test_counts_and_blank_scores_are_not_evaluated() -> None:
    batch = build(
        {
            "llm_id": ["a", "a", "b", "b"],
            "query_id": ["1", "2", "1", "2"],
            "score": [1, "", 0.25, None],
        }
    )
    assert (batch.n_llms, batch.n_queries, batch.n_scores) == (2, 1, 2)
    assert sorted(batch.scores["score"].tolist()) == [0.25, 1.0]


@pytest.mark.parametrize(
    ("rows", "fragment"),
    [
        ({"llm_id": ["a"], "score": [1]}, "missing column 'query_id'"),
        ({"llm_id": [], "query_id": [], "score": []}, "no rows"),
        (
            {"llm_id": ["a", "a"], "query_id": ["1", "2"], "score": [1, "maybe"]},
            "row 2, column 'score': expected a number in [0, 1], a percentage (87%), true/false, "
            "yes/no, up/down, good/bad, pass/fail or correct/incorrect (any case), found 'maybe'",
        ),
        (
            {"llm_id": ["a"], "query_id": ["1"], "score": [1.5]},
            "row 1, column 'score': expected a number in [0, 1], found 1.5",
        ),
        (
            {"llm_id": ["a", "a"], "query_id": ["1", "2"], "score": ["0.5", "150%"]},
            "row 2, column 'score': expected a percentage in [0%, 100%], found '150%'",
        ),
        ({"llm_id": ["a"], "query_id": ["1"], "score": [-1]}, "found -1"),
        (
            {"llm_id": [" "], "query_id": ["1"], "score": [1]},
            "column 'llm_id': expected a non-empty",
        ),
        (
            {"llm_id": ["a", "a"], "query_id": ["1", "1"], "score": [1, 0]},
            "scores 0 here but 1 at row 1",
        ),
        (
            {"llm_id": ["a"], "query_id": ["1"], "score": [1], "split": ["dev"]},
            "expected one of train, val, test",
        ),
        (
            {"llm_id": ["a"], "query_id": ["1"], "score": [1], "cost_usd": [-0.1]},
            "column 'cost_usd': expected a number >= 0",
        ),
        ({"llm_id": ["a"], "query_id": ["1"], "score": [None]}, "every score is blank"),
    ],
)
def test_bad_input_names_place_expected_and_found(
    rows: dict[str, list[object]], fragment: str
) -> None:
    with pytest.raises(LocusInputError) as info:
        build(rows)
    message = str(info.value)
    assert fragment in message
    assert message.startswith("f.csv")
    assert "\n" not in message


def test_identical_duplicate_rows_collapse() -> None:
    batch = build({"llm_id": ["a", "a"], "query_id": ["1", "1"], "score": [1, 1]})
    assert batch.n_scores == 1


def test_same_id_with_two_texts_is_two_queries() -> None:
    batch = build(
        {
            "llm_id": ["a", "b"],
            "query_id": ["7", "7"],
            "score": [1, 0],
            "query_text": ["What is 2+2?", "What is 2+3?"],
        }
    )
    assert batch.n_queries == 2
    assert batch.scores["text_hash"].nunique() == 2


def test_text_identity_ignores_line_endings_and_outer_space() -> None:
    assert text_hash("a\r\nb  ") == text_hash("a\nb")
    assert text_hash("a b") != text_hash("a  b")
    assert normalise_text("e\u0301") == "\u00e9"


def test_costs_and_latencies_kept() -> None:
    batch = build(
        {"llm_id": ["a"], "query_id": ["1"], "score": [1], "cost_usd": [0.002], "latency_ms": [""]}
    )
    assert batch.scores["cost_usd"].tolist() == [0.002]
    assert np.isnan(batch.scores["latency_ms"].iloc[0])


def test_conflicting_task_for_one_query_is_an_error() -> None:
    with pytest.raises(LocusInputError, match="has task 'law' here but 'math'"):
        build(
            {"llm_id": ["a", "b"], "query_id": ["1", "1"], "score": [1, 0], "task": ["math", "law"]}
        )
