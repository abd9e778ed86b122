"""Progress reporting, injected into long-running library calls.

Library code never draws anything: it takes a `ProgressFactory` and reports into it. The CLI passes
one that draws rich progress bars; tests and scripts pass nothing (`no_progress`) or a recorder.

    def work(items, progress: ProgressFactory = no_progress):
        with progress("encoding queries", total=len(items)) as advance:
            for item in items:
                ...
                advance(1)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

__all__ = ["Advance", "ProgressFactory", "no_progress"]

Advance = Callable[[int], None]


class ProgressFactory(Protocol):
    """Opens one progress task; the context yields `advance(n)`."""

    def __call__(
        self, description: str, total: int | None = None
    ) -> AbstractContextManager[Advance]: ...


@contextmanager
def _silent(description: str, total: int | None = None) -> Iterator[Advance]:
    del description, total
    yield lambda n: None


no_progress: ProgressFactory = _silent
