"""The gateway's decision log: one row per chat request `locus serve` answered, with the
probability that routing chose the LLM that answered (the logging probability off-policy
estimates divide by: `locus.offpolicy`) and its outcome once posted (`POST /v1/outcomes`).

Every write is its own transaction, so a crash loses at most the request in flight; the log is
kept to the newest `trim_decisions(keep)` rows. Replicas on one PostgreSQL store share it: an
outcome may be posted to any of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import delete, func, select, update

from locus.store import schema
from locus.store._core import StoreCore, now

__all__ = ["DECISION_FIELDS", "StoreDecisions", "stamp"]

# the columns of a decision, in the order `decisions` returns and an export writes them
DECISION_FIELDS = tuple(column.name for column in schema.decisions.columns)


def stamp() -> str:
    """The current UTC time, ISO 8601 to the microsecond: decisions are ordered by it."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _row(values: Any) -> dict[str, Any]:
    found = dict(zip(DECISION_FIELDS, values, strict=True))
    found["ranked"] = json.loads(found["ranked"]) if found["ranked"] else []
    found["explored"] = bool(found["explored"])
    return found


class StoreDecisions(StoreCore):
    """`put_decision`, `decision`, `decisions`, `set_decision_outcome`, `trim_decisions`,
    `decision_count`."""

    def put_decision(self, decision: Mapping[str, Any]) -> None:
        """Keep one decision (`DECISION_FIELDS`; `asked_at` defaults to now, `ranked` is a
        list of [llm_id, P(correct)])."""
        row = {name: decision.get(name) for name in DECISION_FIELDS}
        row["asked_at"] = row["asked_at"] or stamp()
        row["ranked"] = json.dumps(row["ranked"] or [])
        row["explored"] = int(bool(row["explored"]))
        with self._write(data=False) as conn:
            conn.execute(schema.decisions.insert().values(**row))

    def decision(self, request_id: str) -> dict[str, Any] | None:
        """The decision of one request, or None (unknown, or trimmed)."""
        d = schema.decisions.c
        with self._read() as conn:
            found = conn.execute(
                select(*[d[f] for f in DECISION_FIELDS]).where(d.request_id == request_id)
            ).first()
        return None if found is None else _row(found)

    def decisions(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The decisions, oldest first (the newest `limit` where given)."""
        d = schema.decisions.c
        query = select(*[d[f] for f in DECISION_FIELDS]).order_by(
            d.asked_at.desc(), d.request_id.desc()
        )
        if limit is not None:
            query = query.limit(limit)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [_row(r) for r in reversed(rows)]

    def decision_count(self) -> int:
        with self._read() as conn:
            return int(
                conn.execute(select(func.count()).select_from(schema.decisions)).scalar() or 0
            )

    def set_decision_outcome(self, request_id: str, score: float) -> bool:
        """Record the outcome of a logged request; False where the log does not hold it."""
        d = schema.decisions.c
        with self._write(data=False) as conn:
            done = conn.execute(
                update(schema.decisions)
                .where(d.request_id == request_id)
                .values(outcome=float(score), outcome_at=now())
            )
        return bool(done.rowcount)

    def trim_decisions(self, keep: int) -> int:
        """Drop all but the newest `keep` decisions; returns how many went."""
        d = schema.decisions.c
        with self._write(data=False) as conn:
            total = conn.execute(select(func.count()).select_from(schema.decisions)).scalar() or 0
            if total <= keep:
                return 0
            cutoff = conn.execute(
                select(d.asked_at, d.request_id)
                .order_by(d.asked_at.desc(), d.request_id.desc())
                .offset(keep)
                .limit(1)
            ).first()
            assert cutoff is not None
            done = conn.execute(
                delete(schema.decisions).where(
                    (d.asked_at < cutoff.asked_at)
                    | ((d.asked_at == cutoff.asked_at) & (d.request_id <= cutoff.request_id))
                )
            )
        return int(done.rowcount)
