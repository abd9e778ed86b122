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
OUTCOMES = "outcomes"  # the source of scores learned from production outcomes


class LiveOnboarding:
    """`post(llm_id, rows)` for the service; one post at a time (they write the store)."""

    def __init__(
        self,
        store: Store,
        router: Any,
        artifact: str,
        *,
        max_rows: int,
        refresh_every_s: float = 0.0,
    ) -> None:
        self.store, self.router, self.artifact, self.max_rows = store, router, artifact, max_rows
        self.refresh_every_s = refresh_every_s
        self._lock = threading.Lock()
        self._pending: set[str] = set()  # LLMs with outcomes not yet in their embedding
        self._timer: threading.Timer | None = None

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

    def add_outcomes(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Store outcome rows {llm_id, query_text, score} (source `outcomes`; a later outcome
        for the same LLM and text overwrites the earlier) and re-embed their LLMs: at once, or
        within `refresh_every_s` in the background."""
        if len(rows) > self.max_rows:
            raise LocusInputError(f"outcomes: {len(rows):,} rows; at most {self.max_rows:,}")
        from locus.text.cache import encode_missing

        frame = pd.DataFrame(rows)
        frame["query_id"] = [text_hash(t)[:16] for t in frame["query_text"]]
        llms = sorted(set(frame["llm_id"]))
        with self._lock:
            batch = ImportBatch.from_long(frame, source=OUTCOMES, origin="POST /v1/outcomes")
            imported = self.store.write_batch(batch, kind="table", replace=True)
            encode_missing(self.store, self.router.vectors.text_encoder)
            self._pending.update(llms)
            if self.refresh_every_s <= 0:
                refreshed = self._refresh_pending()
            else:
                refreshed = []
                if self._timer is None:
                    self._timer = threading.Timer(self.refresh_every_s, self._scheduled)
                    self._timer.daemon = True
                    self._timer.start()
        return {
            "recorded": len(frame),
            "llms": llms,
            "new_scores": imported.new_scores,
            "replaced_scores": imported.replaced_scores,
            "refreshed": refreshed,
            "refresh_in_s": None if refreshed else self.refresh_every_s,
        }

    def _refresh_pending(self) -> list[str]:
        """Re-embed the LLMs with outcomes since the last refresh (called under the lock)."""
        from locus.pipeline.embed import embed_workspace_llms

        llms = sorted(self._pending)
        if llms:
            embed_workspace_llms(self.store, llms, name=self.artifact)
            self.router.refresh()
        self._pending.clear()
        return llms

    def _scheduled(self) -> None:
        with self._lock:
            self._timer = None
            self._refresh_pending()
