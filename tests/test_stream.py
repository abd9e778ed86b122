"""The stream suite: a production replay of the fitted router's test queries, one outcome seen
per query, locus against mabwiser's bandits; and what it leans on: exploration's logging
probabilities, and a guard that stands down when its default's endpoint changed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from locus.benchmark.stream import (
    POLICIES,
    SCENARIOS,
    _effective_truth,
    load_stream,
    run_stream,
)
from locus.errors import LocusInputError
from locus.routing.explore import Exploration
from locus.store import Store
from tests.conftest import CliResult
from tests.planted_workspace import trained_planted_workspace

Run = Callable[..., CliResult]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(trained_planted_workspace(tmp_path_factory.mktemp("stream") / "ws"))


@pytest.fixture(scope="module")
def result(trained: Path) -> dict[str, Any]:
    with Store.open(trained, create=False) as store:
        return run_stream(load_stream(store), seeds=[0], swap_at=20)


def test_every_policy_replays_the_stream_and_its_figures_add_up(
    trained: Path, result: dict[str, Any]
) -> None:
    from locus.pipeline.data import workspace_table
    from locus.pipeline.workspace_router import WorkspaceRouter

    n = result["requests"]
    assert set(result["summary"]) == {f"{s} / {p}" for s in SCENARIOS for p in POLICIES}
    for policy in POLICIES:
        [found] = result["per_seed"]["no change"][policy]
        # regret against the oracle: the oracle's hits less the policy's, over the stream
        assert found["regret"] == pytest.approx(n * result["oracle"] - n * found["hit@1"])
        assert found["regret_curve"][-1] == [n, pytest.approx(found["regret"])]
        assert sum(found["shares"].values()) == pytest.approx(1.0)
    # the static router's replay is the fitted router's own routing of the test queries
    with Store.open(trained, create=False) as store:
        router = WorkspaceRouter(store, outcomes=False)
        data = workspace_table(store, split_seed=router.manifest.split_seed)
        test = data.rows("test")
        decisions = router.router.route(data.vectors[test])
        columns = [data.table.llm_index(d.llm_id) for d in decisions]
        direct = float(np.mean(data.table.scores[test, columns]))
    [static] = result["per_seed"]["no change"]["locus-static"]
    assert static["hit@1"] == pytest.approx(direct)


def test_the_replay_is_reproducible_by_its_seed(trained: Path, result: dict[str, Any]) -> None:
    with Store.open(trained, create=False) as store:
        again = run_stream(load_stream(store), seeds=[0], swap_at=20, scenarios=["no change"])
    for policy in POLICIES:
        first = result["per_seed"]["no change"][policy][0]
        second = again["per_seed"]["no change"][policy][0]
        assert first["hit@1"] == second["hit@1"] and first["shares"] == second["shares"]


def test_offpolicy_estimates_are_set_beside_their_truth(result: dict[str, Any]) -> None:
    [entry] = result["offpolicy"]
    [static] = result["per_seed"]["no change"]["locus-static"]
    assert entry["locus-static"]["truth"] == pytest.approx(static["hit@1"])
    for target in ("locus-static", "best single LLM"):
        found = entry[target]
        for method in ("ips", "dr"):
            low, high = found[method]["interval"]
            assert low <= found[method]["value"] <= high
            assert found[method]["covers"] == (low <= found["truth"] <= high)


def test_the_swap_answers_as_the_weaker_llm_from_its_request_on() -> None:
    truth = np.array([[1.0, 0.0, 1.0], [1.0, np.nan, 0.0], [1.0, 0.0, np.nan], [np.nan, 1, 1]])
    swapped = _effective_truth(truth, (0, 1), swap_at=1)
    assert swapped[0].tolist() == [1.0, 0.0, 1.0]  # before the swap: itself
    # after it: the other's score, wrong where the other was not scored, NaN where it was not
    assert swapped[1:, 0].tolist()[:2] == [0.0, 0.0] and np.isnan(swapped[3, 0])
    assert np.array_equal(swapped[:, 1:], truth[:, 1:], equal_nan=True)


def test_a_slow_drift_answers_as_the_weaker_llm_more_and_more_often() -> None:
    n = 4000
    truth = np.column_stack([np.ones(n), np.zeros(n)])
    drifted = _effective_truth(truth, (0, 1), swap_at=2000, drift=True, seed=3)
    assert (drifted[:2000, 0] == 1).all()  # before it: itself
    early, late = drifted[2000:2500, 0].mean(), drifted[3500:, 0].mean()
    assert 0.8 < early < 0.95 and late < 0.2  # answered as the other ever more often
    again = _effective_truth(truth, (0, 1), swap_at=2000, drift=True, seed=3)
    assert np.array_equal(drifted, again)


def test_bad_settings_are_refused(trained: Path) -> None:
    with Store.open(trained, create=False) as store:
        stream = load_stream(store)
    with pytest.raises(LocusInputError, match="unknown 'ucb'"):
        run_stream(stream, policies=["ucb"])
    with pytest.raises(LocusInputError, match="--swap-at 900 leaves too little stream"):
        run_stream(stream, swap_at=900)


def test_exploration_propensities_are_the_frequencies_of_its_choices() -> None:
    """The logging probabilities off-policy estimates divide by: each column's share of many
    `choose` calls on the same query, within Monte Carlo noise; 1 - share at least on the first
    choice, 0 for a candidate surely worse."""
    p = np.array([[0.70, 0.66, 0.62, 0.20]])
    sd = np.array([[0.05, 0.08, 0.10, 0.01]])
    exploration = Exploration(share=0.3)
    found = exploration.propensities(p, sd)[0]
    rng = np.random.default_rng(1)
    picks = [int(exploration.choose(p, sd, rng)[0]) for _ in range(6000)]
    shares = np.bincount(picks, minlength=4) / len(picks)
    assert found.sum() == pytest.approx(1.0)
    assert found[0] >= 0.7 and found[3] == 0.0 and found[1] > 0 and found[2] > 0
    assert np.abs(found - shares).max() < 0.02
    assert Exploration().propensities(p, sd)[0].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_a_guard_stands_down_when_its_defaults_endpoint_changed(trained: Path) -> None:
    """The guard held on an LLM whose endpoint changed would keep every query on it: its
    outcomes (forget_fit) set its margin to 0, said in its validation; another LLM's outcomes
    leave it as it was."""
    from locus.pipeline.workspace_router import WorkspaceRouter
    from locus.routing.guard import Guard

    with Store.open(trained, create=False) as store:
        router = WorkspaceRouter(store, outcomes=False).router
    assert router.guard is not None and router.knn is not None
    guard = router.guard = Guard(router.guard.default, 0.05, {"queries": 433})  # a held one
    vectors = np.full((1, router.knn.vectors_.shape[1]), 0.1, np.float32)
    other = next(llm for llm in router.llm_ids if llm != guard.default)
    router.add_outcomes(other, vectors, np.zeros(1), forget_fit=True)
    assert router.guard is guard
    router.add_outcomes(guard.default, vectors, np.zeros(1), forget_fit=True)
    assert router.guard is not None and router.guard.margin == 0
    assert router.guard.default == guard.default
    assert "endpoint changed" in router.guard.validation["stood_down"]


def test_the_stream_command_writes_its_table_json_and_plot(
    trained: Path, run_cli: Run, tmp_path: Path
) -> None:
    done = run_cli(
        "benchmark", "stream", "-w", trained, "--seed", "0", "--swap-at", "20", "--method",
        "locus", "--method", "thompson", "--out", tmp_path, "--pool", "planted",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert "| no change | locus |" in done.stdout and "| swap | thompson |" in done.stdout
    assert "linucb" not in done.stdout
    assert (tmp_path / "stream-planted.json").stat().st_size > 1000
    assert (tmp_path / "stream-planted.png").read_bytes()[:4] == b"\x89PNG"
    bad = run_cli("benchmark", "stream", "-w", trained, "--method", "ucb", "--out", tmp_path)
    assert bad.exit_code == 2 and "unknown 'ucb'" in bad.stderr
