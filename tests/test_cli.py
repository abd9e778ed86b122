"""The command line through its real entry point: output, --json, errors and exit codes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from locus.data.batch import ImportBatch
from locus.store import Store
from tests.conftest import CliResult, planted_long_table

Run = Callable[..., CliResult]


@pytest.fixture
def filled(workspace: Path) -> Path:
    with Store.open(workspace) as store:
        store.write_batch(
            ImportBatch.from_long(planted_long_table(), source="planted", origin="p.csv"),
            kind="table",
        )
    return workspace


def test_llms_table_and_json(run_cli: Run, filled: Path) -> None:
    result = run_cli("llms", "--workspace", filled)
    assert result.exit_code == 0
    assert "llm-0" in result.stdout and "6 LLMs" in result.stdout
    rows = run_cli("llms", "--workspace", filled, "--json").json()
    assert isinstance(rows, list) and len(rows) == 6
    assert {"llm_id", "queries_scored", "accuracy", "best_task"} <= set(rows[0])
    assert all(row["best_task"] in {"math", "law"} for row in rows)


def test_workspace_from_environment(
    run_cli: Run, filled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCUS_WORKSPACE", str(filled))
    payload = run_cli("stats", "--json").json()
    assert isinstance(payload, dict)
    assert payload["counts"]["llms"] == 6
    assert len(payload["checksums"]["scores"]) == 64


def test_encode_is_cached(run_cli: Run, filled: Path) -> None:
    first = run_cli("encode", "--encoder", "hashing-16", "--workspace", filled, "--json").json()
    second = run_cli("encode", "--workspace", filled, "--json").json()
    assert isinstance(first, dict) and isinstance(second, dict)
    assert first["encoded"] == 40 and second["encoded"] == 0
    assert second["encoder"] == "hashing-16"  # the workspace remembers its encoder


def test_missing_workspace_is_one_line_exit_2(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli("llms", "--workspace", tmp_path / "nothing-here")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "import data first" in result.stderr


def test_workspace_that_is_a_file(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "a-file"
    path.write_text("x")
    result = run_cli("stats", "--workspace", path)
    assert result.exit_code == 2
    assert "expected a directory, found a file" in result.stderr
    assert path.read_text() == "x"


def test_usage_error_exit_2(run_cli: Run) -> None:
    result = run_cli("llms", "--no-such-option")
    assert result.exit_code == 2


def test_failed_import_leaves_no_workspace_behind(run_cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("llm_id,query_id,score\na,1,0.5\nb,1,2\n")
    workspace = tmp_path / "ws"
    result = run_cli("import", "table", bad, "--workspace", workspace)
    assert result.exit_code == 2
    assert "line 3, column 'score': expected a number in [0, 1], found '2'" in result.stderr
    assert not workspace.exists()
    unknown = run_cli("import", "csvv", bad, "--workspace", workspace)
    assert unknown.exit_code == 2 and "expected one of table, mmlu-pro" in unknown.stderr
    assert not workspace.exists()


def test_one_file_per_llm_shares_queries(run_cli: Run, tmp_path: Path) -> None:
    """The README's promise: LLMs imported from separate files share the queries they have
    in common (a query is its text)."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(
        "llm_id,query_id,score,query_text\nA,q1,1,What is 2+2?\nA,q2,0,Capital of France?\n"
    )
    b.write_text(
        "llm_id,query_id,score,query_text\nB,q1,0,What is 2+2?\nB,q2,1,Capital of France?\n"
    )
    ws = tmp_path / "ws"
    assert run_cli("import", "table", a, "-w", ws).exit_code == 0
    second = run_cli("import", "table", b, "-w", ws)
    shown = " ".join(second.stdout.split())
    assert (
        second.exit_code == 0 and "2 of its queries have the text of a query already known" in shown
    )
    stats = run_cli("stats", "-w", ws, "--json").json()
    assert isinstance(stats, dict)
    assert stats["counts"]["queries"] == 2 and stats["counts"]["query_aliases"] == 4
    with Store.open(ws) as store:
        table = store.score_table()
    assert table.scores.shape == (2, 2) and not np.isnan(table.scores).any()
    # without text, per-LLM files join only when they name one namespace
    c, d = tmp_path / "c.csv", tmp_path / "d.csv"
    c.write_text("llm_id,query_id,score\nC,item-1,1\nC,item-2,0\n")
    d.write_text("llm_id,query_id,score\nD,item-1,0\nD,item-2,1\n")
    bare = tmp_path / "bare"
    for path in (c, d):
        assert run_cli("import", "table", path, "-w", bare, "--namespace", "bench-x").exit_code == 0
    assert run_cli("stats", "-w", bare, "--json").json()["counts"]["queries"] == 2  # type: ignore[index]


