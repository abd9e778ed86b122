"""Learning from outcomes: a chat answer's request id, later scored by the caller, becomes the
answering LLM's evidence.

Every chat answer carries `x-locus-request-id`; the replica that answered remembers which LLM
answered which text for its last `capacity` requests (`OutcomeLog`). `POST /v1/outcomes` with
`{"request_id", "score"}` (or `{"llm_id", "query_text", "score"}`, which any replica can take)
stores the score as that LLM's on that query, in the source `outcomes`, and re-embeds the LLMs
it concerns: at once, or on a schedule (`ServerSettings.outcome_refresh_s`: every that many
seconds, in a background thread, the LLMs with outcomes since the last refresh). Replicas on
one PostgreSQL store follow the new embeddings like any onboarding.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Any

__all__ = ["OutcomeLog", "parse_outcomes"]


class OutcomeLog:
    """request id -> (llm_id, query text) of the last `capacity` answers."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._answers: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, llm_id: str, text: str) -> str:
        request_id = uuid.uuid4().hex
        with self._lock:
            self._answers[request_id] = (llm_id, text)
            while len(self._answers) > self.capacity:
                self._answers.popitem(last=False)
        return request_id

    def resolve(self, request_id: str) -> tuple[str, str] | None:
        with self._lock:
            return self._answers.get(request_id)


def parse_outcomes(body: Any, log: OutcomeLog) -> list[dict[str, Any]]:
    """The outcomes of a POST body as rows {llm_id, query_text, score}.

    Raises:
        ValueError: a malformed body, a score outside [0, 1], an unknown request id (the
            message says what is wrong, for a 400 or 404).
        KeyError: a request id this replica does not remember (a 404).
    """
    items = body.get("outcomes") if isinstance(body, dict) and "outcomes" in body else [body]
    if not isinstance(items, list) or not items:
        raise ValueError("outcomes: expected a non-empty list of {request_id, score} objects")
    rows = []
    for i, item in enumerate(items):
        where = f"outcomes[{i}]" if isinstance(body, dict) and "outcomes" in body else "outcome"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object with request_id and score")
        unknown = sorted(set(item) - {"request_id", "llm_id", "query_text", "score"})
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}")
        score = item.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
            raise ValueError(f"{where}: score {score!r}; expected a number in [0, 1]")
        if "request_id" in item:
            found = log.resolve(str(item["request_id"]))
            if found is None:
                raise KeyError(
                    f"{where}: unknown request_id {item['request_id']!r}; this server remembers "
                    f"its last {log.capacity:,} answers (another replica answered it, or it is "
                    "older): post llm_id and query_text instead"
                )
            llm_id, text = found
        else:
            given_llm, given_text = item.get("llm_id"), item.get("query_text")
            if (
                not isinstance(given_llm, str)
                or not isinstance(given_text, str)
                or not given_text.strip()
            ):
                raise ValueError(f"{where}: expected request_id, or llm_id and query_text")
            llm_id, text = given_llm, given_text
        rows.append({"llm_id": llm_id, "query_text": text, "score": float(score)})
    return rows
