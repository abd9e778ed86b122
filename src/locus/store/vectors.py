"""Query vectors: text-encoder outputs cached per (encoder, text hash), float32 blobs.

A vector belongs to a text, not to a source: every query with that text, from any source, uses it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy import func, select

from locus.errors import LocusNotFoundError
from locus.store import schema
from locus.store._core import IN_CHUNK, StoreCore, upsert

__all__ = ["StoreVectors"]


class StoreVectors(StoreCore):
    """`texts_without_vectors`, `put_vectors`, `find_vectors`, `get_vectors`, `vector_dim`,
    `vector_count`."""

    def texts_without_vectors(self, encoder: str) -> list[tuple[str, str]]:
        """(text_hash, text) of every distinct query text with no vector for `encoder`, sorted
        by hash."""
        q, v = schema.queries.c, schema.query_vectors.c
        have = select(v.text_hash).where(v.encoder == encoder)
        # one `queries` row per text: its text hash is its identity
        stmt = (
            select(q.text_hash, q.query_text)
            .where(q.text_hash != "", q.text_hash.not_in(have))
            .order_by(q.text_hash)
        )
        with self._read() as conn:
            return [(h, t) for h, t in conn.execute(stmt).all()]

    def put_vectors(self, encoder: str, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store query vectors (n, dim) float32 for `encoder`, one transaction; vectors already
        stored for a hash are kept.

        Raises:
            ValueError: `vectors` is not (len(hashes), dim).
        """
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.ndim != 2 or len(vectors) != len(hashes):
            raise ValueError(
                f"expected vectors of shape ({len(hashes)}, dim), found {vectors.shape}"
            )
        dim = int(vectors.shape[1])
        rows = [
            {"encoder": encoder, "text_hash": h, "dim": dim, "vector": vectors[i].tobytes()}
            for i, h in enumerate(hashes)
        ]
        with self._write(data=False) as conn:
            stmt = upsert(conn, schema.query_vectors).on_conflict_do_nothing(
                index_elements=["encoder", "text_hash"]
            )
            conn.execute(stmt, rows)

    def find_vectors(self, encoder: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """text_hash -> query vector (dim,) float32 of those of `hashes` stored for `encoder`;
        hashes without a vector are left out (no error)."""
        v = schema.query_vectors.c
        found: dict[str, np.ndarray] = {}
        wanted = list(dict.fromkeys(hashes))
        with self._read() as conn:
            for start in range(0, len(wanted), IN_CHUNK):
                part = wanted[start : start + IN_CHUNK]
                for h, blob in conn.execute(
                    select(v.text_hash, v.vector).where(v.encoder == encoder, v.text_hash.in_(part))
                ):
                    found[h] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return found

    def get_vectors(self, encoder: str, hashes: Sequence[str]) -> np.ndarray:
        """Query vectors (len(hashes), dim) float32 in the order of `hashes`.

        Raises:
            LocusNotFoundError: some text has no vector for this encoder (run `locus encode`).
        """
        found = self.find_vectors(encoder, hashes)
        missing = [h for h in dict.fromkeys(hashes) if h not in found]
        if missing:
            raise LocusNotFoundError(
                f"{len(missing)} query text(s) have no vector for text encoder {encoder!r}; "
                "run `locus encode` first"
            )
        if not hashes:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[h] for h in hashes]).astype(np.float32)

    def vector_dim(self, encoder: str) -> int:
        """Dimension of the stored vectors of `encoder` (0 if none)."""
        v = schema.query_vectors.c
        with self._read() as conn:
            dim = conn.execute(select(v.dim).where(v.encoder == encoder).limit(1)).scalar()
        return int(dim or 0)

    def vector_count(self, encoder: str) -> int:
        """How many query vectors are stored for `encoder`."""
        v = schema.query_vectors.c
        with self._read() as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(schema.query_vectors)
                    .where(v.encoder == encoder)
                ).scalar_one()
            )
