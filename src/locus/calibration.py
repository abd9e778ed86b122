"""Calibration of P(correct): scales and a shift of the predictor's logits, fitted on held-out
cells.

A predictor fitted on a few hundred training queries carries the confidence it has on them to
new queries (the anchors suite: ECE 0.10-0.22 at A <= 512 on MMLU-Pro), and its per-query
differences are partly memorised noise (its AUROC fell below the per-LLM mean's there).
Cost-aware routing multiplies P(correct) by prices, so it must mean what it says.

With each LLM's *quality* q_j (its mean logit over a fixed set of reference queries), the map is

    logit' = scale x (logit - q_j) + quality_scale x q_j + shift

so the per-query part and the per-LLM part are scaled apart: where the per-query part is noise,
`scale` shrinks it and the LLM's quality is left. With each LLM's *evidence quality* e_j too (the
logit of its mean score on the evidence it was embedded from), the map adds

    + evidence_scale x e_j

and the data chooses between the network's reading of quality and the evidence's own: on
MMLU-Pro the fit puts quality_scale near 0 and evidence_scale near 1 (benchmarks/README.md, "A
150-step schedule and evidence quality"). An LLM without an evidence quality (its pool
entry lacks the mean: written by an earlier version) uses q_j in its place. Without
qualities it is Platt scaling (logit' = scale x logit + shift), which keeps the ranking of
cells. `fit_calibration` chooses the parameters by the lowest log-loss on validation cells
(soft labels for graded scores); scales are >= 0.

`fit_logistic` is the one logistic fit of the package: this calibration, the stack's weights
(`locus.routing.stack.fit_stack`), a newcomer's thin reading (`locus.routing.thin`) and an LLM
onboarded into MF or IRT (`locus.routing.learned`) are each it with their own features, prior
and bounds.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(0, 3, 5000)                       # overconfident: true slope 1/3
    >>> truth = (rng.random(5000) < 1 / (1 + np.exp(-logits / 3))).astype(float)
    >>> round(fit_calibration(logits, truth).scale, 1)
    0.3
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.metrics import logit_log_loss

__all__ = [
    "REFERENCE_QUERIES",
    "Calibration",
    "evidence_quality",
    "evidence_quality_of",
    "fit_calibration",
    "fit_logistic",
    "logit",
    "reference_rows",
    "sigmoid",
]

_MAX_SCALE = 10.0


def sigmoid(x: NDArray[Any]) -> NDArray[np.float64]:
    """1 / (1 + e^-x), without overflow warnings."""
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64))))


def logit(proba: NDArray[Any], clip: float = 1e-6) -> NDArray[np.float64]:
    """log(p / (1 - p)), p clipped to [clip, 1 - clip] so that 0 and 1 stay finite."""
    p = np.clip(np.asarray(proba, np.float64), clip, 1 - clip)
    return np.asarray(np.log(p) - np.log1p(-p))


def fit_logistic(
    features: NDArray[np.floating[Any]],
    scores: NDArray[np.floating[Any]],
    *,
    offset: NDArray[np.floating[Any]] | None = None,
    prior: NDArray[np.floating[Any]] | None = None,
    strength: float | NDArray[np.floating[Any]] = 0.0,
    start: NDArray[np.floating[Any]] | None = None,
    bounds: Sequence[tuple[float | None, float | None]] | None = None,
    average: bool = False,
    max_iterations: int | None = None,
) -> NDArray[np.float64]:
    """argmin over w of the log-loss of sigmoid(`features` w + `offset`) against `scores`,
    summed over the rows (their mean with `average`), plus strength / 2 x |w - prior|^2.

    Where every weight is penalised and none is bounded, the objective is strictly convex and
    Newton's method solves it (to a gradient of 1e-10, a few steps): an LLM onboarded into MF
    and IRT, hundreds of times per `locus fit`, 4x faster than by L-BFGS-B, which solves the
    rest.

    Args:
        features: (n, p) one row per scored cell.
        scores: (n,) in [0, 1].
        offset: (n,) added to every logit (default 0).
        prior: (p,) what the penalty pulls towards (default 0).
        strength: the penalty's strength, one for all weights or (p,) one each (0: an
            unpenalised weight, such as an intercept's column of ones).
        start: (p,) where the solver starts (default the prior).
        bounds: (low, high) per weight, None for no bound (default none).
        average: the mean of the rows' log-loss instead of its sum.
        max_iterations: the solver's bound on iterations (default 50 for Newton, scipy's
            for L-BFGS-B).

    Returns:
        (p,) the weights.
    """
    x = np.asarray(features, np.float64)
    y = np.asarray(scores, np.float64)
    base = np.zeros(len(y)) if offset is None else np.asarray(offset, np.float64)
    centre = np.zeros(x.shape[1]) if prior is None else np.asarray(prior, np.float64)
    pull = np.broadcast_to(np.asarray(strength, np.float64), centre.shape)
    rows = max(len(y), 1) if average else 1
    weights = centre.copy() if start is None else np.array(start, np.float64)

    def loss(w: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        z = base + x @ w
        gap = w - centre
        value = np.sum(np.logaddexp(0.0, z) - y * z) / rows + 0.5 * np.sum(pull * gap**2)
        gradient = x.T @ (sigmoid(z) - y) / rows + pull * gap
        return float(value), gradient

    if bounds is None and bool(np.all(pull > 0)):
        for _ in range(max_iterations or 50):
            value, gradient = loss(weights)
            if float(np.max(np.abs(gradient), initial=0.0)) < _NEWTON_TOLERANCE:
                break
            z = base + x @ weights
            curvature = sigmoid(z) * sigmoid(-z) / rows
            hessian = (x.T * curvature) @ x + np.diag(pull)
            step = np.linalg.solve(hessian, gradient)
            # backtracking (Armijo): a full step can overshoot where the scores are nearly
            # separable; near the optimum, a change below the loss's rounding is no rise
            size, ceiling = 1.0, value + 1e-12 * (1.0 + abs(value))
            while loss(weights - size * step)[0] > ceiling - 1e-4 * size * (gradient @ step):
                size /= 2
                if size < 1e-12:
                    break
            weights = weights - size * step
            if float(np.max(np.abs(size * step), initial=0.0)) < _NEWTON_TOLERANCE:
                break
        return weights

    from scipy.optimize import minimize

    options = {} if max_iterations is None else {"maxiter": max_iterations}
    found = minimize(
        loss,
        weights,
        jac=True,
        method="L-BFGS-B",
        bounds=None if bounds is None else list(bounds),
        options=options,
    )
    return np.asarray(found.x, np.float64)


_NEWTON_TOLERANCE = 1e-10  # on the gradient's and the step's largest entry


@dataclass(frozen=True)
class Calibration:
    """logit' = scale x (logit - q) + quality_scale x q + shift, or scale x logit + shift
    without `quality_scale`; the identity by default.

    Attributes:
        scale, shift: the map of the per-query part, and the offset.
        quality_scale: the map of each LLM's quality q (None: Platt scaling, no qualities).
        cells: validation cells it was fitted on (0: not fitted).
        log_loss_before, log_loss_after: on those cells.
    """

    scale: float = 1.0
    shift: float = 0.0
    quality_scale: float | None = None
    evidence_scale: float | None = None
    cells: int = 0
    log_loss_before: float = math.nan
    log_loss_after: float = math.nan

    def apply(
        self,
        logits: NDArray[Any],
        quality: NDArray[Any] | None = None,
        evidence_quality: NDArray[Any] | None = None,
    ) -> NDArray[Any]:
        """Calibrated logits (n_queries, n_llms), same dtype; `quality` (n_llms,) is each
        column's LLM quality, needed when `quality_scale` is set; `evidence_quality` (n_llms,)
        each column's evidence quality, NaN (or None for all) where unknown: q is used there.

        Raises:
            LocusInputError: a quality calibration without qualities.
        """
        out = np.asarray(logits)
        if self.quality_scale is None:
            return (out * self.scale + self.shift).astype(out.dtype, copy=False)
        if quality is None:
            raise LocusInputError(
                "this calibration scales each LLM's quality; pass quality= (the LLMs' mean "
                "logits over the reference queries)"
            )
        q = np.asarray(quality, dtype=out.dtype)
        mapped = (out - q) * self.scale + q * self.quality_scale + self.shift
        if self.evidence_scale is not None:
            mapped = mapped + self.evidence_scale * evidence_or_quality(evidence_quality, q)
        return mapped.astype(out.dtype, copy=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "shift": self.shift,
            "quality_scale": self.quality_scale,
            "evidence_scale": self.evidence_scale,
            "cells": self.cells,
            "log_loss_before": None if math.isnan(self.log_loss_before) else self.log_loss_before,
            "log_loss_after": None if math.isnan(self.log_loss_after) else self.log_loss_after,
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Calibration:
        try:
            quality_scale = value.get("quality_scale")
            evidence_scale = value.get("evidence_scale")
            return cls(
                scale=float(value["scale"]),
                shift=float(value["shift"]),
                quality_scale=None if quality_scale is None else float(quality_scale),
                evidence_scale=None if evidence_scale is None else float(evidence_scale),
                cells=int(value.get("cells") or 0),
                log_loss_before=float(value.get("log_loss_before") or math.nan),
                log_loss_after=float(value.get("log_loss_after") or math.nan),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise LocusInputError(f"calibration {value!r}: expected scale and shift") from error


def evidence_or_quality(
    evidence_quality: NDArray[Any] | None, quality: NDArray[Any]
) -> NDArray[Any]:
    """Each LLM's evidence quality, its network quality where that is unknown (NaN or None)."""
    q = np.asarray(quality)
    if evidence_quality is None:
        return q
    e = np.asarray(evidence_quality, dtype=q.dtype)
    return np.where(np.isnan(e), q, e)


