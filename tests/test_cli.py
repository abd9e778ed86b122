"""The command line through its real entry point: output, --json, errors and exit codes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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
