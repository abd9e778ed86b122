"""Small statistics the suites share: mean ± sd over seeds, log-loss over observed cells."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from locus.metrics import log_loss

__all__ = ["log_loss", "mean_sd"]


def mean_sd(values: Sequence[float | None]) -> dict[str, float]:
    """{"mean", "sd"} of the values that are not NaN or None (sd 0 for one, NaN for none)."""
    clean = [v for v in values if v is not None and v == v]
    if not clean:
        return {"mean": float("nan"), "sd": float("nan")}
    return {
        "mean": statistics.fmean(clean),
        "sd": statistics.stdev(clean) if len(clean) > 1 else 0.0,
    }
