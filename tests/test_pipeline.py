"""Workspace workflows and their CLI commands on a planted workspace (hashing text encoder)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.data.batch import ImportBatch
from locus.errors import LocusArtifactError, LocusInputError, LocusNotFoundError
from locus.locus import Locus
from locus.pipeline import (
    embed_workspace_llms,
    evaluate_workspace,
    fit_workspace,
    load_workspace_locus,
    workspace_table,
)
from locus.store import Store
from locus.text import HashingEncoder
from locus.text.cache import encode_missing
from tests.conftest import CliResult
from tests.nn.conftest import small_config
from tests.planted_workspace import ENCODER_DIM, build_planted_workspace, planted_rows

Run = Callable[..., CliResult]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A planted workspace trained without `law-3`, which is left to onboard."""
    path = build_planted_workspace(tmp_path_factory.mktemp("pipeline") / "ws")
    with Store.open(path) as store:
        fit_workspace(store, small_config(), exclude_llms=["law-3"])
    return path


def test_routing_beats_best_single_llm(trained: Path) -> None:
    with Store.open(trained) as store:
        result = evaluate_workspace(store)
    routing, baselines = result.routing, result.baselines
    assert result.llms == 11  # law-3 is not embedded yet
    assert routing.hit_at_1 > baselines.best_single_llm + 0.15
    # the known answer: every test query to an LLM of its task's group (which of the four
    # equal specialists answers moves hit@1 by sampling noise alone, +-0.05 on 47 queries)
    from locus.pipeline import workspace_table
    from locus.pipeline.workspace_router import WorkspaceRouter

    with Store.open(trained) as store:
        data = workspace_table(store)
        test = data.rows("test")
        router = WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM))
        chosen = [d.llm_id for d in router.router.route(data.vectors[test], top=1)]
    tasks = [data.table.tasks[i] for i in test]
    assert np.mean([llm.split("-")[0] == t for llm, t in zip(chosen, tasks, strict=True)]) >= 0.95
    assert routing.hit_at_1 <= routing.hit_at_3 <= routing.hit_at_5 <= baselines.oracle
    # Bayes-optimal AUROC on this planted pool (skill 0.9 vs 0.2, one task in three) is ~0.815
    assert result.correctness.auroc > 0.7
    assert set(result.per_task) == {"math", "law", "biology"}
    assert result.as_dict()["routing"]["hit@1"] == routing.hit_at_1


def test_onboarding_without_retraining(trained: Path) -> None:
    with Store.open(trained) as store:
        before_ids, before, _ = store.embeddings("default")
        [report] = embed_workspace_llms(store, ["law-3"])
        assert report.new and report.evidence > 100
        ids, after, _ = store.embeddings("default")
        assert ids == sorted([*before_ids, "law-3"])
        kept = [ids.index(llm) for llm in before_ids]
        np.testing.assert_array_equal(after[kept], before)  # nobody else moved
        model = load_workspace_locus(store)
        vector = after[ids.index("law-3")]
        distances = {llm: float(np.linalg.norm(after[i] - vector)) for i, llm in enumerate(ids)}
        del distances["law-3"]
        assert min(distances, key=distances.__getitem__).startswith("law-")
        assert "law-3" in model.llm_ids_
        # the same evidence gives the same vector
        [again] = embed_workspace_llms(store, ["law-3"])
        assert again.moved == pytest.approx(0.0, abs=1e-6)


def test_more_scores_refine_the_embedding(tmp_path: Path) -> None:
    rows = planted_rows()
    newcomer = rows[rows["llm_id"] == "math-0"].assign(llm_id="fresh")
    path = build_planted_workspace(tmp_path / "ws", rows)
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=100))
        first, extra = newcomer.iloc[::7].iloc[:40], newcomer.iloc[1::7].iloc[:10]
        store.write_batch(
            ImportBatch.from_long(first, source="planted", origin="a.csv"), kind="table"
        )
        [one] = embed_workspace_llms(store, ["fresh"], include_test=True)
        store.write_batch(
            ImportBatch.from_long(extra, source="planted", origin="b.csv"), kind="table"
        )
        [two] = embed_workspace_llms(store, ["fresh"], include_test=True)
    assert (one.evidence, two.evidence) == (40, 50)
    assert two.moved is not None and two.moved > 0


