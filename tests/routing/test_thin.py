"""A newcomer read beside the pool (`locus.routing.thin`): the readings' weights fitted on the
fitted LLMs made thin, its level its own, a specialist still routed its task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.metrics import roc_auc_score

from locus.calibration import sigmoid
from locus.errors import LocusInputError
from locus.routing import Evidence, StackedRouter
from locus.routing.level import reference_level
from locus.routing.thin import (
    FEATURES,
    MONOTONE,
    SIZES,
    ThinEvidence,
    _monotone_logistic,
    fit_thin,
    level_shift,
)
from tests.routing.test_evidence_floor import SKILL, LevelsOnly, _queries, _scores, _small_pool


def _logit(p: NDArray[Any]) -> NDArray[np.float64]:
    p = np.clip(np.asarray(p, np.float64), 1e-3, 1 - 1e-3)
    return np.log(p / (1 - p))


class LevelsFromEvidence(LevelsOnly):
    """A LOCUS that reads an LLM's level from its evidence and nothing of which query suits it
    (its `thin_logits`: the logit of each evidence's mean, on every query)."""

    def thin_logits(
        self,
        evidence: Sequence[tuple[NDArray[np.float32], NDArray[np.float32]]],
        query_vectors: NDArray[np.float32],
    ) -> NDArray[Any]:
        means = np.array([np.mean(scores) for _, scores in evidence])
        return np.tile(_logit(means), (len(query_vectors), 1))


def _difficulty_pool(
    n_llms: int = 12, n_queries: int = 3_000, seed: int = 0
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float64]]:
    """Queries of a planted difficulty, LLMs of a planted level: logit P = level - difficulty.
    (vectors, scores (n, n_llms), the true logits)"""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1.5, n_queries)
    levels = rng.normal(0, 0.7, n_llms)
    truth = levels[None, :] - difficulty[:, None]
    scores = (rng.random(truth.shape) < sigmoid(truth)).astype(np.float32)
    vectors = rng.normal(size=(n_queries, 8)).astype(np.float32)
    return vectors, scores, truth


def test_the_readings_follow_the_pools_sense_of_difficulty() -> None:
    """Fitted LLMs whose stacked logits know each query's difficulty, a LOCUS that knows only
    levels: the fitted weights lean on the pool's mean, and a newcomer so read ranks its own
    queries as the pool does, far above its own flat logits."""
    vectors, scores, truth = _difficulty_pool()
    train, val = slice(0, 2_000), slice(2_000, 3_000)
    pool = list(range(11))  # the 12th LLM is the newcomer
    locus = LevelsFromEvidence({f"m{j}": 0.5 for j in pool})
    thin = fit_thin(
        locus.thin_logits,
        Evidence(vectors[train], scores[train][:, pool], tuple(locus.levels)),
        vectors[val],
        scores[val][:, pool],
        truth[val][:, pool],  # the pool's stacked logits: its LLMs' true logits
    )
    assert thin is not None and thin.sizes == SIZES
    weights = dict(zip(FEATURES, thin.coefficients(32)[0], strict=True))
    # every fitted LLM reads the one difficulty here: their mean and best are one reading
    assert weights["mean"] + weights["best"] > 0.5
    assert weights["task"] == weights["near"] == weights["region"] == 0.0  # none was read
    newcomer = scores[train, 11][:32]
    own = np.full(1_000, _logit(np.array([newcomer.mean()]))[0])
    read = thin.logits(own, None, None, truth[val][:, pool], 32)
    held_out = scores[val, 11]
    assert roc_auc_score(held_out, read) > 0.8  # its own flat logits: 0.5


def test_weights_between_sizes_are_interpolated_in_log_n() -> None:
    rows = ((1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 1.0), (0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0))
    thin = ThinEvidence((16, 64), rows, (0.0, 1.0))
    np.testing.assert_allclose(thin.coefficients(32)[0], [0.5, 0.5, 0.0, 0.0, 0.0, 1.0, 0.5, 0.5])
    assert thin.coefficients(32)[1] == pytest.approx(0.5)
    np.testing.assert_allclose(thin.coefficients(4)[0], rows[0])  # the nearest size's
    np.testing.assert_allclose(thin.coefficients(10_000)[0], rows[1])
    assert ThinEvidence.from_dict(thin.as_dict()) == thin
    assert thin.share(16) == thin.share(128) == 1.0 and thin.share(512) == thin.share(1e4) == 0.0
    assert thin.share(256) == pytest.approx(0.5)  # halfway from 128 to 512 in log n
    assert ThinEvidence((16, 64), rows, (0.0, 1.0), fade=(32, 128)).share(64) == pytest.approx(0.5)
    with pytest.raises(LocusInputError, match="one row of weights per evidence size"):
        ThinEvidence((16, 64), rows[:1], (0.0, 0.0))
    with pytest.raises(LocusInputError, match="sizes ascending"):
        ThinEvidence((64, 16), rows, (0.0, 0.0))
    with pytest.raises(LocusInputError, match="8 weights per size"):
        ThinEvidence((16, 64), ((0.0,) * 4,) * 2, (0.0, 0.0))
    with pytest.raises(LocusInputError, match="readings"):
        ThinEvidence.from_dict({**thin.as_dict(), "features": ["own"]})


