"""One OpenAI-compatible call to an LLM's endpoint, with its failure typed (`Failure`).

A failure is *retryable* (the gateway falls back to the next LLM) when the LLM or the network
failed: connection refused or reset, timeout, 429, 5xx, a malformed body, a context-length
error (another LLM may have a larger context), a 404 / 410 "model not found" (the model was
retired). It is not when the request itself is refused: another 4xx, such as a content filter,
goes back to the client as it came. *Transient* failures (a reset connection, a 429, a 5xx)
are worth one more call of the same LLM. Messages name what happened in words, never an
exception's repr.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from locus.data.llm_catalog import Endpoint
from locus.server.upstream_failures import Attempt, Failure, UpstreamError

__all__ = [
    "DONE",
    "MALFORMED",
    "Attempt",
    "Failure",
    "UpstreamError",
    "UpstreamStream",
    "Upstreams",
]

DONE = "[DONE]"
MALFORMED = "[MALFORMED]"  # a data line that is not JSON: skipped and counted by the gateway


class Upstreams:
    """The endpoints of the catalog, reached with one shared httpx client.

    Args:
        endpoints: llm_id -> Endpoint.
        transport: an httpx transport (tests); default: real connections.
        env: where API keys are looked up by their variable name (default: os.environ).
    """

    def __init__(
        self,
        endpoints: Mapping[str, Endpoint],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.endpoints = dict(endpoints)
        self._transport = transport
        self._env = os.environ if env is None else env
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=self._transport, limits=httpx.Limits(max_connections=256)
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _request(
        self, llm_id: str, body: Mapping[str, Any]
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        endpoint = self.endpoints.get(llm_id)
        if endpoint is None:  # the catalog was reloaded while the request was routed
            raise UpstreamError(llm_id, Failure.RETIRED, "no endpoint any more (catalog reloaded)")
        headers = {"content-type": "application/json"}
        if endpoint.api_key_env:
            key = self._env.get(endpoint.api_key_env)
            if key:
                headers["authorization"] = f"Bearer {key}"
        payload = {**body, "model": endpoint.model}
        return f"{endpoint.base_url}/chat/completions", payload, headers

    async def complete(
        self, llm_id: str, body: Mapping[str, Any], *, timeout: float
    ) -> dict[str, Any]:
        """The upstream's JSON completion for a non-streaming request.

        Raises:
            UpstreamError: any failure, classified.
        """
        url, payload, headers = self._request(llm_id, body)
        try:
            response = await self.client().post(
                url, json={**payload, "stream": False}, headers=headers, timeout=timeout
            )
        except httpx.TimeoutException:
            raise UpstreamError(
                llm_id, Failure.TIMEOUT, f"no answer within {timeout:g} s"
            ) from None
        except httpx.TransportError as error:
            raise transport_failure(llm_id, error) from None
        check_status(llm_id, response.status_code, response.headers, _json_or_none(response))
        data = _json_or_none(response)
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise UpstreamError(llm_id, Failure.BAD_RESPONSE, "the answer is not a chat completion")
        return data


class UpstreamStream:
    """An upstream SSE stream past its first token: `head` (the chunks read so far, the first
    one with content last) and `next_chunk()` for the rest; `aclose()` releases the
    connection. `started` is when the request was sent (`time.perf_counter`), `first_token_s`
    the seconds from then to the first token."""

    def __init__(
        self,
        llm_id: str,
        response: httpx.Response,
        lines: AsyncIterator[str],
        head: list[Any],
        malformed: int = 0,
        *,
        started: float = 0.0,
        first_token_s: float = 0.0,
    ) -> None:
        self.llm_id, self._response, self._lines, self.head = llm_id, response, lines, head
        self.malformed = malformed  # malformed chunks skipped before the first token
        self.started, self.first_token_s = started, first_token_s

    async def next_chunk(self) -> Any:
        """The next data chunk (a dict), DONE, MALFORMED (a data line that is not JSON), or
        None when the stream ended without [DONE].

        Raises:
            UpstreamError: a stall (no data within the read timeout) or a cut connection.
        """
        return await _next_data(self.llm_id, self._lines)

    async def aclose(self) -> None:
        await self._response.aclose()


async def _next_data(llm_id: str, lines: AsyncIterator[str]) -> Any:
    try:
        async for line in lines:
            if not line.startswith("data:"):
                continue  # blank separators, comments (":"), event: and id: lines
            data = line[5:].strip()
            if data == DONE:
                return DONE
            try:
                return json.loads(data)
            except ValueError:
                return MALFORMED
    except httpx.TimeoutException:
        raise UpstreamError(llm_id, Failure.TIMEOUT, "the stream stalled") from None
    except httpx.TransportError as error:
        raise UpstreamError(
            llm_id, Failure.DROPPED, f"the stream was cut ({_words(error)})"
        ) from None
    return None


def transport_failure(llm_id: str, error: httpx.TransportError) -> UpstreamError:
    """A call that got no answer: no connection (`Failure.CONNECT`: refused, unreachable), or
    one the upstream accepted and then closed or reset before answering (`Failure.DROPPED`)."""
    if isinstance(error, (httpx.ConnectError, httpx.ProxyError, httpx.UnsupportedProtocol)):
        return UpstreamError(llm_id, Failure.CONNECT, f"connection failed ({_words(error)})")
    return UpstreamError(
        llm_id, Failure.DROPPED,
        f"the upstream accepted the connection and dropped it without an answer "
        f"({_words(error)})",
    )  # fmt: skip


def _words(error: BaseException) -> str:
    """An exception in words for a message: its kind, and its text where it has one."""
    kind = {
        "ConnectError": "could not connect",
        "ReadError": "connection reset",
        "RemoteProtocolError": "the peer closed the connection",
        "WriteError": "connection reset",
    }.get(type(error).__name__, type(error).__name__)
    text = " ".join(str(error).split())
    return kind if not text or len(text) > 80 else f"{kind}: {text}"


def has_content(chunk: Any) -> bool:
    """Whether an SSE chunk carries part of the answer (text, a tool call, or the end)."""
    if not isinstance(chunk, dict):
        return False
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("tool_calls") or choice.get("finish_reason"):
            return True
    return False


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


async def open_stream(
    upstreams: Upstreams, llm_id: str, body: Mapping[str, Any], *, first_token_s: float,
    stall_s: float, malformed_max: int = 10,
) -> UpstreamStream:  # fmt: skip
    """Start a streaming completion and read up to its first token (within `first_token_s`),
    skipping up to `malformed_max` malformed chunks.

    Raises:
        UpstreamError: anything failing before the first token (the gateway falls back).
    """
    began = time.perf_counter()
    url, payload, headers = upstreams._request(llm_id, body)
    client = upstreams.client()
    request = client.build_request(
        "POST", url, json={**payload, "stream": True}, headers=headers,
        timeout=httpx.Timeout(first_token_s, read=stall_s),
    )  # fmt: skip
    response: httpx.Response | None = None
    try:
        response = await asyncio.wait_for(client.send(request, stream=True), first_token_s)
        if response.status_code >= 300:
            raw = await response.aread()
            try:
                error_body = json.loads(raw)
            except ValueError:
                error_body = None
            check_status(llm_id, response.status_code, response.headers, error_body)
        lines = response.aiter_lines()
        head: list[Any] = []
        malformed = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + first_token_s
        while True:
            chunk = await asyncio.wait_for(_next_data(llm_id, lines), deadline - loop.time())
            if chunk is None or chunk == DONE:
                raise UpstreamError(
                    llm_id, Failure.BAD_RESPONSE, "the stream ended before any answer"
                )
            if chunk == MALFORMED:
                malformed += 1
                if malformed > malformed_max:
                    raise UpstreamError(
                        llm_id, Failure.BAD_RESPONSE, "every stream chunk malformed"
                    )
                continue
            head.append(chunk)
            if has_content(chunk):
                return UpstreamStream(
                    llm_id, response, lines, head, malformed,
                    started=began, first_token_s=time.perf_counter() - began,
                )  # fmt: skip
    except (asyncio.TimeoutError, httpx.TimeoutException):
        await _close(response)
        raise UpstreamError(
            llm_id, Failure.TIMEOUT, f"no first token within {first_token_s:g} s"
        ) from None
    except httpx.TransportError as error:
        await _close(response)
        raise transport_failure(llm_id, error) from None
    except UpstreamError:
        await _close(response)
        raise


async def _close(response: httpx.Response | None) -> None:
    if response is not None:
        await response.aclose()


def check_status(llm_id: str, status: int, headers: Mapping[str, str], body: Any) -> None:
    """Raise the `UpstreamError` an HTTP status means (nothing for 2xx)."""
    if status < 300:
        return
    if status == 429:
        retry = headers.get("retry-after")
        try:
            seconds = float(retry) if retry is not None else None
        except ValueError:
            seconds = None
        raise UpstreamError(
            llm_id, Failure.RATE_LIMITED, "429 rate limited", status=429, retry_after=seconds
        )
    if status >= 500:
        raise UpstreamError(llm_id, Failure.SERVER_ERROR, f"upstream error {status}", status=status)
    if status in (404, 410):
        raise UpstreamError(
            llm_id, Failure.RETIRED, f"the model is not found or retired ({status})", status=status
        )
    error = body.get("error") if isinstance(body, dict) else None
    code = str((error or {}).get("code") or "") if isinstance(error, dict) else ""
    message = str((error or {}).get("message") or "") if isinstance(error, dict) else ""
    if code == "context_length_exceeded" or "context length" in message.lower():
        raise UpstreamError(
            llm_id, Failure.CONTEXT_LENGTH, "the request exceeds its context", status=status
        )
    raise UpstreamError(
        llm_id,
        Failure.REFUSED,
        f"upstream refused the request ({status})",
        status=status,
        body=body,
    )
