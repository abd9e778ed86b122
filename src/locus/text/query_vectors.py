"""`QueryVectors`: where a routed text's vector comes from, as one injected service.

A text already in the workspace (normalised exactly as at import, `locus.data.query_identity`)
has its vector in the store's cache; a text seen recently (stored or new) has it in a bounded
in-memory cache;
any other text is encoded by the text encoder (loaded on first need, so routing known texts
never loads it) and remembered. Routers never see texts: the workspace router asks this
service for vectors, then routes them.

    >>> vectors = QueryVectors("hashing-64", lookup=None)                 # doctest: +SKIP
    >>> vectors(["What is 2+2?"]).shape  # doctest: +SKIP
    (1, 64)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from locus.data.query_identity import text_hash
from locus.errors import LocusInputError
from locus.text.protocol import TextEncoder

__all__ = ["Lookup", "QueryVectors"]

# (encoder name, text hashes) -> {hash: vector} for those the store has
Lookup = Callable[[str, list[str]], Mapping[str, NDArray[np.float32]]]


class QueryVectors:
    """Query vectors of texts: the store's cache, then memory, then the encoder.

    Args:
        encoder_name: the text encoder the vectors must come from (the artifact's).
        lookup: the store's vector cache (`Store.find_vectors`); None: memory and encoder only.
        text_encoder: the encoder for new texts (default: `encoder_name` by
            `locus.text.get_text_encoder`, loaded on first need).
        cache_size: new texts whose vectors are kept in memory.

    Attributes:
        encoded, cache_hits: texts encoded, texts served from the store or the memory cache.
    """

    def __init__(
        self,
        encoder_name: str,
        lookup: Lookup | None,
        *,
        text_encoder: TextEncoder | None = None,
        cache_size: int = 10_000,
    ) -> None:
        self.encoder_name = encoder_name
        self._lookup = lookup
        self._text_encoder = text_encoder
        self._cache: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._cache_size = cache_size
        self.encoded = 0
        self.cache_hits = 0

    @property
    def text_encoder(self) -> TextEncoder:
        """The text encoder, loaded on first use.

        Raises:
            LocusInputError: an encoder given with another name than `encoder_name`.
        """
        if self._text_encoder is None:
            from locus.text import get_text_encoder

            self._text_encoder = get_text_encoder(self.encoder_name)
        if self._text_encoder.name != self.encoder_name:
            raise LocusInputError(
                f"text encoder {self._text_encoder.name!r} differs from the artifact's "
                f"({self.encoder_name!r}); use that encoder"
            )
        return self._text_encoder

    def __call__(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Vectors (n, dq) of `texts`, in order; a text repeated in one call is encoded once.

        Raises:
            LocusInputError: an empty text.
        """
        empty = [i for i, text in enumerate(texts) if not str(text).strip()]
        if empty:
            raise LocusInputError(f"query {empty[0]} is empty; expected query text to route")
        hashes = [text_hash(str(text)) for text in texts]
        found: dict[str, NDArray[np.float32]] = {}
        for h in hashes:
            if h in self._cache:
                self._cache.move_to_end(h)
                found[h] = self._cache[h]
        wanted = [h for h in dict.fromkeys(hashes) if h not in found]
        if wanted and self._lookup is not None:
            stored = self._lookup(self.encoder_name, wanted)
            found.update(stored)
            for key, vector in stored.items():  # a text asked again skips the store
                self._remember(key, vector)
        self.cache_hits += sum(1 for h in hashes if h in found)
        first_of: dict[str, int] = {}
        for i, h in enumerate(hashes):
            if h not in found:
                first_of.setdefault(h, i)
        if first_of:
            fresh = np.asarray(
                self.text_encoder.encode([str(texts[i]) for i in first_of.values()]),
                dtype=np.float32,
            )
            self.encoded += len(first_of)
            for row, h in enumerate(first_of):
                found[h] = fresh[row]
                self._remember(h, fresh[row])
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def _remember(self, key: str, vector: NDArray[np.float32]) -> None:
        self._cache[key] = vector
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
