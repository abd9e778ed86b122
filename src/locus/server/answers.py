"""What the gateway answers: the model names it routes by (`parse_model`), its answers
(`ChatAnswer`, `StreamAnswer`), its error (`GatewayError`) and the SSE line format."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from locus.errors import LocusInputError
from locus.routing.router import RankedLLM
from locus.routing.rules import DecisionRule

__all__ = ["ROUTING_MODEL", "ChatAnswer", "GatewayError", "StreamAnswer", "parse_model", "sse"]

ROUTING_MODEL = "locus"


class GatewayError(Exception):
    """No LLM answered (`status` 502/503/504), or an upstream refused the request (its 4xx).

    Attributes:
        llm_id: the LLM whose upstream gave this answer (a refusal), None when none did.
        attempts: upstream calls made for the request (0: none).
        failed: the LLMs tried before `llm_id` (all of them when it is None), with why.
    """

    def __init__(
        self, status: int, message: str, *, kind: str, body: Any = None,
        llm_id: str | None = None, attempts: int = 0,
        failed: Sequence[Mapping[str, Any]] = (),
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.kind, self.body = status, kind, body
        self.llm_id, self.attempts, self.failed = llm_id, attempts, list(failed)


@dataclass(frozen=True)
class ChatAnswer:
    """The answering LLM's completion and how it came about."""

    payload: dict[str, Any]
    llm_id: str
    attempts: int
    cost_usd: float | None
    failed: list[dict[str, Any]] = field(default_factory=list)
    predicted: RankedLLM | None = None  # the router's P(correct) and expected cost for it
    upstream_model: str | None = None  # the model name the upstream answered with
    explored: bool = False  # routed by an exploration draw, not to the best mean

    @property
    def fell_back(self) -> bool:
        return self.attempts > 1


@dataclass(frozen=True)
class StreamAnswer:
    """A stream past its first token: the answering LLM, attempts, and the SSE lines."""

    llm_id: str
    attempts: int
    events: AsyncIterator[bytes]
    failed: list[dict[str, Any]] = field(default_factory=list)
    predicted: RankedLLM | None = None
    upstream_model: str | None = None
    explored: bool = False


def sse(data: Any) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def parse_model(name: object, llm_ids: Collection[str]) -> tuple[str | None, DecisionRule]:
    """The model name -> (a fixed llm_id or None to route, the decision rule): `locus`
    (accuracy), `locus:cost=W`, `locus:quality=S`, `locus:budget=B` (`locus.routing.rules`).

    Raises:
        LocusInputError: not a string, an unknown model, a malformed or out-of-range rule.
    """
    if not isinstance(name, str) or not name:
        raise LocusInputError(
            f"model must be {ROUTING_MODEL!r}, 'locus:quality=S', 'locus:budget=B', "
            "'locus:cost=W' or an llm_id"
        )
    if name in llm_ids:
        return name, DecisionRule()
    if name == ROUTING_MODEL:
        return None, DecisionRule()
    head, sep, tail = name.partition(":")
    if head == ROUTING_MODEL and sep:
        try:
            return None, DecisionRule.parse(tail)
        except LocusInputError as error:
            raise LocusInputError(f"model {name!r}: {error}") from None
    shown = ", ".join(sorted(llm_ids)[:5])
    raise LocusInputError(
        f"unknown model {name!r}; expected {ROUTING_MODEL!r}, 'locus:quality=0.95', "
        f"'locus:budget=0.001', 'locus:cost=10' or an llm_id ({shown}, ...; GET /v1/models "
        "lists them)"
    )
