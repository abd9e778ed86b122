"""One source per imported file or folder, through the CLI: `locus sources` after re-imports."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult

Run = Callable[..., CliResult]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval_logs"


def _sources(run_cli: Run, ws: Path) -> dict[str, dict[str, object]]:
    listed = run_cli("sources", "-w", ws, "--json")
    assert listed.exit_code == 0, listed.stderr
    return {str(row["name"]): row for row in listed.json()}  # type: ignore[union-attr, index]


def test_sources_show_the_latest_path_and_import_time(run_cli: Run, tmp_path: Path) -> None:
    fixture = FIXTURES / "lm_eval" / "output"
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(fixture / "main", first)
    shutil.copytree(fixture / "main", second)
    ws = tmp_path / "ws"
    assert run_cli("import", "lm-eval", first, "--source", "runs", "-w", ws).exit_code == 0
    long_ago = "2020-01-01T00:00:00+00:00"
    with sqlite3.connect(ws / "locus.db") as db:  # as if imported long ago
        db.execute(
            "UPDATE sources SET first_imported_at = ?, last_imported_at = ?", (long_ago, long_ago)
        )
    db.close()
    assert run_cli("import", "lm-eval", second, "--source", "runs", "-w", ws).exit_code == 0
    row = _sources(run_cli, ws)["runs"]
    assert (row["origin"], row["first_imported_at"]) == (str(second), long_ago)
    assert str(row["last_imported_at"]) > long_ago
