"""The LLM catalog in the store: metadata and endpoints written per LLM (`locus import llms`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select, update

from locus.store import schema
from locus.store._core import StoreCore, now
from locus.store.imports import LLM_METADATA

__all__ = ["StoreCatalog"]


class StoreCatalog(StoreCore):
    """`upsert_llm_metadata`."""

    def upsert_llm_metadata(self, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, int]:
        """Set metadata fields of LLMs (known ones are updated, new ones added), in one
        transaction; fields a row leaves out keep their stored values. Plain select, update and
        insert, so the same code runs on any SQL dialect.

        Returns: {"new": LLMs added, "updated": LLMs whose stored fields changed}.

        Raises:
            ValueError: a field that is not LLM metadata.
        """
        for _, fields in rows:
            unknown = set(fields) - set(LLM_METADATA)
            if unknown:
                raise ValueError(f"not LLM metadata: {sorted(unknown)}")
        m = schema.llms.c
        new = updated = 0
        with self._write() as conn:
            ids = [llm for llm, _ in rows]
            stored = {
                row[0]: dict(zip(LLM_METADATA, row[1:], strict=True))
                for row in conn.execute(
                    select(m.llm_id, *[m[c] for c in LLM_METADATA]).where(m.llm_id.in_(ids))
                )
            }
            stamp = now()
            for llm_id, fields in rows:
                if llm_id not in stored:
                    conn.execute(
                        schema.llms.insert(), [{"llm_id": llm_id, "created_at": stamp, **fields}]
                    )
                    new += 1
                elif any(stored[llm_id].get(k) != v for k, v in fields.items()):
                    conn.execute(update(schema.llms).where(m.llm_id == llm_id).values(**fields))
                    updated += 1
        return {"new": new, "updated": updated}
