"""Your own data through the CLI: per-LLM tables with the columns people have, tool logs,
replacing and removing sources, errors under --json, the smallest pool fit accepts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.store import Store
from tests.conftest import CliResult

Run = Callable[..., CliResult]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval_logs"


def _per_llm_files(folder: Path, llms: int = 4, queries: int = 60, seed: int = 0) -> list[Path]:
    """One CSV per LLM with the columns people have: model, prompt, category, score."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for m in range(llms):
        lines = ["model,prompt,category,score"]
        for q in range(queries):
            category = "math" if q % 2 else "law"
            good = (m % 2 == 0) == (category == "math")
            score = int(rng.random() < (0.85 if good else 0.25))
            lines.append(f"llm-{m},Question {q} about {category}: what holds?,{category},{score}")
        path = folder / f"llm{m}.csv"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def test_per_llm_files_import_with_no_column_flags(run_cli: Run, tmp_path: Path) -> None:
    paths = _per_llm_files(tmp_path / "files")
    ws = tmp_path / "ws"
    result = run_cli("import", "table", *paths, "-w", ws)
    assert result.exit_code == 0, result.stderr
    notes = " ".join(result.stderr.split())
    assert (
        "columns recognised by name: llm_id <- 'model', query_text <- 'prompt', "
        "task <- 'category'" in notes
    )
    assert "query_id: none in the file, each query is identified by its text" in notes
    with Store.open(ws) as store:
        table = store.score_table()
        assert table.scores.shape == (60, 4) and not np.isnan(table.scores).any()
        assert set(table.tasks) == {"math", "law"}
        assert list(store.sources()["name"]) == ["llm0", "llm1", "llm2", "llm3"]


def test_files_given_without_a_format_are_read_as_auto_and_a_misspelt_format_is_named(
    run_cli: Run, tmp_path: Path
) -> None:
    paths = _per_llm_files(tmp_path / "files")
    ws = tmp_path / "ws"
    result = run_cli("import", *paths, "-w", ws)  # `locus import *.csv`
    assert result.exit_code == 0, result.stderr
    with Store.open(ws) as store:
        assert store.score_table().scores.shape == (60, 4)
    missing = run_cli("import", tmp_path / "nothere.csv", "-w", ws)
    assert missing.exit_code == 2
    assert f"{tmp_path / 'nothere.csv'}: no such file or folder" in missing.stderr
    misspelt = run_cli("import", "tabel", *paths, "-w", ws)
    assert misspelt.exit_code == 2
    assert "unknown import format 'tabel' (did you mean 'table'?)" in misspelt.stderr


def test_a_corrected_file_replaces_its_source_without_averaging(
    run_cli: Run, tmp_path: Path
) -> None:
    paths = _per_llm_files(tmp_path / "files")
    ws = tmp_path / "ws"
    assert run_cli("import", "table", *paths, "-w", ws).exit_code == 0
    fixed = tmp_path / "llm3-fixed.csv"
    lines = paths[3].read_text().splitlines()
    flipped = [lines[0]] + [
        line[:-1] + ("0" if line.endswith("1") else "1") for line in lines[1:31]
    ]  # half the questions re-graded, the other half dropped
    fixed.write_text("\n".join(flipped) + "\n")
    result = run_cli("import", "table", fixed, "--source", "llm3", "--replace", "-w", ws, "--json")
    report = result.json()
    assert result.exit_code == 0 and isinstance(report, dict)
    assert (report["replaced_scores"], report["removed_scores"]) == (30, 30)
    with Store.open(ws) as store:
        table = store.score_table(llm_ids=["llm-3"])
        assert store.counts()["disagreeing_cells"] == 0
    assert int((~np.isnan(table.scores)).sum()) == 30  # only the corrected file's scores
    expected = [int(line[-1]) for line in flipped[1:]]
    assert sorted(table.scores[:, 0].astype(int).tolist()) == sorted(expected)