def test_reimport_of_unchanged_files_skips_reading_them(
    run_cli: Run, workspace: Path, tmp_path: Path
) -> None:
    import os

    table = tmp_path / "scores.csv"
    planted_long_table().to_csv(table, index=False)
    first = run_cli("import", "table", table, "--workspace", workspace, "--json").json()
    assert isinstance(first, dict) and first["changed"] is True
    again = run_cli("import", "table", table, "--workspace", workspace)
    assert again.exit_code == 0 and "unchanged since the last import" in again.stdout
    # a changed file (new mtime, new content) is read again; --replace always reads
    frame = planted_long_table()
    frame.loc[0, "score"] = 1.0 - frame.loc[0, "score"]
    frame.to_csv(table, index=False)
    os.utime(table, ns=(os.stat(table).st_atime_ns, os.stat(table).st_mtime_ns + 10**9))
    changed = run_cli("import", "table", table, "--workspace", workspace)
    assert changed.exit_code == 2 and "--replace" in changed.stderr  # read: the conflict shows
    replaced = run_cli("import", "table", table, "--replace", "--workspace", workspace, "--json")
    assert replaced.json()["replaced_scores"] == 1  # type: ignore[index]


def test_fit_defaults_are_the_training_defaults() -> None:
    import inspect
    import typing

    from locus.cli.model_commands import fit_command
    from locus.nn import TrainingConfig

    defaults = TrainingConfig()
    parameters = inspect.signature(fit_command).parameters
    for name in ("anchors", "min_evidence", "seed"):
        assert parameters[name].default == getattr(defaults, name), name
    for name in ("max_steps", "eval_every", "patience"):  # None: the config's own default
        assert parameters[name].default is None, name
        option = typing.get_type_hints(fit_command, include_extras=True)[name].__metadata__[0]
        assert f"(default {getattr(defaults, name)}" in option.help, name


def test_progress_in_a_log_file_is_plain_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import locus.cli._render as render

    monkeypatch.delenv("LOCUS_NO_PROGRESS", raising=False)
    clock = iter(float(t) for t in range(0, 10_000, 20))  # 20 s between readings
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    with render.progress_bars()("fitting", total=20) as advance:
        for _ in range(20):
            advance(1)
    lines = capsys.readouterr().err.splitlines()
    # stderr is not a terminal here: lines at every tenth (the clock allows each), then the end
    assert lines[0].startswith("fitting: 2/20 in ") and "left" in lines[0]
    assert lines[-1].startswith("fitting: 20/20 in ") and "left" not in lines[-1]
    assert len(lines) == 11 and "\x1b" not in "".join(lines)


def test_encode_tells_a_workspace_on_the_old_cut_how_to_switch(run_cli: Run, filled: Path) -> None:
    from locus.store import Store

    with Store.open(filled) as store:
        store.set_meta("text_encoder", "all-MiniLM-L6-v2/onnx-int8")  # encoded before 2026-12-03
    kept = run_cli("encode", "--workspace", filled)
    said = " ".join(kept.stderr.split())  # the console wraps long lines
    assert kept.exit_code == 0
    assert "cuts texts after 256 tokens" in said and "--encoder minilm-onnx-int8" in said
    switched = run_cli("encode", "--encoder", "minilm-onnx-int8", "--workspace", filled)
    assert "switching the workspace's text encoder" in " ".join(switched.stderr.split())
    assert "cuts texts" not in run_cli("encode", "--workspace", filled).stderr
