"""Reading a request body for `create_app`: the JSON object, the fields every endpoint checks
the same way, and `BadRequest`, the 4xx that names what is wrong."""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Mapping
from typing import Any

from fastapi import Request

__all__ = [
    "CHAT_FIELDS",
    "LOCUS_CHAT_FIELDS",
    "BadRequest",
    "check_chat_fields",
    "non_negative",
    "read_json_body",
    "unavailable_llms",
]

# what a chat request may hold: the OpenAI Chat Completions parameters, and the sampling
# parameters OpenAI-compatible servers (vLLM, TGI, llama.cpp) add; anything else is a 400
# naming it, as the OpenAI API answers (a misspelt "temperatur" must not pass silently)
CHAT_FIELDS = (
    "messages", "model", "audio", "frequency_penalty", "function_call", "functions",
    "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities",
    "n", "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key",
    "reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier", "stop",
    "store", "stream", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs",
    "top_p", "user", "verbosity", "web_search_options",
    "top_k", "min_p", "repetition_penalty",
)  # fmt: skip
# locus's own: read by the gateway, never sent upstream
LOCUS_CHAT_FIELDS = ("unavailable", "max_latency_ms", "explore")


class BadRequest(Exception):
    """A client error: its HTTP status, message and error type (the API's error shape)."""

    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


async def read_json_body(request: Request, max_bytes: int) -> dict[str, Any]:
    """The body as a JSON object, at most `max_bytes`."""
    raw = await request.body()
    if len(raw) > max_bytes:
        raise BadRequest(413, f"body over {max_bytes:,} bytes", "too_large")
    try:
        data = json.loads(raw or b"null")
    except ValueError:
        raise BadRequest(400, "malformed JSON body", "invalid_request") from None
    if not isinstance(data, dict):
        raise BadRequest(400, "expected a JSON object body", "invalid_request")
    return data


def check_chat_fields(data: Mapping[str, Any]) -> None:
    """Refuse a chat request with a parameter neither OpenAI's nor locus's.

    Raises:
        BadRequest: 400 naming the first unknown parameter (and the known one it is closest
            to).
    """
    known = (*CHAT_FIELDS, *LOCUS_CHAT_FIELDS)
    unknown = [name for name in data if name not in known]
    if not unknown:
        return
    close = difflib.get_close_matches(str(unknown[0]), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise BadRequest(
        400,
        f"unknown parameter {unknown[0]!r}{hint}; expected an OpenAI chat completion parameter "
        f"(messages, model, temperature, max_tokens, ...) or locus's own "
        f"({', '.join(LOCUS_CHAT_FIELDS)})",
        "invalid_request",
    )


def unavailable_llms(known: Collection[str], value: Any) -> list[str]:
    """An "unavailable" field: a list of the pool's llm_ids (none when absent)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(400, "unavailable: expected a list of llm_ids", "invalid_request")
    unknown = [v for v in value if v not in known]
    if unknown:
        raise BadRequest(400, f"unavailable: unknown LLM {unknown[0]!r}", "invalid_request")
    return value


def non_negative(data: dict[str, Any], name: str, default: float | None) -> float | None:
    """A number field >= 0 (booleans refused), or `default` when absent."""
    value = data.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise BadRequest(400, f"{name}: expected a number >= 0", "invalid_request")
    return float(value)
