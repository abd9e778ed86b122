"""Query vectors, encoded once: the store caches them by (encoder name, sha256 of the text).

`encode_missing` encodes only the texts that have no vector yet, in batches, each batch committed
on its own, so an interrupted run keeps what it finished and the next run resumes. The batches are
encoded here, or by any `ChunkEncoder` given (`text/ray_encode.py`: on a Ray cluster's workers),
whose vectors come back in order and are written here as they arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from locus._progress import ProgressFactory, no_progress
from locus.store import Store
from locus.text.protocol import TextEncoder

__all__ = ["ChunkEncoder", "EncodeReport", "encode_missing"]

# chunks of texts -> their vectors, chunk by chunk, in the order given
ChunkEncoder = Callable[[Iterable[list[str]]], Iterator[NDArray[np.float32]]]


@dataclass(frozen=True)
class EncodeReport:
    encoder: str
    dim: int
    encoded: int
    cached: int
    seconds: float

    @property
    def queries_per_second(self) -> float:
        return self.encoded / self.seconds if self.seconds > 0 else 0.0


def encode_missing(
    store: Store,
    encoder: TextEncoder,
    *,
    chunk_size: int = 512,
    batch_size: int = 16,
    progress: ProgressFactory = no_progress,
    chunk_encoder: ChunkEncoder | None = None,
) -> EncodeReport:
    """Encode every query text of the store that has no vector for `encoder`, `chunk_size`
    texts at a time, by `encoder` itself or by `chunk_encoder` (which must give `encoder`'s
    vectors: the store keeps them under its name).

    Records the encoder as the workspace's text encoder (`store.text_encoder`).
    """
    import time

    started = time.perf_counter()
    missing = store.texts_without_vectors(encoder.name)
    cached = store.vector_count(encoder.name)
    dim = 0
    if missing:
        dim = encoder.dim
        with progress(
            f"encoding {len(missing):,} queries ({encoder.name})", total=len(missing)
        ) as advance:
            chunks = [missing[s : s + chunk_size] for s in range(0, len(missing), chunk_size)]
            texts = ([text for _, text in chunk] for chunk in chunks)
            encoded: Iterable[NDArray[np.float32]]
            if chunk_encoder is None:
                encoded = (encoder.encode(batch, batch_size=batch_size) for batch in texts)
            else:
                encoded = chunk_encoder(texts)
            for chunk, vectors in zip(chunks, encoded, strict=True):
                store.put_vectors(encoder.name, [h for h, _ in chunk], vectors)
                advance(len(chunk))
    elif cached:
        dim = store.vector_dim(encoder.name)
    store.set_meta("text_encoder", encoder.name)
    return EncodeReport(
        encoder=encoder.name,
        dim=dim,
        encoded=len(missing),
        cached=cached,
        seconds=time.perf_counter() - started,
    )