def test_bad_requests(trained: Path, tmp_path: Path) -> None:
    with Store.open(trained) as store:
        with pytest.raises(LocusNotFoundError, match="unknown LLM 'gpt-9'"):
            embed_workspace_llms(store, ["gpt-9"])
        with pytest.raises(LocusNotFoundError, match="run `locus fit` first"):
            load_workspace_locus(store, "other")
        with pytest.raises(LocusInputError, match="plain name"):
            load_workspace_locus(store, "../x")
    # an LLM whose only scores are on queries without text cannot be embedded
    no_text = pd.DataFrame({"llm_id": ["mute"], "query_id": ["x1"], "score": [1.0]})
    other = build_planted_workspace(tmp_path / "ws")
    with Store.open(other) as store:
        fit_workspace(store, small_config(max_steps=50))
        store.write_batch(
            ImportBatch.from_long(no_text, source="bare", origin="bare.csv"), kind="table"
        )
        with pytest.raises(LocusInputError, match="no usable scores"):
            embed_workspace_llms(store, ["mute"])
        # an artifact whose text encoder differs from the workspace's is refused
        encode_missing(store, HashingEncoder(ENCODER_DIM + 1))
        with pytest.raises(LocusArtifactError, match="re-run locus fit"):
            load_workspace_locus(store)


def test_cli_route_evaluate_embed(run_cli: Run, trained: Path) -> None:
    result = run_cli("route", "integral derivative matrix limit", "-w", trained, "--json")
    assert result.exit_code == 0, result.stderr
    payload = result.json()
    assert isinstance(payload, list) and payload[0]["llm_id"].startswith("math-")
    assert (
        len(payload[0]["ranked"]) == 3 and payload[0]["ranked"][0]["llm_id"] == payload[0]["llm_id"]
    )
    text = run_cli("route", "court jury appeal tort verdict", "-w", trained, "--top", "1")
    assert text.exit_code == 0 and "law-" in text.stdout
    empty = run_cli("route", "", "-w", trained)
    assert empty.exit_code == 2 and "empty" in empty.stderr
    evaluation = run_cli("evaluate", "-w", trained, "--json").json()
    assert isinstance(evaluation, dict) and evaluation["split"] == "test"
    table = run_cli("evaluate", "-w", trained)
    assert "best single LLM" in table.stdout and "per task" in table.stdout
    unknown = run_cli("embed", "nobody", "-w", trained)
    assert unknown.exit_code == 2 and unknown.stderr.count("\n") == 1


def test_cli_route_with_the_task_given(run_cli: Run, trained: Path) -> None:
    """`--task`: a text that gives its task away to no one (no word of any task's) goes to
    the specialists of the task named; an unknown task is a one-line error that names the
    fit's tasks; evaluate sets the router told each test query's task beside the per-task
    table, and the table reading the task from the text beside the router of texts."""
    text = "please answer this question for me"
    for task in ("math", "law"):
        told = run_cli("route", text, "-w", trained, "--task", task, "--json")
        assert told.exit_code == 0, told.stderr
        assert told.json()[0]["llm_id"].startswith(f"{task}-")  # type: ignore[index]
    typo = run_cli("route", text, "-w", trained, "--task", "lwa")
    assert typo.exit_code == 2 and "did you mean 'law'" in typo.stderr
    assert "biology, law, math" in typo.stderr and typo.stderr.count("\n") == 1
    evaluation = run_cli("evaluate", "-w", trained, "--json").json()
    assert isinstance(evaluation, dict)
    told_hit = evaluation["routing"]["task_given_hit@1"]
    from_text = evaluation["baselines"]["best_llm_per_task_from_text"]
    # the planted texts give their task away (each task its own words): told or not, the
    # router routes about the same (an LLM onboarded by another test may move a query or
    # two), and the table reads the same tasks from the text
    assert abs(told_hit - evaluation["routing"]["hit@1"]) <= 0.05
    assert from_text == pytest.approx(evaluation["baselines"]["best_llm_per_task"])
    assert 0.5 < evaluation["correctness"]["task_given_auroc"] <= 1
    table = run_cli("evaluate", "-w", trained)
    assert "each query's task given (--task)" in table.stdout
    assert "the task read from the text" in table.stdout


