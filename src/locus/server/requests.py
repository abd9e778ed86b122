"""Reading a request body for `create_app`: the JSON object, the fields every endpoint checks
the same way, and `BadRequest`, the 4xx that names what is wrong."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from fastapi import Request

__all__ = ["BadRequest", "non_negative", "read_json_body", "unavailable_llms"]


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
