"""Off-policy estimates on sparse evidence (`locus.offpolicy`), the guard on such evidence, and
the product on a planted one-LLM-per-query log: import says so, fit routes to the
specialists, evaluate gives estimates with intervals and no dense-only rows."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from locus.metrics import routing_accuracy
from locus.offpolicy import (
    Overlap,
    direct,
    doubly_robust,
    inclusion,
    ips,
    overlap_of,
    paired_ips,
    selection_hit,
)
from locus.routing.guard import fit_guard
from tests.conftest import CliResult

Run = Callable[..., CliResult]

RATES = np.array([0.9, 0.6, 0.3])  # three LLMs' planted P(correct), the same on every query


def dense_truth(n: int, seed: int, rates: np.ndarray = RATES) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((n, len(rates))) < rates).astype(np.float64)


def logged(truth: np.ndarray, seed: int, shares: np.ndarray | None = None) -> np.ndarray:
    """`truth` with one LLM per query kept, drawn with `shares` (default uniform)."""
    rng = np.random.default_rng(seed)
    n, m = truth.shape
    kept = rng.choice(m, size=n, p=shares)
    out = np.full_like(truth, np.nan)
    out[np.arange(n), kept] = truth[np.arange(n), kept]
    return out


def test_overlap_tells_a_dense_table_from_a_log() -> None:
    truth = dense_truth(200, 0)
    assert overlap_of(truth).overlap == 1.0 and not overlap_of(truth).sparse
    log = logged(truth, 0)
    found = overlap_of(log)
    assert (found.llms_per_query, found.overlap, found.sparse) == (1.0, 0.0, True)
    assert Overlap.from_counts(200, 3, 200) == found
    assert "each query was answered by one LLM" in found.describe()
    half = truth.copy()
    half[::2, 0] = np.nan  # half the queries miss one LLM of three: 0.75 overlap
    assert overlap_of(half).overlap == pytest.approx(0.75) and not overlap_of(half).sparse


def test_ips_is_hit_at_1_on_a_dense_table() -> None:
    truth = dense_truth(300, 1)
    proba = np.random.default_rng(2).random(truth.shape)
    choice = proba.argmax(axis=1)
    assert ips(choice, truth).value == pytest.approx(routing_accuracy(proba, truth))
    assert selection_hit(proba, truth) == routing_accuracy(proba, truth)
    other = np.zeros(len(truth), int)
    paired = paired_ips(choice, other, truth)
    assert paired.value == pytest.approx(np.mean(truth[np.arange(300), choice] - truth[:, 0]))


def test_estimates_cover_the_truth_a_dense_table_knows() -> None:
    # a policy that sends every query to LLM 0: true value 0.9; to a per-query mix: its mean
    covered = {"ips": 0, "dr": 0}
    widths = {"ips": [], "dr": []}
    for seed in range(40):
        truth = dense_truth(400, seed)
        log = logged(truth, 100 + seed)
        policy = np.random.default_rng(seed).integers(0, 3, size=len(truth))
        true_value = truth[np.arange(len(truth)), policy].mean()
        # a reward model that knows the planted rates: DR's variance falls below IPS's
        reward = np.tile(RATES, (len(truth), 1))
        for name, estimate in (
            ("ips", ips(policy, log)),
            ("dr", doubly_robust(policy, log, reward)),
        ):
            low, high = estimate.interval
            covered[name] += low <= true_value <= high
            widths[name].append(high - low)
    assert covered["ips"] >= 34 and covered["dr"] >= 34  # 95% intervals: ~38 of 40
    assert np.mean(widths["dr"]) < 0.7 * np.mean(widths["ips"])
    # the naive reading ties every router on the logged LLM; the estimates tell them apart
    truth = dense_truth(3000, 7)
    log = logged(truth, 8)
    best, worst = np.zeros(3000, int), np.full(3000, 2)
    assert routing_accuracy(np.eye(3)[best], log) == routing_accuracy(np.eye(3)[worst], log)
    gain = paired_ips(best, worst, log)
    assert gain.value - 2 * gain.se > 0.4  # planted: 0.6
    assert selection_hit(np.eye(3)[best], log) > selection_hit(np.eye(3)[worst], log)


def test_inclusion_reads_an_uneven_traffic_split() -> None:
    truth = dense_truth(6000, 3)
    log = logged(truth, 4, shares=np.array([0.1, 0.3, 0.6]))
    assert inclusion(log) == pytest.approx([0.1, 0.3, 0.6], abs=0.02)
    # LLM 0 was logged on a tenth of the queries: its estimate is still its rate
    assert ips(np.zeros(6000, int), log).value == pytest.approx(0.9, abs=0.05)


def test_direct_and_bad_input() -> None:
    reward = np.array([[0.2, 0.8], [0.6, 0.4]])
    assert direct(np.array([1, 0]), reward).value == pytest.approx(0.7)
    assert direct(np.array([1, 0]), reward).method == "dm"
    with pytest.raises(Exception, match="one choice per query"):
        ips(np.array([0]), np.ones((2, 2)))
    with pytest.raises(Exception, match="outside"):
        ips(np.array([0, 5]), np.ones((2, 2)))
    with pytest.raises(Exception, match="probability of 0"):
        ips(np.array([0, 1]), np.array([[1.0, np.nan], [np.nan, 1.0]]), np.array([0.0, 1.0]))
    one = ips(np.array([0]), np.array([[1.0, np.nan]]))
    assert math.isinf(one.se) and one.as_dict()["low"] is None


def test_the_guard_stands_down_where_a_log_cannot_tell() -> None:
    # 40 validation queries of a log, each LLM's P(correct) the same everywhere but for a
    # weak hint: no margin clears, and routing is not worse beyond noise either
    truth = dense_truth(40, 11, np.array([0.6, 0.6, 0.6]))
    log = logged(truth, 12)
    proba = np.random.default_rng(13).uniform(0.55, 0.65, size=log.shape)
    guard = fit_guard(proba, log, ["a", "b", "c"], default_column=0)
    assert guard.validation["stood_down"] is True and guard.margin == 0.0
    assert guard.validation["estimate"] == "ips"
    # a log large enough to show routing loses: the default is kept
    truth = dense_truth(3000, 14, np.array([0.9, 0.3, 0.3]))
    log = logged(truth, 15)
    proba = np.tile([0.5, 0.9, 0.9], (3000, 1))  # a router that believes the weak ones
    guard = fit_guard(proba, log, ["a", "b", "c"], default_column=0)
    assert guard.always_default and not guard.validation["stood_down"]
    # and large enough to show it wins: a finite margin that moves queries
    truth = dense_truth(3000, 16, np.array([0.3, 0.9, 0.9]))
    log = logged(truth, 17)
    guard = fit_guard(np.tile([0.3, 0.9, 0.8], (3000, 1)), log, ["a", "b", "c"], 0)
    assert not guard.always_default and guard.validation["moved"] == 1.0
    assert guard.validation["hit@1"] == pytest.approx(0.9, abs=0.06)


def test_a_dense_guard_is_unchanged() -> None:
    truth = dense_truth(40, 21, np.array([0.6, 0.6, 0.6]))
    proba = np.random.default_rng(22).uniform(0.55, 0.65, size=truth.shape)
    guard = fit_guard(proba, truth, ["a", "b", "c"], default_column=0)
    assert "estimate" not in guard.validation and "stood_down" not in guard.validation


def planted_log(seed: int = 0) -> pd.DataFrame:
    """A gateway's log of the planted pool: one specialist per task (0.9 on it, 0.2 off),
    each query answered by one of them, drawn uniformly; no query id, a task column."""
    from tests.planted_workspace import planted_rows

    rows = planted_rows(llms_per_group=1, queries_per_task=160, seed=seed)
    rng = np.random.default_rng(seed)
    picked = rows.groupby("query_id", sort=False).sample(1, random_state=rng)
    return picked.rename(columns={"llm_id": "model", "query_text": "prompt", "score": "correct"})[
        ["prompt", "model", "task", "correct"]
    ]


def test_a_one_llm_per_query_log_end_to_end(tmp_path: Path, run_cli: Run) -> None:
    from locus.pipeline import fit_workspace
    from locus.store import Store
    from locus.text import HashingEncoder
    from locus.text.cache import encode_missing
    from tests.nn.conftest import small_config
    from tests.planted_workspace import ENCODER_DIM, TASKS, VOCABULARY

    path = tmp_path / "gateway-log.csv"
    planted_log().to_csv(path, index=False)
    workspace = tmp_path / "ws"
    imported = run_cli("import", str(path), "-w", str(workspace), "--json")
    assert imported.exit_code == 0, imported.stderr
    notes = json.loads(imported.stdout)["notes"]
    assert any("each query was answered by one LLM" in n for n in notes), notes
    with Store.open(workspace) as store:
        encode_missing(store, HashingEncoder(ENCODER_DIM))
        report = fit_workspace(store, small_config())
    assert any(n.startswith("sparse evidence: ") for n in report.notes), report.notes
    assert report.guard is not None and not report.guard.always_default
    # new texts of each task go to its specialist
    rng = np.random.default_rng(99)
    texts, tasks = [], []
    for task in TASKS:
        for q in range(20):
            texts.append(" ".join(rng.choice(VOCABULARY[task].split(), 5)) + f" new {q}")
            tasks.append(task)
    queries = tmp_path / "new.txt"
    queries.write_text("\n".join(texts) + "\n")
    routed = run_cli("route", "-f", str(queries), "-w", str(workspace), "--json")
    assert routed.exit_code == 0, routed.stderr
    chosen = [row["llm_id"] for row in json.loads(routed.stdout)]
    right = np.mean([llm == f"{task}-0" for llm, task in zip(chosen, tasks, strict=True)])
    assert right >= 0.8, list(zip(chosen, tasks, strict=True))
    found = run_cli("evaluate", "-w", str(workspace), "--json")
    assert found.exit_code == 0, found.stderr
    result = json.loads(found.stdout)
    assert result["routing"] is None and result["baselines"] is None  # no dense-only figures
    estimates = result["offpolicy"]["estimates"]
    assert {"LOCUS, guarded", "best single LLM", "best LLM per task, the task given"} <= set(
        estimates
    )
    for by in estimates.values():
        for method in ("ips", "dr"):
            assert by[method]["low"] <= by[method]["value"] <= by[method]["high"]
    # the specialists' router beats always asking one of them (planted: 0.9 against ~0.43)
    routed_dr = estimates["LOCUS, guarded"]["dr"]
    single_dr = estimates["best single LLM"]["dr"]
    assert routed_dr["value"] - single_dr["value"] > 0.25
    shown = run_cli("evaluate", "-w", str(workspace))
    assert "doubly robust" in shown.stdout and "oracle" not in shown.stdout.split("No oracle")[0]
    # the gateway's decision log knows how each test answer was chosen: evaluate reads those
    # probabilities (here 0.5 for every logged answer: IPS doubles each hit it counts)
    from locus.metrics import best_single_choices
    from locus.pipeline import workspace_table

    with Store.open(workspace) as store:
        data = workspace_table(store)
        test = data.rows("test")
        truth = data.table.scores[test].astype(np.float64)
        for i, row in enumerate(test):
            [j] = np.flatnonzero(~np.isnan(truth[i]))
            store.put_decision({
                "request_id": f"r{i}", "llm_id": data.table.llm_ids[j], "propensity": 0.5,
                "text_hash": data.table.text_hashes[row],
            })  # fmt: skip
        trained = data.table.scores[data.rows("train")]
    again = json.loads(run_cli("evaluate", "-w", str(workspace), "--json").stdout)["offpolicy"]
    assert again["propensity"].startswith("the gateway's decision log (")
    best = best_single_choices(trained, np.zeros_like(truth))
    hits = [
        truth[i, best[i]] / 0.5 if not np.isnan(truth[i, best[i]]) else 0.0
        for i in range(len(test))
    ]
    assert again["estimates"]["best single LLM"]["ips"]["value"] == pytest.approx(np.mean(hits))
