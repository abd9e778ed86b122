"""One source per imported file or folder, through the CLI: real lm-eval and inspect-ai logs
under two paths, `--replace` touching only its own source, a corrected table under a new name,
the ambiguous case, `locus sources` after re-imports, and workspaces named the earlier way."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from locus.data.importers import get_importer
from locus.store import Store
from tests.conftest import CliResult

Run = Callable[..., CliResult]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "eval_logs"
LOG_FOLDERS = [
    ("lm-eval", FIXTURES / "lm_eval" / "output", 72),
    ("inspect", FIXTURES / "inspect_ai" / "logs", 40),
]


def _suffix(path: Path) -> str:
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:6]


def _sources(run_cli: Run, ws: Path) -> dict[str, dict[str, object]]:
    listed = run_cli("sources", "-w", ws, "--json")
    assert listed.exit_code == 0, listed.stderr
    return {str(row["name"]): row for row in listed.json()}  # type: ignore[union-attr, index]


@pytest.mark.parametrize(("format_name", "fixture", "n_scores"), LOG_FOLDERS)
def test_two_log_folders_are_two_sources_and_replace_touches_only_its_own(
    run_cli: Run, tmp_path: Path, format_name: str, fixture: Path, n_scores: int
) -> None:
    first, second = tmp_path / "first" / fixture.name, tmp_path / "second" / fixture.name
    shutil.copytree(fixture, first)
    shutil.copytree(fixture, second)
    ws = tmp_path / "ws"
    for path in (first, second):
        result = run_cli("import", format_name, path, "-w", ws)
        assert result.exit_code == 0, result.stderr
    # one base name, two paths: the second's name carries a hash of its path
    names = {fixture.name: first, f"{fixture.name}-{_suffix(second)}": second}
    listed = _sources(run_cli, ws)
    assert {n: (r["origin"], r["scores"], r["kind"]) for n, r in listed.items()} == {
        name: (str(path), n_scores, format_name) for name, path in names.items()
    }
    replaced = run_cli("import", format_name, second, "--replace", "-w", ws, "--json")
    assert replaced.exit_code == 0, replaced.stderr
    report = replaced.json()
    assert isinstance(report, dict)
    assert report["source"] == f"{fixture.name}-{_suffix(second)}"
    assert (report["replaced_scores"], report["removed_scores"]) == (0, 0)
    assert {n: r["scores"] for n, r in _sources(run_cli, ws).items()} == dict.fromkeys(
        names, n_scores
    )  # the first folder's scores are all still there
    again = run_cli("import", format_name, first, "-w", ws, "--json").json()
    assert again["changed"] is False  # type: ignore[index]  # the same path, the same source


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


def _per_llm_tables(folder: Path, names: list[str], llm: str = "llm-3") -> list[Path]:
    """One table per name, each the same LLM's 60 scores on the same questions."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        lines = ["model,prompt,score"]
        lines += [f"{llm},Question {q}: what holds?,{int(rng.random() < 0.5)}" for q in range(60)]
        path = folder / f"{name}.csv"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def _corrected(old: Path, fixed: Path) -> list[int]:
    """Half of `old`'s questions re-graded (flipped) into `fixed`, the other half dropped; the
    corrected scores."""
    lines = old.read_text().splitlines()
    flipped = [lines[0]] + [
        line[:-1] + ("0" if line.endswith("1") else "1") for line in lines[1:31]
    ]
    fixed.write_text("\n".join(flipped) + "\n")
    return [int(line[-1]) for line in flipped[1:]]


