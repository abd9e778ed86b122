"""Rendering for the command line: JSON, number formats, one-line summaries; the consoles and
progress bars of `locus.cli._terminal`, re-exported.

Nothing here computes a result; commands hand finished results to these helpers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from locus.cli._terminal import (
    DEFAULT_PROGRESS_SECONDS,
    PROGRESS_SECONDS_ENV,
    FitProgress,
    duration,
    progress_bars,
    progress_seconds,
    stderr_console,
    stdout_console,
    training_bar,
    training_line,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_PROGRESS_SECONDS",
    "PROGRESS_SECONDS_ENV",
    "FitProgress",
    "duration",
    "fmt",
    "note",
    "print_json",
    "progress_bars",
    "progress_seconds",
    "stderr_console",
    "stdout_console",
    "training_bar",
    "training_line",
]


def note(message: str, *, quiet: bool = False) -> None:
    """`note: MESSAGE` on stderr; nothing with `quiet` (-q, --json)."""
    if not quiet:
        stderr_console().print(f"note: {message}", markup=False, highlight=False)


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "as_dict"):
        return value.as_dict()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: '-' for missing, fixed digits for floats, thousands separators for ints."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def guard_line(guard: Any) -> str:
    """One line on a routing guard (`locus.routing.guard.Guard`) and what it did on the
    validation queries it was chosen on."""
    val = guard.validation
    if val.get("stood_down"):
        se = val.get("unguarded_gain_se", float("nan"))
        return (
            f"routing guard: stood down; on this sparse evidence the validation queries cannot "
            f"tell routing from {guard.default} alone (off-policy gain "
            f"{val.get('hit@1', float('nan')) - val.get('default_hit@1', float('nan')):+.3f} "
            f"± {se:.3f}), so P(correct) routes: moves {val.get('moved', float('nan')):.0%} "
            "of queries"
        )
    if guard.always_default:
        head = (
            f"routing guard: every query goes to {guard.default}; on validation, routing did "
            "not beat it by a standard error"
        )
    else:
        head = (
            f"routing guard: {guard.default} unless another LLM's P(correct) is higher by "
            f"{guard.margin:.3f}; moves {val.get('moved', float('nan')):.0%} of queries"
        )
    estimated = ", off-policy estimates" if val.get("estimate") else ""
    return (
        f"{head} (validation hit@1{estimated}: guarded {val.get('hit@1', float('nan')):.4f}, "
        f"unguarded {val.get('unguarded_hit@1', float('nan')):.4f}, {guard.default} alone "
        f"{val.get('default_hit@1', float('nan')):.4f})"
    )


def calibration_line(calibration: Any) -> str:
    """One line on a fit's calibration of P(correct) (`locus.calibration.Calibration`)."""
    parts = f"per-query part x{calibration.scale:.2f}"
    if calibration.quality_scale is not None:
        parts += f", each LLM's quality x{calibration.quality_scale:.2f}"
    if calibration.evidence_scale is not None:
        parts += f", its evidence's quality x{calibration.evidence_scale:.2f}"
    return (
        f"calibration of P(correct) on {calibration.cells:,} validation cells: {parts}, shift "
        f"{calibration.shift:+.2f} (log-loss {calibration.log_loss_before:.4f} -> "
        f"{calibration.log_loss_after:.4f})"
    )
