"""Calibration of P(correct): scale and shift of logits, fitted on held-out cells."""

from __future__ import annotations

import json

import numpy as np
import pytest

from locus.calibration import (
    Calibration,
    evidence_quality,
    evidence_quality_of,
    fit_calibration,
    fit_logistic,
    sigmoid,
)
from locus.errors import LocusInputError
from locus.metrics import correctness_metrics


def _overconfident(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Logits three times too sure and 0.5 too optimistic."""
    true_logit = rng.normal(0, 1.2, n)
    truth = (rng.random(n) < sigmoid(true_logit)).astype(np.float64)
    return 3 * true_logit + 0.5, truth


def test_calibration_undoes_overconfidence_on_new_cells() -> None:
    logits, truth = _overconfident(np.random.default_rng(0), 20_000)
    calibration = fit_calibration(logits, truth)
    assert calibration.scale == pytest.approx(1 / 3, abs=0.03)
    assert calibration.shift == pytest.approx(-0.5 / 3, abs=0.05)
    assert calibration.log_loss_after < calibration.log_loss_before
    fresh, fresh_truth = _overconfident(np.random.default_rng(1), 20_000)
    before = correctness_metrics(sigmoid(fresh), fresh_truth)
    after = correctness_metrics(sigmoid(calibration.apply(fresh)), fresh_truth)
    assert before["ece"] > 0.1 and after["ece"] < 0.02
    assert after["auroc"] == pytest.approx(before["auroc"], abs=1e-12)  # ranking unchanged


def test_graded_scores_and_missing_cells() -> None:
    rng = np.random.default_rng(2)
    logits = rng.normal(0, 2, (400, 5))
    truth = np.clip(sigmoid(logits / 2) + rng.normal(0, 0.05, logits.shape), 0, 1)
    truth[rng.random(truth.shape) < 0.3] = np.nan
    calibration = fit_calibration(logits, truth)
    assert calibration.cells == int((~np.isnan(truth)).sum())
    assert calibration.scale == pytest.approx(0.5, abs=0.1)


def test_a_calibration_never_hurts_the_cells_it_was_fitted_on() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 1, 500)
    truth = (rng.random(500) < sigmoid(logits)).astype(float)  # already calibrated
    calibration = fit_calibration(logits, truth)
    assert calibration.log_loss_after <= calibration.log_loss_before
    assert calibration.scale == pytest.approx(1.0, abs=0.25)
    anti = fit_calibration(logits, 1 - truth)  # a predictor that ranks backwards
    assert anti.scale == 0.0  # flat rather than inverted: the ranking is never reversed


def test_round_trip_and_errors() -> None:
    calibration = fit_calibration(*_overconfident(np.random.default_rng(4), 1000))
    again = Calibration.from_dict(json.loads(json.dumps(calibration.as_dict())))
    assert again == calibration
    assert Calibration().apply(np.array([1.5], np.float32)).dtype == np.float32
    with pytest.raises(LocusInputError, match="differ"):
        fit_calibration(np.zeros(5), np.zeros(6))
    with pytest.raises(LocusInputError, match="at least 10"):
        fit_calibration(np.zeros(5), np.ones(5))
    with pytest.raises(LocusInputError, match="expected scale and shift"):
        Calibration.from_dict({"scale": "big"})


def _noisy_interactions(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """LLM quality is real, the predictor's per-query part pure memorised noise."""
    quality = np.linspace(-1.5, 1.5, 8)
    truth = (rng.random((n, 8)) < sigmoid(quality)).astype(np.float64)
    logits = quality + rng.normal(0, 2.0, (n, 8))
    return logits, truth, quality


def test_quality_calibration_shrinks_noise_to_the_llms_quality() -> None:
    logits, truth, quality = _noisy_interactions(np.random.default_rng(5), 2000)
    blend = fit_calibration(logits, truth, quality)
    assert blend.scale < 0.1 and blend.quality_scale == pytest.approx(1.0, abs=0.15)
    platt = fit_calibration(logits, truth)
    assert blend.log_loss_after < platt.log_loss_after
    fresh, fresh_truth, _ = _noisy_interactions(np.random.default_rng(6), 2000)
    by_blend = correctness_metrics(sigmoid(blend.apply(fresh, quality)), fresh_truth)
    by_platt = correctness_metrics(sigmoid(platt.apply(fresh)), fresh_truth)
    by_quality = correctness_metrics(np.tile(sigmoid(quality), (2000, 1)), fresh_truth)
    assert by_blend["auroc"] > by_platt["auroc"] + 0.05
    assert by_blend["auroc"] == pytest.approx(by_quality["auroc"], abs=0.01)
    with pytest.raises(LocusInputError, match="pass quality="):
        blend.apply(fresh)
    with pytest.raises(LocusInputError, match="one value per column"):
        fit_calibration(logits, truth, quality[:3])
    assert Calibration.from_dict(json.loads(json.dumps(blend.as_dict()))) == blend


def test_evidence_quality_replaces_a_network_that_misreads_quality() -> None:
    """The network reads two LLMs' qualities the wrong way round; their evidence means do not."""
    rng = np.random.default_rng(7)
    true_quality = np.array([-0.5, 0.0, 0.6, 0.8])
    misread = np.array([-0.5, 0.0, 0.8, 0.6])  # the top two swapped, as on MMLU-Pro
    difficulty = rng.normal(0, 1.0, (3000, 1))
    truth = (rng.random((3000, 4)) < sigmoid(true_quality + difficulty)).astype(np.float64)
    logits = misread + difficulty + rng.normal(0, 0.3, (3000, 4))
    means = sigmoid(true_quality + difficulty).mean(axis=0)  # what 1,000s of anchors would say
    evidence = evidence_quality(means, np.full(4, 3000))
    with_evidence = fit_calibration(logits, truth, misread, evidence)
    without = fit_calibration(logits, truth, misread)
    assert with_evidence.evidence_scale is not None and with_evidence.evidence_scale > 0.5
    assert with_evidence.quality_scale is not None and with_evidence.quality_scale < 0.3
    assert with_evidence.log_loss_after < without.log_loss_after
    routed = sigmoid(with_evidence.apply(logits, misread, evidence)).argmax(axis=1)
    assert np.mean(routed == 3) > np.mean(routed == 2)  # the truly best LLM leads again
    # an LLM without an evidence quality (NaN) is read through the network's quality
    partial = evidence.copy()
    partial[0] = np.nan
    mapped = with_evidence.apply(logits, misread, partial)
    np.testing.assert_allclose(
        mapped[:, 0], with_evidence.apply(logits, misread, np.full(4, misread[0]))[:, 0]
    )
    assert Calibration.from_dict(json.loads(json.dumps(with_evidence.as_dict()))) == with_evidence
    assert Calibration.from_dict({"scale": 1.0, "shift": 0.0}).evidence_scale is None
    with pytest.raises(LocusInputError, match="needs quality"):
        fit_calibration(logits, truth, None, evidence)


def test_evidence_quality_of_reads_the_fit_time_means() -> None:
    from locus.artifact import Manifest

    means = Manifest.from_dict({"evidence_means": {"a": [0.75, 100], "b": [0.0, 9]}}).evidence_means
    assert means == {"a": (0.75, 100), "b": (0.0, 9)}
    found = evidence_quality_of(means, ["b", "new", "a"])
    assert found[0] == pytest.approx(np.log(0.05 / 0.95))  # (0 x 9 + 0.5) / 10
    assert np.isnan(found[1]) and found[2] == pytest.approx(np.log(75.5 / 25.5))
    assert np.isnan(evidence_quality_of(Manifest.from_dict({}).evidence_means, ["a"])).all()


def _penalised_loss(
    x: np.ndarray, y: np.ndarray, offset: np.ndarray, prior: np.ndarray, weights: np.ndarray
) -> float:
    z = offset + x @ weights
    return float(np.sum(np.logaddexp(0, z) - y * z) + np.sum((weights - prior) ** 2) / 2)


@pytest.mark.parametrize(("n", "p", "scale"), [(256, 128, 0.3), (16, 128, 0.3), (200, 4, 10.0)])
def test_newton_and_l_bfgs_find_the_same_penalised_fit(n: int, p: int, scale: float) -> None:
    # fewer rows than weights, and nearly separable scores (true weights x10): Newton's line
    # search must keep it from overshooting
    rng = np.random.default_rng(n + p)
    x = rng.normal(size=(n, p)) * 0.3
    y = (rng.random(n) < sigmoid(x @ (rng.normal(size=p) * scale))).astype(np.float64)
    offset, prior = rng.normal(size=n), rng.normal(size=p) * 0.1
    newton = fit_logistic(x, y, offset=offset, prior=prior, strength=1.0)
    lbfgs = fit_logistic(x, y, offset=offset, prior=prior, strength=1.0, bounds=[(None, None)] * p)
    np.testing.assert_allclose(newton, lbfgs, atol=2e-4)
    gradient = x.T @ (sigmoid(offset + x @ newton) - y) + (newton - prior)
    assert np.abs(gradient).max() < 1e-8  # Newton's is the optimum; L-BFGS stops near it
    assert _penalised_loss(x, y, offset, prior, newton) <= _penalised_loss(
        x, y, offset, prior, lbfgs
    )


def test_an_unpenalised_or_bounded_weight_is_fitted_within_its_bounds() -> None:
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(size=500), np.ones(500)])
    y = (rng.random(500) < sigmoid(-2 * x[:, 0] + 1)).astype(np.float64)
    free = fit_logistic(x, y, strength=np.array([1.0, 0.0]))  # intercept unpenalised: L-BFGS
    assert free[0] == pytest.approx(-2, abs=0.4) and free[1] == pytest.approx(1, abs=0.3)
    bounded = fit_logistic(x, y, strength=1.0, bounds=[(0.0, None), (None, None)])
    assert bounded[0] == pytest.approx(0.0, abs=1e-6)  # the data pull it below 0: held at 0
