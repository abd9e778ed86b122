"""The `TextEncoder` protocol: what turns query text into query vectors.

An encoder has a `name` (the key of the vector cache: two encoders with the same name must give the
same vectors), a `dim`, and `encode`: one text -> (dim,), a list of texts -> (n, dim), float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, overload, runtime_checkable

import numpy as np

__all__ = ["TextEncoder"]


@runtime_checkable
class TextEncoder(Protocol):
    """Turns texts into fixed-size float32 vectors."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @overload
    def encode(self, texts: str, *, batch_size: int = ...) -> np.ndarray: ...

    @overload
    def encode(self, texts: Sequence[str], *, batch_size: int = ...) -> np.ndarray: ...

    def encode(self, texts: str | Sequence[str], *, batch_size: int = 64) -> np.ndarray: ...
