"""Streams that survive: the gateway's relay of an upstream's SSE chunks to the caller, and the
continuation, on the next LLM, of an answer whose stream broke after its first token.

A stream that is *cut* (the connection reset, or closed before a finish_reason and [DONE]),
that *stalls* (nothing for `stall_timeout_s`) or that turns *malformed* (more than
`malformed_chunks_max` broken chunks in a row) after its first token continues on the next LLM
of the request's fallback order (`Gateway`: breaker, retired and unavailable LLMs skipped,
within `max_attempts` and `total_timeout_s`), so that the caller receives one whole answer.
The continuation request is the original request with the answer so far (the text of its
first choice) added to its messages, in one of two forms:

1. prefill, tried first (`continuation_body(..., prefill=True)`): the original messages, a
   system message `CONTINUE_INSTRUCTION`, then the partial answer as the trailing assistant
   message. An LLM that takes a prefill (Anthropic, DeepSeek and Mistral prefix completion,
   chat templates that continue a final assistant message) writes on from it; one that answers
   a trailing assistant message with a new message is told by the instruction to continue.
2. quoted, when that LLM refuses the prefill (a 400 / 422): once more on the same LLM with the
   original messages and one user message asking it to continue the quoted partial text
   (`CONTINUE_QUOTED`), then the LLM after it.

Only the text of the answer is resumed: an answer with tool calls, a request for n > 1
choices or a response_format other than text ends with the error event, as does a stream for
which no LLM continues. The continued chunks follow the ones already sent with the answer's
chunk `id` (the first LLM's), the `model` of what now answers and no second `role`; the seam
is marked by an SSE comment line (`: locus: continued from a (cut) on b`) and a `"locus":
{"continued_from": "a", "reason": "cut", "llm_id": "b"}` field of the first continued chunk.
A continuation asks for the caller's `max_tokens` again, so a continued answer may be longer
than it by the part already sent. Its usage chunk (where asked for) sums every LLM's tokens:
the continuing LLM's own figures, and for each stream that broke, its usage where it sent one,
else an estimate (its prompt and its text at ~4 characters a token), each listed in the
chunk's `"locus": {"usage_by": [...]}` (`"estimated": true` where estimated).

A continuing LLM may start its answer over instead (one that refused the prefill and was given
the quoted text does: a public fault harness's S14). Its first words are held back until they
tell (`Restart`): a text that repeats the answer sent so far is a restart, and only what
follows the repeated part is sent; one that repeats its beginning and then departs from it
(`RESTART_MIN` characters or more in common) is an answer started over in other words, which
cannot be joined to the part sent: the stream ends with the error event, never [DONE] after a
repeated or incoherent text. The last chunk of a continued answer says who wrote what:
`"locus": {"written_by": [{"llm_id": "a", "chars": 212}, {"llm_id": "b", "chars": 96}]}`.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from locus.server.metrics import Metrics
from locus.server.upstream import DONE, MALFORMED, Failure, UpstreamError, UpstreamStream

__all__ = [
    "CONTINUE_INSTRUCTION",
    "CONTINUE_QUOTED",
    "RESTART_MIN",
    "Restart",
    "StreamRelay",
    "continuation_body",
    "resumable",
]

CONTINUE_INSTRUCTION = (
    "The answer to the conversation above was interrupted. The assistant message that follows "
    "is its beginning: continue it from exactly where it stops, without repeating any of it "
    "and without starting over."
)
CONTINUE_QUOTED = (
    "Your answer to the conversation above was interrupted after the text quoted below "
    "(between the lines of three quotes). Continue it from exactly where it stops: write only "
    'the rest, without repeating any of it and without starting over.\n"""\n{partial}\n"""'
)
DONE_EVENT = b"data: [DONE]\n\n"
CHARS_PER_TOKEN = 4  # the rule of thumb that estimates a broken stream's tokens
# characters (whitespace collapsed) a continuation must share with the start of the answer sent
# so far to count as that answer started over; fewer is a continuation that happens to begin
# as the answer did ("The", "1.")
RESTART_MIN = 16
_SPACE = re.compile(r"\s+")

logger = logging.getLogger("locus.server")

# the partial text, the LLM whose stream broke, why ("cut", "stall", "malformed") -> the LLM
# that continues, its stream past the first token, its model name; or why none did
Resume = Callable[[str, str, str], Awaitable[tuple[str, UpstreamStream, str] | str]]


def _sse(data: Any) -> bytes:
    """One SSE data line of `data` as compact JSON."""
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def continuation_body(body: Mapping[str, Any], partial: str, *, prefill: bool) -> dict[str, Any]:
    """The request that continues `partial`, the answer so far to `body`'s messages: with the
    partial answer as a trailing assistant message (a prefill) after a system message asking
    to continue it, or (`prefill` False) quoted in a user message asking to continue it."""
    messages = list(body.get("messages") or [])
    if prefill:
        messages += [
            {"role": "system", "content": CONTINUE_INSTRUCTION},
            {"role": "assistant", "content": partial},
        ]
    else:
        messages.append({"role": "user", "content": CONTINUE_QUOTED.format(partial=partial)})
    return {**body, "messages": messages}


def prompt_chars(body: Mapping[str, Any]) -> int:
    """The characters of a request's messages' text (its prompt, to estimate its tokens)."""
    total = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(
                len(part["text"])
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
    return total


def _tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def _usage_sum(parts: list[dict[str, Any]]) -> dict[str, int]:
    """prompt, completion and total tokens summed over `parts` (usage dicts)."""
    prompt = sum(int(part.get("prompt_tokens") or 0) for part in parts)
    completion = sum(int(part.get("completion_tokens") or 0) for part in parts)
    total = prompt + completion
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def resumable(body: Mapping[str, Any]) -> bool:
    """Whether a broken answer to `body` can be continued as text: one choice, a text answer
    (not a JSON object or schema, which a continuation cannot resume)."""
    choices = body.get("n")
    if choices not in (None, 1):
        return False
    response_format = body.get("response_format")
    return not isinstance(response_format, dict) or response_format.get("type") in (None, "text")


def _squeezed(text: str) -> str:
    return _SPACE.sub(" ", text)


class Restart:
    """Whether a continuation's first words start the answer over: fed the continuation's
    text as it comes (`feed`), it says to hold it ("hold"), that it continues the answer
    ("continues"), that it repeated the answer sent and goes on past it ("restarted", with
    `rest`: what follows the repeated part), or that it started over in other words
    ("incoherent"). Text is compared with whitespace collapsed and leading whitespace
    dropped.

    >>> check = Restart("The capital of France is")
    >>> check.feed("The capital of "), check.feed("France is Paris.")
    ('hold', 'restarted')
    >>> check.rest
    ' Paris.'
    >>> Restart("The capital of France is").feed(" Paris, on the Seine.")
    'continues'
    """

    def __init__(self, sent: str) -> None:
        self.sent = _squeezed(sent).lstrip()
        self.text = ""  # the continuation's text so far
        self.rest = ""

    def feed(self, content: str) -> str:
        self.text += content
        seen = _squeezed(self.text).lstrip()
        common = 0
        for mine, theirs in zip(seen, self.sent, strict=False):
            if mine != theirs:
                break
            common += 1
        if not self.sent:
            return "continues"
        if common == len(self.sent):  # the whole answer sent, repeated: keep what follows
            self.rest = self._after(len(self.sent))
            return "restarted"
        if common == len(seen):  # so far, the answer sent again: not yet told
            return "hold"
        return "incoherent" if common >= min(RESTART_MIN, len(self.sent)) else "continues"

    def ended(self) -> str:
        """At the continuation's end while held: "continues" where what it wrote shares too
        little with the answer sent to be a restart, else "incoherent" (it started over and
        stopped before adding anything)."""
        seen = _squeezed(self.text).lstrip()
        return "incoherent" if len(seen) >= min(RESTART_MIN, len(self.sent)) else "continues"

    def _after(self, squeezed: int) -> str:
        """The raw text after the first `squeezed` characters of the collapsed text."""
        count, index, raw = 0, 0, self.text
        while index < len(raw) and raw[index].isspace() and count == 0:
            index += 1  # leading whitespace was dropped
        while index < len(raw) and count < squeezed:
            if raw[index].isspace():
                while index + 1 < len(raw) and raw[index + 1].isspace():
                    index += 1
            count += 1
            index += 1
        return raw[index:]


def _first_content(chunk: Any) -> str:
    """The text of the first choice's delta of a chunk ("" for none)."""
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            return content if isinstance(content, str) else ""
    return ""


