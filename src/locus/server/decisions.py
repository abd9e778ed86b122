"""The gateway's decision log: each chat request's routing decision kept in the workspace
store (`locus.store.decisions`), with the probability that routing chose the LLM that
answered, so that the log is evidence off-policy estimates can read (`locus decisions`).

Writes run off the event loop, one transaction each; a failed write is logged and never fails
the request. `ServerSettings.decision_log` says what is kept of the text ("hash", "text",
"off"); the log is trimmed to `decision_log_max` rows every `TRIM_EVERY` writes.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio

from locus.data.query_identity import text_hash
from locus.server.settings import ServerSettings

__all__ = ["TRIM_EVERY", "DecisionLog"]

TRIM_EVERY = 1_000  # writes between two trims of the log
RANKED_KEPT = 5  # candidates of the fallback order kept with a decision

logger = logging.getLogger("locus.server")


class DecisionLog:
    """Writes decisions to `store` (a `Store`, or None: nothing kept) as `settings` say."""

    def __init__(self, store: Any, settings: ServerSettings) -> None:
        self.store = None if settings.decision_log == "off" else store
        self.keep_text = settings.decision_log == "text"
        self.max_rows = settings.decision_log_max
        self._writes = 0
        self._lock = threading.Lock()

    async def record(
        self, request_id: str, answer: Any, text: str, latency_ms: float, cost_usd: float | None
    ) -> None:
        """Keep the decision behind `answer` (a `ChatAnswer` or `StreamAnswer`)."""
        if self.store is None:
            return
        usage = getattr(answer, "payload", {}).get("usage") or {}
        predicted = answer.predicted
        row = {
            "request_id": request_id,
            "llm_id": answer.llm_id,
            "propensity": answer.propensity,
            "p_correct": None if predicted is None else _number(predicted.p_correct),
            "ranked": [[c.llm_id, _number(c.p_correct)] for c in answer.ranked[:RANKED_KEPT]],
            "text_hash": text_hash(text) if text.strip() else None,
            "text": text if self.keep_text else None,
            "explored": answer.explored,
            "latency_ms": latency_ms,
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "cost_usd": cost_usd,
        }
        await anyio.to_thread.run_sync(self._put, row)

    def _put(self, row: dict[str, Any]) -> None:
        assert self.store is not None
        try:
            self.store.put_decision(row)
            with self._lock:
                self._writes += 1
                trim = self._writes % TRIM_EVERY == 0
            if trim:
                self.store.trim_decisions(self.max_rows)
        except Exception as error:  # the log must never fail a request
            logger.warning("decision log: request %s not kept (%s)", row["request_id"], error)

    def resolve(self, request_id: str) -> tuple[str, str, float | None] | None:
        """(llm_id, text, P(correct)) of a logged request whose text is kept (a request
        another replica answered, or one from before a restart); else None."""
        if self.store is None:
            return None
        found = self.store.decision(request_id)
        if found is None or not found["text"]:
            return None
        return found["llm_id"], found["text"], found["p_correct"]

    def outcome(self, request_id: str, score: float) -> bool:
        """Set a logged request's outcome; False where the log does not hold it."""
        if self.store is None:
            return False
        try:
            return bool(self.store.set_decision_outcome(request_id, score))
        except Exception as error:
            logger.warning("decision log: outcome of %s not kept (%s)", request_id, error)
            return False


def _number(value: float) -> float | None:
    return None if value != value else float(value)  # NaN (a pinned LLM): None
