"""What goes in and out over HTTP, for every endpoint alike: the API key checked, the JSON body
read and checked (`BadRequest`, the 4xx that names what is wrong), a chat request's own
fields, the one error shape every error answers in (`add_error_answers`), and the x-locus-*
headers of an answer."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from locus.errors import LocusError, LocusInputError
from locus.routing.router import RankedLLM
from locus.server.fallback import GatewayError
from locus.server.upstream import Attempt
from locus.store.keys import ApiKey

__all__ = [
    "CHAT_FIELDS",
    "LOCUS_CHAT_FIELDS",
    "BadRequest",
    "ChatQuery",
    "add_error_answers",
    "answer_headers",
    "auth_refusal",
    "error_response",
    "gateway_error_response",
    "non_negative",
    "parse_chat_body",
    "predicted_headers",
    "read_json_body",
    "text_of",
    "unavailable_llms",
    "unread_words",
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
LOCUS_CHAT_FIELDS = ("unavailable", "max_latency_ms", "explore", "task", "fallbacks")


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


def non_negative(data: Mapping[str, Any], name: str, default: float | None) -> float | None:
    """A number field >= 0 (booleans refused), or `default` when absent."""
    value = data.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise BadRequest(400, f"{name}: expected a number >= 0", "invalid_request")
    return float(value)


@dataclass(frozen=True)
class ChatQuery:
    """A chat request, checked: the text it is routed on and locus's own fields (taken out of
    the body, never sent upstream)."""

    text: str
    unavailable: list[str]
    max_latency_ms: float | None
    explore: float | None
    task: str | None = None  # the text's task, where the caller knows it
    # False: the LLM the model names (or the routed one) answers or the request fails; no
    # other LLM is called in its place
    fallbacks: bool = True
    # the last user message's parts routing did not read (an image_url, an input_audio)
    unread: tuple[str, ...] = ()


def parse_chat_body(data: dict[str, Any], known: Collection[str]) -> ChatQuery:
    """Check a chat request and take locus's fields out of `data` (what is left goes
    upstream); `known` the pool's LLMs.

    Raises:
        BadRequest: 400 naming an unknown parameter (and the known one it is closest to), a
            missing `messages`, a locus field out of range.
        LocusInputError: messages without a text to route on (a 400 too).
    """
    _check_chat_fields(data)
    if "messages" not in data:
        raise BadRequest(400, "messages: required", "invalid_request")
    text, unread = text_of(data["messages"])
    unavailable = unavailable_llms(known, data.pop("unavailable", None))
    max_latency = data.pop("max_latency_ms", None)
    if max_latency is not None and (
        isinstance(max_latency, bool)
        or not isinstance(max_latency, int | float)
        or max_latency <= 0
    ):
        raise BadRequest(
            400, "max_latency_ms: expected a number of milliseconds > 0", "invalid_request"
        )
    explore = data.pop("explore", None)  # this request's share
    if explore is not None and (
        isinstance(explore, bool) or not isinstance(explore, int | float) or not 0 <= explore <= 1
    ):
        raise BadRequest(
            400, "explore: expected a share in [0, 1] (0: route to the best mean)",
            "invalid_request",
        )  # fmt: skip
    task = data.pop("task", None)
    if task is not None and (not isinstance(task, str) or not task.strip()):
        raise BadRequest(400, f"task: expected a task name, found {task!r}", "invalid_request")
    fallbacks = data.pop("fallbacks", True)
    if not isinstance(fallbacks, bool):
        raise BadRequest(
            400,
            f"fallbacks: expected true (another LLM may answer where the chosen one fails, "
            f"the default) or false (never), found {fallbacks!r}",
            "invalid_request",
        )
    return ChatQuery(text, unavailable, max_latency, explore, task, fallbacks, unread)


def _check_chat_fields(data: Mapping[str, Any]) -> None:
    """Refuse a chat request with a parameter neither OpenAI's nor locus's."""
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


def text_of(messages: Any) -> tuple[str, tuple[str, ...]]:
    """The text to route a chat on, the last user message's text ("" where it has none), and
    the types of that message's parts that are not text (("image_url",): what routing did
    not read)."""
    if not isinstance(messages, list) or not messages:
        raise LocusInputError("messages: expected a non-empty list of {role, content} objects")
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise LocusInputError("messages: every message needs a role and a content")
    users = [m for m in messages if m.get("role") == "user"] or messages
    content = users[-1].get("content")
    unread: tuple[str, ...] = ()
    if isinstance(content, list):  # [{"type": "text", "text": ...}, {"type": "image_url"}]
        parts = [part for part in content if isinstance(part, dict)]
        unread = tuple(str(p.get("type", "?")) for p in parts if p.get("type", "text") != "text")
        content = " ".join(str(p.get("text", "")) for p in parts if p.get("type", "text") == "text")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise LocusInputError(
            "messages: a message's content must be a text or a list of content parts"
        )
    return content, unread


def unread_words(unread: Sequence[str]) -> str:
    """What routing did not read, in words: "2 image_url parts", "1 input_audio part"."""
    counts: dict[str, int] = {}
    for kind in unread:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind} part{'s' if n > 1 else ''}" for kind, n in counts.items())


def auth_refusal(
    request: Request, verify_key: Callable[[str], ApiKey | None] | None
) -> Response | None:
    """The 401/403 answer for a request that may not pass, or None: every /v1 request needs a
    key the store knows (`verify_key`; the key is left in `request.state.api_key`); without
    keys (None: `--no-auth`) writes are refused."""
    path = request.url.path
    if not path.startswith("/v1/"):
        return None
    write = request.method == "POST" and (
        path.startswith("/v1/llms/") or path in ("/v1/outcomes", "/v1/catalog/reload")
    )
    if verify_key is None:
        if write:
            return error_response(
                403, "writes need an API key; this server runs --no-auth", "forbidden"
            )
        return None
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return error_response(
            401, "missing API key: send Authorization: Bearer <key>", "unauthorized"
        )
    key = verify_key(secret.strip())
    if key is None:
        return error_response(401, "unknown or revoked API key", "unauthorized")
    request.state.api_key = key
    return None


def error_response(status: int, message: str, kind: str) -> JSONResponse:
    """The one error shape: {"error": {"message", "type"}}, the message on one line."""
    return JSONResponse(
        {"error": {"message": " ".join(message.split()), "type": kind}}, status_code=status
    )


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
    upstream_model: str | None, failed: Sequence[Attempt], explored: bool = False
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
        headers["x-locus-failed"] = ",".join(f"{a.llm_id}={a.kind.value}" for a in failed)
    return headers


def add_error_answers(app: FastAPI) -> None:
    """Every error in the one JSON shape: bad input a 4xx naming what is wrong, a gateway
    failure with its attempts, 404 and 405 too, a bug a bare 500."""

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> Response:
        return error_response(500, "internal error", "internal")

    @app.exception_handler(BadRequest)
    async def bad(request: Request, error: BadRequest) -> Response:
        return error_response(error.status, str(error), error.kind)

    @app.exception_handler(LocusError)
    async def locuserror_response(request: Request, error: LocusError) -> Response:
        return error_response(400, str(error), "invalid_request")

    @app.exception_handler(StarletteHTTPException)
    async def httperror_response(request: Request, error: StarletteHTTPException) -> Response:
        kinds = {404: "not_found", 405: "method_not_allowed"}
        message = {
            404: f"no such endpoint: {request.url.path}",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(error.status_code, str(error.detail))
        return error_response(
            error.status_code, message, kinds.get(error.status_code, "http_error")
        )

    @app.exception_handler(GatewayError)
    async def gatewayerror_response(request: Request, error: GatewayError) -> Response:
        return gateway_error_response(error)


def gateway_error_response(error: GatewayError, request_id: str | None = None) -> Response:
    """The answer to a chat no LLM answered, with what is known of how it came about: an
    upstream's refusal as it came, naming its LLM (and its `request_id`, for an outcome), and
    the attempts and failures of any request that called upstreams."""
    refusal = error.refusal
    if refusal is not None and isinstance(refusal.body, dict):
        response: Response = JSONResponse(refusal.body, status_code=error.status)
    else:
        response = error_response(error.status, str(error), error.kind)
    if error.llm_id is not None:
        if request_id is not None:
            response.headers["x-locus-request-id"] = request_id
        response.headers["x-locus-llm"] = error.llm_id
    if error.attempts:
        response.headers["x-locus-attempts"] = str(error.attempts)
    response.headers.update(answer_headers(None, error.failed))
    return response
