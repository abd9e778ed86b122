"""The stack of LOCUS's logits and kNN votes, the mixture behind its level, and the weights."""

from __future__ import annotations

import numpy as np
import pytest

from locus.errors import LocusInputError
from locus.routing.stack import choose_weight, mix


def test_the_weight_goes_to_the_better_calibrated_router() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, (3000, 4))
    truth = (rng.random(p.shape) < p).astype(np.float64)
    informed, noise = p, rng.uniform(0.05, 0.95, p.shape)
    assert choose_weight(informed, noise, truth) >= 0.8
    assert choose_weight(noise, informed, truth) <= 0.2
    # two halves of the truth, each knowing a different part: the mix beats both
    half = np.where(rng.random(p.shape) < 0.5, p, 0.5)
    other = np.where(half == 0.5, p, 0.5)
    weight = choose_weight(half, other, truth)
    assert 0.3 <= weight <= 0.7
    np.testing.assert_allclose(mix(half, other, 0.5), (half + other) / 2)
    with pytest.raises(LocusInputError, match="differ"):
        choose_weight(p, p[:, :2], truth)
    with pytest.raises(LocusInputError, match="no scored cell"):
        choose_weight(p, p, np.full(p.shape, np.nan))


def _planted_cells(seed: int = 0, n: int = 3000, m: int = 5) -> dict[str, np.ndarray]:
    """Scores of m LLMs on n queries from difficulty + quality + a per-(LLM, query) skill; a
    "LOCUS" that knows difficulty and quality only, a "kNN" vote that knows the skill only."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.5, (n, 1))
    quality = np.linspace(-0.5, 0.5, m)[None, :]
    skill = rng.normal(0, 1.2, (n, m))
    truth = (rng.random((n, m)) < 1 / (1 + np.exp(-(difficulty + quality + skill)))).astype(float)
    locus = np.broadcast_to(difficulty + quality, (n, m)).copy()
    vote = 1 / (1 + np.exp(-(skill + rng.normal(0, 0.5, (n, m)))))
    return {"truth": truth, "locus": locus, "vote": vote, "noise": rng.uniform(0.2, 0.8, (n, m))}


def test_the_stack_routes_by_the_vote_and_keeps_the_mixture_for_difficulty() -> None:
    from locus.metrics import routing_accuracy
    from locus.routing.stack import Stack, fit_stack, smoothed_vote

    train, test = _planted_cells(0), _planted_cells(1)
    stack = fit_stack(
        train["locus"], {50: train["vote"], 10: train["vote"]}, train["truth"], ks=(50,), mix_k=10
    )
    assert stack.needed_ks == (10, 50)
    assert stack.deviation_weights[1] > 0.5  # the vote decides which LLM suits the query
    assert stack.deviation_weights[0] > 0.5  # LOCUS adds each LLM's quality, which it lacks
    votes = {50: test["vote"], 10: test["vote"]}
    stacked = stack.logits(test["locus"], votes)
    # the level is the mixture's (its vote smoothed as the parts' are): averaged over the
    # LLMs, the stack says what the mixture says
    vote = smoothed_vote(test["vote"], 10)
    mixture = mix(1 / (1 + np.exp(-test["locus"])), vote, stack.mix_weight)
    level = np.log(mixture / (1 - mixture)).mean(axis=1)
    np.testing.assert_allclose(stacked.mean(axis=1), level, atol=1e-9)
    alone = routing_accuracy(test["locus"], test["truth"])
    assert routing_accuracy(stacked, test["truth"]) > alone + 0.05
    # the vote alone lacks each LLM's quality, which LOCUS's deviation adds
    assert routing_accuracy(stacked, test["truth"]) > routing_accuracy(test["vote"], test["truth"])
    assert Stack.from_dict(stack.as_dict()) == stack
    assert "knn50" in stack.describe()


def test_a_vote_that_knows_nothing_leaves_the_ranking_to_locus() -> None:
    from locus.routing.stack import fit_stack

    cells = _planted_cells(2)
    votes = {50: cells["noise"]}
    stack = fit_stack(cells["locus"], votes, cells["truth"], ks=(50,), mix_k=50)
    assert abs(stack.deviation_weights[1]) < 0.1
    assert stack.deviation_weights[0] > 0.6
    assert stack.mix_weight >= 0.8


def test_without_locus_the_weights_are_pulled_towards_the_part_named() -> None:
    """`toward` names the evidence part the deviation weights are pulled to: a strong pull
    leaves that part's vote alone, whichever of the kNN votes it is."""
    from locus.routing.stack import fit_stack

    cells = _planted_cells(4)
    votes = {10: cells["vote"], 50: cells["noise"]}
    for toward, alone in ((1, (0.0, 1.0, 0.0)), (2, (0.0, 0.0, 1.0))):
        stack = fit_stack(cells["locus"], votes, cells["truth"], ks=(10, 50), mix_k=10,
                          use_locus=False, penalty=1e4, toward=toward)  # fmt: skip
        np.testing.assert_allclose(stack.deviation_weights, alone, atol=1e-3)
    # by default, the last part (the regional vote); a weak pull lets the data speak
    weak = fit_stack(cells["locus"], votes, cells["truth"], ks=(10, 50), mix_k=10,
                     use_locus=False)  # fmt: skip
    assert weak.deviation_weights[1] > 0.5 > abs(weak.deviation_weights[2])
    with pytest.raises(LocusInputError, match="no evidence part 3"):
        fit_stack(cells["locus"], votes, cells["truth"], ks=(10, 50), mix_k=10,
                  use_locus=False, toward=3)  # fmt: skip