def test_cli_route_file(run_cli: Run, trained: Path, tmp_path: Path) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text("integral derivative\n\ncell enzyme protein\n")
    payload = run_cli("route", "--file", queries, "-w", trained, "--json").json()
    assert isinstance(payload, list) and len(payload) == 2
    assert payload[1]["llm_id"].startswith("biology-")
    neither = run_cli("route", "-w", trained)
    assert neither.exit_code == 2 and "neither" in neither.stderr


def test_artifact_loaded_inside_its_workspace_sees_the_current_pool(tmp_path: Path) -> None:
    path = build_planted_workspace(tmp_path / "ws")
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=50), exclude_llms=["law-3"])
        embed_workspace_llms(store, ["law-3"])  # onboarded after the fit
    folder = path / "artifacts" / "default"
    with Locus.load(folder) as inside:  # finds its workspace by itself
        assert "law-3" in inside.llm_ids_ and inside.pool_.bound
    alone = Locus.load(folder, workspace=None)  # the fit-time snapshot only
    assert "law-3" not in alone.llm_ids_ and not alone.pool_.bound
    # onboarding through the library lands in the workspace too
    with Store.open(path) as store:
        data = workspace_table(store, llm_ids=["law-2"])
        model = Locus.load(folder, workspace=store)
        column = data.table.scores[:, 0]
        rows = np.flatnonzero(~np.isnan(column))[:80]
        vector = model.add_llm("law-2-copy", data.vectors[rows], column[rows])
        ids, vectors, counts = store.embeddings("default")
    assert "law-2-copy" in ids and counts[ids.index("law-2-copy")] == 80
    np.testing.assert_array_equal(vectors[ids.index("law-2-copy")], vector)


def test_pool_of_an_interrupted_fit_is_not_trusted(tmp_path: Path) -> None:
    """A fit that saved its artifact but died before writing the pool leaves rows computed by
    the previous networks: the artifact's own embeddings are used and written back."""
    path = build_planted_workspace(tmp_path / "ws")
    folder = path / "artifacts" / "default"
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=50))
        snapshot = Locus.load(folder, workspace=None)
        ids, _, counts = store.embeddings("default")
        stale = np.full((len(ids), snapshot.encoder_.dim), 9.0, dtype=np.float32)
        store.replace_embeddings("default", ids, stale, counts)
        store.set_meta("pool_fit_id:default", "an-earlier-fit")
        model = Locus.load(folder, workspace=store)
        np.testing.assert_array_equal(model.llm_embeddings_, snapshot.llm_embeddings_)
        model.add_llm("extra", np.zeros((4, ENCODER_DIM), np.float32), np.ones(4, np.float32))
        ids_after, vectors_after, _ = store.embeddings("default")
        assert len(ids_after) == len(ids) + 1 and not (vectors_after == 9.0).any()
        assert store.get_meta("pool_fit_id:default") == snapshot.manifest.fit_id


def test_cli_embed_all(run_cli: Run, trained: Path) -> None:
    payload = run_cli("embed", "--all", "-w", trained, "--json").json()
    assert isinstance(payload, list) and len(payload) == 12
    assert {row["llm_id"] for row in payload} >= {"law-3", "math-0"}
    neither = run_cli("embed", "-w", trained)
    assert neither.exit_code == 2 and "neither" in neither.stderr
    after = run_cli("evaluate", "-w", trained, "--json").json()
    assert isinstance(after, dict) and after["llms"] == 12


def test_artifact_saved_into_a_workspace_by_hand_is_not_mixed_with_older_rows(
    tmp_path: Path,
) -> None:
    """A Locus fitted on arrays and saved over a workspace's artifact carries its own pool: the
    rows an earlier fit left in the workspace are not read as its embeddings."""
    path = build_planted_workspace(tmp_path / "ws")
    folder = path / "artifacts" / "default"
    with Store.open(path) as store:
        fit_workspace(store, small_config(max_steps=50))
        data = workspace_table(store)
    model = Locus(small_config(max_steps=60, seed=1))
    model.fit(data.table, data.vectors, data.rows("train"), data.rows("val"),
              text_encoder_name=data.encoder)  # fmt: skip
    model.save(folder)
    with Locus.load(folder) as loaded:
        np.testing.assert_array_equal(loaded.llm_embeddings_, model.llm_embeddings_)


