"""Limits, timeouts and retries of the service: one dataclass, set from `locus serve` options
or a TOML file (`ServerSettings.from_file`), shrunk by tests.

    # serve.toml
    max_attempts = 4
    first_token_timeout_s = 10
    retries_per_llm = 1
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from locus.errors import LocusInputError

__all__ = ["DECISION_LOGS", "DRIFT_ACTIONS", "ServerSettings"]


# what an LLM's drift alarm does (`ServerSettings.on_drift`)
DRIFT_ACTIONS = ("discount", "alert")
# what the decision log keeps of each request's text (`ServerSettings.decision_log`)
DECISION_LOGS = ("hash", "text", "off")
_WORDS = {"on_drift": DRIFT_ACTIONS, "decision_log": DECISION_LOGS}


@dataclass(frozen=True)
class ServerSettings:
    """What bounds every request.

    Attributes:
        max_body_bytes: larger request bodies get 413.
        max_batch: most texts one /v1/route call may route.
        max_attempts: LLMs tried for one chat request (the routed one, then fallbacks); each
            may be called `1 + retries_per_llm` times.
        attempt_timeout_s: one non-streaming upstream call, connect to last byte.
        first_token_timeout_s: a streaming call's wait for its first token (then it falls
            back). 10 s, from measured times to the first token: with a public gateway fault
            harness, whose reference client moves on at about 10 s, the slow-first-token case
            passed in 11.4 s at 10 s and exceeded the harness's 15 s bound at 15 s (the
            default was 15 s).
        total_timeout_s: the time spent finding an LLM that answers: every attempt before
            the first answer, and before each continuation of a broken stream, together
            (the time an answer streams is not counted).
        stall_timeout_s: a stream that sends nothing for this long after its first token is
            broken: it continues on the next LLM (`locus.server.streaming`), or ends with an
            error event where none continues it. 10 s, as the first token's: a public
            gateway fault harness's reference client fails a stalled stream over in 11 s,
            where 30 s (the earlier default) left its caller waiting three times as long.
        retries_per_llm: calls of the same LLM again, after a transient failure (a 5xx, a
            reset connection, a 429 whose Retry-After is short), before falling over to the
            next one.
        retry_backoff_s: the wait before such a retry (a 429's Retry-After instead, when it
            says so and it is at most `retry_after_max_s`).
        retry_after_max_s: a longer Retry-After moves on to the next LLM at once.
        malformed_chunks_max: malformed SSE chunks skipped (and counted) in one stream before
            it is ended as broken.
        breaker_failures, breaker_cooldown_s: an LLM failing this many times in a row is
            skipped for the cool-down, then given one trial request.
        outcome_refresh_s: 0: an LLM is re-embedded as soon as outcomes for it are posted;
            otherwise at most this often, in the background.
        top: ranked LLMs in a /v1/route answer (the fallback order is the whole ranking).
        pool_check_s: how often (at most) a request checks the store for LLM embeddings
            written by another process (a replica's onboarding): the pool is re-read when they
            changed.
        on_drift: what an LLM's drift alarm does (`locus.routing.drift`: its outcomes, read
            against the P(correct) predicted when it answered, say it became worse):
            "discount" (the default) drops the evidence of it from before the change from
            its votes, so routing reads what it does now; "alert" only raises the alarm (the
            /v1/upstreams field, the metric, the log line).
        explore: the share of routed chat requests (in [0, 1]) sent by a Thompson draw on the
            candidates' uncertainty rather than to the best mean (`locus.routing.explore`), so
            that an LLM the router is unsure of gets outcomes; 0 (the default) is off. A
            request overrides it with its own `explore` field.
        decision_log: the workspace's decision log of chat requests (`locus decisions`:
            the LLM that answered, the probability routing chose it, P(correct), latency,
            tokens, cost, the outcome once posted), keeping each text's "hash" (the default),
            its "text" too (the log is then evidence a fit can read), or "off".
        decision_log_max: decisions kept (the oldest dropped beyond it).
        canary_every_s: run the canary checks (`locus canary check`: the LLMs with a recorded
            baseline asked its probes again) every this many seconds; 0 (the default): off. An
            alarm is the `canary` field of /v1/upstreams, `locus_canary_alarm`, a log line,
            and acts as `on_drift` says.
        outcome_max_age_days: posted outcomes older than this leave routing's votes (evidence
            that ages: an endpoint that drifts slowly); 0 (the default): every outcome counts.
            The window moves at each re-read of the pool, at least every hundredth of it.
    """

    max_body_bytes: int = 1_000_000
    max_batch: int = 256
    max_attempts: int = 3
    attempt_timeout_s: float = 30.0
    first_token_timeout_s: float = 10.0
    total_timeout_s: float = 60.0
    stall_timeout_s: float = 10.0
    retries_per_llm: int = 1
    retry_backoff_s: float = 0.25
    retry_after_max_s: float = 2.0
    malformed_chunks_max: int = 10
    breaker_failures: int = 3
    breaker_cooldown_s: float = 30.0
    outcome_refresh_s: float = 0.0
    top: int = 3
    pool_check_s: float = 1.0
    explore: float = 0.0
    on_drift: str = "discount"
    decision_log: str = "hash"
    decision_log_max: int = 1_000_000
    outcome_max_age_days: float = 0.0
    canary_every_s: float = 0.0

    def __post_init__(self) -> None:
        for name, allowed in _WORDS.items():
            if getattr(self, name) not in allowed:
                raise LocusInputError(
                    f"server setting {name}: expected one of {', '.join(allowed)}, found "
                    f"{getattr(self, name)!r}"
                )
        for field in fields(self):
            if field.name in _WORDS:
                continue
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise LocusInputError(
                    f"server setting {field.name}: expected a number >= 0, found {value!r}"
                )
        if self.max_attempts < 1 or self.top < 1:
            raise LocusInputError("server settings: max_attempts and top must be at least 1")
        if self.explore > 1:
            raise LocusInputError(
                f"server setting explore: expected a share of requests in [0, 1], found "
                f"{self.explore!r}"
            )

    def with_(self, **changes: Any) -> ServerSettings:
        """A copy with `changes` (None values ignored: an option left unset)."""
        given = {k: v for k, v in changes.items() if v is not None}
        unknown = sorted(set(given) - {f.name for f in fields(self)})
        if unknown:
            raise LocusInputError(
                f"unknown server setting {unknown[0]!r}; expected one of "
                f"{', '.join(f.name for f in fields(self))}"
            )
        return dataclasses.replace(self, **given)

    def to_json(self) -> str:
        """The settings as JSON (`from_json` reads them back: worker processes)."""
        import json

        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServerSettings:
        import json

        return cls().with_(**json.loads(text))

    @classmethod
    def from_file(cls, path: str | Path, base: ServerSettings | None = None) -> ServerSettings:
        """`base` (default: the defaults) with the values of a TOML file of setting names.

        Raises:
            LocusInputError: an unreadable file, an unknown name, a value of the wrong type.
        """
        import tomllib

        try:
            values: Mapping[str, Any] = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise LocusInputError(f"{path}: not a readable TOML settings file ({error})") from None
        try:
            return (base or cls()).with_(**values)
        except LocusInputError as error:
            raise LocusInputError(f"{path}: {error}") from None
