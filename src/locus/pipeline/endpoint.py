"""Asking an OpenAI-compatible endpoint a list of prompts: bounded concurrency, timeouts,
retries with backoff, and each answer handed over the moment it arrives.

`check_endpoint` runs first (one `GET /models`): an unreachable endpoint, a refused key or a
model the endpoint does not serve is one clear error before anything is sent. `ask_all` then
sends the prompts (`concurrency` at a time): a 429, a 5xx, a timeout or a dropped connection is
retried with exponential backoff (a `Retry-After` up to `max_wait_s` honoured); 401/403 and
"model not found" stop the whole run (every other prompt would fail alike); any other 4xx
(context length, content filter) fails that prompt only. Each answer goes to `on_answer` as
soon as it arrives, so a crash or Ctrl-C halfway loses none that was paid for.

    >>> endpoint = Endpoint("http://127.0.0.1:8000/v1", "my-model")      # doctest: +SKIP
    >>> check_endpoint(endpoint, api_key=None)  # doctest: +SKIP
    >>> asked = [("q1", "What is 2+2?")]
    >>> failures = ask_all(endpoint, None, asked, on_answer=print)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from locus._progress import Advance
from locus.data.llm_catalog import Endpoint
from locus.errors import LocusInputError

__all__ = ["EndpointAnswer", "EndpointError", "ask_all", "check_endpoint"]

RETRYABLE = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class EndpointError(LocusInputError):
    """The endpoint cannot answer at all: unreachable, the key refused, the model not served."""


@dataclass(frozen=True)
class EndpointAnswer:
    """One answer: its text, the model named in the response, tokens used and latency."""

    text: str
    model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float


def _headers(api_key: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


def _url(endpoint: Endpoint, path: str) -> str:
    return endpoint.base_url.rstrip("/") + path


def check_endpoint(endpoint: Endpoint, api_key: str | None, *, timeout_s: float = 10.0) -> None:
    """Check the endpoint answers and serves `endpoint.model` (`GET /models`; an endpoint
    without that route is given the benefit of the doubt).

    Raises:
        EndpointError: unreachable, the key refused (401/403), the model not in its list.
    """
    try:
        response = httpx.get(
            _url(endpoint, "/models"), headers=_headers(api_key), timeout=timeout_s
        )
    except httpx.HTTPError as error:
        raise EndpointError(
            f"endpoint {endpoint.base_url} is unreachable ({type(error).__name__}: "
            f"{error or 'no answer'}); expected an OpenAI-compatible API there; check the URL "
            "and that the server is running"
        ) from None
    _refuse_key(endpoint, response.status_code)
    if response.status_code != 200:
        return
    try:
        served = [str(m.get("id")) for m in response.json().get("data") or []]
    except (ValueError, AttributeError):
        return
    if served and endpoint.model not in served:
        raise EndpointError(
            f"endpoint {endpoint.base_url} does not serve model {endpoint.model!r}; it serves "
            f"{', '.join(served[:20])}; pass one of those with --model"
        )


def _refuse_key(endpoint: Endpoint, status: int) -> None:
    if status in (401, 403):
        raise EndpointError(
            f"endpoint {endpoint.base_url} refused the API key (HTTP {status}); expected a "
            "valid key; set it in the environment variable --api-key-env names"
        )


def ask_all(
    endpoint: Endpoint,
    api_key: str | None,
    prompts: Sequence[tuple[str, list[dict[str, str]]]],
    on_answer: Callable[[str, EndpointAnswer], None],
    *,
    concurrency: int = 4,
    timeout_s: float = 120.0,
    retries: int = 3,
    backoff_s: float = 1.0,
    max_wait_s: float = 30.0,
    max_tokens: int | None = None,
    advance: Advance = lambda n: None,
) -> dict[str, str]:
    """Send each (key, chat messages) of `prompts`; `on_answer(key, answer)` as each arrives.

    Returns:
        {key: why} for the prompts that failed after their retries (the rest were answered).

    Raises:
        EndpointError: the key refused or the model not found mid-run (answers handed over
            until then stay handed over).
    """
    return asyncio.run(
        _ask_all(
            endpoint,
            api_key,
            prompts,
            on_answer,
            concurrency=concurrency,
            timeout_s=timeout_s,
            retries=retries,
            backoff_s=backoff_s,
            max_wait_s=max_wait_s,
            max_tokens=max_tokens,
            advance=advance,
        )
    )


async def _ask_all(
    endpoint: Endpoint,
    api_key: str | None,
    prompts: Sequence[tuple[str, list[dict[str, str]]]],
    on_answer: Callable[[str, EndpointAnswer], None],
    *,
    concurrency: int,
    timeout_s: float,
    retries: int,
    backoff_s: float,
    max_wait_s: float,
    max_tokens: int | None,
    advance: Advance,
) -> dict[str, str]:
    gate = asyncio.Semaphore(max(1, concurrency))
    failures: dict[str, str] = {}
    limits = httpx.Limits(max_connections=max(1, concurrency))
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:

        async def one(key: str, messages: list[dict[str, str]]) -> None:
            async with gate:
                body: dict[str, Any] = {
                    "model": endpoint.model, "messages": messages, "temperature": 0,
                }  # fmt: skip
                if max_tokens is not None:
                    body["max_tokens"] = max_tokens
                try:
                    answer = await _ask(
                        client, endpoint, api_key, body, retries, backoff_s, max_wait_s
                    )
                except _PromptFailed as failed:
                    failures[key] = str(failed)
                else:
                    on_answer(key, answer)
                advance(1)

        tasks = [asyncio.create_task(one(key, messages)) for key, messages in prompts]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return failures


class _PromptFailed(Exception):
    """This prompt failed (after its retries); the others go on."""


async def _ask(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    api_key: str | None,
    body: dict[str, Any],
    retries: int,
    backoff_s: float,
    max_wait_s: float,
) -> EndpointAnswer:
    url = _url(endpoint, "/chat/completions")
    why = ""
    for attempt in range(retries + 1):
        if attempt:
            await asyncio.sleep(_wait_s(why, attempt, backoff_s, max_wait_s))
        started = time.perf_counter()
        try:
            response = await client.post(url, json=body, headers=_headers(api_key))
        except httpx.HTTPError as error:
            why = f"{type(error).__name__}: {error or 'no answer'}"
            continue
        latency_ms = (time.perf_counter() - started) * 1000
        status = response.status_code
        _refuse_key(endpoint, status)
        if status in (404, 410):
            raise EndpointError(
                f"endpoint {endpoint.base_url} has no model {endpoint.model!r} (HTTP {status}: "
                f"{_error_text(response)}); pass the model name it serves with --model"
            )
        if status in RETRYABLE:
            why = f"HTTP {status}: {_error_text(response)}"
            retry_after = response.headers.get("retry-after", "")
            if retry_after.replace(".", "", 1).isdigit():
                why += f" (retry-after {retry_after})"
            continue
        if status >= 300:
            raise _PromptFailed(f"HTTP {status}: {_error_text(response)}")
        try:
            payload = response.json()
            text = payload["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            why = "the response is not a chat completion"
            continue
        usage = payload.get("usage") or {}
        return EndpointAnswer(
            text=str(text or ""),
            model=payload.get("model"),
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            latency_ms=latency_ms,
        )
    raise _PromptFailed(f"{why} after {retries + 1} attempts")


def _wait_s(why: str, attempt: int, backoff_s: float, max_wait_s: float) -> float:
    """A Retry-After the last failure carried (up to `max_wait_s`), else exponential backoff
    with jitter."""
    if "(retry-after " in why:
        return min(max_wait_s, float(why.rsplit("(retry-after ", 1)[1].rstrip(")")))
    return min(max_wait_s, backoff_s * 2 ** (attempt - 1) * (0.5 + random.random()))


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return " ".join(str(message).split())[:200]
    except (ValueError, AttributeError):
        pass
    return " ".join(response.text.split())[:200] or response.reason_phrase


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None