def test_cli_fit_reports_calibration_and_guard(run_cli: Run, tmp_path: Path) -> None:
    path = build_planted_workspace(tmp_path / "ws")
    fitted = run_cli(
        "fit", "-w", path, "--max-steps", "60", "--eval-every", "20", "-A", "64",
        "--set", "ranking_weight=0.5", "--set", "predictor_hidden=48",
    )  # fmt: skip
    assert fitted.exit_code == 0, fitted.stderr
    saved = json.loads((path / "artifacts" / "default" / "config.json").read_text())
    assert saved["training"]["ranking_weight"] == 0.5 and saved["network"]["predictor_hidden"] == 48
    assert saved["training"]["max_steps"] == 60
    assert "calibration of P(correct) on " in fitted.stdout
    assert "routing guard: " in fitted.stdout and "stacked with a kNN router" in fitted.stdout
    evaluation = run_cli("evaluate", "-w", path, "--json").json()
    routing = evaluation["routing"]
    assert routing["guard"]["default"] and "unguarded_hit@1" in routing
    assert 0.0 <= routing["moved"] <= 1.0
    table = run_cli("evaluate", "-w", path)
    assert "LOCUS, guarded" in table.stdout and "unguarded (--no-guard)" in table.stdout
    free = run_cli("route", "court jury appeal tort verdict", "-w", path, "--no-guard", "--json")
    assert free.exit_code == 0 and free.json()[0]["held"] is False
    typo = run_cli("fit", "-w", path, "--set", "ranking_wieght=0.5")
    assert typo.exit_code == 2 and "ranking_wieght" in typo.stderr
    unread = run_cli("fit", "-w", path, "--set", "patience=soon")
    assert unread.exit_code == 2 and "patience='soon': expected int" in unread.stderr


def test_the_demo_reuses_only_a_current_artifact(tmp_path: Path) -> None:
    from locus.cli.demo import artifact_is_current

    path = build_planted_workspace(tmp_path / "ws")
    config_file = path / "artifacts" / "default" / "config.json"
    with Store.open(path) as store:
        assert not artifact_is_current(store)  # nothing trained yet
        fit_workspace(store, small_config(max_steps=40))
        assert artifact_is_current(store)
        saved = json.loads(config_file.read_text())
        older = {**saved, "format": "locus-artifact/2"}  # an earlier version's: refit once
        config_file.write_text(json.dumps(older))
        assert not artifact_is_current(store)
        config_file.write_text(json.dumps(saved))
        assert artifact_is_current(store)
        store.write_batch(
            ImportBatch.from_long(
                pd.DataFrame([{"llm_id": "new-llm", "query_id": "q-new", "score": 1.0,
                               "query_text": "a question no one asked"}]),
                source="more", origin="more.csv",
            ),
            kind="table",
        )  # fmt: skip
        assert not artifact_is_current(store)  # the data changed


