"""The `scores-json` importer: graded scores, text-derived ids, tasks, repeats."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from locus.data.importers import import_scores_json
from locus.data.query_identity import text_hash
from locus.errors import LocusInputError

from .conftest import write_json_gz


def test_folder_with_graded_scores(scores_json_folder: Path) -> None:
    batch = import_scores_json(scores_json_folder)
    assert batch.source == "scores-json"
    assert batch.llms["llm_id"].tolist() == ["m/one", "two"]
    queries = batch.queries.set_index("query_text")
    assert queries.loc["Q1\nA. x\nB. y", "task"] == "mmlu_test"  # from the file name
    assert queries.loc["What is 3*3?", "task"] == "gsm8k"  # from the record
    assert queries.loc["Q1\nA. x\nB. y", "query_id"] == text_hash("Q1\nA. x\nB. y")[:16]
    scores = batch.scores.set_index(["llm_id", "query_id"])["score"]
    assert scores[("m/one", text_hash("Q2\nA. x\nB. y")[:16])] == 0.5


def test_ids_are_stable_across_files_and_runs(tmp_path: Path) -> None:
    write_json_gz(tmp_path / "a.json.gz", [{"question": "Same?", "scores": {"x": 1}}])
    first = import_scores_json(tmp_path / "a.json.gz").queries["query_id"].tolist()
    (tmp_path / "b.json").write_text('[{"question": "Same?", "scores": {"y": 0}}]')
    second = import_scores_json(tmp_path / "b.json").queries["query_id"].tolist()
    assert first == second == [text_hash("Same?")[:16]]


def test_record_id_is_used_when_given(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '[{"id": 7, "question": "A", "scores": {"x": 1}},'
        ' {"query_id": "q-9", "question": "B", "scores": {"x": 0}}]'
    )
    assert sorted(import_scores_json(path).queries["query_id"]) == ["7", "q-9"]


def test_null_score_is_not_evaluated(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"question": "A", "scores": {"x": 1, "y": null}}]')
    assert import_scores_json(path).n_scores == 1


def test_repeated_text_is_averaged_and_keeps_its_first_task(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_json_gz(
        tmp_path / "a_train.json.gz",
        [{"question": "Dup?", "scores": {"x": 1.0}}, {"question": "Dup?", "scores": {"x": 0.5}}],
    )
    write_json_gz(tmp_path / "b_test.json.gz", [{"question": "Dup?", "scores": {"x": 0.0}}])
    with caplog.at_level(logging.WARNING, logger="locus.data.importers"):
        batch = import_scores_json(tmp_path)
    assert batch.n_queries == 1
    assert batch.queries["task"].tolist() == ["a_train"]
    assert batch.scores["score"].tolist() == [pytest.approx(0.5)]
    assert "averaged" in caplog.text


def test_repeats_error_reports_both_places(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '[{"question": "Dup?", "scores": {"x": 1}}, {"question": "Other", "scores": {"x": 1}},'
        ' {"question": "Dup?", "scores": {"x": 0}}]'
    )
    with pytest.raises(LocusInputError) as caught:
        import_scores_json(path, repeats="error")
    message = str(caught.value)
    assert "s.json: record 3, LLM 'x'" in message and "s.json: record 1, LLM 'x'" in message


def test_bad_value_is_reported_even_when_repeated(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '[{"question": "Dup?", "scores": {"x": 1}}, {"question": "Dup?", "scores": {"x": 1.5}}]'
    )
    with pytest.raises(LocusInputError, match="record 2, LLM 'x'"):
        import_scores_json(path)


def test_non_numeric_score(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"question": "A", "scores": {"x": "high"}}]')
    with pytest.raises(LocusInputError, match="expected a number"):
        import_scores_json(path)


def test_score_outside_unit_interval(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '[{"question": "A", "scores": {"x": 0.5}}, {"question": "B", "scores": '
        '{"x": 0.2, "y": 97}}]'
    )
    with pytest.raises(LocusInputError) as caught:
        import_scores_json(path)
    assert "s.json: record 2, LLM 'y'" in str(caught.value)


def test_record_without_text(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"prompt": "A", "scores": {"x": 1}}]')
    with pytest.raises(LocusInputError, match="record 1: expected the query text"):
        import_scores_json(path)


def test_record_without_scores_object(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"question": "A", "scores": [1, 0]}]')
    with pytest.raises(LocusInputError, match="field 'scores'"):
        import_scores_json(path)


def test_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"question": "A", "scores": {"x": 1}')
    with pytest.raises(LocusInputError, match="malformed JSON"):
        import_scores_json(path)


def test_truncated_gzip(tmp_path: Path) -> None:
    path = write_json_gz(
        tmp_path / "s.json.gz",
        [{"question": f"Q{i}", "scores": {"x": i % 2}} for i in range(500)],
    )
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(LocusInputError, match="truncated"):
        import_scores_json(path)


def test_not_a_list(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"question": "A"}')
    with pytest.raises(LocusInputError, match="found a JSON dict"):
        import_scores_json(path)


def test_unknown_repeat_policy(scores_json_folder: Path) -> None:
    write_json_gz(
        scores_json_folder / "dup.json.gz",
        [{"question": "What is 3*3?", "scores": {"two": 1.0}}],
    )
    with pytest.raises(LocusInputError, match="repeats="):
        import_scores_json(scores_json_folder, repeats="max")  # type: ignore[arg-type]


def test_same_text_in_two_files_for_different_llms_keeps_the_first_task(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('[{"question": "Shared?", "scores": {"x": 1}}]')
    (tmp_path / "b.json").write_text('[{"question": "Shared?", "scores": {"y": 0}}]')
    batch = import_scores_json(tmp_path)
    assert batch.queries["task"].tolist() == ["a"]
    assert batch.n_scores == 2