@pytest.mark.parametrize("target", [0.05, 0.5, 0.93])
def test_the_level_shift_puts_the_mean_where_the_evidence_says(target: float) -> None:
    z = np.random.default_rng(0).normal(size=200)
    assert sigmoid(z + level_shift(z, target)).mean() == pytest.approx(target, abs=1e-5)


def test_a_pool_of_two_llms_or_a_locus_that_cannot_embed_keeps_none() -> None:
    vectors, scores, truth = _difficulty_pool(n_llms=2)
    locus = LevelsFromEvidence({"a": 0.5, "b": 0.5})
    evidence = Evidence(vectors[:2_000], scores[:2_000], ("a", "b"))
    later = slice(2_000, None)
    assert (
        fit_thin(locus.thin_logits, evidence, vectors[later], scores[later], truth[later]) is None
    )
    train, val, levels = _small_pool(2_000)
    assert StackedRouter.fit(levels, train, val, cross_fit_below=0).thin is None  # no embedder


def _specialist_pool() -> tuple[StackedRouter, LevelsFromEvidence]:
    """Three fitted LLMs (no maths specialist) with the stack fitted on a validation split; the
    maths specialist onboarded since, LOCUS's prior for it below its level."""
    train, val, _ = _small_pool(1_600, seed=3)
    keep = [1, 2, 3]
    ids = tuple(train.llm_ids[j] for j in keep)
    train, val = (Evidence(e.vectors, e.scores[:, keep], ids, e.tasks) for e in (train, val))
    locus = LevelsFromEvidence({llm: float(np.mean(SKILL[llm])) for llm in ids})
    router = StackedRouter.fit(locus, train, val, cross_fit_below=0)
    locus.levels["math-llm"] = 0.40
    return router, locus


def test_a_specialist_read_beside_the_pool_keeps_its_task_and_its_level() -> None:
    router, _ = _specialist_pool()
    assert router.thin is not None
    weights = dict(zip(FEATURES, router.thin.coefficients(64)[0], strict=True))
    # on this pool the per-task rates tell the LLMs apart; the factor model (tasks are apart
    # in the query vectors) reads them too: 64 scores weigh them 0.46 and 0.57
    assert weights["task"] > 0.25 and weights["task"] + weights["factor"] > 0.75
    rng = np.random.default_rng(11)
    maths, _ = _queries(400, rng)
    maths = maths[::4]
    others = router.predict_proba(maths)[:, :-1]
    probes, probe_tasks = _queries(64, rng)
    scores = _scores(probe_tasks, ["math-llm"], rng)[:, 0]
    router.join("math-llm", probes, scores, probe_tasks)
    assert router.factors is not None
    assert {k: v.shape[0] for k, v in router._factor_rows["math-llm"].items()} == {
        "factor": 2,
        "ability": 2,
    }
    np.testing.assert_allclose(router.predict_proba(maths)[:, :-1], others, atol=1e-6)
    chosen = [d.llm_id for d in router.route(maths, top=1)]
    assert chosen.count("math-llm") >= 90
    # its level: its mean score (no probe is a query of the fit, whose scores would say how
    # easy they were), over the fit's queries of its probes' tasks (the stack's mean P there is
    # another figure); at 64 scores its logit is this reading alone (`FADE`)
    assert router.knn is not None and router._fit_index is not None
    target, rows = reference_level(router.knn, [0, 1, 2], router._fit_index, probes, scores,
                                   probe_tasks)  # fmt: skip
    assert target == pytest.approx(float(scores.mean()))
    on_rows = router._stacked(rows, router.locus.predict_logits(rows), thin=1.0)
    assert on_rows is not None
    assert float(sigmoid(on_rows[1][:, -1]).mean()) == pytest.approx(target, abs=1e-4)
    logits = router.locus.predict_logits(probes)
    read, stacked = (
        router._stacked(probes, logits, thin=1.0),
        router._stacked(probes, logits, thin=0.0),
    )
    assert read is not None and stacked is not None
    assert read[0][-1] == stacked[0][-1] == router.locus.llm_ids.index("math-llm")
    assert 0.5 / 65 < scores.mean() < 64.5 / 65  # within what its 64 scores can say: as it is
    assert abs(float(sigmoid(stacked[1][:, -1]).mean()) - scores.mean()) > 1e-3
    np.testing.assert_allclose(router.predict_logits(probes)[:, -1], read[1][:, -1], atol=1e-5)
    # joined again with 256 scores: half this reading, half the stack's
    more, more_tasks = _queries(256, rng)
    router.join("math-llm", more, _scores(more_tasks, ["math-llm"], rng)[:, 0], more_tasks)
    logits = router.locus.predict_logits(probes)
    read, stacked = (
        router._stacked(probes, logits, thin=1.0),
        router._stacked(probes, logits, thin=0.0),
    )
    assert read is not None and stacked is not None
    blend = router.predict_logits(probes)[:, -1]
    np.testing.assert_allclose(blend, (read[1][:, -1] + stacked[1][:, -1]) / 2, atol=1e-5)
    # with 512 scores the stack's reading alone: no factor vector is fitted for it
    most, most_tasks = _queries(512, rng)
    router.join("math-llm", most, _scores(most_tasks, ["math-llm"], rng)[:, 0], most_tasks)
    assert "math-llm" not in router._factor_rows