def evidence_quality(means: NDArray[Any], counts: NDArray[Any]) -> NDArray[np.float64]:
    """The logit of each LLM's mean evidence score, smoothed by half a score either way so that
    a perfect or null record stays finite: logit((mean x n + 0.5) / (n + 1)); NaN stays NaN.

    >>> evidence_quality(np.array([0.5, 1.0]), np.array([10, 3])).round(3).tolist()
    [0.0, 1.946]
    """
    n = np.asarray(counts, dtype=np.float64)
    p = (np.asarray(means, dtype=np.float64) * n + 0.5) / (n + 1.0)
    return np.asarray(np.log(p) - np.log1p(-p))


REFERENCE_QUERIES = 256  # training queries a fit keeps to measure each LLM's quality


def reference_rows(train_rows: NDArray[np.int64], seed: int) -> NDArray[np.int64]:
    """The training rows a fit keeps as reference queries: up to `REFERENCE_QUERIES`,
    drawn by `seed` (independently of training's random draws), in row order."""
    rng = np.random.default_rng([seed, 1_000_003])
    count = min(REFERENCE_QUERIES, len(train_rows))
    return np.sort(rng.choice(train_rows, count, replace=False))


def evidence_quality_of(
    means: Mapping[str, Sequence[float]], llm_ids: Sequence[str]
) -> NDArray[Any]:
    """`evidence_quality` (n_llms,) of `llm_ids` from {llm_id: (mean score, count)} (a pool's
    `evidence_means`, or the manifest's `evidence_means`); NaN for an LLM it does not hold."""
    mean = np.array([means[llm][0] if llm in means else np.nan for llm in llm_ids], np.float64)
    count = np.array([means[llm][1] if llm in means else 1 for llm in llm_ids], np.float64)
    return evidence_quality(mean, count)


