"""What a command draws on the terminal while it runs: rich consoles that never cut a line to a
guessed width without a terminal, progress bars (plain timed lines in a log), the training bar of
a fit. `locus.cli._render` re-exports them beside its formats.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from locus._progress import Advance, ProgressFactory
from locus.errors import LocusInputError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "DEFAULT_PROGRESS_SECONDS",
    "PROGRESS_SECONDS_ENV",
    "FitProgress",
    "duration",
    "progress_bars",
    "progress_seconds",
    "rule",
    "stderr_console",
    "stdout_console",
    "training_bar",
    "training_line",
]

PROGRESS_SECONDS_ENV = "LOCUS_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 30.0  # without a terminal: a progress line at least this often
RULE_WIDTH = 100  # a section rule's columns without a terminal
_UNBOUNDED_WIDTH = 10_000  # a console without a terminal has no width to fit lines to


def _console(stderr: bool) -> Console:
    """A rich console; without a terminal (a pipe, a log file, CI), one that never wraps or
    cuts a line to a guessed width (rich's default is 80 columns; `$COLUMNS` still rules)."""
    from rich.console import Console

    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    width = None if os.environ.get("COLUMNS") else _UNBOUNDED_WIDTH
    return Console(stderr=stderr, soft_wrap=True, width=width)


def rule(console: Console, title: str) -> None:
    """A section rule titled `title`: the terminal's width on a terminal, `RULE_WIDTH` columns
    without one (a console writing to a log has no width, and a rule would fill 10,000)."""
    from rich.rule import Rule

    width = console.width if console.is_terminal else min(console.width, RULE_WIDTH)
    console.print(Rule(title), width=width)


def stderr_console() -> Console:
    return _console(stderr=True)


def stdout_console() -> Console:
    return _console(stderr=False)


def progress_seconds(interval: float | None = None) -> float:
    """Seconds between progress lines without a terminal: `interval`, else
    `$LOCUS_PROGRESS_SECONDS`, else `DEFAULT_PROGRESS_SECONDS`.

    Raises:
        LocusInputError: the variable is not a positive number.
    """
    if interval is not None:
        return interval
    text = os.environ.get(PROGRESS_SECONDS_ENV)
    if not text:
        return DEFAULT_PROGRESS_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise LocusInputError(
            f"${PROGRESS_SECONDS_ENV}={text!r}: expected a positive number of seconds between "
            f"progress lines, e.g. 30; unset it for the default ({DEFAULT_PROGRESS_SECONDS:g})"
        )
    return value


def duration(seconds: float) -> str:
    """A duration to read at a glance: '42 s', '4 min 05 s', '1 h 02 min'."""
    whole = max(0, round(seconds))
    if whole < 90:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class _PlainLines:
    """One task's progress as plain lines (no terminal to draw a bar on): one when it starts,
    then one every `interval` seconds or every tenth of `total`, whichever comes first (a
    thread keeps the lines coming while one step takes longer), one at the end. Each line is
    flushed and whole; `clock` is injected so that tests can run it on a planted clock."""

    def __init__(
        self,
        stream: TextIO,
        description: str,
        total: int | None,
        *,
        interval: float,
        clock: Callable[[], float],
        unit: str = "",
        eta_bound: bool = False,
    ) -> None:
        self._stream, self._description, self._total = stream, description, total
        self._interval, self._clock, self._unit = interval, clock, unit
        self._eta_bound = eta_bound  # the total is an upper bound (early stopping)
        self._done, self._detail = 0, ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = self._last = clock()

    @contextmanager
    def running(self) -> Iterator[Advance]:
        """Start, yield `advance`, and finish: as stopped where the body raised."""
        try:
            self.start()
            yield self.advance
        except BaseException:
            self.finish(stopped=True)
            raise
        self.finish()

    def start(self) -> None:
        self._started = self._last = self._clock()
        self._write(f"{self._description} ...")
        self._thread = threading.Thread(target=self._heartbeat, daemon=True)
        self._thread.start()

    def update(self, done: int, total: int | None = None, detail: str = "") -> None:
        """`done` of `total` (default: as given before), `detail` added to the line."""
        with self._lock:
            before, self._done, self._detail = self._done, done, detail
            self._total = total if total is not None else self._total
            now = self._clock()
            tenth = max(1, (self._total or 0) // 10)
            crossed = bool(self._total) and done // tenth > before // tenth
            over = bool(self._total) and done >= (self._total or 0)  # the last line follows
            if (crossed or now - self._last >= self._interval) and not over:
                self._line(now)

    def advance(self, n: int) -> None:
        self.update(self._done + n)

    def finish(self, detail: str | None = None, *, stopped: bool = False) -> None:
        """The last line; `stopped`: the task did not end, an error or Ctrl-C ended it."""
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join()
        with self._lock:
            if detail is not None:
                self._detail = detail
            self._line(self._clock(), final="stopped" if stopped else "done")

    def _heartbeat(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                now = self._clock()
                if now - self._last >= self._interval and not self._stop.is_set():
                    self._line(now)

    def _line(self, now: float, final: str | None = None) -> None:
        """One line; `final`: "done" or "stopped" for the last one."""
        self._last = now
        elapsed, done, total = now - self._started, self._done, self._total
        detail = f"; {self._detail}" if self._detail else ""
        if not total and not done:  # a stage that counts nothing
            state = {None: "running for", "done": "done in", "stopped": "stopped after"}[final]
            self._write(f"{self._description}: {state} {duration(elapsed)}{detail}")
            return
        line = f"{self._description}: {self._unit}{done:,}"
        if total:
            line += f"/{total:,}" if final else f"/{total:,} ({done / total:.0%})"
        line += f" in {duration(elapsed)}"
        if total and not final and 0 < done < total:
            bound = " at most" if self._eta_bound else ""
            line += f", about {duration(elapsed * (total - done) / done)} left{bound}"
        self._write(line + (", stopped" if final == "stopped" else "") + detail)

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


class _RichProgress:
    """A `ProgressFactory` drawing rich bars on stderr in a terminal, plain lines otherwise
    (silent with --quiet)."""

    def __init__(self, enabled: bool, interval: float | None = None) -> None:
        self._enabled = enabled and not os.environ.get("LOCUS_NO_PROGRESS")
        self._interval = progress_seconds(interval) if self._enabled else DEFAULT_PROGRESS_SECONDS

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
            with _PlainLines(
                sys.stderr, description, total, interval=self._interval, clock=time.monotonic
            ).running() as advance:
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
            console=console,
            transient=False,
        ) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)


def progress_bars(quiet: bool = False, *, interval: float | None = None) -> ProgressFactory:
    """Progress on stderr: rich bars in a terminal, else plain lines every `interval` seconds
    (default `progress_seconds()`) or tenth of the work; none with `quiet` (or
    $LOCUS_NO_PROGRESS)."""
    return _RichProgress(enabled=not quiet, interval=interval)


def training_line(info: dict[str, float]) -> str:
    """The trainer's progress info (`locus.nn.training.ProgressCallback`) as words."""
    parts = [f"loss {info['loss']:.4f}"] if "loss" in info else []
    if "val_routing_accuracy" in info:
        parts.append(f"val hit@1 {info['val_routing_accuracy']:.4f}")
        parts.append(f"best {info.get('best_val_routing_accuracy', float('nan')):.4f}")
    if "val_log_loss" in info:
        parts.append(f"val log-loss {info['val_log_loss']:.4f}")
    if "checks_left" in info:  # early stopping: the total is only an upper bound
        parts.append(f"stops after {int(info['checks_left'])} more checks without a gain")
    return ", ".join(parts)


class FitProgress:
    """What `locus fit` shows while it runs: its stages (`stage`, a `ProgressFactory`) and
    the trainer's steps (call it: a `locus.nn.training.ProgressCallback`). In a terminal, one
    rich display; otherwise plain lines (`_PlainLines`), every `interval` seconds or tenth
    of the steps, with the elapsed time and an estimate of the time left."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval, self._clock = interval, clock
        self._bar: Any = None  # rich.progress.Progress in a terminal
        self._task: Any = None
        self._lines: _PlainLines | None = None
        self._info: dict[str, float] = {}
        self._step = self._total = 0

    def __call__(self, step: int, total: int, info: dict[str, float]) -> None:
        self._step, self._total, self._info = step, total, dict(info)
        detail = training_line(info)
        if self._bar is not None:
            if self._task is None:
                self._task = self._bar.add_task("training", total=total, info="")
            self._bar.update(self._task, completed=step, total=total, info=detail)
            return
        if self._lines is None:
            self._lines = _PlainLines(
                sys.stderr, "training", total, interval=self._interval, clock=self._clock,
                unit="step ", eta_bound=True,
            )  # fmt: skip
            self._lines.start()
        self._lines.update(step, total, detail)

    @contextmanager
    def stage(self, description: str, total: int | None = None) -> Iterator[Advance]:
        """One stage of the fit other than training (reading, stacking, saving)."""
        self._end_training()
        if self._bar is not None:
            task = self._bar.add_task(description, total=total, info="")
            yield lambda n: self._bar.advance(task, n)
            self._bar.update(task, total=1, completed=1)
            return
        with _PlainLines(
            sys.stderr, description, total, interval=self._interval, clock=self._clock
        ).running() as advance:
            yield advance

    def _end_training(self, failed: bool = False) -> None:
        """The training's last line, once it is over (a stage begins, or the fit ends or
        fails)."""
        if self._lines is None:
            return
        lines, self._lines = self._lines, None
        detail = training_line({k: v for k, v in self._info.items() if k != "checks_left"})
        if not failed and self._step < self._total:
            detail = f"stopped early (no validation gain); {detail}"
        lines.finish(detail, stopped=failed)

    @contextmanager
    def _display(self, terminal: bool) -> Iterator[FitProgress]:
        if not terminal:
            try:
                yield self
            except BaseException:
                self._end_training(failed=True)
                raise
            self._end_training()
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
            console=stderr_console(),
        ) as bar:
            self._bar = bar
            yield self


@contextmanager
def training_bar(enabled: bool, *, interval: float | None = None) -> Iterator[FitProgress | None]:
    """`locus fit`'s progress (`FitProgress`) for a `with` block, None when not `enabled` (or
    $LOCUS_NO_PROGRESS); plain lines every `interval` seconds (default `progress_seconds()`)
    where stderr is not a terminal."""
    if not enabled or os.environ.get("LOCUS_NO_PROGRESS"):
        yield None
        return
    progress = FitProgress(progress_seconds(interval))
    with progress._display(stderr_console().is_terminal) as shown:
        yield shown