def test_the_fit_matches_a_logistic_regression_and_keeps_own_readings_from_counting_against() -> (
    None
):
    """Where the best weights are >= 0 the fit is sklearn's logistic regression (same penalty);
    an own reading that goes against the scores is held at 0, the others free."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    x = rng.normal(size=(4_000, len(FEATURES)))
    truth = x @ np.array([1.0, 0.5, 0.3, 0.2, -0.7, 0.4, 0.6, 0.3]) - 0.3
    y = (rng.random(4_000) < sigmoid(truth)).astype(np.float64)
    weights, intercept = _monotone_logistic(x, y)
    reference = LogisticRegression(C=1.0, max_iter=1_000).fit(x, y)
    np.testing.assert_allclose(weights, reference.coef_[0], atol=2e-3)
    assert intercept == pytest.approx(float(reference.intercept_[0]), abs=2e-3)
    against = x.copy()
    against[:, FEATURES.index("region")] *= -1.0  # region now counts against the scores
    weights, _ = _monotone_logistic(against, y)
    assert weights[FEATURES.index("region")] == 0.0
    assert weights[FEATURES.index("mean")] < -0.5  # a pool reading may weigh against
    assert all(weights[FEATURES.index(name)] >= 0.0 for name in MONOTONE)


def test_an_llm_whose_probes_were_all_right_is_not_read_as_never_wrong() -> None:
    """Every one of its 32 probes right: its level is at most (32 + 1/2) / 33 over the fit's
    queries of its probes' tasks, not the stack's 0.999 (on the probes themselves 0.987), and
    still well above the pool's."""
    router, _ = _specialist_pool()
    assert router.thin is not None
    for row in router.thin.weights:
        assert all(row[FEATURES.index(name)] >= 0.0 for name in MONOTONE)
    probes, probe_tasks = _queries(32, np.random.default_rng(12))
    router.join("math-llm", probes, np.ones(32, np.float32), probe_tasks)
    assert router.knn is not None and router._fit_index is not None
    _, rows = reference_level(router.knn, [0, 1, 2], router._fit_index, probes, np.ones(32),
                              probe_tasks)  # fmt: skip
    assert float(router.predict_proba(rows)[:, -1].mean()) == pytest.approx(32.5 / 33, abs=1e-4)
    mean = float(router.predict_proba(probes)[:, -1].mean())
    assert 0.9 < mean < 0.99
    assert mean > float(router.predict_proba(probes)[:, :-1].mean(axis=0).max())


def test_a_newcomer_on_easy_probes_is_read_against_how_easy_the_pool_found_them() -> None:
    """Its 32 probes drawn from the pool's easiest quarter, and a LOCUS that reads them as a
    stronger LLM still (0.97): 27 of 32 right (0.84), and the pool's scores on the same probes
    say they were easy, so over other queries it is read at 0.51 against a true 0.50 (at the
    probes' mean on the probes themselves: 0.56; at the stack's reading of them: 0.91)."""
    rng = np.random.default_rng(4)
    n, m = 3_000, 12
    difficulty = rng.normal(0, 1.5, n)
    levels = np.append(rng.normal(0, 0.7, m - 1), 0.0)  # the newcomer: level 0
    scores = (rng.random((n, m)) < sigmoid(levels[None, :] - difficulty[:, None])).astype(
        np.float32
    )
    # the first coordinate of a query tells its difficulty: neighbours are alike in it
    vectors = np.column_stack([difficulty + rng.normal(0, 0.2, n), rng.normal(size=(n, 3))])
    vectors = vectors.astype(np.float32)
    ids = tuple(f"m{j}" for j in range(m - 1))
    train, val, test = slice(0, 2_000), slice(2_000, 2_500), slice(2_500, n)
    train_ev, val_ev = (Evidence(vectors[r], scores[r][:, : m - 1], ids) for r in (train, val))
    locus = LevelsFromEvidence({llm: float(scores[train, j].mean()) for j, llm in enumerate(ids)})
    router = StackedRouter.fit(locus, train_ev, val_ev, cross_fit_below=0, factors=False)
    probes = rng.choice(np.argsort(difficulty[train])[:500], 32, replace=False)
    locus.levels["new"] = 0.97
    router.join("new", vectors[probes], scores[probes, -1])
    on_probes = float(router.predict_proba(vectors[probes])[:, -1].mean())
    elsewhere = float(router.predict_proba(vectors[test])[:, -1].mean())
    assert elsewhere < on_probes - 0.1
    truth = float(scores[test, -1].mean())
    assert abs(elsewhere - truth) < 0.03
    assert abs(elsewhere - truth) < abs(float(scores[probes, -1].mean()) - truth) / 10


