"""The `mmlu-pro` importer on tiny eval_results folders with known answers."""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path

import pytest

from locus.data.importers import import_mmlu_pro
from locus.data.importers.mmlu_pro import mmlu_pro_llm_id
from locus.errors import LocusInputError

from .conftest import ProgressRecord, mmlu_record, write_mmlu_zip


@pytest.mark.parametrize(
    ("name", "llm_id"),
    [
        ("model_outputs_Llama-2-7b-hf_5shots.zip", "Llama-2-7b-hf"),
        ("model_outputs_gemini-1.5-pro-002_5shots.zip", "gemini-1.5-pro-002"),
        ("model_outputs_Yi-6B.json", "Yi-6B"),
        ("mine_0shots.json.gz", "mine_0shots"),
        ("_5shots.zip", "_5shots"),
    ],
)
def test_llm_id_from_file_name(name: str, llm_id: str) -> None:
    assert mmlu_pro_llm_id(Path(name)) == llm_id


def test_scores_texts_and_tasks(mmlu_folder: Path, progress_record: ProgressRecord) -> None:
    batch = import_mmlu_pro(mmlu_folder, progress=progress_record)
    assert batch.source == "mmlu-pro"
    assert batch.llms["llm_id"].tolist() == ["llm-a", "llm-b"]
    means = batch.scores.groupby("llm_id")["score"].mean().to_dict()
    assert means == {"llm-a": 0.5, "llm-b": 0.75}
    assert progress_record.tasks == [("reading MMLU-Pro results", 2)]
    assert progress_record.advanced == [2]

    queries = batch.queries
    assert sorted(queries["query_id"].unique()) == ["1", "2", "3", "4"]
    assert len(queries) == 5  # question 3 was revised in llm-b's file: a second query
    texts = queries[queries["query_id"] == "1"]["query_text"].tolist()
    # the JSON list and the Python-list string of the same options give one query
    assert texts == ["Question 1?\nA. zero\nB. one\nC. two\nD. three"]
    assert dict(zip(queries["query_id"], queries["task"], strict=True)) == {
        "1": "math",
        "2": "law",
        "3": "math",
        "4": "law",
    }


def test_revised_question_is_scored_under_its_own_text(mmlu_folder: Path) -> None:
    batch = import_mmlu_pro(mmlu_folder)
    three = batch.scores[batch.scores["query_id"] == "3"]
    assert three["text_hash"].nunique() == 2
    assert sorted(three["score"]) == [0.0, 1.0]


def test_non_record_items_are_skipped_and_logged(
    mmlu_folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="locus.data.importers"):
        batch = import_mmlu_pro(mmlu_folder)
    assert batch.scores.groupby("llm_id").size().to_dict() == {"llm-a": 4, "llm-b": 4}
    assert "skipped 1 list items" in caplog.text


def test_json_files_and_single_file(tmp_path: Path) -> None:
    path = tmp_path / "model_outputs_solo_5shots.json"
    path.write_text(json.dumps([mmlu_record(1, "B"), mmlu_record(2, "C")]))
    batch = import_mmlu_pro(path)
    assert batch.llms["llm_id"].tolist() == ["solo"]
    assert batch.n_scores == 2


def test_answer_from_answer_index_when_answer_missing(tmp_path: Path) -> None:
    record = mmlu_record(1, "C", answer_index="2")
    del record["answer"]
    write_mmlu_zip(tmp_path / "x.zip", [record])
    assert import_mmlu_pro(tmp_path).scores["score"].tolist() == [1.0]


def test_ignores_other_files_in_the_folder(mmlu_folder: Path) -> None:
    (mmlu_folder / "README.md").write_text("notes")
    (mmlu_folder / "models.csv").write_text("a,b\n")
    assert import_mmlu_pro(mmlu_folder).n_llms == 2


# --- errors ------------------------------------------------------------------------------------


def test_truncated_zip(mmlu_folder: Path) -> None:
    path = mmlu_folder / "model_outputs_llm-a_5shots.zip"
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(LocusInputError) as caught:
        import_mmlu_pro(mmlu_folder)
    assert "model_outputs_llm-a_5shots.zip" in str(caught.value)
    assert "zip" in str(caught.value)


