"""The `routerbench` importer: wide tables with cost columns, list-wrapped prompts, folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from locus.data.importers import import_routerbench
from locus.errors import LocusInputError

from .conftest import routerbench_frame


def test_wide_table_to_long(routerbench_file: Path) -> None:
    batch = import_routerbench(routerbench_file)
    assert batch.source == "routerbench"
    assert batch.llms["llm_id"].tolist() == ["b", "org/a"]
    scores = batch.scores.set_index(["llm_id", "query_id"])
    assert scores.loc[("org/a", "mbpp.dev.1"), "score"] == 0.0
    assert scores.loc[("org/a", "mbpp.dev.2"), "cost_usd"] == pytest.approx(0.003)
    assert scores.loc[("b", "mbpp.dev.0"), "cost_usd"] == pytest.approx(0.01)
    queries = batch.queries.set_index("query_id")
    assert queries.loc["mbpp.dev.0", "query_text"] == "Write function number 0."
    assert set(queries["task"]) == {"mbpp"}


def test_multi_element_prompt_is_joined_and_plain_prompt_kept(tmp_path: Path) -> None:
    frame = routerbench_frame(3)
    frame.loc[0, "prompt"] = repr(["turn one", "turn two"])
    frame.loc[1, "prompt"] = "[not a list literal"
    frame.loc[2, "prompt"] = "[1, 2]"
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    texts = import_routerbench(path).queries.set_index("query_id")["query_text"]
    assert texts["mbpp.dev.0"] == "turn one\nturn two"
    assert texts["mbpp.dev.1"] == "[not a list literal"
    assert texts["mbpp.dev.2"] == "[1, 2]"


def test_blank_cells_are_not_evaluated(tmp_path: Path) -> None:
    frame = routerbench_frame(3)
    frame.loc[1, "org/a"] = np.nan
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    assert import_routerbench(path).n_scores == 5


def test_without_cost_columns_every_numeric_column_is_an_llm(tmp_path: Path) -> None:
    frame = routerbench_frame(3)[["sample_id", "eval_name", "prompt", "org/a", "b"]]
    frame["notes"] = ["x", "y", "z"]
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    batch = import_routerbench(path)
    assert batch.llms["llm_id"].tolist() == ["b", "org/a"]
    assert batch.scores["cost_usd"].isna().all()


def test_folder_shares_the_query_namespace(tmp_path: Path) -> None:
    routerbench_frame(3).to_csv(tmp_path / "mbpp_train.csv.gz", index=False)
    test = routerbench_frame(5).iloc[3:]
    test.to_csv(tmp_path / "mbpp_test.csv.gz", index=False)
    (tmp_path / "README.md").write_text("ignored")
    batch = import_routerbench(tmp_path)
    assert batch.n_queries == 5
    assert batch.n_scores == 10


def test_same_id_in_two_files_with_identical_rows_is_one_query(tmp_path: Path) -> None:
    routerbench_frame(3).to_csv(tmp_path / "a.csv", index=False)
    routerbench_frame(3).to_csv(tmp_path / "b.csv", index=False)
    assert import_routerbench(tmp_path).n_queries == 3


def test_missing_id_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    routerbench_frame().drop(columns="sample_id").to_csv(path, index=False)
    with pytest.raises(LocusInputError, match="missing column 'sample_id'"):
        import_routerbench(path)


def test_other_id_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    routerbench_frame().rename(columns={"sample_id": "uid"}).to_csv(path, index=False)
    assert import_routerbench(path, id_column="uid").n_queries == 3


def test_no_score_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    routerbench_frame()[["sample_id", "eval_name", "prompt"]].to_csv(path, index=False)
    with pytest.raises(LocusInputError, match="no LLM score columns"):
        import_routerbench(path)


def test_non_numeric_score_names_file_line_and_llm(tmp_path: Path) -> None:
    frame = routerbench_frame(3)
    frame["b"] = frame["b"].astype(object)
    frame.loc[2, "b"] = "unknown"
    path = tmp_path / "t.csv.gz"
    frame.to_csv(path, index=False)
    with pytest.raises(LocusInputError) as caught:
        import_routerbench(path)
    message = str(caught.value)
    assert "t.csv.gz: line 4, LLM column 'b'" in message and "'unknown'" in message


def test_score_outside_unit_interval(tmp_path: Path) -> None:
    frame = routerbench_frame(3)
    frame.loc[0, "org/a"] = 3.0
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(LocusInputError, match="line 2, LLM column 'org/a'"):
        import_routerbench(path)


def test_negative_cost(tmp_path: Path) -> None:
    frame = routerbench_frame(3)
    frame.loc[1, "b|total_cost"] = -0.5
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(LocusInputError, match="cost_usd"):
        import_routerbench(path)


def test_header_only(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    routerbench_frame().iloc[:0].to_csv(path, index=False)
    with pytest.raises(LocusInputError, match="no data rows"):
        import_routerbench(path)
