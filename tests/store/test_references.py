"""Reference answers travel from every importer that has them to the store; probe answers are
kept one by one and read back."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from locus.data.batch import ImportBatch
from locus.data.importers.long_table import import_table
from locus.data.query_identity import text_hash
from locus.errors import LocusInputError
from locus.store import Store
from locus.store.references import ProbeAnswer, Reference

MC = "Which planet is largest?\nA. Mars\nB. Jupiter\nC. Venus"


def _rows(**extra: list[object]) -> pd.DataFrame:
    base = {
        "llm_id": ["m1", "m2", "m1", "m1"],
        "query_id": ["q1", "q1", "q2", "q3"],
        "query_text": [MC, MC, "What is 6 x 7?", "Capital of France?"],
        "score": [1.0, 0.0, 1.0, 0.0],
    }
    return pd.DataFrame({**base, **extra})


def test_references_are_kept_with_a_guessed_or_given_grader(workspace: Path) -> None:
    rows = _rows(reference=["B", "B", "42", "Paris"], grader=[None, None, None, "exact"])
    batch = ImportBatch.from_long(rows, source="s", origin="f.csv")
    with Store.open(workspace) as store:
        report = store.write_batch(batch, kind="table")
        assert report.references == 3
        refs = store.references()
        assert refs[text_hash(MC)] == Reference("B", "choice")
        assert refs[text_hash("What is 6 x 7?")] == Reference("42", "number")
        assert refs[text_hash("Capital of France?")] == Reference("Paris", "exact")
        assert store.reference_count() == 3
        # a re-import changes nothing; a corrected reference replaces the old one
        again = store.write_batch(batch, kind="table")
        assert again.references == 0 and not again.changed
        fixed = _rows(reference=["B", "B", "42", "Paris, France"])
        store.write_batch(ImportBatch.from_long(fixed, source="s", origin="f.csv"), kind="table")
        assert store.references()[text_hash("Capital of France?")].answer == "Paris, France"
        # removing the source removes its references with its aliases
        store.remove_source("s")
        assert store.references() == {} and store.reference_count() == 0


def test_an_unknown_grader_is_refused_with_its_row() -> None:
    rows = _rows(reference=["B", "B", "42", "Paris"], grader=["letter", None, None, None])
    with pytest.raises(LocusInputError, match=r"row 1, column 'grader'.*choice, number, exact"):
        ImportBatch.from_long(rows, source="s", origin="f.csv")


def test_a_queries_file_answer_column_is_the_reference(tmp_path: Path) -> None:
    """The ZeroEval layout: scores.csv (llm_id, query_id, task, score) and queries.jsonl.gz
    (query_id, query_text, task, answer)."""
    scores = tmp_path / "scores.csv"
    _rows().drop(columns="query_text").to_csv(scores, index=False)
    queries = tmp_path / "queries.jsonl.gz"
    with gzip.open(queries, "wt") as out:
        for qid, text, answer in (("q1", MC, "B"), ("q2", "What is 6 x 7?", "42"),
                                  ("q3", "Capital of France?", "Paris")):  # fmt: skip
            out.write(json.dumps({"query_id": qid, "query_text": text, "answer": answer}) + "\n")
    batch = import_table(scores, queries=queries)
    got = batch.queries.set_index("query_id")
    assert got.loc["q1", "reference"] == "B" and got.loc["q1", "grader"] == "choice"
    assert got.loc["q2", "grader"] == "number" and got.loc["q3", "grader"] == "exact"


def test_a_scores_file_gold_column_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "evals.csv"
    rows = _rows(gold=["B", "B", "42", "Paris"]).rename(columns={"llm_id": "model"})
    rows.to_csv(path, index=False)
    batch = import_table(path)
    assert any("reference <- 'gold'" in note for note in batch.notes)
    assert batch.queries["reference"].notna().all()


def test_mmlu_pro_keeps_each_answer_key(shared_data: Path, workspace: Path) -> None:
    from locus.data.importers.mmlu_pro import import_mmlu_pro

    [first] = sorted((shared_data / "mmlu_pro" / "eval_results").glob("*.zip"))[:1]
    batch = import_mmlu_pro(first)
    assert batch.queries["reference"].isin(list("ABCDEFGHIJ")).all()
    assert (batch.queries["grader"] == "choice").all()
    with Store.open(workspace) as store:
        store.write_batch(batch, kind="mmlu-pro")
        assert store.reference_count() == batch.queries["text_hash"].nunique()


def test_probe_answers_are_kept_one_by_one(workspace: Path) -> None:
    with Store.open(workspace) as store:
        store.write_batch(ImportBatch.from_long(_rows(), source="s", origin="f"), kind="table")
        first = ProbeAnswer("new", "h1", "The answer is (B)", 1.0, "up-1", 120, 30, 0.001, 85.0)
        store.put_probe_answer(first)
        store.put_probe_answer(ProbeAnswer("new", "h2", "no idea", None))
        store.put_probe_answer(ProbeAnswer("other", "h1", "A", 0.0))
        answers = store.probe_answers("new")
        assert answers == {"h1": first, "h2": ProbeAnswer("new", "h2", "no idea", None)}
        store.put_probe_answer(ProbeAnswer("new", "h2", "B", 1.0))  # asked again: replaced
        assert store.probe_answers("new")["h2"].score == 1.0
        assert store.probe_answers("nobody") == {}
