"""readers: every supported suffix, exact row places, and every way a file can be bad."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from locus.data.readers import (
    TABLE_SUFFIXES,
    file_stem,
    load_json,
    read_table,
    table_suffix,
)
from locus.errors import LocusInputError

WriteText = Callable[[Path, str], Path]

CSV = "llm_id,query_id,score\na,007,1\nb,007,0\n"


@pytest.mark.parametrize(
    ("name", "suffix", "stem"),
    [
        ("scores.csv", ".csv", "scores"),
        ("scores.csv.gz", ".csv.gz", "scores"),
        ("Scores.CSV.GZ", ".csv.gz", "Scores"),
        ("s.tsv", ".tsv", "s"),
        ("s.parquet", ".parquet", "s"),
        ("x.jsonl.gz", ".jsonl.gz", "x"),
        ("mmlu_test.json.gz", ".json.gz", "mmlu_test"),
        ("data.v2.json", ".json", "data.v2"),
        ("scores.xlsx", None, "scores"),
    ],
)
def test_suffix_and_stem(name: str, suffix: str | None, stem: str) -> None:
    assert table_suffix(Path(name)) == suffix
    assert file_stem(Path(name)) == stem


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".tsv", ".tsv.gz"])
def test_delimited_keeps_ids_as_text(tmp_path: Path, write_text: WriteText, suffix: str) -> None:
    text = CSV.replace(",", "\t") if ".tsv" in suffix else CSV
    table = read_table(write_text(tmp_path / f"scores{suffix}", text))
    assert list(table.frame.columns) == ["llm_id", "query_id", "score"]
    assert table.frame["query_id"].tolist() == ["007", "007"]
    assert table.describe_row(0) == "line 2"
    assert table.describe_row(1) == "line 3"


def test_csv_line_numbers_count_multiline_cells_and_blank_lines(
    tmp_path: Path, write_text: WriteText
) -> None:
    text = 'llm_id,query_id,query_text,score\na,q1,"two\nlines",1\n\nb,q2,plain,0\n'
    table = read_table(write_text(tmp_path / "s.csv", text))
    assert len(table.frame) == 2
    assert table.describe_row(0) == "line 2"
    assert table.describe_row(1) == "line 5"


def test_na_like_text_stays_text_and_blank_is_missing(
    tmp_path: Path, write_text: WriteText
) -> None:
    table = read_table(write_text(tmp_path / "s.csv", "llm_id,query_id,score\nNA,None,\n"))
    assert table.frame["llm_id"].iloc[0] == "NA"
    assert table.frame["query_id"].iloc[0] == "None"
    assert pd.isna(table.frame["score"].iloc[0])


def test_keep_columns(tmp_path: Path, write_text: WriteText) -> None:
    table = read_table(write_text(tmp_path / "s.csv", CSV), keep_columns=("llm_id", "nope"))
    assert list(table.frame.columns) == ["llm_id"]


def test_parquet(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    pd.DataFrame({"llm_id": ["a", "b"], "query_id": ["q", "q"], "score": [1.0, 0.5]}).to_parquet(
        path
    )
    table = read_table(path, keep_columns=("llm_id", "score"))
    assert list(table.frame.columns) == ["llm_id", "score"]
    assert table.frame["score"].tolist() == [1.0, 0.5]
    assert table.describe_row(1) == "row 2"


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_jsonl_line_numbers_skip_blank_lines(
    tmp_path: Path, write_text: WriteText, suffix: str
) -> None:
    text = '{"llm_id": "a", "query_id": 1, "score": 1}\n\n{"llm_id": "b", "query_id": 1}\n'
    table = read_table(write_text(tmp_path / f"s{suffix}", text))
    assert table.frame["llm_id"].tolist() == ["a", "b"]
    assert table.describe_row(1) == "line 3"


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_json_list(tmp_path: Path, write_text: WriteText, suffix: str) -> None:
    document = [{"llm_id": "a", "query_id": "q", "score": 1}, {"llm_id": "b", "query_id": "q"}]
    table = read_table(write_text(tmp_path / f"s{suffix}", json.dumps(document)))
    assert len(table.frame) == 2
    assert table.describe_row(1) == "record 2"


# --- bad input: always a one-line LocusInputError naming the file ------------------------------


def _error(path: Path) -> str:
    with pytest.raises(LocusInputError) as caught:
        read_table(path)
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message or path.name in message
    return message


def test_unknown_suffix_lists_supported(tmp_path: Path, write_text: WriteText) -> None:
    message = _error(write_text(tmp_path / "scores.xlsx", "x"))
    assert "unknown table format" in message
    assert all(suffix in message for suffix in TABLE_SUFFIXES)


def test_missing_path(tmp_path: Path) -> None:
    assert "no such file" in _error(tmp_path / "absent.csv")


def test_folder_instead_of_file(tmp_path: Path) -> None:
    folder = tmp_path / "scores.csv"
    folder.mkdir()
    assert "is a folder" in _error(folder)


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".jsonl", ".json", ".json.gz"])
def test_empty_file(tmp_path: Path, write_text: WriteText, suffix: str) -> None:
    assert "empty" in _error(write_text(tmp_path / f"s{suffix}", ""))


def test_empty_json_list(tmp_path: Path, write_text: WriteText) -> None:
    assert "empty list" in _error(write_text(tmp_path / "s.json", "[]"))


def test_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes("llm_id,query_id,score\ncafé,q,1\n".encode("latin-1"))
    assert "not UTF-8" in _error(path)


def test_truncated_gzip(tmp_path: Path) -> None:
    whole = gzip.compress((CSV * 200).encode())
    path = tmp_path / "s.csv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    assert "truncated" in _error(path)


def test_not_gzip_at_all(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl.gz"
    path.write_bytes(b"this is plain text, not gzip\n")
    assert "damaged" in _error(path)


def test_malformed_json(tmp_path: Path, write_text: WriteText) -> None:
    message = _error(write_text(tmp_path / "s.json", '[{"llm_id": "a",}]'))
    assert "malformed JSON" in message
    assert "line 1" in message


def test_malformed_jsonl_line(tmp_path: Path, write_text: WriteText) -> None:
    text = '{"llm_id": "a"}\n{"llm_id": \n'
    message = _error(write_text(tmp_path / "s.jsonl", text))
    assert "line 2" in message
    assert "malformed JSON" in message


def test_jsonl_line_not_an_object(tmp_path: Path, write_text: WriteText) -> None:
    message = _error(write_text(tmp_path / "s.jsonl", '{"a": 1}\n[1, 2]\n'))
    assert "line 2" in message
    assert "expected a JSON object" in message


def test_json_not_a_list(tmp_path: Path, write_text: WriteText) -> None:
    assert "found a JSON dict" in _error(write_text(tmp_path / "s.json", '{"a": 1}'))


def test_json_item_not_an_object(tmp_path: Path, write_text: WriteText) -> None:
    assert "record 2" in _error(write_text(tmp_path / "s.json", '[{"a": 1}, 3]'))


def test_ragged_csv(tmp_path: Path, write_text: WriteText) -> None:
    assert "not a well-formed table" in _error(
        write_text(tmp_path / "s.csv", "a,b\n1,2\n3,4,5,6\n")
    )


def test_damaged_parquet(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    pd.DataFrame({"a": range(100)}).to_parquet(path)
    path.write_bytes(path.read_bytes()[:-30])
    assert "Parquet" in _error(path)


def test_load_json_errors_name_the_file(tmp_path: Path, write_text: WriteText) -> None:
    with pytest.raises(LocusInputError, match="no such file"):
        load_json(tmp_path / "absent.json")
    with pytest.raises(LocusInputError, match="malformed JSON"):
        load_json(write_text(tmp_path / "bad.json.gz", "{"))


def test_folder_without_suffix(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    assert "is a folder" in _error(folder)


def test_non_utf8_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": "caf\xe9"}\n')
    message = _error(path)
    assert "line 2" in message and "not UTF-8" in message