def test_the_stack_checks_its_inputs() -> None:
    from locus.routing.stack import Stack, fit_stack, knn_logits

    cells = _planted_cells(3, n=50)
    locus, vote, truth = cells["locus"], cells["vote"], cells["truth"]
    with pytest.raises(LocusInputError, match="one shape"):
        fit_stack(locus, {50: vote[:, :2]}, truth, ks=(50,), mix_k=50)
    with pytest.raises(LocusInputError, match="no kNN votes for k = 500"):
        fit_stack(locus, {50: vote}, truth, ks=(50, 500), mix_k=50)
    with pytest.raises(LocusInputError, match="no scored cell"):
        fit_stack(locus, {50: vote}, np.full((50, 5), np.nan), ks=(50,), mix_k=50)
    with pytest.raises(LocusInputError, match="needs 2 deviation weights"):
        Stack(ks=(50,), deviation_weights=(1.0,), mix_weight=0.5, mix_k=50)
    with pytest.raises(LocusInputError, match=r"in \[0, 1\]"):
        Stack(ks=(50,), deviation_weights=(1.0, 0.0), mix_weight=1.5, mix_k=50)
    with pytest.raises(LocusInputError, match="the task vote only in a stack with a task part"):
        Stack(ks=(50,), deviation_weights=(1.0, 0.0), mix_weight=0.5, mix_k=50, level="tasks")
    # a unanimous vote stays finite: one pseudo-success and one pseudo-failure
    np.testing.assert_allclose(knn_logits(np.array([0.0, 1.0]), 8), [-np.log(9), np.log(9)])


def test_the_base_rate_shift_matches_the_mean_score_and_keeps_the_ranking() -> None:
    from locus.metrics import routing_accuracy
    from locus.routing.stack import Stack, base_rate_shift

    cells = _planted_cells(4)
    truth = cells["truth"]
    logits = cells["locus"] - 1.0  # predicts too low everywhere
    shift = base_rate_shift(logits, truth)
    assert 0.5 < shift < 1.5
    p = 1 / (1 + np.exp(-(logits + shift)))
    assert abs(p.mean() - truth.mean()) < 1e-6
    assert routing_accuracy(logits + shift, truth) == routing_accuracy(logits, truth)
    half = truth.copy()
    half[::2] = np.nan  # unscored cells do not count
    p_half = 1 / (1 + np.exp(-(logits + base_rate_shift(logits, half))))
    assert abs(p_half[1::2].mean() - truth[1::2].mean()) < 1e-6
    with pytest.raises(LocusInputError, match="differ"):
        base_rate_shift(logits[:, :2], truth)
    stack = Stack(ks=(50,), deviation_weights=(1.0, 0.0), mix_weight=1.0, mix_k=50, shift=0.4)
    votes = {50: cells["vote"]}
    np.testing.assert_allclose(
        stack.logits(cells["locus"], votes) - 0.4,
        Stack(ks=(50,), deviation_weights=(1.0, 0.0), mix_weight=1.0, mix_k=50).logits(
            cells["locus"], votes
        ),
        atol=1e-9,
    )
    assert Stack.from_dict(stack.as_dict()) == stack