def test_a_bool_column_and_mixed_percentages_import_as_scores(run_cli: Run, tmp_path: Path) -> None:
    # what pandas writes for a bool column: True / False
    booleans = tmp_path / "booleans.csv"
    pd.DataFrame(
        {
            "model": ["llm-a", "llm-a", "llm-b", "llm-b"],
            "prompt": ["What is 1 + 1?", "What is 2 + 2?", "What is 1 + 1?", "What is 2 + 2?"],
            "correct": [True, False, False, True],
        }
    ).to_csv(booleans, index=False)
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("model,prompt,score\nllm-c,What is 1 + 1?,87%\nllm-c,What is 2 + 2?,0.5\n")
    ws = tmp_path / "ws"
    result = run_cli("import", "table", booleans, mixed, "-w", ws)
    assert result.exit_code == 0, result.stderr
    notes = " ".join(result.stderr.split())
    assert "score: words read as numbers (True -> 1, False -> 0)" in notes
    assert "score: percentages read as fractions (87% -> 0.87)" in notes
    with Store.open(ws) as store:
        table = store.score_table()
    by_text = dict(zip(table.query_texts, range(len(table.query_texts)), strict=True))
    got = {
        (llm, text): round(float(table.scores[row, table.llm_ids.index(llm)]), 6)  # float32
        for llm in ("llm-a", "llm-b", "llm-c")
        for text, row in by_text.items()
    }
    assert got == {
        ("llm-a", "What is 1 + 1?"): 1.0, ("llm-a", "What is 2 + 2?"): 0.0,
        ("llm-b", "What is 1 + 1?"): 0.0, ("llm-b", "What is 2 + 2?"): 1.0,
        ("llm-c", "What is 1 + 1?"): 0.87, ("llm-c", "What is 2 + 2?"): 0.5,
    }  # fmt: skip


def test_sources_list_and_remove(run_cli: Run, tmp_path: Path) -> None:
    paths = _per_llm_files(tmp_path / "files", llms=2)
    ws = tmp_path / "ws"
    run_cli("import", "table", *paths, "-w", ws)
    listed = run_cli("sources", "-w", ws, "--json").json()
    assert [(s["name"], s["llms"], s["scores"]) for s in listed] == [  # type: ignore[union-attr, index]
        ("llm0", 1, 60),
        ("llm1", 1, 60),
    ]
    refused = run_cli("remove-source", "llm1", "-w", ws, "--json")
    assert refused.exit_code == 2
    assert refused.json()["error"] == (  # type: ignore[index]
        "remove-source llm1: pass --yes to remove its 60 scores (no terminal to ask on)"
    )
    removed = run_cli("remove-source", "llm1", "--yes", "-w", ws, "--json").json()
    assert removed == {  # the queries stay: llm0 still scores them
        "source": "llm1",
        "scores": 60,
        "aliases": 60,
        "queries": 0,
        "stale_artifacts": [],
    }
    unknown = run_cli("remove-source", "nope", "--yes", "-w", ws)
    assert unknown.exit_code == 2
    assert unknown.stderr.strip() == (
        "error: no source 'nope' in this workspace; expected one of llm0 (see `locus sources`)"
    )
    # a removed file is read again when imported again (not skipped as unchanged)
    again = run_cli("import", "table", paths[1], "-w", ws, "--json").json()
    assert again["new_scores"] == 60  # type: ignore[index]


def test_table_usability_messages(run_cli: Run, tmp_path: Path) -> None:
    semi = tmp_path / "semi.csv"
    semi.write_text("model;question;correct\nllm-x;What is 1 + 1?;100%\nllm-x;What is 2 + 2?;0%\n")
    result = run_cli("import", "table", semi, "-w", tmp_path / "ws")
    assert result.exit_code == 0
    notes = " ".join(result.stderr.split())
    assert "read as semicolon-separated (from its header)" in notes
    assert "score: percentages read as fractions (100% -> 1)" in notes
    bad_cell = tmp_path / "bad.csv"
    bad_cell.write_text("model,prompt,score\na,hi,87%\na,ho,maybe\n")
    bad = run_cli("import", "table", bad_cell, "-w", tmp_path / "ws")
    assert bad.exit_code == 2
    assert bad.stderr.strip() == (
        f"error: {bad_cell}: line 3, column 'score': expected a number in [0, 1], a percentage "
        "(87%), true/false, yes/no, up/down, good/bad, pass/fail or correct/incorrect (any "
        "case), found 'maybe'; fix the value or leave it blank for 'not evaluated'"
    )
    ambiguous = tmp_path / "amb.csv"
    ambiguous.write_text("model,llm,prompt,score\nA,B,hi,1\n")
    result = run_cli("import", "table", ambiguous, "-w", tmp_path / "ws", "--json")
    assert result.exit_code == 2
    assert result.json() == {
        "error": f"{ambiguous}: no llm_id column found among the file's columns (model, llm, "
        "prompt, score); several columns could be it (model, llm): choose one with "
        "-c llm_id=COLUMN",
        "kind": "LocusInputError",
        "hint": "several columns could be it (model, llm): choose one with -c llm_id=COLUMN",
    }


