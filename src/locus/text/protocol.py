"""The `TextEncoder` protocol: what turns query text into query vectors.

An encoder has a `name` (the key of the vector cache: two encoders with the same name must give the
same vectors), a `dim`, and `encode`: one text -> (dim,), a list of texts -> (n, dim), float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, overload, runtime_checkable

import numpy as np

from locus.errors import LocusArtifactError, LocusInputError

__all__ = ["TextEncoder", "encode_texts"]


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


def encode_texts(
    encoder: TextEncoder | None, texts: Sequence[str], trained_with: str
) -> np.ndarray:
    """(n, dim) float32 vectors of non-empty `texts` by `encoder`, which must be the encoder a
    model was trained with (`trained_with`).

    Raises:
        LocusInputError: an empty text, or no encoder.
        LocusArtifactError: an encoder of another name.
    """
    empty = [i for i, text in enumerate(texts) if not text.strip()]
    if empty:
        raise LocusInputError(f"query {empty[0]} is empty; expected query text to route or score")
    if encoder is None:
        raise LocusInputError(
            "texts need a text encoder: construct Locus(text_encoder=...) or pass query vectors"
        )
    if encoder.name != trained_with:
        raise LocusArtifactError(
            f"text encoder {encoder.name!r} differs from the one this Locus was trained with "
            f"({trained_with!r}); use that encoder"
        )
    return np.asarray(encoder.encode(list(texts)), dtype=np.float32)
