"""Budgets tell the truth: `locus evaluate`'s savings table marks a budget rule that spent
more than its budget on the test queries, and on a small split its frontier sentence carries
standard errors."""

from __future__ import annotations

import numpy as np
import pytest

from locus.cli._evaluation import render_savings
from locus.pipeline.savings import SMALL_SAVINGS, CostSavings, _spread, rule_row
from locus.routing.frontier import frontier_metrics, frontier_of, hull


def _savings(queries: int, seed: int = 0) -> tuple[CostSavings, np.ndarray, np.ndarray]:
    """Three LLMs on `queries` queries (dear and good, mid, cheap and poor), a router that
    reads their P(correct) with noise, and a budget rule choosing the mid LLM."""
    rng = np.random.default_rng(seed)
    rates, prices = np.array([0.9, 0.7, 0.4]), np.array([0.01, 0.004, 0.001])
    y = (rng.random((queries, 3)) < rates).astype(np.float64)
    r = np.tile(prices, (queries, 1)) * rng.uniform(0.5, 1.5, (queries, 3))
    p = np.clip(rates + rng.normal(0, 0.1, (queries, 3)), 0.01, 0.99)
    singles = {f"llm-{j}": (float(r[:, j].mean()), float(y[:, j].mean())) for j in range(3)}
    strong, cheap = singles["llm-0"], singles["llm-2"]
    budget = 0.8 * float(r[:, 1].mean())  # the mid LLM alone overspends it by 25%
    rows = [rule_row("budget", budget, y[:, 1], r[:, 1], strong[0])]
    curve = frontier_of(p, np.tile(prices, (queries, 1)), y, r)
    points = np.array(list(singles.values()))
    high = float(points[:, 0].max())
    small = queries < SMALL_SAVINGS
    savings = CostSavings(
        queries=queries, estimated=False,
        strong={"llm_id": "llm-0", "accuracy": strong[1], "cost": strong[0]},
        cheapest={"llm_id": "llm-2", "accuracy": cheap[1], "cost": cheap[0]},
        rules=rows, frontier=frontier_metrics(curve, strong, cheap, high),
        static_mix=frontier_metrics(hull(points), strong, cheap, high), singles=singles,
        hull=[(float(a), float(b)) for a, b in curve],
        spread=_spread(p, np.tile(prices, (queries, 1)), y, r) if small else None,
    )  # fmt: skip
    return savings, y, r


def test_a_budget_rule_that_overspends_is_marked_by_how_much(
    capsys: pytest.CaptureFixture[str],
) -> None:
    savings, _, _ = _savings(400)
    [row] = savings.rules
    assert row["over_budget"] == pytest.approx(0.25)
    assert row["cost_se"] > 0 and 0 < row["accuracy_se"] < 0.05
    render_savings(savings)
    shown = " ".join(capsys.readouterr().out.split())
    assert "25% over its budget (beyond noise)" in shown
    assert "standard error" not in shown  # 400 queries: no interval on the frontier sentence
    kept = rule_row("budget", 1.0, np.array([1.0, 0.0]), np.array([0.5, 0.5]), 1.0)
    assert kept["over_budget"] is None


def test_a_frontier_on_few_queries_carries_its_standard_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    savings, _, _ = _savings(27)
    spread = savings.spread
    assert spread is not None and 0 <= spread["reached_100"] <= 1
    assert spread["aiq_se"] > 0 and spread["cost_share_at_95_se"] > 0
    render_savings(savings)
    shown = " ".join(capsys.readouterr().out.split())
    assert "on only 27 queries: ±" in shown
    assert "one standard error over resamples of the queries" in shown
    assert f"AIQ {savings.frontier['aiq']:.4f} ± {spread['aiq_se']:.4f}" in shown