def test_a_level_read_from_the_task_vote() -> None:
    """`level` "tasks": the level's mixture reads the task vote in the kNN vote's place (with
    the task vote's deviation alone, the stack is the task vote itself); it survives the dict
    round trip, and a stack saved with weights for named tasks (locus-stacked/5-6) reads back
    without them."""
    from locus.calibration import logit
    from locus.routing.stack import Stack

    rng = np.random.default_rng(0)
    locus = rng.normal(size=(6, 3))
    votes = {50: rng.uniform(0.1, 0.9, (6, 3)), 5: rng.uniform(0.1, 0.9, (6, 3))}
    tasks = rng.uniform(0.1, 0.9, (6, 3))
    stack = Stack((50,), (0.0, 0.0, 1.0), 0.0, 5, tasks=True, level="tasks")
    np.testing.assert_allclose(stack.logits(locus, votes, tasks), logit(tasks), atol=1e-12)
    knn_level = Stack((50,), (0.0, 0.0, 1.0), 0.0, 5, tasks=True)
    assert not np.allclose(knn_level.logits(locus, votes, tasks), logit(tasks))
    assert Stack.from_dict(stack.as_dict()) == stack
    assert "the task vote" in stack.describe()
    saved = {**stack.as_dict(), "given_weights": [0.0, 0.0, 2.0]}
    assert "given_weights" not in stack.as_dict() and Stack.from_dict(saved) == stack


def test_the_level_reads_whichever_vote_reads_the_cells_better() -> None:
    """`choose_level`: the task vote where it has the lower log-loss on the scored cells than
    the kNN vote (smoothed at its k), else the kNN vote; cells without a score are not read."""
    from locus.routing.stack import choose_level

    rng = np.random.default_rng(3)
    skill = rng.uniform(0.1, 0.9, (400, 3))
    truth = (rng.random(skill.shape) < skill).astype(float)
    truth[::7, 1] = np.nan
    near, far = (
        np.clip(skill + rng.normal(0, 0.02, skill.shape), 0.01, 0.99),
        np.full_like(skill, 0.5),
    )
    assert choose_level(far, 50, near, truth) == "tasks"
    assert choose_level(near, 50, far, truth) == "knn"
    wrong_where_unscored = near.copy()
    wrong_where_unscored[::7, 1] = 1 - truth[::7, 0]  # nonsense, on cells with no score
    assert choose_level(far, 50, wrong_where_unscored, truth) == "tasks"


def test_a_level_read_from_a_few_neighbours_is_smoothed_as_the_parts_are() -> None:
    """A kNN level at k = 5, LOCUS without a share: an LLM none of whose 5 neighbours was
    right is 1/7 likely, not 1e-6 (before, the level's mean over four LLMs fell 3.4 logits and
    every LLM's P(correct) with it: 0.08 where three of them had 4 of 5 right)."""
    from locus.calibration import logit
    from locus.routing.stack import Stack, knn_logits, smoothed_vote

    votes = {5: np.array([[0.0, 0.8, 0.8, 0.8]]), 50: np.full((1, 4), 0.6)}
    locus = np.zeros((1, 4))
    stack = Stack((50,), (0.0, 0.0), 0.0, 5)  # no deviations: every LLM at the level
    expected = float(np.mean(logit(smoothed_vote(votes[5], 5))))
    np.testing.assert_allclose(stack.logits(locus, votes), expected, atol=1e-12)
    assert 0.5 < 1 / (1 + np.exp(-expected)) < 0.62
    np.testing.assert_allclose(smoothed_vote(votes[5], 5), [[1 / 7, 5 / 7, 5 / 7, 5 / 7]])
    np.testing.assert_allclose(knn_logits(votes[5], 5), logit(smoothed_vote(votes[5], 5)))
