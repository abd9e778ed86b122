"""lm-evaluation-harness, inspect-ai and HELM output, as the real tools wrote it.

The fixtures under tests/fixtures/eval_logs/ were produced by lm_eval 0.4.13 (its `dummy`
model, and its `local-chat-completions` against a scripted endpoint on 127.0.0.1), inspect_ai
0.3.285 (a registered model provider) and crfm-helm 0.5.16 (its `simple` model and a registered
client), offline; each folder's build script re-creates them. The importers need none of those
packages.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from locus.data.importers import detect_format, import_helm, import_inspect, import_lm_eval
from locus.errors import LocusInputError
from locus.store import Store
from locus.store.ingest import import_path


def _by_model(batch) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    out: dict[str, dict[str, float]] = {}
    for row in batch.scores.itertuples():
        out.setdefault(row.llm_id, {})[row.query_id] = row.score
    return out


# --- lm-evaluation-harness ------------------------------------------------------------------


def test_lm_eval_joins_models_on_the_prompt_and_keeps_the_newer_run(lm_eval_folder: Path) -> None:
    batch = import_lm_eval(lm_eval_folder)
    assert sorted(batch.llms["llm_id"]) == ["tiny-alpha", "tiny-beta", "tiny-gamma"]
    # every model scored every document of both tasks: one query per prompt text
    assert batch.queries["text_hash"].nunique() == 24 and batch.n_scores == 72
    first = batch.queries.set_index("query_id").loc["tiny_mc/0"]
    assert first["query_text"] == "Question: What is 7 multiplied by 8?\nAnswer:"
    assert first["task"] == "tiny_mc"
    assert batch.notes[0] == "metric per task: tiny_gen exact_match, tiny_mc acc"
    assert "tiny-alpha / tiny_mc: also in an older run" in batch.notes[1]
    # tiny-alpha's tiny_mc scores are the rerun's (the newer file), not the first run's
    rerun = next((lm_eval_folder / "rerun" / "tiny-alpha").glob("samples_tiny_mc_*.jsonl"))
    expected = {
        f"tiny_mc/{r['doc_id']}": r["acc"] for r in map(json.loads, rerun.read_text().splitlines())
    }
    found = _by_model(batch)["tiny-alpha"]
    assert {k: v for k, v in found.items() if k.startswith("tiny_mc/")} == expected
    # references: a generation task's target; a multiple-choice task's right continuation
    refs = batch.queries.set_index("query_id")
    assert refs.loc["tiny_mc/0", ["reference", "grader"]].tolist() == ["56", "number"]
    assert refs.loc["tiny_mc/1", ["reference", "grader"]].tolist() == ["Canberra", "exact"]
    assert refs.loc["tiny_gen/0", ["reference", "grader"]].tolist() == ["15", "number"]
    assert refs["reference"].notna().all()


def test_lm_eval_metric_choice(lm_eval_folder: Path) -> None:
    norm = import_lm_eval(lm_eval_folder, metric={"tiny_mc": "acc_norm"})
    assert norm.notes[0] == "metric per task: tiny_gen exact_match, tiny_mc acc_norm"
    with pytest.raises(LocusInputError) as caught:
        import_lm_eval(lm_eval_folder, metric="f1")
    message = str(caught.value)
    assert "task 'tiny_mc' has no per-sample metric 'f1'; it carries acc, acc_norm" in message
    assert message.endswith("choose one of those with --metric")


def test_lm_eval_clear_errors(lm_eval_folder: Path) -> None:
    run = lm_eval_folder / "main" / "tiny-beta"
    samples = next(run.glob("samples_tiny_gen_*.jsonl"))
    samples.unlink()
    with pytest.raises(LocusInputError, match="no per-sample file for task 'tiny_gen'") as caught:
        import_lm_eval(lm_eval_folder)
    assert "re-run lm_eval with --log_samples" in str(caught.value)


def test_lm_eval_truncated_samples_name_the_line(lm_eval_folder: Path) -> None:
    samples = next((lm_eval_folder / "main" / "tiny-gamma").glob("samples_tiny_mc_*.jsonl"))
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join([*lines[:3], lines[3][:40]]) + "\n")
    with pytest.raises(LocusInputError) as caught:
        import_lm_eval(lm_eval_folder)
    assert f"{samples}: line 4: not JSON" in str(caught.value)


# the endpoint build_chat.sh runs (chat_server.py) answers these tiny_gen documents right
CHAT_RIGHT = {"tiny_gen/0", "tiny_gen/1", "tiny_gen/2", "tiny_gen/5", "tiny_gen/6"}


def test_lm_eval_chat_completions_runs_import_like_locus_import_auto(
    lm_eval_chat_folder: Path, tmp_path: Path
) -> None:
    """`lm_eval --model local-chat-completions --apply_chat_template` logs the chat messages as
    JSON in arguments.gen_args_0.arg_0: the query is the last user message."""
    format_name = detect_format(lm_eval_chat_folder)[0]
    assert format_name == "lm-eval"
    with Store.open(tmp_path / "ws") as store:
        report = import_path(store, format_name, lm_eval_chat_folder)
        table = store.score_table()
    assert (report.llms_in_file, report.queries_in_file, report.scores_in_file) == (3, 12, 36)
    # the model= of each run's --model_args, lm-eval's model_name
    assert table.llm_ids == ("chat-delta", "chat-epsilon", "chat-zeta")
    assert table.observed.all()
    texts = dict(zip(table.query_ids, table.query_texts, strict=True))
    assert texts["tiny_gen/0"] == "Q: What is 9 plus 6?\nA:"
    assert all(text.startswith("Q: ") and "role" not in text for text in texts.values())
    # zero-shot, few-shot as earlier turns (with a system message) and few-shot inside the one
    # user message: the same 12 queries, the few-shot examples cut off
    assert texts["tiny_gen/1"] == (
        "Q: What is the boiling point of water at sea level in degrees Celsius?\nA:"
    )
    for llm_id in table.llm_ids:
        samples = next((lm_eval_chat_folder / llm_id).glob("samples_tiny_gen_*.jsonl"))
        written = {
            f"tiny_gen/{r['doc_id']}": r["exact_match"]
            for r in map(json.loads, samples.read_text().splitlines())
        }
        column = table.scores[:, table.llm_index(llm_id)]
        found = dict(zip(table.query_ids, column.tolist(), strict=True))
        assert found == written
        assert {query for query, score in found.items() if score == 1.0} == CHAT_RIGHT


def test_lm_eval_chat_and_completion_runs_share_their_queries(
    lm_eval_chat_folder: Path, tmp_path: Path
) -> None:
    """A tiny_gen document asked through the chat endpoint and as a completion prompt (lm-eval's
    dummy model, output/) is one query: the user message is the completion prompt's text."""
    completions = lm_eval_chat_folder.parent / "output"
    with Store.open(tmp_path / "ws") as store:
        import_path(store, "lm-eval", completions)
        # another source: the chat queries can only join the stored ones through their text
        chat = import_path(store, "lm-eval", lm_eval_chat_folder, source="endpoint")
        table = store.score_table()
        counts = store.counts()
    assert (chat.new_queries, chat.new_aliases, chat.new_scores) == (0, 12, 36)
    assert counts["queries"] == 24 and counts["scores"] == 72 + 36
    row = table.query_texts.index("Q: What is 9 plus 6?\nA:")
    assert table.observed[row].all(), "the chat LLMs and the completion LLMs score one query"
    assert table.scores[row, table.llm_index("chat-delta")] == 1.0
    assert table.scores[row, table.llm_index("tiny-alpha")] == 0.0  # the dummy said "lol"


