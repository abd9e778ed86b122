"""`HashingEncoder`: a deterministic bag-of-words encoder for unit tests (no model, no torch).

Texts that share words get similar vectors, which is all planted-data tests need. Not for real use:
it knows nothing of meaning.

    >>> encoder = HashingEncoder(dim=16)
    >>> encoder.encode("two words").shape, encoder.encode(["a", "b c"]).shape
    ((16,), (2, 16))
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from locus.data.query_identity import normalise_text
from locus.errors import LocusInputError

__all__ = ["HashingEncoder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEncoder:
    """Signed feature hashing of lower-cased words into `dim` buckets, L2-normalised."""

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise LocusInputError(f"hashing encoder dim must be >= 2, found {dim}")
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: str | Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        del batch_size
        single = isinstance(texts, str)
        items = [texts] if isinstance(texts, str) else list(texts)
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        for row, text in enumerate(items):
            for word in _WORD.findall(normalise_text(text).lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self._dim] += 1.0 if (value >> 63) & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out[0] if single else out
