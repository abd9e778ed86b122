"""The command line through its real entry point: output, --json, errors and exit codes."""

from __future__ import annotations

import re
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
    with render.progress_bars(interval=15)("fitting", total=20) as advance:
        for _ in range(20):
            advance(1)
    lines = capsys.readouterr().err.splitlines()
    # stderr is not a terminal here: a line at the start, then at every step (20 s each, more
    # than the 15 s interval), the last step in the final line only
    assert lines[0] == "fitting ..."
    assert lines[1] == "fitting: 1/20 (5%) in 20 s, about 6 min 20 s left"
    assert lines[-1] == "fitting: 20/20 in 7 min 00 s"  # the end: one more reading
    assert len(lines) == 21 and "\x1b" not in "".join(lines)


def test_a_section_rule_in_a_log_is_a_line_people_can_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from locus.cli._terminal import RULE_WIDTH, rule, stdout_console

    monkeypatch.delenv("COLUMNS", raising=False)
    console = stdout_console()  # stdout is captured: no terminal, lines are never cut
    console.print("x" * 300)
    rule(console, "5. routing accuracy")
    long, line = capsys.readouterr().out.splitlines()
    assert long == "x" * 300  # a result line keeps its length
    assert "5. routing accuracy" in line and len(line) == RULE_WIDTH  # the rule does not fill 10k


def test_plain_progress_every_tenth_or_interval_whichever_first() -> None:
    import io

    from locus.cli._terminal import _PlainLines

    stream, now = io.StringIO(), [0.0]
    lines = _PlainLines(stream, "fitting", 100, interval=30, clock=lambda: now[0])
    lines.start()
    for step in range(1, 101):
        now[0] += 10 if step <= 3 else 1  # three slow steps, then 1 s a step
        lines.update(step)
    lines.finish()
    shown = stream.getvalue().splitlines()
    assert shown[:3] == [
        "fitting ...",
        "fitting: 3/100 (3%) in 30 s, about 16 min 10 s left",  # the interval: 30 s
        "fitting: 10/100 (10%) in 37 s, about 5 min 33 s left",  # a tenth: 7 s later
    ]
    assert shown[3].startswith("fitting: 20/100 (20%) in 47 s")
    assert shown[-1] == "fitting: 100/100 in 2 min 07 s" and len(shown) == 12


def test_plain_progress_keeps_coming_while_a_stage_counts_nothing() -> None:
    import io
    import time

    from locus.cli._terminal import _PlainLines

    stream = io.StringIO()
    lines = _PlainLines(stream, "stacking", None, interval=0.05, clock=time.monotonic)
    lines.start()
    deadline = time.monotonic() + 30
    while "running for" not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    lines.finish()
    shown = stream.getvalue().splitlines()
    assert shown[0] == "stacking ..." and re.fullmatch(r"stacking: running for \d+ s", shown[1])
    assert re.fullmatch(r"stacking: done in \d+ s", shown[-1])


def test_progress_interval_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from locus.cli._render import progress_seconds
    from locus.errors import LocusInputError

    monkeypatch.delenv("LOCUS_PROGRESS_SECONDS", raising=False)
    assert progress_seconds() == 30 and progress_seconds(2.5) == 2.5
    monkeypatch.setenv("LOCUS_PROGRESS_SECONDS", "0.5")
    assert progress_seconds() == 0.5
    monkeypatch.setenv("LOCUS_PROGRESS_SECONDS", "soon")
    with pytest.raises(LocusInputError, match="LOCUS_PROGRESS_SECONDS='soon': expected a pos"):
        progress_seconds()