def test_usage_errors_are_json_under_json(run_cli: Run) -> None:
    result = run_cli("fit", "--bogus", "--json")
    assert result.exit_code == 2
    assert result.json() == {"error": "No such option: --bogus", "kind": "UsageError", "hint": None}


def test_fit_states_its_minimum(run_cli: Run, tmp_path: Path) -> None:
    one = _per_llm_files(tmp_path / "one", llms=1)
    ws = tmp_path / "ws"
    run_cli("import", "table", *one, "-w", ws)
    run_cli("encode", "-w", ws, "--encoder", "hashing-64")
    refused = run_cli("fit", "-w", ws)
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        "error: fit needs at least 2 LLMs to route among; the workspace has 1; import another "
        "LLM's scores (`locus import`)"
    )


def test_tool_logs_import_fit_and_route(run_cli: Run, tmp_path: Path) -> None:
    """Real lm-eval output: imported, joined across its 3 models, fitted (a pool too small to
    learn from: routed by the LLMs' own scores, said so) and routed; inspect and HELM logs join
    the same workspace."""
    ws = tmp_path / "ws"
    result = run_cli(
        "import", "auto", FIXTURES / "lm_eval" / "output", FIXTURES / "inspect_ai" / "logs",
        FIXTURES / "helm" / "benchmark_output", "-w", ws, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout
    reports = result.json()
    assert [r["format"] for r in reports] == ["lm-eval", "inspect", "helm"]  # type: ignore[union-attr, index]
    assert [r["llms_in_file"] for r in reports] == [3, 3, 3]  # type: ignore[union-attr, index]
    assert run_cli("encode", "-w", ws, "--encoder", "hashing-64").exit_code == 0
    fitted = run_cli("fit", "-w", ws)
    assert fitted.exit_code == 0, fitted.stderr
    said = " ".join(fitted.stderr.split())
    assert "too few to learn from or to calibrate P(correct) on" in said
    assert "routing by each LLM's per-task rates and the nearest scored queries, not LOCUS" in said
    routed = run_cli("route", "Question: What is 7 multiplied by 8?\nAnswer:", "-w", ws, "--json")
    assert routed.exit_code == 0, routed.stderr
    decision = routed.json()
    names = {"tiny-alpha", "tiny-beta", "tiny-gamma", "tiny/alpha", "tiny/beta", "tiny/gamma",
             "simple/model1", "tiny/model-a", "tiny/model-b"}  # fmt: skip
    chosen = decision[0]["llm_id"] if isinstance(decision, list) else decision["llm_id"]  # type: ignore[index, call-overload]
    assert chosen in names


_KILLED_IMPORT = textwrap.dedent(
    """
    import sys, time
    from contextlib import contextmanager
    from pathlib import Path
    from locus.data.importers import get_importer
    from locus.store import Store

    batch = get_importer(sys.argv[2])(Path(sys.argv[3]))

    @contextmanager
    def pause_while_writing(description, total=None):
        def advance(n):
            print("WRITING", flush=True)
            time.sleep(600)
        yield advance

    Store.open(sys.argv[1]).write_batch(batch, kind=sys.argv[2], progress=pause_while_writing)
    """
)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("lm-eval", FIXTURES / "lm_eval" / "output"),
        ("inspect", FIXTURES / "inspect_ai" / "logs"),
        ("helm", FIXTURES / "helm" / "benchmark_output"),
    ],
)
def test_an_import_killed_mid_write_leaves_nothing(name: str, path: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    with Store.open(ws) as store:
        before = store.counts()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_IMPORT, str(ws), name, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "WRITING"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    with Store.open(ws) as store:
        assert store.counts() == before
        assert store.sources().empty


def test_ctrl_c_during_an_import_says_what_it_kept(tmp_path: Path) -> None:
    """SIGINT while the second of two files is written (each in its own transaction): exit 130
    and one line saying that file was rolled back whole and the first is kept, which is true."""
    from tests.conftest import LineReader, locus_command, locus_env, planted_long_table

    small, big, ws = tmp_path / "small.csv", tmp_path / "big.csv", tmp_path / "ws"
    planted_long_table().to_csv(small, index=False)
    n_llms, n_queries = 20, 6_000  # 120,000 scores: a second or more to write
    rng = np.random.default_rng(0)
    pd.DataFrame(
        {
            "llm_id": np.repeat([f"big-{i}" for i in range(n_llms)], n_queries),
            "query_id": np.tile([f"b{j}" for j in range(n_queries)], n_llms),
            "query_text": np.tile([f"big question {j}" for j in range(n_queries)], n_llms),
            "score": rng.integers(0, 2, n_llms * n_queries).astype(float),
        }
    ).to_csv(big, index=False)
    # Ctrl-C as a terminal sends it: a test run started in the background of a script (as CI
    # may be) ignores SIGINT, its children inherit that, and the import would finish unmoved
    command = locus_command("import", "table", small, big, "-w", ws)
    command[2] = (
        "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); " + (command[2])
    )
    child = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=locus_env(),
    )  # fmt: skip
    assert child.stderr is not None
    stderr = LineReader(child.stderr)
    try:
        stderr.wait_for(lambda line: line == "writing scores ...")  # small.csv's transaction
        stderr.wait_for(lambda line: line == "writing scores ...")  # big.csv's: open now
        child.send_signal(signal.SIGINT)
        said = stderr.rest()
        assert child.wait(timeout=60) == 130
    finally:
        child.kill()
        child.wait()
        stderr.rest()
        child.stderr.close()
    assert any(line.startswith("writing scores: stopped after ") for line in said)  # not "done"
    assert said[-1] == (
        f"import interrupted while writing {big}: its transaction was rolled back, so nothing "
        f"of it was written; {small}, imported before it, is kept"
    )
    with Store.open(ws) as store:
        assert store.sources()["name"].tolist() == ["small"]
        assert store.counts()["scores"] == len(planted_long_table())