@pytest.mark.parametrize(
    ("arg_0", "found"),
    [
        (['[{"role": "user", "content": "Q: What is 9 pl'], "not JSON (Unterminated string"),
        ('[{"role": "user", "content": "Q: What is 9 plus 6?"', "not JSON (Expecting"),
        (
            ['{"role": "user", "content": "Q: What is 9 plus 6?"}'],
            "found a JSON dict, not a list of messages",
        ),
        ([{"content": "Q: What is 9 plus 6?"}], "an element that is not a message"),
        (['[{"role": "system", "content": "Be brief."}]'], "(roles system) without a user"),
    ],
)
def test_lm_eval_malformed_chat_messages_name_the_file_and_line(
    lm_eval_chat_folder: Path, arg_0: object, found: str
) -> None:
    samples = next((lm_eval_chat_folder / "chat-zeta").glob("samples_tiny_gen_*.jsonl"))
    lines = samples.read_text().splitlines()
    record = json.loads(lines[2])
    record["arguments"]["gen_args_0"]["arg_0"] = arg_0
    lines[2] = json.dumps(record)
    samples.write_text("\n".join(lines) + "\n")
    with pytest.raises(LocusInputError) as caught:
        import_lm_eval(lm_eval_chat_folder)
    message = str(caught.value)
    assert message.startswith(f"{samples}: line 3: arguments.gen_args_0.arg_0: ")
    assert found in message
    assert "expected the chat messages lm-eval logs for a chat-completions LLM" in message
    assert "\n" not in message


# --- inspect-ai -----------------------------------------------------------------------------


def test_inspect_reads_eval_and_json_logs_alike(inspect_folder: Path) -> None:
    batch = import_inspect(inspect_folder)
    assert sorted(batch.llms["llm_id"]) == ["tiny/alpha", "tiny/beta", "tiny/gamma"]
    means = batch.scores.groupby("llm_id")["score"].mean().round(4).to_dict()
    assert means["tiny/alpha"] == pytest.approx(0.75)  # q01-q09 right of 12 (C -> 1, I -> 0)
    assert means["tiny/gamma"] == pytest.approx(0.25)
    # gamma's run was written twice, as .json and .eval: the newer log is kept, a note says so
    assert any(
        "tiny/gamma / tiny_qa" in note and "replaced by newer" in note for note in batch.notes
    )
    json_log = next(inspect_folder.glob("*tiny-gamma*.json"))
    eval_log = next(inspect_folder.glob("*tiny-gamma*.eval"))
    a, b = import_inspect(json_log), import_inspect(eval_log)
    assert a.scores[["query_id", "score"]].equals(b.scores[["query_id", "score"]])
    assert a.queries["query_text"].tolist() == b.queries["query_text"].tolist()
    # a chat input: the last user message is the query, not the system prompt
    q12 = a.queries.set_index("query_id").loc["tiny_qa/q12", "query_text"]
    assert q12 == "What gas do plants absorb from the air?"
    # each sample's target is its reference answer
    refs = a.queries.set_index("query_id")
    assert refs.loc["tiny_qa/q01", ["reference", "grader"]].tolist() == ["4", "number"]
    assert refs["reference"].notna().all()