def test_a_corrected_table_under_a_new_name_replaces_the_source_of_its_llm(
    run_cli: Run, tmp_path: Path
) -> None:
    llm2, llm3 = _per_llm_tables(tmp_path / "files", ["llm2", "llm3"])
    llm2.write_text(llm2.read_text().replace("llm-3,", "llm-2,"))
    ws = tmp_path / "ws"
    assert run_cli("import", "table", llm2, llm3, "-w", ws).exit_code == 0
    fixed = tmp_path / "llm3-fixed.csv"
    expected = _corrected(llm3, fixed)
    result = run_cli("import", "table", fixed, "--replace", "-w", ws)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"{fixed}: replacing source llm3 (60 scores of 1 LLM, from {llm3}): no source was "
        "imported from this path and it holds the same LLMs and queries (pass --source NAME to "
        "replace another)"
    )
    listed = _sources(run_cli, ws)
    assert {n: (r["origin"], r["scores"]) for n, r in listed.items()} == {
        "llm2": (str(llm2), 60),
        "llm3": (str(fixed), 30),
    }
    with Store.open(ws) as store:
        table = store.score_table(llm_ids=["llm-3"])
        assert store.counts()["disagreeing_cells"] == 0
    observed = table.scores[~np.isnan(table.scores[:, 0]), 0]
    assert sorted(observed.astype(int).tolist()) == sorted(expected)  # not averaged


def test_a_corrected_table_matching_two_sources_is_refused(run_cli: Run, tmp_path: Path) -> None:
    a, b = _per_llm_tables(tmp_path / "files", ["a", "b"])
    ws = tmp_path / "ws"
    assert run_cli("import", "table", a, b, "-w", ws).exit_code == 0
    with Store.open(ws) as store:
        before = store.counts()
    fixed = tmp_path / "fixed.csv"
    _corrected(a, fixed)
    result = run_cli("import", "table", fixed, "--replace", "-w", ws)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: --replace {fixed}: no source was imported from this path, and 2 sources hold "
        f"the same LLMs and queries: a ({a}), b ({b}); expected one to replace; pass --source "
        "NAME to say which"
    )
    with Store.open(ws) as store:
        assert store.counts() == before
    chosen = run_cli("import", "table", fixed, "--replace", "--source", "b", "-w", ws, "--json")
    assert chosen.exit_code == 0, chosen.stderr
    assert {n: r["scores"] for n, r in _sources(run_cli, ws).items()} == {"a": 60, "b": 30}


def test_replace_of_a_new_path_with_other_queries_adds_a_source(
    run_cli: Run, tmp_path: Path
) -> None:
    (old,) = _per_llm_tables(tmp_path / "files", ["old"])
    other = tmp_path / "other.csv"
    other.write_text(old.read_text().replace("Question", "Another question"))
    ws = tmp_path / "ws"
    assert run_cli("import", "table", old, "-w", ws).exit_code == 0
    result = run_cli("import", "table", other, "--replace", "-w", ws)
    assert result.exit_code == 0, result.stderr
    assert (
        f"{other}: --replace: no source was imported from this path or holds the same LLMs and "
        "queries; imported as the new source other" in " ".join(result.stderr.split())
    )
    assert {n: r["scores"] for n, r in _sources(run_cli, ws).items()} == {"old": 60, "other": 60}


def test_a_workspace_named_by_format_keeps_its_source(run_cli: Run, tmp_path: Path) -> None:
    """Earlier versions named a folder's source after its format: re-importing that folder
    writes the same source (nothing doubles); another folder is its own source, said."""
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(FIXTURES / "inspect_ai" / "logs", first)
    shutil.copytree(FIXTURES / "inspect_ai" / "logs", second)
    ws = tmp_path / "ws"
    with Store.open(ws) as store:  # what `locus import inspect first` wrote before
        store.write_batch(get_importer("inspect")(first), kind="inspect")
    again = run_cli("import", "inspect", first, "--replace", "-w", ws, "--json").json()
    assert isinstance(again, dict)
    assert (again["source"], again["changed"]) == ("inspect", False)
    assert {n: r["scores"] for n, r in _sources(run_cli, ws).items()} == {"inspect": 40}
    other = run_cli("import", "inspect", second, "-w", ws)
    assert other.exit_code == 0, other.stderr
    assert (
        f"source inspect (40 scores from {first}, named after the format as earlier versions of "
        "locus named every folder's source) may hold these scores too"
        in " ".join(other.stderr.split())
    )
    assert {n: r["scores"] for n, r in _sources(run_cli, ws).items()} == {
        "inspect": 40,
        "second": 40,
    }
