"""The HTTP answers `locus serve` shares: the error shape, the x-locus-* headers of an
answer, the text a chat request is routed on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.responses import JSONResponse

from locus.errors import LocusInputError
from locus.routing.router import RankedLLM

__all__ = ["answer_headers", "error_response", "predicted_headers", "text_of"]


def predicted_headers(predicted: RankedLLM | None) -> dict[str, str]:
    """x-locus-p-correct (with x-locus-p-correct-sd, its uncertainty) and
    x-locus-expected-cost-usd of the answering LLM, where known."""
    headers = {}
    if predicted is not None and predicted.p_correct == predicted.p_correct:  # not NaN
        headers["x-locus-p-correct"] = f"{predicted.p_correct:.4f}"
        if predicted.uncertainty is not None:
            headers["x-locus-p-correct-sd"] = f"{predicted.uncertainty:.4f}"
    if predicted is not None and predicted.cost_usd is not None:
        headers["x-locus-expected-cost-usd"] = f"{predicted.cost_usd:.8f}"
    return headers


def answer_headers(
    upstream_model: str | None, failed: Sequence[Any], explored: bool = False
) -> dict[str, str]:
    """x-locus-upstream-model (what answered), x-locus-failed (llm=kind of each LLM tried
    before it) and x-locus-explored (the LLM was drawn by exploration, not the best mean),
    where there is something to say."""
    headers = {}
    if explored:
        headers["x-locus-explored"] = "true"
    if upstream_model:
        headers["x-locus-upstream-model"] = upstream_model
    if failed:
        headers["x-locus-failed"] = ",".join(f"{f['llm_id']}={f['kind']}" for f in failed)
    return headers


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": " ".join(message.split()), "type": kind}}, status_code=status
    )


def text_of(messages: Any) -> str:
    """The text to route a chat on: the last user message's text."""
    if not isinstance(messages, list) or not messages:
        raise LocusInputError("messages: expected a non-empty list of {role, content} objects")
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise LocusInputError("messages: every message needs a role and a content")
    users = [m for m in messages if m.get("role") == "user"] or messages
    content = users[-1].get("content")
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    if not isinstance(content, str) or not content.strip():
        raise LocusInputError("messages: the last user message has no text content")
    return content