def test_inspect_epochs_average_and_scorer_choice(inspect_folder: Path) -> None:
    epochs = next((inspect_folder / "extra").glob("*.eval"))
    batch = import_inspect(epochs)
    assert batch.n_scores == 4  # 4 samples x 2 epochs -> one mean score per sample
    assert set(np.round(batch.scores["score"], 3)) <= {0.0, 0.5, 1.0}
    includes = import_inspect(epochs, metric="includes")
    assert includes.notes[0] == "scorer per task: tiny_qa_epochs includes"
    with pytest.raises(LocusInputError) as caught:
        import_inspect(epochs, metric="f1")
    assert "has no scorer 'f1'; its samples carry match, includes" in str(caught.value)
    by_category = import_inspect(epochs, task_field="category")
    assert set(by_category.queries["task"]) <= {"arithmetic", "geography", "science"}


def test_inspect_damaged_and_unfinished_logs(inspect_folder: Path) -> None:
    log = next(inspect_folder.glob("*tiny-alpha*.eval"))
    log.write_bytes(log.read_bytes()[:200])
    with pytest.raises(LocusInputError, match=r"not a readable \.eval log"):
        import_inspect(log)
    json_log = next(inspect_folder.glob("*tiny-gamma*.json"))
    content = json.loads(json_log.read_text())
    content["status"] = "error"
    json_log.write_text(json.dumps(content))
    with pytest.raises(LocusInputError) as caught:
        import_inspect(json_log)
    assert "the run's status is 'error'; expected a finished ('success') run" in str(caught.value)


def test_inspect_eval_members_are_zstandard(inspect_folder: Path) -> None:
    """inspect 0.3.285 compresses .eval members with zstandard (zip method 93), which
    Python's zipfile cannot read: the importer decompresses them itself."""
    log = next(inspect_folder.glob("*tiny-alpha*.eval"))
    with zipfile.ZipFile(log) as archive:
        assert {info.compress_type for info in archive.infolist()} == {93}


# --- HELM -----------------------------------------------------------------------------------


def test_helm_joins_runs_on_the_instance_text(helm_folder: Path) -> None:
    batch = import_helm(helm_folder)
    assert sorted(batch.llms["llm_id"]) == ["simple/model1", "tiny/model-a", "tiny/model-b"]
    assert batch.queries["text_hash"].nunique() == 6 and batch.n_scores == 18
    texts = set(batch.queries["query_text"])
    assert "Is 70 even or odd?" in texts  # the instance, not the prompt with its examples
    # the reference tagged correct is the query's reference answer
    by_text = batch.queries.set_index("query_text")
    assert by_text.loc["Is 70 even or odd?", ["reference", "grader"]].tolist() == ["Even", "exact"]
    means = batch.scores.groupby("llm_id")["score"].mean()
    assert means["tiny/model-a"] == pytest.approx(4 / 6) and means["simple/model1"] == 0.0
    assert batch.notes == ("metric per task: simple_mcqa exact_match",)
    quasi = import_helm(helm_folder, metric="quasi_exact_match")
    assert quasi.notes == ("metric per task: simple_mcqa quasi_exact_match",)
    with pytest.raises(LocusInputError, match="reports no per-instance 'bleu_4'"):
        import_helm(helm_folder, metric="bleu_4")


def test_helm_run_without_stats(helm_folder: Path) -> None:
    run = next(helm_folder.rglob("run_spec.json")).parent
    (run / "per_instance_stats.json").unlink()
    with pytest.raises(LocusInputError) as caught:
        import_helm(helm_folder)
    assert str(caught.value).startswith(f"{run / 'per_instance_stats.json'}: missing")


# --- detection ------------------------------------------------------------------------------


def test_detect_format(
    lm_eval_folder: Path, inspect_folder: Path, helm_folder: Path, tmp_path: Path
) -> None:
    assert detect_format(lm_eval_folder)[0] == "lm-eval"
    assert detect_format(inspect_folder)[0] == "inspect"
    assert detect_format(next(inspect_folder.glob("*.json")))[0] == "inspect"
    assert detect_format(helm_folder)[0] == "helm"
    table = tmp_path / "scores.csv"
    table.write_text("model,prompt,score\na,hi,1\n")
    assert detect_format(table)[0] == "table"
    (tmp_path / "notes.txt").write_text("nothing")
    with pytest.raises(LocusInputError, match="no format locus reads found"):
        detect_format(tmp_path / "notes.txt")