def test_an_import_waiting_for_another_says_so(tmp_path: Path) -> None:
    """A second import finds the workspace's write lock held (here by this test, as a first
    import would hold it): it says on stderr that it waits, then imports once the lock is
    released."""
    from tests.conftest import LineReader, locus_command, locus_env, planted_long_table

    table, ws = tmp_path / "scores.csv", tmp_path / "ws"
    planted_long_table().to_csv(table, index=False)
    with Store.open(ws) as holder, holder._write(data=False):
        child = subprocess.Popen(
            locus_command("import", "table", table, "-w", ws),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=locus_env(LOCUS_NO_PROGRESS="1"),
        )  # fmt: skip
        assert child.stderr is not None and child.stdout is not None
        stderr = LineReader(child.stderr)
        try:
            said = stderr.wait_for(lambda line: line.startswith("waiting"))
            assert child.poll() is None  # it waits while the lock is held
        except BaseException:
            child.kill()
            raise
    try:
        assert child.wait(timeout=120) == 0, stderr.rest()
        assert child.stdout.read().startswith(f"imported: {table} as source scores")
    finally:
        stderr.rest()
        child.stderr.close()
        child.stdout.close()
    assert said == (
        "waiting for another import to finish: another process holds the write lock of "
        f"workspace {ws} (waiting up to 60 s)"
    )
    with Store.open(ws) as store:
        assert store.counts()["scores"] == len(planted_long_table())