def test_cli_route_quality_and_budget(run_cli: Run, trained: Path, tmp_path: Path) -> None:
    query = "integral derivative matrix limit"
    unpriced = run_cli("route", query, "-w", trained, "--quality", "0.9")
    assert unpriced.exit_code == 2 and "quality needs each LLM's cost" in unpriced.stderr
    for flag, value, message in [
        ("--quality", "1.5", "quality must lie in [0, 1]"),
        ("--quality", "-0.5", "quality must lie in [0, 1]"),
        ("--budget", "-1", "budget must be a number > 0"),
        ("--cost-weight", "-2", "cost_weight must be a finite number >= 0"),
    ]:
        bad = run_cli("route", query, "-w", trained, flag, value)
        assert bad.exit_code == 2 and message in bad.stderr and bad.stderr.count("\n") == 1
    rows = planted_rows()
    priced = build_planted_workspace(
        tmp_path / "priced",
        rows.assign(cost_usd=np.where(rows["llm_id"].str.startswith("math-"), 0.02, 0.001)),
    )
    with Store.open(priced) as store:
        fit_workspace(store, small_config(max_steps=30))
    strict = run_cli("route", query, "-w", priced, "--quality", "0.95", "--json").json()
    assert strict[0]["llm_id"].startswith("math-")
    assert strict[0]["cost_usd"] == pytest.approx(0.02) and 0 < strict[0]["p_correct"] <= 1
    cheap = run_cli("route", query, "-w", priced, "--budget", "0.001", "--json").json()
    assert not cheap[0]["llm_id"].startswith("math-")
    text = run_cli("route", query, "-w", priced, "--quality", "0.95")
    assert text.exit_code == 0 and "expected $0.020000" in text.stdout
    both = run_cli("route", query, "-w", priced, "--quality", "0.9", "--budget", "0.01")
    assert both.exit_code == 2 and "choose one decision rule" in both.stderr
    # the budget is a mean: a query routed above it is marked, and the lines say so
    queries = tmp_path / "queries.txt"
    queries.write_text("integral derivative matrix limit\ncourt tort jury\npolynomial roots\n")
    mean = run_cli("route", "-f", queries, "-w", priced, "--budget", "0.005", "--json").json()
    assert isinstance(mean, list)
    assert [r["above_budget"] for r in mean] == [r["cost_usd"] > 0.005 for r in mean]
    assert any(r["above_budget"] for r in mean) and not all(r["above_budget"] for r in mean)
    shown = run_cli("route", "-f", queries, "-w", priced, "--budget", "0.005")
    dear = sum(r["above_budget"] for r in mean)
    assert shown.stdout.count("above the budget") == dear
    assert f"{dear} of 3 routes expected to cost more than --budget 0.005" in shown.stdout


def test_evaluation_names_the_simple_baseline_that_wins() -> None:
    from locus.pipeline.evaluate import (
        Baselines,
        CorrectnessMetrics,
        Evaluation,
        RoutingMetrics,
        TaskEvaluation,
    )

    def evaluation(
        hit: float,
        given: float | None = None,
        from_text: float | None = None,
        table: float = 0.85,
        tasks: bool = True,
    ) -> Evaluation:
        return Evaluation(
            artifact="default", split="test", queries=200, llms=4,
            routing=RoutingMetrics(
                hit, hit, hit, hit, hit_at_1_se=0.03, task_given_hit_at_1=given
            ),
            correctness=CorrectnessMetrics(0.7, 0.7, 0.2, 0.02, 800),
            baselines=Baselines(0.60, "coder-llm", table, 1.0, 0.5, from_text),
            per_task={"maths": TaskEvaluation(200, hit, 0.6, 1.0)} if tasks else {},
        )  # fmt: skip

    name = "the best LLM per task (the task given)"
    assert evaluation(0.55).winning_baseline == (name, 0.85, 0.55)
    assert evaluation(0.55).as_dict()["winning_baseline"] == {
        "name": name, "hit@1": 0.85, "router_hit@1": 0.55,
    }  # fmt: skip
    # told each query's task, the router is set against the table that reads the task; the
    # table that reads it from the text, against the router of texts
    told = evaluation(0.70, given=0.86, from_text=0.72)
    assert told.winning_baseline == (
        "the best LLM per task (the task read from the text)",
        0.72,
        0.70,
    )
    assert evaluation(0.74, given=0.86, from_text=0.72).winning_baseline is None
    assert evaluation(0.86).winning_baseline is None
    assert evaluation(0.86).as_dict()["winning_baseline"] is None
    # the router's hit@1 is a float32 mean: the same 15 of 18 queries is no win
    assert evaluation(0.7, given=float(np.float32(15 / 18)), table=15 / 18).winning_baseline is None
    # without tasks, the per-task table is the best single LLM: not named as a table
    assert evaluation(0.55, tasks=False).winning_baseline == (
        "the best single LLM (coder-llm)", 0.60, 0.55,
    )  # fmt: skip


