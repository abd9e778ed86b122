"""Live onboarding: scores posted for an LLM (new or known) refine or create its embedding
with no retraining, visible to the next routed request and kept in the store.

The scores are imported like any file (source `api`, one transaction), new query texts are
encoded, the LLM is re-embedded from all its stored non-test scores (`embed_workspace_llms`:
the LLM encoder, loaded on the first post) and the router re-reads the pool.
"""

from __future__ import annotations

import threading
from typing import Any

import pandas as pd

from locus.data.batch import ImportBatch
from locus.data.query_identity import text_hash
from locus.errors import LocusInputError
from locus.store import Store

__all__ = ["LiveOnboarding"]

SOURCE = "api"


class LiveOnboarding:
    """`post(llm_id, rows)` for the service; one post at a time (they write the store)."""

    def __init__(self, store: Store, router: Any, artifact: str, *, max_rows: int) -> None:
        self.store, self.router, self.artifact, self.max_rows = store, router, artifact, max_rows
        self._lock = threading.Lock()

    def validate(self, llm_id: str, body: Any) -> pd.DataFrame:
        """The posted scores as canonical rows; LocusInputError names the first bad one."""
        rows = body.get("scores") if isinstance(body, dict) else None
        if not isinstance(rows, list) or not rows:
            raise LocusInputError(
                "scores: expected a non-empty list of {query_text, score} objects"
            )
        if len(rows) > self.max_rows:
            raise LocusInputError(f"scores: {len(rows):,} rows; at most {self.max_rows:,} per post")
        records = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise LocusInputError(f"scores[{i}]: expected an object with query_text and score")
            text, score = row.get("query_text"), row.get("score")
            if not isinstance(text, str) or not text.strip():
                raise LocusInputError(f"scores[{i}]: query_text must be non-empty text")
            if (
                isinstance(score, bool)
                or not isinstance(score, (int, float))
                or not 0 <= score <= 1
            ):
                raise LocusInputError(f"scores[{i}]: score {score!r}; expected a number in [0, 1]")
            query_id = row.get("query_id") or text_hash(text)[:16]
            records.append(
                {"llm_id": llm_id, "query_id": str(query_id), "query_text": text,
                 "score": float(score)}
            )  # fmt: skip
        return pd.DataFrame(records)

    def post(self, llm_id: str, body: Any) -> dict[str, Any]:
        frame = self.validate(llm_id, body)
        from locus.pipeline.embed import embed_workspace_llms
        from locus.text.cache import encode_missing

        with self._lock:
            batch = ImportBatch.from_long(
                frame, source=SOURCE, origin=f"POST /v1/llms/{llm_id}/scores"
            )
            imported = self.store.write_batch(batch, kind="table", replace=True)
            encode_missing(self.store, self.router.vectors.text_encoder)
            [report] = embed_workspace_llms(self.store, [llm_id], name=self.artifact)
            self.router.refresh()
        return {
            "llm_id": llm_id,
            "posted": len(frame),
            "new_scores": imported.new_scores,
            "replaced_scores": imported.replaced_scores,
            "embedding": report.as_dict(),
        }
