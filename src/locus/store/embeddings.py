"""LLM embeddings: the (n_llms, dim) vectors a trained artifact computed, stored per artifact."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
from sqlalchemy import Connection, select

from locus.errors import LocusNotFoundError
from locus.store import schema
from locus.store._core import StoreCore, llm_keys, now, upsert

__all__ = ["StoreEmbeddings"]


class StoreEmbeddings(StoreCore):
    """`replace_embeddings` and `embeddings`."""

    def replace_embeddings(
        self,
        artifact: str,
        llm_ids: Sequence[str],
        vectors: np.ndarray,
        evidence_counts: Sequence[int] | np.ndarray,
        *,
        only: bool = False,
        register: bool = False,
        evidence_means: Sequence[float | None] | None = None,
    ) -> None:
        """Store LLM embeddings (n, dim) of `artifact` in one transaction.

        `evidence_means` (one per LLM, None where unknown) are the LLMs' mean scores on the
        evidence each embedding was computed from (the calibration's evidence quality), kept
        in the meta table beside the rows; an LLM written without one loses its old one.

        With `only=False` the artifact's stored set becomes exactly these LLMs (after a fit);
        with `only=True` just these LLMs are inserted or updated (onboarding). With
        `register=True` an LLM the store does not know yet is added to its LLMs (onboarded
        from evidence given as arrays, with no scores imported).

        Raises:
            ValueError: `vectors` is not (len(llm_ids), dim) or the counts do not match.
            LocusNotFoundError: an LLM is unknown to the store and `register` is False.
        """
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.ndim != 2 or not len(vectors) == len(llm_ids) == len(evidence_counts):
            raise ValueError(
                f"expected ({len(llm_ids)}, dim) vectors and {len(llm_ids)} counts, found "
                f"{vectors.shape} and {len(evidence_counts)}"
            )
        stamp = now()
        e = schema.llm_embeddings.c
        with self._write(data=False) as conn:
            keys = llm_keys(conn, list(llm_ids))
            missing = [llm for llm in llm_ids if llm not in keys]
            if missing and register:
                conn.execute(
                    upsert(conn, schema.llms).on_conflict_do_nothing(index_elements=["llm_id"]),
                    [{"llm_id": llm, "created_at": stamp} for llm in missing],
                )
                keys = llm_keys(conn, list(llm_ids))
                missing = []
            if missing:
                raise LocusNotFoundError(f"unknown LLM {missing[0]!r}; import its scores first")
            if not only:
                conn.execute(schema.llm_embeddings.delete().where(e.artifact == artifact))
            rows = [
                {
                    "artifact": artifact,
                    "llm": keys[llm],
                    "evidence_count": int(count),
                    "dim": int(vectors.shape[1]),
                    "vector": vectors[i].tobytes(),
                    "computed_at": stamp,
                }
                for i, (llm, count) in enumerate(zip(llm_ids, evidence_counts, strict=True))
            ]
            stmt = upsert(conn, schema.llm_embeddings)
            stmt = stmt.on_conflict_do_update(
                index_elements=["artifact", "llm"],
                set_={
                    "evidence_count": stmt.excluded.evidence_count,
                    "dim": stmt.excluded.dim,
                    "vector": stmt.excluded.vector,
                    "computed_at": stmt.excluded.computed_at,
                },
            )
            if rows:
                conn.execute(stmt, rows)
            _write_means(conn, artifact, llm_ids, evidence_counts, evidence_means, only)
            _bump_version(conn, artifact)

    def evidence_means(self, artifact: str) -> dict[str, tuple[float, int]]:
        """{llm_id: (mean score, count)} of the evidence `artifact`'s stored embeddings were
        computed from, where it was recorded."""
        value = self.get_meta(_means_key(artifact))
        return (
            {}
            if value is None
            else {k: (float(m), int(n)) for k, (m, n) in json.loads(value).items()}
        )

    def embeddings_version(self, artifact: str) -> int:
        """A counter raised by every write of `artifact`'s embeddings: a process that routes
        on them re-reads the pool when it changed (0: never written)."""
        value = self.get_meta(_version_key(artifact))
        return 0 if value is None else int(value)

    def embeddings(self, artifact: str) -> tuple[list[str], np.ndarray, list[int]]:
        """(llm_ids, embeddings (n, dim) float32, evidence counts) stored for `artifact`, sorted
        by llm_id; empty lists and a (0, 0) array when there are none."""
        e, m = schema.llm_embeddings.c, schema.llms.c
        stmt = (
            select(m.llm_id, e.evidence_count, e.vector)
            .join(schema.llms, m.id == e.llm)
            .where(e.artifact == artifact)
            .order_by(m.llm_id)
        )
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32), []
        vectors = np.stack([np.frombuffer(blob, dtype="<f4") for _, _, blob in rows])
        return [r[0] for r in rows], vectors.astype(np.float32), [int(r[1]) for r in rows]


def _means_key(artifact: str) -> str:
    return f"evidence_means:{artifact}"


def _write_means(
    conn: Connection,
    artifact: str,
    llm_ids: Sequence[str],
    counts: Sequence[int] | np.ndarray,
    means: Sequence[float | None] | None,
    only: bool,
) -> None:
    """Update the `evidence_means` meta entry of `artifact` in the writing transaction."""
    m = schema.meta.c
    key = _means_key(artifact)
    value = conn.execute(select(m.value).where(m.key == key)).scalar() if only else None
    known: dict[str, list[float]] = {} if value is None else json.loads(value)
    given = [None] * len(llm_ids) if means is None else list(means)
    for llm, count, mean in zip(llm_ids, counts, given, strict=True):
        if mean is None or not np.isfinite(mean):
            known.pop(llm, None)
        else:
            known[llm] = [float(mean), int(count)]
    stmt = upsert(conn, schema.meta).values(key=key, value=json.dumps(known, sort_keys=True))
    conn.execute(
        stmt.on_conflict_do_update(index_elements=["key"], set_={"value": stmt.excluded.value})
    )


def _version_key(artifact: str) -> str:
    return f"embeddings_version:{artifact}"


def _bump_version(conn: Connection, artifact: str) -> None:
    """Raise `embeddings_version` in the writing transaction (writers are serialised)."""
    key = _version_key(artifact)
    m = schema.meta.c
    value = conn.execute(select(m.value).where(m.key == key)).scalar()
    stmt = upsert(conn, schema.meta).values(key=key, value=str(int(value or 0) + 1))
    conn.execute(
        stmt.on_conflict_do_update(index_elements=["key"], set_={"value": stmt.excluded.value})
    )
