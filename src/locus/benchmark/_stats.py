"""Small statistics the suites share: mean ± sd over seeds, log-loss over observed cells."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np


def mean_sd(values: Sequence[float | None]) -> dict[str, float]:
    """{"mean", "sd"} of the values that are not NaN or None (sd 0 for one, NaN for none)."""
    clean = [v for v in values if v is not None and v == v]
    if not clean:
        return {"mean": float("nan"), "sd": float("nan")}
    return {
        "mean": statistics.fmean(clean),
        "sd": statistics.stdev(clean) if len(clean) > 1 else 0.0,
    }


def log_loss(proba: np.ndarray, truth: np.ndarray) -> float:
    """Mean binary cross-entropy over the observed cells of `truth` (graded scores as soft
    targets), probabilities clipped to [1e-6, 1 - 1e-6]."""
    observed = ~np.isnan(truth)
    p = np.clip(np.asarray(proba, dtype=np.float64)[observed], 1e-6, 1 - 1e-6)
    y = truth[observed].astype(np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
