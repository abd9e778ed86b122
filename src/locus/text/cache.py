"""Query vectors, encoded once: the store caches them by (encoder name, sha256 of the text).

`encode_missing` encodes only the texts that have no vector yet, in batches, each batch committed
on its own, so an interrupted run keeps what it finished and the next run resumes.
"""

from __future__ import annotations

from dataclasses import dataclass

from locus._progress import ProgressFactory, no_progress
from locus.store import Store
from locus.text.protocol import TextEncoder

__all__ = ["EncodeReport", "encode_missing"]


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
) -> EncodeReport:
    """Encode every query text of the store that has no vector for `encoder`.

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
            for start in range(0, len(missing), chunk_size):
                chunk = missing[start : start + chunk_size]
                vectors = encoder.encode([text for _, text in chunk], batch_size=batch_size)
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