def test_a_reading_written_before_the_factor_reading_gives_it_no_weight() -> None:
    old = {
        "features": list(FEATURES[:6]),
        "sizes": [16, 64],
        "weights": [[1.0, 0.0, 0.0, 0.0, 0.5, 0.0], [0.5, 0.0, 0.0, 0.0, 0.5, 0.0]],
        "intercepts": [0.0, 0.1],
        "fade": [128, 512],
    }
    thin = ThinEvidence.from_dict(old)
    assert [row[6:] for row in thin.weights] == [(0.0, 0.0), (0.0, 0.0)]
    assert thin.weights[0][:6] == (1.0, 0.0, 0.0, 0.0, 0.5, 0.0)


def _taste_pool(
    n_llms: int = 12, n_queries: int = 3_000, seed: int = 2
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float64]]:
    """LLMs that differ in which queries suit them, linearly in the query's vector: logit P =
    level + taste . q[:3] - difficulty. (vectors, scores (n, n_llms), the true logits)"""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n_queries, 8)).astype(np.float32)
    difficulty = vectors[:, 3:6] @ np.array([0.8, -0.6, 0.5])
    tastes = rng.normal(0, 1.2, (n_llms, 3))
    truth = rng.normal(0, 0.5, n_llms)[None, :] + vectors[:, :3] @ tastes.T - difficulty[:, None]
    scores = (rng.random(truth.shape) < sigmoid(truth)).astype(np.float32)
    return vectors, scores, truth


def test_the_factor_reading_ranks_a_newcomers_queries_by_its_own_taste() -> None:
    """LLMs whose strengths are linear in the query (a taste each), a LOCUS that knows only
    levels, fitted LLMs that know their own tastes: the pool's mean says nothing of the
    newcomer's. The factor model, its vector onboarded from the newcomer's 64 scores, does:
    its weight is positive and the newcomer's queries rank far better with it than without."""
    from locus.nn.factor_models import LearnedBaselineConfig
    from locus.routing.factors import Factors, SplitFactors

    vectors, scores, truth = _taste_pool()
    train, val, test = slice(0, 2_000), slice(2_000, 2_600), slice(2_600, None)
    pool = list(range(11))  # the 12th LLM is the newcomer
    locus = LevelsFromEvidence({f"m{j}": 0.5 for j in pool})
    ids = tuple(locus.levels)
    evidence = Evidence(vectors[train], scores[train][:, pool], ids)
    config = LearnedBaselineConfig(dim=8, min_steps=400, max_epochs=40)
    mf = SplitFactors.fit("mf", evidence, Evidence(vectors[val], scores[val][:, pool], ids),
                          config=config)  # fmt: skip
    factors = Factors({"factor": mf})
    read = {}
    for name, reader in (("with", factors.thin_logits), ("without", None)):
        thin = fit_thin(locus.thin_logits, evidence, vectors[val], scores[val][:, pool],
                        truth[val][:, pool], factor_logits=reader)  # fmt: skip
        assert thin is not None
        weights = dict(zip(FEATURES, thin.coefficients(64)[0], strict=True))
        assert (weights["factor"] > 0.3) == (name == "with")
        probes = np.arange(64)
        newcomer = scores[train, 11][probes]
        own = np.full(len(vectors[test]), _logit(np.array([newcomer.mean()]))[0])
        factor = None
        if reader is not None:
            rows = {"factor": mf.onboarded(vectors[train][probes], newcomer)[None]}
            factor = {"factor": factors.logits_of(vectors[test], rows)["factor"][:, 0]}
        read[name] = roc_auc_score(
            scores[test, 11], thin.logits(own, None, None, truth[test][:, pool], 64, factor)
        )
    assert read["with"] > read["without"] + 0.04, read
