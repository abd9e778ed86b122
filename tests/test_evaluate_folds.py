"""`locus evaluate --folds`: every query routed once, by a router fitted without it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.pipeline import fit_workspace, workspace_table
from locus.pipeline.evaluate import Routed
from locus.pipeline.evaluate_folds import evaluate_folds
from locus.store import Store
from tests.conftest import CliResult
from tests.nn.conftest import small_config
from tests.planted_workspace import build_planted_workspace

Run = Callable[..., CliResult]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted workspace (12 LLMs, 480 queries of three tasks), fitted without `law-3`."""
    path = Path(build_planted_workspace(tmp_path_factory.mktemp("folds") / "ws"))
    with Store.open(path) as store:
        fit_workspace(store, small_config(), exclude_llms=["law-3"])
    return path


def _artifact_files(path: Path) -> dict[str, int]:
    return {
        str(f.relative_to(path)): f.stat().st_mtime_ns
        for f in (path / "artifacts").rglob("*")
        if f.is_file()
    }


def test_every_query_is_routed_once_by_a_router_fitted_without_it(
    run_cli: Run, fitted: Path
) -> None:
    before = _artifact_files(fitted)
    shown = run_cli("evaluate", "-w", fitted, "--folds", 3, "--json")
    assert shown.exit_code == 0, shown.stderr
    payload = shown.json()
    assert isinstance(payload, dict)
    with Store.open(fitted) as store:
        queries = len(workspace_table(store).table.text_hashes)
    assert (payload["folds"], payload["split"], payload["queries"]) == (3, "3-fold", queries)
    assert payload["llms"] == 12  # law-3, left out of the artifact, is fitted like any LLM
    assert sum(row["queries"] for row in payload["per_task"].values()) == queries
    routing, baselines = payload["routing"], payload["baselines"]
    # the planted answer: each task's specialists; on 480 queries, not on the split's 47
    assert routing["hit@1"] > baselines["best_single_llm"] + 0.3
    assert routing["gain_is_noise"] is False and routing["hit@1_se"] < 0.02
    assert routing["hit@1"] >= baselines["best_llm_per_task"] - 0.04
    assert _artifact_files(fitted) == before  # nothing saved, nothing rewritten


def test_the_folds_are_told_apart_from_a_split_and_bad_folds_are_refused(
    run_cli: Run, fitted: Path
) -> None:
    text = run_cli("evaluate", "-w", fitted, "--folds", 2, "--seed", 1)
    assert text.exit_code == 0, text.stderr
    assert "2-fold over the queries: 480 queries, each routed by a router fitted without it" in (
        text.stdout
    )
    assert "--folds 5` routes every query" not in text.stdout  # the hint is for a split
    split = run_cli("evaluate", "-w", fitted)
    assert "test split: 47 queries" in split.stdout
    assert "too few test queries to tell routers apart: `locus evaluate --folds 5`" in split.stdout
    for wrong, said in (
        (("--folds", 1), "--folds: expected 2 to 20, found 1"),
        (("--folds", 3, "--split", "val"), "--folds routes every query"),
    ):
        refused = run_cli("evaluate", "-w", fitted, *wrong)
        assert refused.exit_code == 2 and said in refused.stderr, refused.stderr
    with Store.open(fitted) as store, pytest.raises(LocusInputError, match="expected 2 to 20"):
        evaluate_folds(store, folds=21)


def test_folds_join_query_by_query() -> None:
    def part(rows: int, best: int, default: int) -> Routed:
        truth = np.tile([[1.0, 0.0]], (rows, 1))
        return Routed(
            truth=truth, proba=truth, order=np.zeros((rows, 2), int),
            unguarded=np.zeros(rows, int), best=np.full(rows, best), table=np.zeros(rows, int),
            tasks=["maths"] * rows, default=np.full(rows, default),
            given=np.zeros(rows, int), given_proba=truth,
        )  # fmt: skip

    joined = Routed.joined([part(3, 0, 0), part(2, 1, -1)])
    assert joined.truth.shape == (5, 2) and joined.tasks == ["maths"] * 5
    assert joined.best.tolist() == [0, 0, 0, 1, 1]
    assert joined.default.tolist() == [0, 0, 0, -1, -1]
    assert joined.given is not None and joined.given_proba is not None
    assert joined.from_text is None  # no part reads the task from the text
    without = Routed.joined([part(3, 0, 0), Routed(**{**part(2, 1, -1).__dict__, "given": None})])
    assert without.given is None and without.given_proba is None


def test_without_an_artifact_the_folds_fit_with_locus_fits_defaults(
    run_cli: Run, tmp_path: Path
) -> None:
    from tests.planted_workspace import planted_rows

    path = build_planted_workspace(tmp_path / "ws", planted_rows(queries_per_task=20))
    shown = run_cli("evaluate", "-w", path, "--folds", 2)
    assert shown.exit_code == 0, shown.stderr
    assert "2-fold over the queries: 60 queries" in shown.stdout
    assert "(locus fit's default settings: no artifact)" in shown.stdout
    assert not (Path(path) / "artifacts").exists() or not any((Path(path) / "artifacts").iterdir())