def test_evaluation_names_the_knn_vote_and_the_p_correct_floor_that_win() -> None:
    from locus.pipeline.evaluate import (
        Baselines,
        CorrectnessMetrics,
        Evaluation,
        Floor,
        RoutingMetrics,
    )

    def evaluation(knn_hit: float | None, floors: dict[str, Floor]) -> Evaluation:
        return Evaluation(
            artifact="default", split="test", queries=200, llms=4,
            routing=RoutingMetrics(0.70, 0.8, 0.9, 0.70, hit_at_1_se=0.03),
            correctness=CorrectnessMetrics(0.7, 0.7, 0.2, 0.02, 800, log_loss=0.66,
                                           floors=floors),
            baselines=Baselines(0.60, "coder-llm", 0.60, 1.0, 0.5, knn=knn_hit),
        )  # fmt: skip

    rate = Floor(brier=0.25, log_loss=0.69, gain=0.03, gain_se=0.01, router_log_loss=0.66)
    vote = Floor(brier=0.22, log_loss=0.64, gain=-0.02, gain_se=0.005, router_log_loss=0.66)
    knn_wins = evaluation(0.74, {"llm_rate": rate, "knn": vote})
    assert knn_wins.winning_baseline == ("the kNN vote (the router's own neighbours)", 0.74, 0.70)
    assert knn_wins.winning_floor == ("knn", vote)
    payload = knn_wins.as_dict()
    assert payload["winning_floor"]["name"] == "knn" and payload["winning_floor"]["gain"] == -0.02
    assert payload["correctness"]["floors"]["llm_rate"]["log_loss"] == 0.69
    assert payload["correctness"]["log_loss"] == 0.66
    assert evaluation(0.69, {"llm_rate": rate}).winning_baseline is None
    assert evaluation(None, {"llm_rate": rate}).winning_floor is None


def test_evaluate_sets_p_correct_beside_the_simple_predictors_on_the_same_cells(
    trained: Path, run_cli: Run
) -> None:
    from locus import metrics
    from locus.pipeline.workspace_router import WorkspaceRouter

    with Store.open(trained) as store:
        result = evaluate_workspace(store)
        data = workspace_table(store)
        # the LLMs evaluate reads: the pool's (law-3 too, once another test onboarded it)
        pooled = set(WorkspaceRouter(store, text_encoder=HashingEncoder(ENCODER_DIM)).llm_ids)
    correct = result.correctness
    assert set(correct.floors) == {"llm_rate", "task_rate", "knn"}
    # each LLM's training rate on the test cells, computed here by hand
    table = data.table.select_llms([llm for llm in data.table.llm_ids if llm in pooled])
    train, test = table.scores[data.rows("train")], table.scores[data.rows("test")]
    by_hand = np.tile(np.nanmean(train, axis=0), (len(test), 1))
    assert correct.floors["llm_rate"].log_loss == pytest.approx(metrics.log_loss(by_hand, test))
    # on a pool of planted task skills the router reads the cells far better than the rates
    rate = correct.floors["llm_rate"]
    assert correct.log_loss is not None and rate.gain > 2 * (rate.gain_se or 0) > 0
    assert rate.router_log_loss == pytest.approx(correct.log_loss)
    # the rate on the true task is set against the router told each query's task
    assert correct.floors["task_rate"].router_told
    assert result.baselines.knn is not None and result.baselines.knn > 0.5
    shown = run_cli("evaluate", "-w", trained)
    assert "P(correct) log-loss" in shown.stdout and "each LLM's rate" in shown.stdout
    assert "kNN vote (the router's own neighbours)" in shown.stdout


def test_log_loss_gain_and_its_standard_error_over_queries() -> None:
    from locus import metrics

    scores = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, np.nan]])
    sharp = np.array([[0.9, 0.1], [0.8, 0.7], [0.2, 0.5]])
    flat = np.full((3, 2), 0.5)
    gain, se = metrics.log_loss_gain(sharp, flat, scores)
    assert gain == pytest.approx(metrics.log_loss(flat, scores) - metrics.log_loss(sharp, scores))
    assert gain > 0 and se is not None and se > 0
    # the error is over the queries' summed cells, not over cells as if independent
    per_query = np.nansum(
        metrics.cell_log_loss(flat, scores) - metrics.cell_log_loss(sharp, scores), axis=1
    )
    assert se == pytest.approx(per_query.std(ddof=1) * np.sqrt(3) / 5)
    assert metrics.log_loss_gain(sharp[:1], flat[:1], scores[:1])[1] is None  # one query: none
    # a certainty proved wrong costs -log(1e-6), not infinity
    assert metrics.log_loss(np.array([[0.0]]), np.array([[1.0]])) == pytest.approx(
        13.8155, abs=1e-3
    )
