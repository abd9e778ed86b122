"""What can go wrong calling an LLM's endpoint, in the gateway's words: the kind of failure
(`Failure`: retryable, transient, unwell, retired, refused), the error that carries it
(`UpstreamError`) and one failed try of one LLM (`Attempt`). `locus.server.upstream` makes the
calls and re-exports these.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["Attempt", "Failure", "UpstreamError"]


class Failure(str, Enum):
    """Why an LLM tried for a request gave no answer. The value is what the headers
    (`x-locus-failed: a=server_error`), the metrics' `kind` label and error messages say."""

    CONNECT = "connect"  # no connection: refused, unreachable, a name that does not resolve
    DROPPED = "dropped"  # the connection accepted, then closed or reset without a whole answer
    TIMEOUT = "timeout"  # no answer, or no first token, in time; a stream that stalled
    RATE_LIMITED = "rate_limited"  # 429
    SERVER_ERROR = "server_error"  # 5xx
    BAD_RESPONSE = "bad_response"  # not a chat completion; a stream broken, cut short, empty
    CONTEXT_LENGTH = "context_length"  # a 4xx saying the request exceeds its context
    RETIRED = "retired"  # 404 / 410: the provider no longer serves the model
    REFUSED = "refused"  # another 4xx (a content filter): the request's fault, not the LLM's
    CIRCUIT_OPEN = "circuit_open"  # no call: the gateway skipped the LLM, its circuit open

    def __str__(self) -> str:
        return self.value

    @property
    def retryable(self) -> bool:
        """Another LLM may answer: the gateway falls back. Not for a refused request, which
        goes back to the client as it came."""
        return self is not Failure.REFUSED

    @property
    def transient(self) -> bool:
        """The same LLM may answer a moment later: it is called again before the next."""
        return self in (
            Failure.CONNECT, Failure.DROPPED, Failure.RATE_LIMITED, Failure.SERVER_ERROR,
        )  # fmt: skip

    @property
    def unwell(self) -> bool:
        """The LLM (or the way to it) is failing: the failure feeds its circuit breaker. An
        upstream that answered, with a refusal or a context limit, is up."""
        return self in (
            Failure.CONNECT, Failure.DROPPED, Failure.TIMEOUT, Failure.RATE_LIMITED,
            Failure.SERVER_ERROR, Failure.BAD_RESPONSE,
        )  # fmt: skip


class UpstreamError(Exception):
    """A failed upstream attempt.

    Attributes:
        llm_id, kind: the LLM and why it failed (`Failure`).
        status: the upstream's HTTP status (None when no response came).
        retry_after: seconds from a 429's Retry-After header, if any (None for any other).
        body: the upstream's JSON error body for a refused request.
    """

    def __init__(
        self,
        llm_id: str,
        kind: Failure,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(f"{llm_id}: {message}")
        self.llm_id, self.kind, self.status = llm_id, kind, status
        self.retry_after, self.body = retry_after, body

    @property
    def retryable(self) -> bool:
        return self.kind.retryable

    @property
    def transient(self) -> bool:
        return self.kind.transient

    @property
    def unwell(self) -> bool:
        return self.kind.unwell

    @property
    def retired(self) -> bool:
        """The model is gone (404 / 410, or its endpoint left the catalog)."""
        return self.kind is Failure.RETIRED

    @property
    def refused(self) -> bool:
        """The upstream refused the request itself (its 4xx goes back as it came)."""
        return self.kind is Failure.REFUSED


@dataclass(frozen=True)
class Attempt:
    """One LLM tried for a request that gave no answer: why (`kind`), and the upstream's HTTP
    status where one came. The gateway writes one per failed call (and per LLM skipped for its
    open circuit); an answer's `x-locus-failed` header and error message read them."""

    llm_id: str
    kind: Failure
    status: int | None = None

    def __str__(self) -> str:
        """In words, for messages and logs: "a: server_error"."""
        return f"{self.llm_id}: {self.kind.value}"