def fit_calibration(
    logits: NDArray[Any],
    truth: NDArray[Any],
    quality: NDArray[Any] | None = None,
    evidence_quality: NDArray[Any] | None = None,
) -> Calibration:
    """The calibration of `logits` (n_queries, n_llms) with the lowest log-loss against
    `truth` (same shape; NaN cells are skipped; scores in [0, 1]); with `quality` (n_llms,), the
    per-query part and each LLM's quality get scales of their own; with `evidence_quality`
    (n_llms,; needs `quality`) the evidence's quality gets one too.

    Raises:
        LocusInputError: shapes that differ, or fewer than 10 scored cells.
    """
    x = np.asarray(logits, dtype=np.float64)
    y = np.asarray(truth, dtype=np.float64)
    if x.shape != y.shape:
        raise LocusInputError(f"fit_calibration: logits {x.shape} and truth {y.shape} differ")
    q = np.zeros_like(x)
    if quality is not None:
        q_row = np.asarray(quality, dtype=np.float64).reshape(-1)
        if x.ndim != 2 or q_row.shape != (x.shape[1],):
            raise LocusInputError(
                f"fit_calibration: quality {q_row.shape} must have one value per column of "
                f"logits {x.shape}"
            )
        q = np.broadcast_to(q_row, x.shape)
    e = None
    if evidence_quality is not None:
        if quality is None:
            raise LocusInputError("fit_calibration: evidence_quality needs quality")
        e_row = evidence_or_quality(np.asarray(evidence_quality).reshape(-1), q_row)
        if e_row.shape != q_row.shape:
            raise LocusInputError(
                f"fit_calibration: evidence_quality {e_row.shape} must match quality {q_row.shape}"
            )
        e = np.broadcast_to(e_row, x.shape)
    scored = ~np.isnan(y) & np.isfinite(x)
    if scored.sum() < 10:
        raise LocusInputError(
            f"fit_calibration: {int(scored.sum())} scored cells; expected at least 10"
        )
    x, y, q = x[scored], np.clip(y[scored], 0.0, 1.0), q[scored]
    features = [x - q, q] if quality is not None else [x]
    if e is not None:
        features.append(e[scored])

    design = np.column_stack([*features, np.ones(len(x))])  # the last weight: the shift
    start = np.array([*[1.0, 1.0, 0.0][: len(features)], 0.0])  # the identity map
    bounds = [(0.0, _MAX_SCALE)] * len(features) + [(None, None)]
    found = fit_logistic(design, y, start=start, bounds=bounds, average=True)
    before, after = logit_log_loss(x, y), logit_log_loss(design @ found, y)
    if not after <= before:  # never worse than the identity on the cells it was fitted on
        found, after = start, before
    return Calibration(
        scale=float(found[0]),
        shift=float(found[-1]),
        quality_scale=float(found[1]) if quality is not None else None,
        evidence_scale=float(found[2]) if e is not None else None,
        cells=len(x),
        log_loss_before=before,
        log_loss_after=after,
    )
