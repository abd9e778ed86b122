"""The `embedllm` importer on a tiny release folder written by the test."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from locus.data.importers import import_embedllm
from locus.errors import LocusInputError


def test_maps_ids_to_names_texts_and_splits(embedllm_folder: Path) -> None:
    batch = import_embedllm(embedllm_folder)
    assert batch.source == "embedllm"
    assert batch.llms["llm_id"].tolist() == ["gamma", "org/alpha-7b", "org/beta-13b"]
    queries = batch.queries.set_index("query_id")
    assert queries.loc["0", "query_text"] == "What is 2+2?"
    assert queries.loc["1", "task"] == "geography"
    assert queries["split"].to_dict() == {"0": "train", "1": "train", "2": "val", "3": "test"}
    scores = batch.scores.set_index(["llm_id", "query_id"])["score"]
    # label = (model_id + prompt_id) even
    assert scores[("org/alpha-7b", "0")] == 1.0
    assert scores[("org/beta-13b", "0")] == 0.0
    assert scores[("gamma", "3")] == 0.0


def test_category_in_split_file_wins(embedllm_folder: Path) -> None:
    train = pd.read_csv(embedllm_folder / "train.csv")
    train["category"] = "from-split"
    train["prompt"] = "ignored: text comes from question_order.csv"
    train.to_csv(embedllm_folder / "train.csv", index=False)
    batch = import_embedllm(embedllm_folder)
    tasks = batch.queries.set_index("query_id")["task"]
    assert tasks["0"] == "from-split"
    assert tasks["3"] == "math"
    assert batch.queries.set_index("query_id").loc["0", "query_text"] == "What is 2+2?"


def test_gzipped_files_and_missing_splits(embedllm_folder: Path) -> None:
    pd.read_csv(embedllm_folder / "test.csv").to_csv(embedllm_folder / "test.csv.gz", index=False)
    (embedllm_folder / "test.csv").unlink()
    (embedllm_folder / "val.csv").unlink()
    batch = import_embedllm(embedllm_folder)
    assert sorted(batch.queries["split"].unique()) == ["test", "train"]


@pytest.mark.parametrize("name", ["model_order.csv", "question_order.csv"])
def test_missing_order_file(embedllm_folder: Path, name: str) -> None:
    (embedllm_folder / name).unlink()
    with pytest.raises(LocusInputError) as caught:
        import_embedllm(embedllm_folder)
    assert f"missing {name}" in str(caught.value)


def test_no_split_file(embedllm_folder: Path) -> None:
    for split in ("train", "val", "test"):
        (embedllm_folder / f"{split}.csv").unlink()
    with pytest.raises(LocusInputError, match=r"no train\.csv, val\.csv or test\.csv"):
        import_embedllm(embedllm_folder)


def test_model_id_not_in_order_file(embedllm_folder: Path) -> None:
    (embedllm_folder / "val.csv").write_text("model_id,prompt_id,label\n0,2,1\n9,2,1\n")
    with pytest.raises(LocusInputError) as caught:
        import_embedllm(embedllm_folder)
    message = str(caught.value)
    assert "val.csv: line 3" in message and "'9'" in message and "model_order.csv" in message


def test_prompt_id_not_in_order_file(embedllm_folder: Path) -> None:
    (embedllm_folder / "test.csv").write_text("model_id,prompt_id,label\n0,42,1\n")
    with pytest.raises(LocusInputError, match=r"question_order\.csv"):
        import_embedllm(embedllm_folder)


def test_missing_label_column(embedllm_folder: Path) -> None:
    (embedllm_folder / "test.csv").write_text("model_id,prompt_id,correct\n0,3,1\n")
    with pytest.raises(LocusInputError, match="missing column 'label'"):
        import_embedllm(embedllm_folder)


def test_order_file_missing_column(embedllm_folder: Path) -> None:
    (embedllm_folder / "model_order.csv").write_text("model_id,name\n0,a\n")
    with pytest.raises(LocusInputError, match="missing column 'model_name'"):
        import_embedllm(embedllm_folder)


def test_order_file_with_conflicting_names(embedllm_folder: Path) -> None:
    (embedllm_folder / "model_order.csv").write_text("model_id,model_name\n0,a\n1,b\n2,c\n0,z\n")
    with pytest.raises(LocusInputError) as caught:
        import_embedllm(embedllm_folder)
    assert "line 5" in str(caught.value) and "line 2" in str(caught.value)


def test_label_outside_unit_interval_names_file_and_line(embedllm_folder: Path) -> None:
    (embedllm_folder / "val.csv").write_text("model_id,prompt_id,label\n0,2,1\n1,2,2\n")
    with pytest.raises(LocusInputError) as caught:
        import_embedllm(embedllm_folder)
    assert "val.csv: line 3" in str(caught.value)


def test_path_is_a_file(embedllm_folder: Path) -> None:
    with pytest.raises(LocusInputError, match="is not a folder"):
        import_embedllm(embedllm_folder / "train.csv")