def test_corrupt_member(tmp_path: Path) -> None:
    path = write_mmlu_zip(tmp_path / "x.zip", [mmlu_record(i, "B") for i in range(200)])
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = b"\x00" * 8
    path.write_bytes(bytes(data))
    with pytest.raises(LocusInputError, match=r"x\.zip"):
        import_mmlu_pro(tmp_path)


def test_malformed_json_inside_zip(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "x.zip", "w") as archive:
        archive.writestr("x.json", '[{"question_id": 1,')
    with pytest.raises(LocusInputError) as caught:
        import_mmlu_pro(tmp_path)
    assert "x.zip" in str(caught.value) and "malformed JSON" in str(caught.value)


def test_zip_without_json(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "x.zip", "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(LocusInputError, match=r"no \.json file inside the zip"):
        import_mmlu_pro(tmp_path)


def test_document_not_a_list(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"accuracy": 0.5}')
    with pytest.raises(LocusInputError, match="found a JSON dict"):
        import_mmlu_pro(tmp_path)


def test_record_missing_a_field_names_zip_and_record(tmp_path: Path) -> None:
    broken = mmlu_record(2, "B")
    del broken["pred"]
    write_mmlu_zip(tmp_path / "model_outputs_m_5shots.zip", [mmlu_record(1, "B"), broken])
    with pytest.raises(LocusInputError) as caught:
        import_mmlu_pro(tmp_path)
    assert "model_outputs_m_5shots.zip: record 2" in str(caught.value)
    assert "'pred'" in str(caught.value)


@pytest.mark.parametrize("options", ["not a list", "['unclosed", "__import__('os')", 3])
def test_unparsable_options(tmp_path: Path, options: object) -> None:
    write_mmlu_zip(tmp_path / "x.zip", [mmlu_record(1, "B", options=options)])
    with pytest.raises(LocusInputError, match="record 1, field 'options'"):
        import_mmlu_pro(tmp_path)


def test_no_answer_at_all(tmp_path: Path) -> None:
    record = mmlu_record(1, "B", answer_index="x")
    del record["answer"]
    write_mmlu_zip(tmp_path / "x.zip", [record])
    with pytest.raises(LocusInputError, match="answer_index"):
        import_mmlu_pro(tmp_path)


def test_category_disagreeing_between_files_is_reported(tmp_path: Path) -> None:
    write_mmlu_zip(tmp_path / "a.zip", [mmlu_record(1, "B", category="math")])
    write_mmlu_zip(tmp_path / "b.zip", [mmlu_record(1, "B", category="physics")])
    with pytest.raises(LocusInputError) as caught:
        import_mmlu_pro(tmp_path)
    assert "b.zip: record 1" in str(caught.value) and "a.zip: record 1" in str(caught.value)


def test_empty_list(tmp_path: Path) -> None:
    write_mmlu_zip(tmp_path / "x.zip", [])
    with pytest.raises(LocusInputError, match="no rows"):
        import_mmlu_pro(tmp_path)


def test_path_is_a_file_of_the_wrong_kind(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("a,b\n")
    with pytest.raises(LocusInputError, match="unsupported file type"):
        import_mmlu_pro(path)


def test_answer_key_corrected_in_a_newer_file_applies_to_older_runs(tmp_path: Path) -> None:
    """Same question text, answer B in an old run, C in a newer one: both are scored against C."""

    def write(name: str, pred: str, answer: str, year: int) -> None:
        record = mmlu_record(1, pred, answer=answer, answer_index="BC".index(answer) + 1)
        info = zipfile.ZipInfo(f"{name}.json", date_time=(year, 1, 1, 0, 0, 0))
        with zipfile.ZipFile(tmp_path / f"{name}.zip", "w") as archive:
            archive.writestr(info, json.dumps([record]))

    write("old-run", pred="C", answer="B", year=2024)
    write("new-run", pred="C", answer="C", year=2025)
    batch = import_mmlu_pro(tmp_path)
    assert batch.n_queries == 1
    assert sorted(batch.scores["score"].tolist()) == [1.0, 1.0]
