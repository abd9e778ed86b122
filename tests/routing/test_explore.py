"""Exploration: a bounded share of queries routed by a Thompson draw on the candidates'
uncertainty; never an LLM surely worse, never when off, a pinned LLM never moved."""

from __future__ import annotations

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.routing.explore import Exploration
from locus.routing.router import RankedLLM


def _draws(exploration: Exploration, p: list[float], sd: list[float], n: int = 4000) -> np.ndarray:
    rng = np.random.default_rng(0)
    proba, spread = np.tile(p, (n, 1)), np.tile(sd, (n, 1))
    return np.bincount(exploration.choose(proba, spread, rng), minlength=len(p)) / n


def test_off_routes_by_the_mean() -> None:
    shares = _draws(Exploration(), [0.6, 0.7, 0.65], [0.2, 0.01, 0.2])
    assert shares.tolist() == [0.0, 1.0, 0.0]


def test_thompson_tries_the_uncertain_llm_as_often_as_it_may_be_the_best() -> None:
    # a newcomer predicted 0.65 from few scores beside a pool LLM known to be 0.70
    shares = _draws(Exploration(share=1.0), [0.70, 0.65], [0.005, 0.08])
    p_newcomer_best = 0.27  # P(Beta of mean 0.65, sd 0.08 > 0.70), by a normal: ~0.27
    assert shares[1] == pytest.approx(p_newcomer_best, abs=0.05)
    # its uncertainty shrunk by evidence: tried far less
    assert _draws(Exploration(share=1.0), [0.70, 0.65], [0.005, 0.01])[1] < 0.01


def test_the_share_bounds_how_many_queries_are_explored() -> None:
    # an LLM as likely as not the best: explored queries split it ~half, the rest go to the mean
    shares = _draws(Exploration(share=0.2), [0.70, 0.70 - 1e-9], [0.0, 0.2], n=20_000)
    assert shares[1] == pytest.approx(0.2 * 0.5, abs=0.02)


def test_an_llm_surely_worse_is_never_tried_and_costs_are_kept() -> None:
    assert _draws(Exploration(share=1.0), [0.8, 0.5], [0.01, 0.1])[1] == 0.0  # 0.5 + 0.2 < 0.8
    rng = np.random.default_rng(1)
    p = np.array([[0.8, 0.75]])
    sd = np.array([[0.0, 0.0]])  # no uncertainty: the draw is the mean, the best utility wins
    utility = p - np.array([[0.3, 0.0]])  # the first is dearer
    assert Exploration(share=1.0).choose(p, sd, rng, utility).tolist() == [1]
    barred = np.array([[-np.inf, 0.75]])
    assert Exploration(share=1.0).choose(np.array([[0.9, 0.75]]), np.array([[0.3, 0]]), rng,
                                         barred).tolist() == [1]  # fmt: skip


def test_reorder_puts_the_draw_first_and_keeps_the_fallback_order() -> None:
    ranked = [
        RankedLLM("a", 0.70, None, 0.70, 0.005),
        RankedLLM("b", 0.68, None, 0.68, 0.005),
        RankedLLM("new", 0.66, None, 0.66, 0.15),
    ]
    rng = np.random.default_rng(3)
    seen = {}
    for _ in range(300):
        order, explored = Exploration(share=1.0).reorder(ranked, rng)
        assert sorted(c.llm_id for c in order) == ["a", "b", "new"]
        assert explored == (order[0].llm_id != "a")
        rest = [c.llm_id for c in order[1:]]
        assert rest == [c.llm_id for c in ranked if c.llm_id != order[0].llm_id]
        seen[order[0].llm_id] = seen.get(order[0].llm_id, 0) + 1
    assert seen.get("new", 0) > 30 and "a" in seen
    assert Exploration().reorder(ranked, rng) == (ranked, False)
    pinned = [RankedLLM("b", float("nan"), None, float("nan")), *ranked]
    assert Exploration(share=1.0).reorder(pinned, rng) == (pinned, False)


def test_a_guarded_first_choice_stays_first_when_not_explored() -> None:
    # the guard held "default" above a higher utility: off the explored share it stays first
    ranked = [RankedLLM("default", 0.70, None, 0.70, 0.0), RankedLLM("x", 0.72, None, 0.72, 0.0)]
    order, explored = Exploration(share=1e-12).reorder(ranked, np.random.default_rng(0))
    assert [c.llm_id for c in order] == ["default", "x"] and not explored


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan"), True, "0.1"])
def test_a_bad_share_is_refused(share: object) -> None:
    with pytest.raises(LocusInputError, match=r"explore must be a share of queries in \[0, 1\]"):
        Exploration(share=share)  # type: ignore[arg-type]


def test_with_share_overrides_per_request() -> None:
    server = Exploration(share=0.05)
    assert server.with_share(None) is server
    assert server.with_share(0.5).share == 0.5 and server.with_share(0.5).reach == server.reach
