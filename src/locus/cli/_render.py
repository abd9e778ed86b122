"""Rendering for the command line: consoles, progress bars, JSON, number formats.

Nothing here computes a result; commands hand finished results to these helpers.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from locus._progress import Advance, ProgressFactory

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "fmt",
    "print_json",
    "progress_bars",
    "stderr_console",
    "stdout_console",
    "training_bar",
]


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def stdout_console() -> Console:
    from rich.console import Console

    return Console()


class _RichProgress:
    """A `ProgressFactory` drawing rich bars on stderr (silent with --quiet)."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled and not os.environ.get("LOCUS_NO_PROGRESS")

    def __call__(
        self, description: str, total: int | None = None
    ) -> AbstractContextManager[Advance]:
        return self._task(description, total)

    @contextmanager
    def _task(self, description: str, total: int | None) -> Iterator[Advance]:
        if not self._enabled:
            yield lambda n: None
            return
        console = stderr_console()
        if not console.is_terminal:  # a log file or CI: a line now and then, never a live bar
            with _log_lines(console, description, total) as advance:
                yield advance
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=stderr_console(),
            transient=False,
        ) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)


@contextmanager
def _log_lines(console: Any, description: str, total: int | None) -> Iterator[Advance]:
    """Progress as plain lines: at every tenth of `total`, at most one per 15 s, and at the end."""
    import time

    started = last = time.monotonic()
    done = 0

    def line(final: bool = False) -> None:
        elapsed = time.monotonic() - started
        if total:
            eta = (
                ""
                if final or done == 0
                else f", about {elapsed * (total - done) / done:.0f} s left"
            )
            console.print(f"{description}: {done}/{total} in {elapsed:.0f} s{eta}", highlight=False)
        else:
            console.print(f"{description}: {done} in {elapsed:.0f} s", highlight=False)

    def advance(n: int) -> None:
        nonlocal done, last
        before, done = done, done + n
        now = time.monotonic()
        step = max(1, (total or 10) // 10)
        if done // step > before // step and now - last >= 15:
            last = now
            line()

    yield advance
    line(final=True)


def progress_bars(quiet: bool = False) -> ProgressFactory:
    """Rich progress bars on stderr, or none with `quiet` (or $LOCUS_NO_PROGRESS)."""
    return _RichProgress(enabled=not quiet)


@contextmanager
def training_bar(enabled: bool) -> Iterator[Any]:
    """A rich bar fed by the trainer's progress(step, total, info) callback (or None)."""
    if not enabled or os.environ.get("LOCUS_NO_PROGRESS"):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("training"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        console=stderr_console(),
    ) as bar:
        task = bar.add_task("training", total=None, info="")

        def update(step: int, total: int, info: dict[str, float]) -> None:
            parts = [f"loss {info['loss']:.4f}"] if "loss" in info else []
            if "val_routing_accuracy" in info:
                parts.append(f"val hit@1 {info['val_routing_accuracy']:.4f}")
                parts.append(f"best {info.get('best_val_routing_accuracy', float('nan')):.4f}")
            if "val_log_loss" in info:
                parts.append(f"val log-loss {info['val_log_loss']:.4f}")
            if "checks_left" in info:  # early stopping: the total is only an upper bound
                parts.append(f"stops after {int(info['checks_left'])} checks without a gain")
            bar.update(task, completed=step, total=total, info="  ".join(parts))

        yield update


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
    return (
        f"{head} (validation hit@1: guarded {val.get('hit@1', float('nan')):.4f}, unguarded "
        f"{val.get('unguarded_hit@1', float('nan')):.4f}, {guard.default} alone "
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
