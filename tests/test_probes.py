"""Probe selection: the orders are prefixes, informative probes are disputed and spread."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.pipeline.probes import first_scored, probe_order
from tests.conftest import CliResult


def _pool(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """200 queries in 4 clusters; on half of each cluster every LLM agrees (all right), on
    the other half they split."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(4, 16)) * 3
    vectors = np.vstack([centres[q % 4] + rng.normal(size=16) for q in range(200)]).astype(
        np.float32
    )
    scores = np.ones((200, 6))
    disputed = np.arange(200) % 8 >= 4
    scores[disputed] = rng.integers(0, 2, (int(disputed.sum()), 6))
    return scores, vectors


def test_informative_probes_are_disputed_and_spread_over_the_clusters() -> None:
    scores, vectors = _pool()
    rows = np.arange(200)
    order = probe_order(scores, vectors, rows, "informative")
    assert sorted(order.tolist()) == rows.tolist()  # an order of every candidate
    first = order[:8]
    assert (np.arange(200)[first] % 8 >= 4).all()  # every one disputed
    assert len({int(q) % 4 for q in first}) == 4  # every cluster covered
    random = probe_order(scores, vectors, rows, "random", seed=3)
    assert sorted(random.tolist()) == rows.tolist()
    np.testing.assert_array_equal(random, probe_order(scores, vectors, rows, "random", seed=3))
    mixed = probe_order(scores, vectors, rows, "mixed", seed=3)
    assert sorted(mixed.tolist()) == rows.tolist()
    assert mixed[0] == order[0] and mixed[1] == random[0]  # informative and random in turn
    observed = np.zeros(200, dtype=bool)
    observed[::2] = True
    assert all(observed[r] for r in first_scored(order, observed, 10))
    with pytest.raises(LocusInputError, match="unknown probe strategy 'smart'"):
        probe_order(scores, vectors, rows, "smart")
    with pytest.raises(LocusInputError, match="no candidate"):
        probe_order(scores, vectors, rows[:0], "random")


def test_stratified_probes_hold_every_task_in_proportion_at_every_prefix() -> None:
    scores, vectors = _pool()
    tasks = ["maths"] * 100 + ["law"] * 60 + ["code"] * 30 + ["history"] * 10
    rows = np.arange(200)
    order = probe_order(scores, vectors, rows, "stratified", seed=4, tasks=tasks)
    assert sorted(order.tolist()) == rows.tolist()
    for n in (10, 20, 33, 100):
        counts = {t: sum(tasks[r] == t for r in order[:n]) for t in set(tasks)}
        for task, size in (("maths", 100), ("law", 60), ("code", 30), ("history", 10)):
            assert abs(counts[task] - n * size / 200) <= 1, (n, counts)
    again = probe_order(scores, vectors, rows, "stratified", seed=4, tasks=tasks)
    np.testing.assert_array_equal(order, again)  # seeded
    other = probe_order(scores, vectors, rows, "stratified", seed=5, tasks=tasks)
    assert not np.array_equal(order, other)
    # a random order within each task: not the rows' own order
    assert [r for r in order if tasks[r] == "maths"] != list(range(100))
    untasked = probe_order(scores, vectors, rows, "stratified", seed=4)
    assert sorted(untasked.tolist()) == rows.tolist()


def test_the_probes_command(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    from tests.planted_workspace import build_planted_workspace

    ws = build_planted_workspace(tmp_path / "ws")
    out = tmp_path / "probes.jsonl"
    result = run_cli("probes", "--n", "12", "--out", out, "-w", ws, "--json")
    assert result.exit_code == 0, result.stderr
    probes = result.json()
    assert isinstance(probes, list) and len(probes) == 12
    assert {"query_id", "query_text", "task"} <= set(probes[0])
    assert len(out.read_text().splitlines()) == 12
    assert len({p["task"] for p in probes}) == 3  # spread over the planted tasks
    balanced = run_cli("probes", "--n", "12", "--strategy", "balanced", "-w", ws, "--json")
    assert balanced.exit_code == 0, balanced.stderr
    assert len(balanced.json()) == 12 and balanced.json() != probes
    unknown = run_cli("probes", "--n", "12", "--strategy", "smart", "-w", ws)
    assert unknown.exit_code != 0 and "balanced" in unknown.stderr  # the strategies named


def test_balanced_probes_spread_over_the_pools_easiness_and_steady_a_newcomers_mean() -> None:
    rng = np.random.default_rng(7)
    easy = rng.random(256)  # how often an LLM is right on each query
    scores = np.clip(easy[:, None] + rng.normal(0, 0.1, (256, 6)), 0, 1)  # partial credit
    scores[5, :] = np.nan  # a query no LLM of the pool was scored on
    vectors = rng.normal(size=(256, 8)).astype(np.float32)
    rows = np.arange(256)
    order = probe_order(scores, vectors, rows, "balanced", seed=1)
    assert sorted(order.tolist()) == rows.tolist()
    np.testing.assert_array_equal(order, probe_order(scores, vectors, rows, "balanced", seed=1))
    assert not np.array_equal(order, probe_order(scores, vectors, rows, "balanced", seed=2))
    # the first 16 probes: one in each sixteenth of the queries ranked by the pool's mean score
    mean_score = scores.mean(axis=1)
    mean_score[5] = np.delete(mean_score, 5).mean()
    ranks = np.argsort(np.argsort(mean_score))
    assert sorted(int(ranks[r]) // 16 for r in order[:16]) == list(range(16))
    # a newcomer right where the pool is: its mean over 16 probes is as right on average as
    # over random ones, and much steadier (sd 0.63-0.78 of random's over planted draws)
    newcomer = (rng.random(256) < 1 / (1 + np.exp(-10 * (easy - 0.5)))).astype(np.float64)
    truth = newcomer.mean()
    draws = {
        strategy: [
            newcomer[probe_order(scores, vectors, rows, strategy, seed=s)[:16]].mean()
            for s in range(300)
        ]
        for strategy in ("random", "balanced")
    }
    assert abs(np.mean(draws["balanced"]) - truth) < 0.02
    assert np.std(draws["balanced"]) < 0.85 * np.std(draws["random"]), {
        k: np.std(v) for k, v in draws.items()
    }