def _with_content(chunk: dict[str, Any], content: str) -> dict[str, Any]:
    """`chunk` with its first choice's text replaced by `content`."""
    choices = [
        {**c, "delta": {**c.get("delta", {}), "content": content}}
        if isinstance(c, dict) and c.get("index", 0) == 0
        else c
        for c in chunk.get("choices", [])
    ]
    return {**chunk, "choices": choices}


def _finishes(chunk: Any) -> bool:
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    return any(
        isinstance(c, dict) and bool(c.get("finish_reason"))
        for c in (choices if isinstance(choices, list) else [])
    )


def stream_failure(llm: str, reason: str) -> UpstreamError:
    """The error of a stream that broke without an exception: malformed, or closed early."""
    if reason == "malformed":
        return UpstreamError(llm, Failure.BAD_RESPONSE, "the stream is malformed")
    return UpstreamError(
        llm, Failure.BAD_RESPONSE, "the stream ended without a finish_reason or [DONE]"
    )


class StreamRelay:
    """The SSE lines of one streamed answer, continued on another LLM where a stream breaks.

    Args:
        llm_id, model, upstream: the answering LLM, its upstream model name, its stream past
            the first token.
        resumable: whether a broken answer may be continued (`resumable(body)`).
        resume: where the answer goes on after a break (`Resume`; the gateway walks the
            request's fallback order).
        broke: (llm_id, stream, error): the accounting of a stream broken after its first
            token (metrics, circuit breaker, error rate).
        ended: (llm_id, stream, whole): the accounting of a stream that ended whole (`whole`
            True) or whose caller hung up (False).
        metrics: malformed chunks and continuations are counted here.
        malformed_max: malformed chunks skipped in a row before the stream counts as broken.
        prompt_chars: the characters of the request's messages (`prompt_chars`), to estimate
            the prompt tokens of a stream that broke before its usage came.
    """

    def __init__(
        self,
        llm_id: str,
        model: str,
        upstream: UpstreamStream,
        *,
        resumable: bool,
        resume: Resume,
        broke: Callable[[str, UpstreamStream, UpstreamError], None],
        ended: Callable[[str, UpstreamStream, bool], None],
        metrics: Metrics,
        malformed_max: int,
        prompt_chars: int = 0,
    ) -> None:
        self.llm_id, self.model, self.upstream = llm_id, model, upstream
        self.prompt_chars = prompt_chars
        self.resumable = resumable
        self._resume, self._broke, self._ended = resume, broke, ended
        self.metrics, self.malformed_max = metrics, malformed_max
        self.finished = False  # a chunk with a finish_reason came: the answer is whole
        self.answer_id: str | None = None  # the chunk id of the answer, the first LLM's
        self.parts: list[str] = []  # the first choice's text so far
        self.continuations: list[dict[str, str]] = []  # each seam: from, to, reason
        self.written_by: list[dict[str, Any]] = []  # each LLM's part of the text, in order
        self.usage_by: list[dict[str, Any]] = []  # the usage of each stream that broke
        self._usage: dict[str, Any] | None = None  # the current stream's usage, if it sent one
        self._stint = 0  # characters of text the current stream wrote

    @property
    def text(self) -> str:
        """The answer's text sent so far (its first choice's)."""
        return "".join(self.parts)

    def _event(self, chunk: Any, seam: dict[str, str] | None) -> bytes:
        if not isinstance(chunk, dict):
            return _sse(chunk)
        found = chunk.get("choices")
        choices: list[Any] = found if isinstance(found, list) else []
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            self.finished = self.finished or bool(choice.get("finish_reason"))
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            if delta.get("tool_calls"):
                self.resumable = False  # a partial tool call cannot be resumed as text
            content = delta.get("content")
            if choice.get("index", 0) == 0 and isinstance(content, str):
                self.parts.append(content)
                self._stint += len(content)
                if not self.written_by or self.written_by[-1]["llm_id"] != self.llm_id:
                    self.written_by.append({"llm_id": self.llm_id, "chars": 0})
                self.written_by[-1]["chars"] += len(content)
        if self.answer_id is None and isinstance(chunk.get("id"), str):
            self.answer_id = chunk["id"]
        chunk = {**chunk, "model": chunk.get("model") or self.model}
        if self.continuations:  # one answer: its id, and one role, the first LLM's
            if self.answer_id is not None:
                chunk["id"] = self.answer_id
            if choices:
                chunk["choices"] = [
                    {**c, "delta": {k: v for k, v in c["delta"].items() if k != "role"}}
                    if isinstance(c, dict) and isinstance(c.get("delta"), dict)
                    else c
                    for c in choices
                ]
        if seam is not None:
            chunk["locus"] = seam
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
            if self.usage_by:  # a continued answer's: every LLM's tokens
                mine = {"llm_id": self.llm_id, **usage}
                chunk["usage"] = {**usage, **_usage_sum([*self.usage_by, usage])}
                chunk["locus"] = {**chunk.get("locus", {}), "usage_by": [*self.usage_by, mine]}
        if self.continuations and _finishes(chunk):
            chunk["locus"] = {**chunk.get("locus", {}), "written_by": self.written_by}
            logger.info(
                "a continued answer ended: written by %s",
                ", ".join(f"{w['llm_id']} ({w['chars']} characters)" for w in self.written_by),
            )
        return _sse(chunk)

    def _spent(self) -> dict[str, Any]:
        """The usage of the current stream, which broke: what it sent, else an estimate."""
        if self._usage is not None:
            return {"llm_id": self.llm_id, **_usage_sum([self._usage])}
        prompt = _tokens(self.prompt_chars + len(self.text) - self._stint)
        completion = _tokens(self._stint)
        return {
            "llm_id": self.llm_id, "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion, "estimated": True,
        }  # fmt: skip

    def _adopt(self, llm_id: str, model: str, upstream: UpstreamStream) -> None:
        self.llm_id, self.model, self.upstream = llm_id, model, upstream
        self._usage, self._stint = None, 0
        if upstream.malformed:
            self.metrics.upstream_errors.labels(llm_id, "malformed_chunk").inc(upstream.malformed)

    async def events(self) -> AsyncIterator[bytes]:
        """The SSE lines to send: every chunk, then [DONE]; or, where no LLM continued a
        broken stream, an error event and no [DONE]."""
        self._adopt(self.llm_id, self.model, self.upstream)
        pending: deque[Any] = deque(self.upstream.head)
        seam: dict[str, str] | None = None
        malformed = 0
        accounted = False  # the current stream's end has been accounted
        check: Restart | None = None  # a continuation's first words, until they tell
        held: list[Any] = []  # its chunks held back meanwhile
        try:
            while True:
                broken: UpstreamError | None = None
                reason = "cut"  # why it broke: "cut", "stall" or "malformed"
                if pending:
                    chunk = pending.popleft()
                else:
                    try:
                        chunk = await self.upstream.next_chunk()
                    except UpstreamError as error:  # a reset connection or a stall
                        chunk, broken = None, error
                        reason = "stall" if error.kind is Failure.TIMEOUT else "cut"
                if broken is None and chunk == MALFORMED:
                    self.metrics.upstream_errors.labels(self.llm_id, "malformed_chunk").inc()
                    malformed += 1
                    if malformed <= self.malformed_max:
                        continue
                    broken, reason = stream_failure(self.llm_id, "malformed"), "malformed"
                elif broken is None and chunk is not None and chunk != DONE:
                    malformed = 0
                    ready = [chunk]
                    if check is not None:
                        told = check.feed(_first_content(chunk))
                        if told == "hold" and not _finishes(chunk):
                            held.append(chunk)
                            continue
                        if told == "hold":
                            told = check.ended()
                        if told == "incoherent":
                            accounted = True
                            self._ended(self.llm_id, self.upstream, True)
                            yield self._restarted_error()
                            return
                        ready = [*held, chunk]
                        if told == "restarted":
                            ready = [_with_content(chunk, check.rest)]
                        check, held = None, []
                    for part in ready:
                        yield self._event(part, seam)
                        seam = None
                    continue
                if check is not None and held and chunk == DONE:
                    # the continuation ended while its words were held back
                    if check.ended() == "incoherent":
                        accounted = True
                        self._ended(self.llm_id, self.upstream, True)
                        yield self._restarted_error()
                        return
                    for part in held:
                        yield self._event(part, seam)
                        seam = None
                    check, held = None, []
                if chunk == DONE or self.finished:
                    # [DONE], or its last chunk (a finish_reason) came: whole, only its
                    # [DONE] (or a usage chunk after it) missing where it broke or closed
                    if chunk != DONE:
                        self.metrics.upstream_errors.labels(self.llm_id, "no_done").inc()
                    accounted = True
                    self._ended(self.llm_id, self.upstream, True)
                    yield DONE_EVENT
                    return
                broken = broken or stream_failure(self.llm_id, "cut")
                accounted = True
                self._broke(self.llm_id, self.upstream, broken)
                await self.upstream.aclose()
                if not self.resumable:
                    yield self._error(f"{broken}; the answer is incomplete")
                    return
                found = await self._resume(self.text, self.llm_id, reason)
                if isinstance(found, str):
                    yield self._error(f"{broken}; {found}; the answer is incomplete")
                    return
                llm_id, upstream, model = found
                self.usage_by.append(self._spent())
                self.metrics.stream_continuations.labels(self.llm_id, llm_id, reason).inc()
                seam = {"continued_from": self.llm_id, "reason": reason, "llm_id": llm_id}
                self.continuations.append({"from": self.llm_id, "to": llm_id, "reason": reason})
                yield f": locus: continued from {self.llm_id} ({reason}) on {llm_id}\n\n".encode()
                self._adopt(llm_id, model, upstream)
                pending, malformed, accounted = deque(upstream.head), 0, False
                check, held = Restart(self.text), []
        finally:
            if not accounted:  # the caller hung up: the upstream was streaming well so far
                self._ended(self.llm_id, self.upstream, False)
            await self.upstream.aclose()

    def _restarted_error(self) -> bytes:
        logger.warning(
            "%s started the answer over instead of continuing it; the stream ends with an "
            "error event",
            self.llm_id,
        )
        return self._error(
            f"{self.llm_id} started the answer over instead of continuing it (its text "
            "repeats the beginning of the answer sent, then departs from it): the answer is "
            "incomplete"
        )

    @staticmethod
    def _error(message: str) -> bytes:
        return _sse({"error": {"message": message, "type": "upstream_stream_error"}})
