"""The `table` importer: formats, column mapping, the queries file, and its errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from locus.data.importers import import_table
from locus.errors import LocusInputError

WriteText = Callable[[Path, str], Path]

LONG = pd.DataFrame(
    {
        "llm_id": ["a", "a", "b", "b"],
        "query_id": ["q1", "q2", "q1", "q2"],
        "score": [1.0, 0.0, 0.5, 1.0],
        "task": ["math", "law", "math", "law"],
    }
)


def _write(frame: pd.DataFrame, path: Path) -> Path:
    name = path.name
    if name.endswith((".csv", ".csv.gz")):
        frame.to_csv(path, index=False)
    elif name.endswith((".tsv", ".tsv.gz")):
        frame.to_csv(path, index=False, sep="\t")
    elif name.endswith(".parquet"):
        frame.to_parquet(path)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        frame.to_json(path, orient="records", lines=True)
    else:
        path.write_text(json.dumps(frame.to_dict(orient="records")))
    return path


@pytest.mark.parametrize(
    "name",
    [
        "scores.csv",
        "scores.csv.gz",
        "scores.tsv",
        "scores.parquet",
        "scores.jsonl",
        "scores.jsonl.gz",
        "scores.json",
    ],
)
def test_every_format_gives_the_same_batch(tmp_path: Path, name: str) -> None:
    batch = import_table(_write(LONG, tmp_path / name))
    assert batch.source == "scores"
    assert (batch.n_llms, batch.n_queries, batch.n_scores) == (2, 2, 4)
    scores = batch.scores.set_index(["llm_id", "query_id"])["score"]
    assert scores[("b", "q1")] == 0.5
    assert dict(zip(batch.queries["query_id"], batch.queries["task"], strict=True)) == {
        "q1": "math",
        "q2": "law",
    }


def test_blank_score_is_not_evaluated(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(tmp_path / "s.csv", "llm_id,query_id,score\na,q1,1\na,q2,\n")
    assert import_table(path).n_scores == 1


def test_optional_columns_pass_through(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(
        tmp_path / "s.csv",
        "llm_id,query_id,score,split,cost_usd,latency_ms\na,q1,1,test,0.002,350\n",
    )
    batch = import_table(path)
    assert batch.queries["split"].tolist() == ["test"]
    assert batch.scores[["cost_usd", "latency_ms"]].iloc[0].tolist() == [0.002, 350.0]


def test_column_mapping(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(
        tmp_path / "results.csv", "model,item,correct,score\nx,1,1,junk\nx,2,0,junk\n"
    )
    batch = import_table(path, columns={"llm_id": "model", "query_id": "item", "score": "correct"})
    assert batch.llms["llm_id"].tolist() == ["x"]
    assert sorted(batch.scores["score"]) == [0.0, 1.0]


def test_mapped_column_absent(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(tmp_path / "s.csv", "llm_id,query_id,correct\na,q,1\n")
    with pytest.raises(LocusInputError) as caught:
        import_table(path, columns={"score": "accuracy"})
    message = str(caught.value)
    assert "'accuracy'" in message and "'score'" in message and "correct" in message
    assert str(path) in message


def test_mapping_to_unknown_canonical_name(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(tmp_path / "s.csv", "llm_id,query_id,score\na,q,1\n")
    with pytest.raises(LocusInputError, match="not a canonical column"):
        import_table(path, columns={"points": "score"})


def test_missing_column(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(tmp_path / "s.csv", "llm_id,query_id,verdict\na,q,1\n")
    with pytest.raises(LocusInputError) as caught:
        import_table(path)
    assert str(caught.value) == (
        f"{path}: no score column found among the file's columns (llm_id, query_id, verdict); "
        "name a column score, correct, is_correct, acc, accuracy, a feedback column "
        "(thumbs_up, rating, feedback, label, outcome), or map yours with -c score=COLUMN"
    )


def test_non_numeric_score_names_the_line(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(tmp_path / "s.csv", "llm_id,query_id,score\na,q1,1\na,q2,maybe\n")
    with pytest.raises(LocusInputError) as caught:
        import_table(path)
    assert str(caught.value) == (
        f"{path}: line 3, column 'score': expected a number in [0, 1], a percentage (87%), "
        "true/false, yes/no, up/down, good/bad, pass/fail or correct/incorrect (any case), "
        "found 'maybe'; fix the value or leave it blank for 'not evaluated'"
    )


def test_each_score_cell_is_read_by_its_own_form(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(
        tmp_path / "s.csv",
        "llm_id,query_id,score\na,q1,87%\na,q2,0.5\na,q3,TRUE\na,q4,no\na,q5,Yes\na,q6,\n"
        "a,q7,false\na,q8,0 %\n",
    )
    batch = import_table(path)
    scores = batch.scores.set_index("query_id")["score"].to_dict()
    assert scores == {
        "q1": 0.87, "q2": 0.5, "q3": 1.0, "q4": 0.0, "q5": 1.0, "q7": 0.0, "q8": 0.0,
    }  # fmt: skip
    assert batch.notes == (
        "score: percentages read as fractions (87% -> 0.87)",
        "score: words read as numbers (TRUE -> 1, Yes -> 1, false -> 0, no -> 0)",
    )


def test_a_logs_feedback_column_is_the_score(tmp_path: Path, write_text: WriteText) -> None:
    # a gateway's log: thumbs up or down, said in one line
    path = write_text(
        tmp_path / "log.csv",
        "timestamp,prompt,model,thumbs_up\nt1,p1,a,up\nt2,p2,b,Down\nt3,p3,a,1\n",
    )
    batch = import_table(path)
    assert sorted(batch.scores["score"]) == [0.0, 1.0, 1.0]
    assert "score <- 'thumbs_up'" in batch.notes[0]
    assert "score: words read as numbers (up -> 1, Down -> 0)" in batch.notes
    # a rating of 1-5 is (rating - 1) / 4, said
    path = write_text(tmp_path / "r.csv", "prompt,model,rating\np1,a,5\np2,a,1\np3,b,3\n")
    batch = import_table(path)
    assert batch.scores.set_index("query_id")["score"].sort_values().tolist() == [0.0, 0.5, 1.0]
    assert any("rating of 1 to 5: (rating - 1) / 4" in note for note in batch.notes)
    # a rating column of 0/1 is read as scores, untouched
    path = write_text(tmp_path / "r01.csv", "prompt,model,rating\np1,a,0\np2,a,1\n")
    assert sorted(import_table(path).scores["score"]) == [0.0, 1.0]
    # beside a primary score name, a "label" is not the score (it is often the gold label)
    path = write_text(tmp_path / "l.csv", "prompt,model,label,correct\np1,a,B,1\np2,a,C,0\n")
    assert sorted(import_table(path).scores["score"]) == [0.0, 1.0]
    # two feedback names and no primary one: ambiguous, said with the fix
    path = write_text(tmp_path / "two.csv", "prompt,model,feedback,label\np1,a,up,A\n")
    with pytest.raises(LocusInputError, match=r"several columns could be it \(feedback, label"):
        import_table(path)


def test_a_percentage_above_100_names_the_line(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(tmp_path / "s.csv", "llm_id,query_id,score\na,q1,0.5\na,q2,101%\n")
    with pytest.raises(LocusInputError) as caught:
        import_table(path)
    assert str(caught.value) == (
        f"{path}: line 3, column 'score': expected a percentage in [0%, 100%], found '101%'; "
        "fix the value or leave it blank for 'not evaluated'"
    )


def test_score_outside_unit_interval_names_the_line(tmp_path: Path, write_text: WriteText) -> None:
    path = write_text(tmp_path / "s.csv", "llm_id,query_id,score\na,q1,1\n\na,q2,85\n")
    with pytest.raises(LocusInputError) as caught:
        import_table(path)
    assert "line 4" in str(caught.value)
    assert "in [0, 1]" in str(caught.value)


def test_jsonl_error_names_the_line(tmp_path: Path, write_text: WriteText) -> None:
    text = (
        '{"llm_id": "a", "query_id": "q1", "score": 1}\n{"llm_id": "a", "query_id": "q2", '
        '"score": -1}\n'
    )
    with pytest.raises(LocusInputError, match="line 2"):
        import_table(write_text(tmp_path / "s.jsonl", text))


def test_header_only_file(tmp_path: Path, write_text: WriteText) -> None:
    with pytest.raises(LocusInputError, match="no rows"):
        import_table(write_text(tmp_path / "s.csv", "llm_id,query_id,score\n"))


def test_unknown_suffix(tmp_path: Path, write_text: WriteText) -> None:
    with pytest.raises(LocusInputError, match=r"\.csv\.gz"):
        import_table(write_text(tmp_path / "scores.txt", "llm_id,query_id,score\n"))


# --- queries file ------------------------------------------------------------------------------


@pytest.fixture
def scores_csv(tmp_path: Path, write_text: WriteText) -> Path:
    return write_text(
        tmp_path / "scores.csv",
        "llm_id,query_id,task,score\na,q1,,1\na,q2,gsm,0\nb,q1,,0\n",
    )


@pytest.mark.parametrize("name", ["queries.jsonl", "queries.jsonl.gz", "queries.csv"])
def test_queries_file_fills_text_and_task(
    tmp_path: Path, scores_csv: Path, write_text: WriteText, name: str
) -> None:
    queries = pd.DataFrame(
        {
            "query_id": ["q1", "q2", "q3"],
            "query_text": ["What is 1+1?", "What is 2+2?", "unused"],
            "task": ["math", "math", "math"],
            "answer": ["2", "4", "?"],
        }
    )
    batch = import_table(scores_csv, queries=_write(queries, tmp_path / name))
    by_id = batch.queries.set_index("query_id")
    assert by_id.loc["q1", "query_text"] == "What is 1+1?"
    assert by_id.loc["q1", "task"] == "math"  # filled in
    assert by_id.loc["q2", "task"] == "gsm"  # the scores file's own task wins
    assert batch.n_queries == 2


def test_numeric_ids_join_as_text(tmp_path: Path, write_text: WriteText) -> None:
    scores = write_text(tmp_path / "s.csv", "llm_id,query_id,score\na,1,1\na,2,0\n")
    queries = write_text(
        tmp_path / "q.jsonl",
        '{"query_id": 1, "query_text": "one"}\n{"query_id": 2, "query_text": "two"}\n',
    )
    batch = import_table(scores, queries=queries)
    assert sorted(batch.queries["query_text"]) == ["one", "two"]


def test_query_missing_from_queries_file(
    tmp_path: Path, scores_csv: Path, write_text: WriteText
) -> None:
    queries = write_text(tmp_path / "q.jsonl", '{"query_id": "q1", "query_text": "x"}\n')
    with pytest.raises(LocusInputError) as caught:
        import_table(scores_csv, queries=queries)
    message = str(caught.value)
    assert "'q2'" in message and "line 3" in message and str(queries) in message


def test_queries_file_without_text_column(
    tmp_path: Path, scores_csv: Path, write_text: WriteText
) -> None:
    queries = write_text(tmp_path / "q.csv", "query_id,prompt\nq1,x\n")
    with pytest.raises(LocusInputError, match="missing column 'query_text'"):
        import_table(scores_csv, queries=queries)


def test_queries_file_with_conflicting_texts(
    tmp_path: Path, scores_csv: Path, write_text: WriteText
) -> None:
    queries = write_text(tmp_path / "q.csv", "query_id,query_text\nq1,x\nq2,y\nq1,z\n")
    with pytest.raises(LocusInputError) as caught:
        import_table(scores_csv, queries=queries)
    assert "line 4" in str(caught.value) and "line 2" in str(caught.value)


def test_queries_file_repeating_a_query_identically_is_fine(
    tmp_path: Path, scores_csv: Path, write_text: WriteText
) -> None:
    queries = write_text(tmp_path / "q.csv", "query_id,query_text\nq1,x\nq2,y\nq1,x\n")
    assert import_table(scores_csv, queries=queries).n_queries == 2


def test_missing_queries_file(tmp_path: Path, scores_csv: Path) -> None:
    with pytest.raises(LocusInputError, match="no such file"):
        import_table(scores_csv, queries=tmp_path / "absent.jsonl")


def test_malformed_queries_file(tmp_path: Path, scores_csv: Path, write_text: WriteText) -> None:
    queries = write_text(tmp_path / "q.jsonl", '{"query_id": "q1", "query_text": "x"\n')
    with pytest.raises(LocusInputError, match="malformed JSON"):
        import_table(scores_csv, queries=queries)


def test_a_probe_file_with_common_column_names(tmp_path: Path, write_text: WriteText) -> None:
    """`locus identify` reads the same column names `locus import table` recognises."""
    import numpy as np

    from locus.atlas.probe_file import read_probe_evidence

    path = write_text(tmp_path / "probe.csv", "prompt,correct\nWhat is 2+2?,1\nDefine tort.,0\n")
    found = read_probe_evidence(path, lambda texts: np.ones((len(texts), 3), np.float32))
    probe = found["probe"]
    assert probe.vectors.shape == (2, 3) and probe.scores.tolist() == [1.0, 0.0]
    assert probe.texts == ["What is 2+2?", "Define tort."]
    odd = write_text(tmp_path / "odd.csv", "q,outcome\nWhat is 2+2?,1\n")
    mapped = read_probe_evidence(
        odd, lambda t: np.ones((len(t), 3), np.float32), {"query_text": "q", "score": "outcome"}
    )
    assert mapped["odd"].scores.tolist() == [1.0]


def test_a_list_valued_text_column_is_refused_or_read_as_chat(tmp_path: Path) -> None:
    # a Parquet list column: never its Python repr as the query text
    path = tmp_path / "lists.parquet"
    pd.DataFrame({"model": ["a", "a"], "prompt": [["q1"], ["q2"]], "correct": [1, 0]}).to_parquet(
        path
    )
    with pytest.raises(LocusInputError) as caught:
        import_table(path)
    assert "row 1, column 'query_text': expected text, found a list ['q1']" in str(caught.value)
    # chat messages: the last user message's text, said in one note
    chat = [
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "What is 2+2?"},
        ],
        [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "Name a prime."}]},
        ],
    ]
    path = tmp_path / "chat.jsonl"
    pd.DataFrame({"model": ["a", "a"], "messages": chat, "correct": [1, 0]}).to_json(
        path, orient="records", lines=True
    )
    batch = import_table(path, columns={"query_text": "messages"})
    assert sorted(batch.queries["query_text"]) == ["Name a prime.", "What is 2+2?"]
    assert "query_text: 2 chat message lists read as their last user message's text" in (
        batch.notes
    )


def test_a_repeated_row_is_named_by_its_text(tmp_path: Path, write_text: WriteText) -> None:
    # no query id in the file: the id is made from the text, so the text names the query
    long = "What is the capital of France and which river runs through it today?"
    path = write_text(
        tmp_path / "log.csv", f"model,prompt,correct\na,{long!s},1\nb,hi,1\na,{long!s},0\n"
    )
    with pytest.raises(LocusInputError) as caught:
        import_table(path)
    assert "LLM 'a' on query 'What is the capital of France and which river runs throug...'" in (
        str(caught.value)
    )
