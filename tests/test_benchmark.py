"""The benchmark suites on planted data: every method on the same evidence, the cache, the
outputs (JSON, PNG, table) and the CLI command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from locus.benchmark import Fold, anchors_table, fit_method, plot_anchors, run_anchors
from locus.benchmark.anchors import evidence_fold as _fold
from locus.cli import app
from locus.errors import LocusInputError
from locus.pipeline import WorkspaceTable, workspace_table
from locus.store import Store
from tests.nn.conftest import small_config
from tests.planted_workspace import build_planted_workspace

FAST_LOCUS = {
    k: v
    for k, v in small_config().to_dict().items()
    if k in ("network", "max_steps", "eval_every", "patience", "llms_per_step", "targets_per_llm")
}
METHODS = ["locus", "locus+knn", "knn", "cluster", "per-task", "best-single", "random"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_planted_workspace(tmp_path_factory.mktemp("bench") / "ws")


@pytest.fixture(scope="module")
def data(workspace: Path) -> WorkspaceTable:
    with Store.open(workspace) as store:
        return workspace_table(store)


def test_a_fold_keeps_only_the_evidence_cells_and_no_test_truth(data: WorkspaceTable) -> None:
    fold = _fold(data, 8, seed=0)
    observed = ~np.isnan(fold.table.scores)
    assert (observed[fold.train_rows].sum(axis=0) == 8).all()
    assert not observed[data.rows("test")].any()
    np.testing.assert_array_equal(
        observed[fold.val_rows], ~np.isnan(data.table.scores[fold.val_rows])
    )
    # the same seed draws the same evidence for every method; another seed other evidence
    again, other = _fold(data, 8, seed=0), _fold(data, 8, seed=1)
    assert fold.key("knn", {}) == again.key("knn", {}) != other.key("knn", {})
    assert observed[:, 0].tolist() != (~np.isnan(other.table.scores[:, 0])).tolist()
    # shared: every LLM on the same 8 queries; per-llm: each its own 8
    train_cells = observed[fold.train_rows]
    assert (train_cells == train_cells[:, :1]).all()
    own = ~np.isnan(_fold(data, 8, seed=0, draw="per-llm").table.scores[fold.train_rows])
    assert (own.sum(axis=0) == 8).all() and not (own == own[:, :1]).all()
    with pytest.raises(LocusInputError, match="unknown draw"):
        run_anchors(data, methods=["knn"], draw="some")


@pytest.mark.slow  # 25-65 s: `make slow` runs it
def test_anchors_suite_ranks_methods_as_planted(data: WorkspaceTable, tmp_path: Path) -> None:
    result = run_anchors(
        data,
        seeds=[0, 1],
        evidence=[16, "all"],
        methods=METHODS,
        cache_dir=tmp_path / "cache",
        locus_settings=FAST_LOCUS,
    )
    summary = result["summary"]
    assert result["evidence"] == ["16", "all"] and len(result["per_seed"]["knn"]["16"]) == 2
    for size in ("16", "all"):
        # specialists per task: the query-aware routers beat the best single LLM by far
        for method in ("knn", "cluster", "per-task", "locus", "locus+knn"):
            assert (
                summary[method][size]["hit@1"]["mean"]
                > summary["best-single"][size]["hit@1"]["mean"] + 0.2
            ), (method, size)
        assert summary["best-single"][size]["headroom"]["mean"] == pytest.approx(0.0)
        assert summary["random"][size]["hit@1"]["mean"] < summary["knn"][size]["hit@1"]["mean"]
    assert 0.5 < summary["knn"]["all"]["headroom"]["mean"] <= 1.0
    # every planted LLM is right as often overall: its mean says little about a cell
    assert (
        summary["best-single"]["16"]["auroc"]["mean"] < 0.6 < summary["knn"]["16"]["auroc"]["mean"]
    )
    assert result["oracle"] > summary["knn"]["all"]["hit@1"]["mean"]
    # a second run reads every fit from the cache and gives the same figures
    again = run_anchors(
        data, seeds=[0, 1], evidence=[16, "all"], methods=METHODS,
        cache_dir=tmp_path / "cache", locus_settings=FAST_LOCUS,
    )  # fmt: skip
    assert all(
        run["cached"] for m in METHODS for s in ("16", "all") for run in again["per_seed"][m][s]
    )
    for method in METHODS:
        assert again["summary"][method]["16"]["hit@1"] == summary[method]["16"]["hit@1"]
    table = anchors_table(result)
    assert table.splitlines()[0] == "| method | 16 | all |" and "**locus**" in table
    png = plot_anchors(result, tmp_path / "anchors.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # 25-65 s: `make slow` runs it
def test_parallel_fits_give_the_same_figures(data: WorkspaceTable, tmp_path: Path) -> None:
    def run(workers: int, cache: Path) -> dict:
        return run_anchors(
            data, seeds=[0], evidence=[16], methods=["locus", "cluster", "best-single"],
            cache_dir=cache, locus_settings=FAST_LOCUS, workers=workers,
        )  # fmt: skip

    serial, parallel = run(1, tmp_path / "serial"), run(2, tmp_path / "parallel")
    for method in ("locus", "cluster", "best-single"):
        one, two = serial["per_seed"][method]["16"][0], parallel["per_seed"][method]["16"][0]
        for metric in ("hit@1", "auroc", "log_loss"):
            assert two[metric] == pytest.approx(one[metric], abs=1e-6), (method, metric)
        assert not two["cached"]
    # the workers wrote the fits where the serial path reads them: a re-run fits nothing
    again = run(2, tmp_path / "parallel")
    assert all(again["per_seed"][m]["16"][0]["cached"] for m in ("locus", "cluster"))


def test_a_damaged_cache_entry_is_refitted(data: WorkspaceTable, tmp_path: Path) -> None:
    fold = _fold(data, 16, seed=0)
    router, cached = fit_method("knn", fold, cache_dir=tmp_path)
    assert not cached
    entry = tmp_path / "knn" / fold.key("knn", {})
    (entry / "router.json").write_text("{not json")
    again, cached = fit_method("knn", fold, cache_dir=tmp_path)
    assert not cached and again.llm_ids == router.llm_ids
    assert fit_method("knn", fold, cache_dir=tmp_path)[1]


def test_a_fit_cached_by_other_code_is_refitted(
    data: WorkspaceTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from locus.benchmark import methods

    fold = _fold(data, 16, seed=0)
    assert not fit_method("knn", fold, cache_dir=tmp_path)[1]
    assert fit_method("knn", fold, cache_dir=tmp_path)[1]  # the same code reads it back
    key = fold.key("knn", {})
    monkeypatch.setattr(methods, "code_digest", lambda: "another version")
    assert fold.key("knn", {}) != key
    assert not fit_method("knn", fold, cache_dir=tmp_path)[1]
    monkeypatch.undo()
    assert fold.key("knn", {}) == key  # the code back: its fit is read back again
    assert fit_method("knn", fold, cache_dir=tmp_path)[1]


def test_bad_requests_are_clear_errors(data: WorkspaceTable) -> None:
    with pytest.raises(LocusInputError, match="unknown method 'svm'"):
        run_anchors(data, methods=["svm"])
    with pytest.raises(LocusInputError, match="'many'"):
        run_anchors(data, evidence=["many"], methods=["knn"])
    with pytest.raises(LocusInputError, match="at least 1"):
        run_anchors(data, evidence=[0], methods=["knn"])
    assert isinstance(_fold(data, "all", 0), Fold)


def test_cli_benchmark_writes_json_and_png(workspace: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["benchmark", "anchors", "-w", str(workspace), "--seed", "0", "--evidence", "32",
            "--method", "knn", "--method", "best-single", "--pool", "planted",
            "--out", str(tmp_path)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "| knn |" in result.output
    written = json.loads((tmp_path / "anchors-planted.json").read_text())
    assert written["pool"] == "planted" and written["methods"] == ["knn", "best-single"]
    assert (tmp_path / "anchors-planted.png").exists()
    bad = runner.invoke(app, ["benchmark", "speed", "-w", str(workspace)])
    assert bad.exit_code != 0 and "unknown suite 'speed'" in str(bad.exception)
    # the planted pool has no costs: the cost suite says what it needs
    no_costs = runner.invoke(app, ["benchmark", "cost", "-w", str(workspace), "--seed", "0"])
    assert no_costs.exit_code != 0 and "needs per-query costs" in str(no_costs.exception)


def test_a_subsample_keeps_each_split_in_proportion(data: WorkspaceTable) -> None:
    n = len(data.splits) // 3
    small = data.subsample(n, seed=0)
    assert len(small.splits) == n == small.table.n_queries == len(small.vectors)
    for split in ("train", "val", "test"):
        share = len(data.rows(split)) / len(data.splits)
        assert abs(len(small.rows(split)) - share * n) <= 1, split
    # rows stay aligned: each kept query keeps its own vector, scores and split
    index = {h: i for i, h in enumerate(data.table.text_hashes)}
    rows = [index[h] for h in small.table.text_hashes]
    np.testing.assert_array_equal(small.vectors, data.vectors[rows])
    np.testing.assert_array_equal(small.table.scores, data.table.scores[rows])
    assert small.splits.tolist() == data.splits[rows].tolist()
    # the seed picks the queries
    assert small.table.text_hashes == data.subsample(n, seed=0).table.text_hashes
    assert small.table.text_hashes != data.subsample(n, seed=1).table.text_hashes
    for bad in (5, len(data.splits) + 1):
        with pytest.raises(LocusInputError, match="a subsample of"):
            data.subsample(bad, seed=0)


def test_cli_runs_each_seed_on_its_own_subsample(workspace: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["benchmark", "anchors", "-w", str(workspace), "--seed", "0", "--seed", "1",
            "--evidence", "8", "--method", "knn", "--method", "best-single", "--queries", "90",
            "--pool", "planted", "--out", str(tmp_path), "--json", "-q"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "anchors-planted-90q.json").read_text())
    assert written["subsample"] == 90 and sum(written["queries"].values()) == 90
    oracles = [run["oracle"] for run in written["per_seed"]["knn"]["8"]]
    assert len(oracles) == 2 and written["oracle"] == pytest.approx(np.mean(oracles))
    too_many = runner.invoke(app, [*args[:-4], "--queries", "100000"])
    assert too_many.exit_code != 0 and "a subsample of 100,000" in str(too_many.exception)


def test_efficiency_interpolates_the_evidence_to_match_locus() -> None:
    from locus.benchmark import efficiency_from_anchors, efficiency_table

    def summary(values: dict[str, float]) -> dict[str, dict[str, dict[str, float]]]:
        return {s: {"hit@1": {"mean": v}, "auroc": {"mean": v}} for s, v in values.items()}

    result = {
        "evidence": ["64", "128", "256", "512", "all"],
        "methods": ["locus", "knn", "mf"],
        "seeds": [0],
        "summary": {
            "locus": summary({"64": 0.60, "128": 0.70, "256": 0.72, "512": 0.73, "all": 0.74}),
            "knn": summary({"64": 0.50, "128": 0.60, "256": 0.70, "512": 0.74, "all": 0.75}),
            "mf": summary({"64": 0.40, "128": 0.50, "256": 0.55, "512": 0.60, "all": 0.9}),
        },
    }
    efficiency = efficiency_from_anchors(result)
    rows = {(r["method"], r["metric"], r["locus_evidence"]): r for r in efficiency["rows"]}
    knn = rows[("knn", "hit@1", 128)]
    assert knn["evidence_needed"] == pytest.approx(256.0) and knn["ratio"] == pytest.approx(2.0)
    # 0.72 lies halfway from 0.70 (256) to 0.74 (512) in log2: 2^8.5
    assert rows[("knn", "hit@1", 256)]["evidence_needed"] == pytest.approx(2**8.5)
    # "all" is not on the sweep's axis: MF never reaches LOCUS on it
    assert not rows[("mf", "hit@1", 128)]["reached"] and rows[("mf", "hit@1", 128)]["ratio"] is None
    table = efficiency_table(efficiency)
    assert "256 (2.0x)" in table and "> 512 (not reached)" in table
    with pytest.raises(LocusInputError, match="no evidence size 1024"):
        efficiency_from_anchors(result, at=(1024,))


def test_family_names_group_fine_tunes_and_siblings() -> None:
    from locus.benchmark.onboarding import family_of

    assert family_of("meta-llama/Meta-Llama-3.1-70B-Instruct") == "llama"
    assert family_of("cognitivecomputations/dolphin-2.9-llama3-8b") == "llama"
    assert family_of("Qwen2-72B-Instruct") == family_of("Qwen/Qwen1.5-7B") == "qwen"
    assert family_of("Mixtral-8x7B-Instruct-v0.1") == "mixtral" != family_of("Mistral-7B")
    assert family_of("o1-mini") == "o1" and family_of("math-3") == "math"


def test_onboarding_suite_on_planted_families(data: WorkspaceTable, tmp_path: Path) -> None:
    from locus.benchmark.onboarding import run_onboarding
    from locus.benchmark.report import onboarding_table

    methods = ["locus", "knn", "mf", "best-single"]
    # families across the skill groups ("math-1", "law-1", "biology-1" are siblings), so a
    # held-out family leaves LLMs of every skill to train on
    families = {llm: f"family-{llm.split('-')[1]}" for llm in data.table.llm_ids}
    result = run_onboarding(
        data, seeds=[0], ks=[8, 64], methods=methods, cache_dir=tmp_path,
        locus_settings=FAST_LOCUS, families=families,
    )  # fmt: skip
    held = result["held_out"]["0"]
    # whole families are held out, nothing else: 12 LLMs x 0.2 -> one family of three
    assert len({families[name] for name in held}) == 1 and len(held) == 3
    summary = result["summary"]
    for method in ("locus", "knn", "mf"):
        # the held-out specialists are recognised from 64 scores: their cells are predictable
        assert summary[method]["64"]["held_out_auroc"]["mean"] > 0.75, method
    # one mean per LLM says nothing about which cells it gets right
    assert summary["best-single"]["64"]["held_out_auroc"]["mean"] < 0.65
    # routing over the whole pool uses the onboarded specialists
    assert (
        summary["knn"]["all"]["hit@1"]["mean"]
        > summary["best-single"]["all"]["hit@1"]["mean"] + 0.2
    )
    assert "| **locus** |" in onboarding_table(result)
    from locus.benchmark.report import plot_onboarding

    assert plot_onboarding(result, tmp_path / "onboarding.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(LocusInputError, match="cannot onboard"):
        run_onboarding(data, methods=["per-task"])


def test_hull_keeps_only_points_no_cheaper_point_beats() -> None:
    from locus.routing.frontier import hull, hull_accuracy_at

    points = np.array([[1.0, 0.5], [2.0, 0.55], [3.0, 0.8], [4.0, 0.7], [5.0, 0.9], [0.5, 0.2]])
    curve = hull(points)
    # (2, 0.55) lies under the chord from (1, 0.5) to (3, 0.8); (4, 0.7) is beaten by (3, 0.8)
    np.testing.assert_array_equal(curve, [[0.5, 0.2], [1.0, 0.5], [3.0, 0.8], [5.0, 0.9]])
    assert hull_accuracy_at(curve, 2.0) == pytest.approx(0.65)
    assert hull_accuracy_at(curve, 9.0) == pytest.approx(0.9) and np.isnan(
        hull_accuracy_at(curve, 0.1)
    )


def test_frontier_metrics_on_a_known_frontier() -> None:
    from locus.routing.frontier import frontier_metrics

    curve = np.array([[1.0, 0.5], [3.0, 0.9]])
    figures = frontier_metrics(curve, strong=(4.0, 0.9), weak=(1.0, 0.5), high=4.0)
    assert figures["cost_share_at_100"] == pytest.approx(3 / 4)
    # 95% of 0.9 = 0.855 is reached at 1 + (0.855 - 0.5) / 0.4 x 2 = 2.775
    assert figures["cost_share_at_95"] == pytest.approx(2.775 / 4)
    assert figures["aiq"] == pytest.approx((2 * 0.7 + 1 * 0.9) / 3, abs=1e-3)
    # the gap recovered rises 0 -> 1 over [1, 3] and stays 1 over [3, 4]
    assert figures["apgr"] == pytest.approx((2 * 0.5 + 1.0) / 3, abs=1e-3)
    assert figures["cpt50"] == pytest.approx(2.0 / 4) and figures["cpt80"] == pytest.approx(2.6 / 4)
    assert figures["accuracy_at_cheapest_cost"] == pytest.approx(0.5)
    never = frontier_metrics(curve, strong=(4.0, 0.95), weak=(1.0, 0.5), high=4.0)
    assert np.isnan(never["cost_share_at_100"]) and never["max_accuracy"] == pytest.approx(0.9)


def test_cost_suite_on_a_planted_pool_with_prices(tmp_path: Path) -> None:
    from locus.benchmark.cost import run_cost
    from locus.benchmark.report import cost_table, plot_cost
    from tests.planted_workspace import planted_rows

    rows = planted_rows()
    # math specialists are the dearest, biology ones the cheapest
    price = {"math": 1e-2, "law": 1e-3, "biology": 1e-4}
    rows["cost_usd"] = [price[llm.split("-")[0]] for llm in rows["llm_id"]]
    path = build_planted_workspace(tmp_path / "ws", rows)
    with Store.open(path) as store:
        data = workspace_table(store)
    result = run_cost(
        data, seeds=[0], folds=3, methods=["knn", "best-single"], cache_dir=tmp_path / "c"
    )
    knn, single = result["summary"]["knn"], result["summary"]["best-single"]
    # k-fold: every query is a test query once, so the singles are read on all of them
    assert result["queries"]["scored_and_priced_by_every_llm"] == data.table.n_queries
    every_math = [v for llm, v in result["single_llms"].items() if llm.startswith("math-")]
    assert all(v["cost"] == pytest.approx(1e-2) for v in every_math)
    assert result["cost_model_relative_error"]["mean"] < 1e-6  # prices are per LLM here
    # knowing who is right where, kNN is more accurate than any single LLM at every price
    assert knn["aiq"]["mean"] > single["aiq"]["mean"] + 0.1
    assert knn["aiq"]["mean"] > result["static_mix"]["aiq"]
    assert knn["max_accuracy"]["mean"] > result["best_single"]["accuracy"] + 0.2
    # ... and matches the best single LLM for less than it costs
    assert knn["cost_share_at_100"]["mean"] < 1.0 and knn["apgr"]["mean"] > 0.9
    assert single["max_accuracy"]["mean"] <= result["best_single"]["accuracy"] + 1e-9
    points = np.array(result["per_seed"]["knn"][0]["points"]["cost-weight"])
    quality = np.array(result["per_seed"]["knn"][0]["points"]["quality"])
    # the frontier's best point is the best of both sweeps
    best = max(points[:, 1].max(), quality[:, 1].max())
    assert best == pytest.approx(knn["max_accuracy"]["mean"])
    assert points[-1, 0] == pytest.approx(1e-4)  # the largest weight: only the cheapest LLMs
    assert quality[-1, 0] == pytest.approx(1e-4)  # any success will do: the cheapest
    # a budget tuned on each fold's validation queries holds on its test queries
    for share in ("0.1", "0.25", "0.6"):
        check = result["per_seed"]["knn"][0]["budgets"][share]
        assert check["spent_over_budget"] <= 1.15, (share, check)
    assert result["skipped"] == []  # every budget could be tuned for
    assert "| **knn** |" in cost_table(result)  # the first method is the default, in bold
    assert 0.5 < knn["auroc"]["mean"] <= 1 and knn["log_loss"]["mean"] > 0
    small = run_cost(data, seeds=[0, 1], folds=3, methods=["knn"], queries=300)
    assert small["subsample"] == 300 and small["queries"]["scored_and_priced_by_every_llm"] == 300
    assert plot_cost(result, tmp_path / "cost.png").read_bytes()[:4] == b"\x89PNG"


def test_cost_suite_skips_budgets_below_the_cheapest_routing_and_writes_the_rest(
    tmp_path: Path,
) -> None:
    from tests.planted_workspace import planted_rows

    rows = planted_rows(llms_per_group=2, queries_per_task=60)
    # math-0 is right nearly everywhere and the cheapest: every budget share of its cost is
    # below what the cheapest routing costs
    star = rows["llm_id"] == "math-0"
    rng = np.random.default_rng(3)
    rows.loc[star, "score"] = (rng.random(int(star.sum())) < 0.95).astype(float)
    price = {"math": 1e-3, "law": 1e-3, "biology": 1e-2}
    rows["cost_usd"] = [
        1e-4 if llm == "math-0" else price[llm.split("-")[0]] for llm in rows["llm_id"]
    ]
    path = build_planted_workspace(tmp_path / "ws", rows)
    args = ["benchmark", "cost", "-w", str(path), "--seed", "0", "--folds", "3",
            "--method", "knn", "--method", "best-single", "--pool", "cheap-star",
            "--out", str(tmp_path / "out")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "out" / "cost-cheap-star.json").read_text())
    assert written["best_single"]["llm_id"] == written["cheapest_single"]["llm_id"] == "math-0"
    assert [(e["seed"], e["budget_share"], e["methods"]) for e in written["skipped"]] == [
        (0, 0.1, ["knn", "best-single"]),
        (0, 0.25, ["knn", "best-single"]),
        (0, 0.6, ["knn", "best-single"]),
    ]
    first = written["skipped"][0]
    assert first["budget_usd"] == pytest.approx(1e-5)
    assert first["reason"].startswith(
        "a budget of 1e-05 USD per query is below the cheapest routing's 0.0001"
    )
    # the figures that could be computed are there
    knn = written["summary"]["knn"]
    assert 0.5 < knn["aiq"]["mean"] <= 1 and np.isnan(knn["budget_0.25_accuracy"]["mean"])
    assert written["per_seed"]["knn"][0]["budgets"] == {}
    said = " ".join(result.output.split())
    assert "skipped (below the cheapest routing)" in said
    assert (
        "skipped: the budget of 10% of the strong LLM's cost (1e-05 USD per query), seed 0, "
        "every method: a budget of 1e-05 USD per query is below the cheapest routing's 0.0001"
    ) in said
    assert (tmp_path / "out" / "cost-cheap-star.png").exists()


def test_held_out_families_stay_near_the_share_asked_for() -> None:
    from locus.benchmark.onboarding import _held_out

    llms = [f"big-{i}" for i in range(9)] + [f"f{j}-{i}" for j in range(10) for i in range(2)]
    families = {llm: llm.split("-")[0] for llm in llms}
    for seed in range(20):
        held = _held_out(llms, families, 0.2, seed)
        assert 6 <= len(held) <= 9  # 29 x 0.2 -> 6; never the 9-LLM family on top of others
        assert {families[h] for h in held} == {h.split("-")[0] for h in held}
        whole = {f for f in {families[h] for h in held}}
        assert all(
            sum(families[x] == f for x in held) == sum(families[x] == f for x in llms)
            for f in whole
        )


@pytest.mark.slow  # 25-65 s: `make slow` runs it
def test_newcomers_suite_onboards_each_left_out_llm_as_locus_onboard_does(
    data: WorkspaceTable, tmp_path: Path
) -> None:
    from locus.benchmark.newcomers import choose_newcomers, run_newcomers
    from locus.benchmark.report import newcomers_table

    means = np.nanmean(data.table.scores[data.rows("train")], axis=0)
    best, worst = (data.table.llm_ids[int(i)] for i in (np.argmax(means), np.argmin(means)))
    assert choose_newcomers(data, ["best", "worst"], random=0) == [best, worst]
    drawn = choose_newcomers(data, ["law-1"], random=3, seed=0)
    assert drawn[0] == "law-1" and len(set(drawn)) == 4
    assert drawn == choose_newcomers(data, ["law-1"], random=3, seed=0)  # seeded
    with pytest.raises(LocusInputError, match="unknown LLM 'nobody'"):
        choose_newcomers(data, ["nobody"])
    result = run_newcomers(
        data, newcomers=["best", "worst"], random=0, ks=[16, 64], seeds=[0, 1],
        baselines=["mf", "knn"], cache_dir=tmp_path, locus_settings=FAST_LOCUS,
    )  # fmt: skip
    assert result["newcomers"] == [best, worst] and len(result["runs"]) == 2 * 2 * 2
    for run in result["runs"]:
        # the router without the newcomer is the same for every k and seed; the newcomer alone
        # is its measured accuracy on its test queries
        assert run["alone"] == pytest.approx(run["measured_accuracy"])
        assert 0 <= run["share"] <= 1 and set(run["baselines"]) == {"mf", "knn"}
    summary = result["summary"]
    # a planted specialist is recognised from 64 of its scores: its cells are predictable,
    # its accuracy read within a few points
    assert summary["mean"]["64"]["locus"]["auroc"]["mean"] > 0.7
    assert summary["mean"]["64"]["locus"]["accuracy_error"]["mean"] < 0.12
    # every specialist has siblings in the pool: adding one costs the pool nothing to speak
    # of (the planted queries' vectors tie, and ties among neighbours break by row order)
    for who in (best, worst):
        assert summary[who]["64"]["gain"]["mean"] > -0.03, who
        # the same LLM trained in the pool: one router for every k and seed, what onboarding
        # is measured against; with all its scores its P(correct) ranks its queries at least
        # as well as from 16 of them
        trained = [r["in_pool"] for r in result["runs"] if r["newcomer"] == who]
        assert all(t == trained[0] for t in trained), who
        assert summary[who]["16"]["in_pool"]["auroc"]["mean"] >= (
            summary[who]["16"]["locus"]["auroc"]["mean"] - 0.02
        ), who
    table = newcomers_table(result)
    assert f"| {worst} | 64 |" in table and "| **mean** | 16 |" in table
    in_pool = summary["mean"]["16"]["in_pool"]
    assert f"| {in_pool['hit@1']['mean']:.4f}, {in_pool['auroc']['mean']:.3f} |" in table
    from locus.benchmark.report import plot_newcomers

    assert plot_newcomers(result, tmp_path / "newcomers.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(LocusInputError, match="cannot onboard here"):
        run_newcomers(data, baselines=["per-task"])


def test_cli_newcomers_suite(workspace: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["benchmark", "newcomers", "-w", str(workspace), "--newcomer", "worst", "--random",
            "0", "--k", "32", "--seed", "0", "--method", "knn", "--set", "max_steps=60",
            "--set", "eval_every=20", "--pool", "planted", "--out", str(tmp_path)]  # fmt: skip
    result = runner.invoke(app, [*args, "--json", "-q"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "newcomers-planted.json").read_text())
    assert written["baselines"] == ["knn"] and len(written["newcomers"]) == 1
    assert (tmp_path / "newcomers-planted.png").read_bytes()[:4] == b"\x89PNG"
    assert written["runs"][0]["k"] == 32 and json.loads(result.output)["runs"] == written["runs"]
    shown = runner.invoke(app, args)  # the fits come from the cache now
    assert shown.exit_code == 0 and f"| {written['newcomers'][0]} | 32 |" in shown.output
    typo = runner.invoke(app, [*args[:5], "nobody", *args[6:]])
    assert typo.exit_code != 0 and "unknown LLM 'nobody'" in str(typo.exception)
    two = runner.invoke(app, [*args, "--strategy", "random", "--strategy", "balanced"])
    assert two.exit_code != 0 and "one --strategy at a time" in str(two.exception)
    unread = runner.invoke(app, [*args, "--set", "max_stepz=60"])
    assert unread.exit_code != 0 and "setting 'max_stepz=60'" in str(unread.exception)