def test_fit_without_a_terminal_reports_progress_in_whole_plain_lines(tmp_path: Path) -> None:
    """stdout and stderr are pipes (CI, nohup, `| tee`): training says where it is in plain
    lines as it goes, and the summary lines are whole (no cut to 80 columns)."""
    import re
    import subprocess

    from tests.conftest import locus_command, locus_env
    from tests.planted_workspace import build_planted_workspace, planted_rows

    ws = build_planted_workspace(
        tmp_path / "ws", planted_rows(llms_per_group=2, queries_per_task=30)
    )
    small = ["dim=32", "inducing_points=8", "heads=2", "feed_forward=64", "predictor_hidden=32"]
    done = subprocess.run(
        locus_command(
            "fit", "-w", ws, "--max-steps", 10, "--eval-every", 5, "--anchors", 64,
            "--min-evidence", 8, *[part for s in small for part in ("--set", s)],
        ),
        capture_output=True, text=True, timeout=600, env=locus_env(LOCUS_PROGRESS_SECONDS="600"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[:2] == ["reading the workspace ...", lines[1]]
    took = r"\d+ (?:s|min \d\d s|h \d\d min)"  # a loaded machine may take minutes
    assert re.fullmatch(rf"reading the workspace: done in {took}", lines[1])
    step = (
        rf"training: step (\d+)/10 \(\d+%\) in {took}, about {took} left at most; "
        r"loss \d\.\d{4}.*"
    )
    steps = [int(m[1]) for m in map(lambda line: re.fullmatch(step, line), lines) if m]
    assert steps == list(range(1, 10))  # every tenth of 10 steps; the 10th in the last line
    assert any(
        re.fullmatch(rf"training: step 10/10 in {took}; loss \d\.\d{{4}}, val .*", x) for x in lines
    )
    assert "fitting the router (kNN stack, guard, newcomers' readings) ..." in lines
    assert any(re.fullmatch(rf"saving the artifact: done in {took}", line) for line in lines)
    summary = re.compile(
        r"^trained artifact default on 6 LLMs, 77 training queries in \d+ s; best validation "
        r"hit@1 \d\.\d{4} at step \d+$",
        re.MULTILINE,
    )
    assert summary.search(done.stdout), done.stdout
    assert re.search(r"^routing guard: .* alone \d\.\d{4}\)$", done.stdout, re.MULTILINE)
    assert "\x1b" not in done.stdout + done.stderr and "\u2026" not in done.stdout + done.stderr


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


_SMALL_NETWORK = (
    "dim=32",
    "inducing_points=8",
    "heads=2",
    "feed_forward=64",
    "predictor_hidden=32",
)


def _tiny_pool(workspace: Path) -> Path:
    """4 LLMs, 24 queries: 19 for training, 4 for validation, 1 for the test, on which every
    LLM is right (its cells have one class)."""
    rows = planted_long_table(n_llms=4, n_queries=24, missing=0.0)
    number = rows["query_id"].str[1:].astype(int)
    rows["split"] = np.where(number < 19, "train", np.where(number < 23, "val", "test"))
    rows.loc[rows["split"] == "test", "score"] = 1.0
    with Store.open(workspace) as store:
        store.write_batch(ImportBatch.from_long(rows, source="tiny", origin="t.csv"), kind="table")
    return workspace


def test_a_tiny_pool_says_it_cannot_calibrate_and_evaluates_only_what_means_something(
    run_cli: Run, workspace: Path
) -> None:
    import json

    ws = _tiny_pool(workspace)
    assert run_cli("encode", "--encoder", "hashing-16", "-w", ws).exit_code == 0
    settings = [part for s in _SMALL_NETWORK for part in ("--set", s)]
    fitted = run_cli("fit", "-w", ws, "--max-steps", 10, "--eval-every", 5, "--anchors", 16,
                     "--min-evidence", 8, *settings)  # fmt: skip
    assert fitted.exit_code == 0, fitted.stderr
    notes = fitted.stderr.splitlines()
    assert len(notes) == 2, notes  # one line each, whole
    assert notes[0].startswith("note: llm-0 has 19 scored training queries (and 4 validation ")
    assert "fewer than 50: too few to learn from or to calibrate P(correct) on" in notes[0]
    assert notes[1] == (
        "note: a tiny pool: 1 test query, fewer than 30: locus evaluate's figures will be noise "
        "(one standard error of hit@1 up to 0.50); `locus evaluate --folds 5` tests every query "
        "instead"
    )
    shown = run_cli("evaluate", "-w", ws)
    assert shown.exit_code == 0, shown.stderr
    assert "test split: 1 query, 4 LLMs" in shown.stdout
    assert "hit@1 on 1 query: no standard error can be estimated" in shown.stdout
    assert "hit@3 1.0000  |  correctness" in shown.stdout and "hit@5" not in shown.stdout
    assert "AUROC n/a (one class)" in shown.stdout and "nan" not in shown.stdout
    payload = json.loads(
        run_cli("evaluate", "-w", ws, "--json").stdout,
        parse_constant=lambda name: pytest.fail(f"--json wrote {name}: not JSON"),
    )
    assert payload["queries"] == 1 and payload["few_queries"] is True
    assert payload["routing"]["hit@3"] == 1.0 and payload["routing"]["hit@5"] is None
    assert payload["routing"]["hit@1_se"] is None and payload["correctness"]["auroc"] is None
    val = run_cli("evaluate", "-w", ws, "--split", "val")
    assert "val split: 4 queries, 4 LLMs" in val.stdout
    assert re.search(r"^hit@1 \d\.\d{4} ± 0\.\d{4} \(one standard error: large, on only 4 "
                     r"queries\)", val.stdout, re.MULTILINE), val.stdout  # fmt: skip


def test_an_unknown_llm_name_is_answered_with_the_nearest_names(run_cli: Run, filled: Path) -> None:
    assert run_cli("encode", "--encoder", "hashing-16", "-w", filled).exit_code == 0
    settings = [part for s in _SMALL_NETWORK for part in ("--set", s)]
    fitted = run_cli("fit", "-w", filled, "--max-steps", 5, "--anchors", 16, "--min-evidence", 8,
                     *settings)  # fmt: skip
    assert fitted.exit_code == 0, fitted.stderr
    embed = run_cli("embed", "llm_0", "-w", filled)
    assert embed.exit_code == 2
    assert embed.stderr == (
        "error: unknown LLM 'llm_0' (did you mean 'llm-0', 'llm-1' or 'llm-2'?); expected an LLM "
        "of the workspace (see `locus llms`); import its scores first\n"
    )
    for args in (
        ("similar", "LLM-4"),
        ("proxy", "LLM-4"),
        ("fit", "--exclude", "LLM-4"),
        ("route", "question 3 about law", "--unavailable", "LLM-4"),
    ):
        refused = run_cli(*args, "-w", filled)
        assert refused.exit_code == 2, (args, refused.stderr)
        assert "LLM 'LLM-4'" in refused.stderr and "(did you mean 'llm-4'" in refused.stderr, (
            args,
            refused.stderr,
        )


def test_quiet_silences_notes(run_cli: Run, tmp_path: Path) -> None:
    table = tmp_path / "scores.csv"
    planted_long_table().to_csv(table, index=False)
    said = run_cli("import", "auto", table, "-w", tmp_path / "told")
    assert said.exit_code == 0 and said.stderr.startswith(f"note: {table}: ")
    quiet = run_cli("import", "auto", table, "-w", tmp_path / "quiet", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == "" and "imported:" in quiet.stdout
    assert run_cli("encode", "--encoder", "hashing-16", "-w", tmp_path / "quiet").exit_code == 0
    settings = [part for s in _SMALL_NETWORK for part in ("--set", s)]
    fitted = run_cli("fit", "-w", tmp_path / "quiet", "--max-steps", 5, "--anchors", 16,
                     "--min-evidence", 8, *settings, "-q")  # fmt: skip
    assert fitted.exit_code == 0 and "trained artifact" in fitted.stdout
    assert fitted.stderr == ""  # a pool this small has two notes without -q
    changed = planted_long_table()
    for flip in (0, 1):  # each import changes a score: the artifact is stale after it
        changed.loc[flip, "score"] = 1.0 - changed.loc[flip, "score"]
        changed.to_csv(table, index=False)
        args = ("import", "table", table, "-w", tmp_path / "quiet", "--replace")
        again = run_cli(*args, *(["-q"] if flip == 0 else []))
        assert again.exit_code == 0, again.stderr
        stale = "note: artifact(s) default were fitted on the data before this change"
        assert again.stderr == "" if flip == 0 else again.stderr.startswith(stale)


def test_llms_shows_the_catalog_prices(run_cli: Run, filled: Path, tmp_path: Path) -> None:
    catalog = tmp_path / "llms.csv"
    catalog.write_text(
        "llm_id,price_in_per_mtok,price_out_per_mtok,cost_per_query\n"
        "llm-0,2.5,10,\nllm-1,0.15,0.6,0.00012\n"
    )
    assert run_cli("import", "llms", catalog, "-w", filled).exit_code == 0
    rows = run_cli("llms", "-w", filled, "--json").json()
    assert isinstance(rows, list)
    by_id = {row["llm_id"]: row for row in rows}
    assert (by_id["llm-0"]["price_in_per_mtok"], by_id["llm-0"]["price_out_per_mtok"]) == (2.5, 10)
    assert by_id["llm-0"]["cost_per_query"] is None and by_id["llm-1"]["cost_per_query"] == 0.00012
    assert all(by_id["llm-5"][field] is None for field in
               ("price_in_per_mtok", "price_out_per_mtok", "cost_per_query"))  # fmt: skip
    shown = run_cli("llms", "-w", filled).stdout
    assert all(title in shown for title in ("USD/M in", "USD/M out", "USD/query"))
    line = next(line for line in shown.splitlines() if " llm-1 " in line)
    cells = [cell.strip() for cell in line.split("│")[1:-1]]
    assert cells[0] == "llm-1" and cells[-3:] == ["0.15", "0.6", "0.00012"]
    line = next(line for line in shown.splitlines() if " llm-0 " in line)
    assert [cell.strip() for cell in line.split("│")[1:-1]][-3:] == ["2.5", "10", "-"]
