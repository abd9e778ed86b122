"""Encoding on a Ray cluster: one encoder per worker, chunks of texts handed out by Ray.

`RayChunkEncoder(spec, expected_name, session)` is a `ChunkEncoder` for `encode_missing`: it
starts one actor per CPU (per GPU where the cluster has GPUs: the encoder then runs on CUDA),
each loading the text encoder `spec` once, and hands chunks to whichever actor is free through
Ray's `ActorPool`; the vectors come back in the order of the chunks, so the caller writes them
to the store as they arrive (an interrupted run keeps what was written and resumes).

Every actor checks that its encoder is the one asked for (same `name`, the vector cache's key):
a worker with another version of an encoder fails the run instead of caching other vectors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.errors import LocusInputError
from locus.ray_cluster import RaySession, import_ray

__all__ = ["RayChunkEncoder"]


class _EncoderWorker:
    """One Ray actor: a text encoder loaded once, encoding the chunks it is given."""

    def __init__(self, spec: str, expected_name: str, device: str, batch_size: int) -> None:
        from locus.text import get_text_encoder

        self._encoder = get_text_encoder(spec, device=device)
        if self._encoder.name != expected_name:
            raise LocusInputError(
                f"text encoder {spec!r} on a Ray worker is {self._encoder.name!r}, not "
                f"{expected_name!r}; install the same locus and models on every worker"
            )
        self._batch_size = batch_size

    def encode(self, texts: list[str]) -> NDArray[np.float32]:
        return np.asarray(
            self._encoder.encode(texts, batch_size=self._batch_size), dtype=np.float32
        )


def _plain(error: Exception) -> Exception:
    """A worker's `LocusInputError` as itself (its message, not Ray's traceback); anything
    else as it came."""
    text = str(error)
    marker = "LocusInputError: "
    if marker in text:
        return LocusInputError(text.rsplit(marker, 1)[1].strip().splitlines()[0])
    return error


class RayChunkEncoder:
    """Chunks of texts -> vectors on the session's cluster (see the module's docstring).

    Args:
        spec: what `get_text_encoder` is given on each worker (a short name or the encoder's
            own name).
        expected_name: the encoder's `name` in this process.
        session: an open `ray_session`.
        workers: actors to start (default: one per GPU, else one per CPU).
        batch_size: the encoder's batch size inside a chunk.
    """

    def __init__(
        self,
        spec: str,
        expected_name: str,
        session: RaySession,
        *,
        workers: int | None = None,
        batch_size: int = 16,
    ) -> None:
        if workers is not None and workers < 1:
            raise LocusInputError(f"Ray encoding workers must be >= 1; got {workers}")
        self.spec = spec
        self.expected_name = expected_name
        self.gpu = session.gpus > 0
        self.workers = workers or max(session.gpus if self.gpu else session.cpus, 1)
        self.batch_size = batch_size

    def __call__(self, chunks: Iterable[list[str]]) -> Iterator[NDArray[np.float32]]:
        ray = import_ray()
        from ray.util import ActorPool

        remote: Any = ray.remote(num_cpus=1, num_gpus=1 if self.gpu else 0)(_EncoderWorker)
        device = "cuda" if self.gpu else "cpu"
        actors = [
            remote.remote(self.spec, self.expected_name, device, self.batch_size)
            for _ in range(self.workers)
        ]
        pool: Any = ActorPool(actors)
        try:
            yield from pool.map(lambda actor, texts: actor.encode.remote(texts), chunks)
        except ray.exceptions.RayError as error:
            raise _plain(error) from None
        finally:
            for actor in actors:
                ray.kill(actor)
