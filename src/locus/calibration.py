"""Calibration of P(correct): one scale and one shift of the predictor's logits (Platt).

A predictor fitted on a few hundred training queries carries the confidence it has on them to
new queries (the anchors suite: ECE 0.10-0.22 at A <= 512 on MMLU-Pro). Cost-aware routing
multiplies P(correct) by prices, so it must mean what it says. `fit_calibration` chooses
logit' = scale x logit + shift by the lowest log-loss on validation cells (soft labels for
graded scores); scale >= 0, so the ranking of cells, hence AUROC and routing without costs, does
not change.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(0, 3, 5000)                       # overconfident: true slope 1/3
    >>> truth = (rng.random(5000) < 1 / (1 + np.exp(-logits / 3))).astype(float)
    >>> round(fit_calibration(logits, truth).scale, 1)
    0.3
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError

__all__ = ["Calibration", "fit_calibration", "sigmoid"]

_MAX_SCALE = 10.0


def sigmoid(x: NDArray[Any]) -> NDArray[np.float64]:
    """1 / (1 + e^-x), without overflow warnings."""
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64))))


@dataclass(frozen=True)
class Calibration:
    """logit' = scale x logit + shift; the identity by default.

    Attributes:
        scale, shift: the map.
        cells: validation cells it was fitted on (0: not fitted).
        log_loss_before, log_loss_after: on those cells.
    """

    scale: float = 1.0
    shift: float = 0.0
    cells: int = 0
    log_loss_before: float = math.nan
    log_loss_after: float = math.nan

    def apply(self, logits: NDArray[Any]) -> NDArray[Any]:
        """Calibrated logits, same shape and dtype."""
        out = np.asarray(logits)
        return (out * self.scale + self.shift).astype(out.dtype, copy=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "shift": self.shift,
            "cells": self.cells,
            "log_loss_before": None if math.isnan(self.log_loss_before) else self.log_loss_before,
            "log_loss_after": None if math.isnan(self.log_loss_after) else self.log_loss_after,
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Calibration:
        try:
            return cls(
                scale=float(value["scale"]),
                shift=float(value["shift"]),
                cells=int(value.get("cells") or 0),
                log_loss_before=float(value.get("log_loss_before") or math.nan),
                log_loss_after=float(value.get("log_loss_after") or math.nan),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise LocusInputError(f"calibration {value!r}: expected scale and shift") from error


def _log_loss(logits: NDArray[np.float64], truth: NDArray[np.float64]) -> float:
    # log(1 + e^-x) for y = 1, log(1 + e^x) for y = 0, soft labels in between
    return float(np.mean(truth * np.logaddexp(0, -logits) + (1 - truth) * np.logaddexp(0, logits)))


def fit_calibration(logits: NDArray[Any], truth: NDArray[Any]) -> Calibration:
    """Scale and shift of `logits` with the lowest log-loss against `truth` (same shape; NaN
    cells are skipped; scores in [0, 1]).

    Raises:
        LocusInputError: shapes that differ, or fewer than 10 scored cells.
    """
    from scipy.optimize import minimize

    x = np.asarray(logits, dtype=np.float64)
    y = np.asarray(truth, dtype=np.float64)
    if x.shape != y.shape:
        raise LocusInputError(f"fit_calibration: logits {x.shape} and truth {y.shape} differ")
    scored = ~np.isnan(y) & np.isfinite(x)
    if scored.sum() < 10:
        raise LocusInputError(
            f"fit_calibration: {int(scored.sum())} scored cells; expected at least 10"
        )
    x, y = x[scored], np.clip(y[scored], 0.0, 1.0)

    def loss(params: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        z = params[0] * x + params[1]
        residual = sigmoid(z) - y  # d loss / d z
        return _log_loss(z, y), np.array([np.mean(residual * x), np.mean(residual)])

    found = minimize(
        loss, np.array([1.0, 0.0]), jac=True, method="L-BFGS-B",
        bounds=[(0.0, _MAX_SCALE), (None, None)],
    )  # fmt: skip
    scale, shift = (float(v) for v in found.x)
    before = _log_loss(x, y)
    after = _log_loss(scale * x + shift, y)
    if not after <= before:  # never worse than the identity on the cells it was fitted on
        scale, shift, after = 1.0, 0.0, before
    return Calibration(scale, shift, len(x), before, after)
