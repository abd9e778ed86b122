"""API keys of `locus serve`, stored hashed (sha256) in the meta table: never the key itself.

A key is `lk-` + 43 random URL-safe characters (256 bits), shown once when created; the store
keeps its hash, a short id, a name, the creation and revocation times, and what the key's
requests may do: `substitute` False is a key whose requests that name an LLM are answered by
that LLM or not at all (no other LLM in its place; `locus keys create --no-substitution`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select

from locus.errors import LocusInputError, LocusNotFoundError
from locus.store import schema
from locus.store._core import StoreCore, now

__all__ = ["ApiKey", "StoreKeys"]

_PREFIX = "api_key:"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    """A live key, as a request with it is served: its id, name, and whether a request of it
    that names an LLM may be answered by another LLM where that one fails (`substitute`)."""

    id: str
    name: str
    substitute: bool = True


class StoreKeys(StoreCore):
    """`create_key`, `list_keys`, `revoke_key`, `verify_key`."""

    def create_key(self, name: str, *, substitute: bool = True) -> tuple[str, str]:
        """A new key for `name`: returns (key id, the secret to hand out; shown only now).
        `substitute` False: its requests that name an LLM get that LLM or an error."""
        name = name.strip()
        if not name:
            raise LocusInputError("a key needs a name (who or what uses it), e.g. ci-bot")
        secret = "lk-" + secrets.token_urlsafe(32)
        digest = _digest(secret)
        key_id = digest[:12]
        record = {
            "name": name, "sha256": digest, "created_at": now(), "revoked_at": None,
            "substitute": substitute,
        }  # fmt: skip
        with self._write(data=False) as conn:
            conn.execute(
                schema.meta.insert().values(key=_PREFIX + key_id, value=json.dumps(record))
            )
        return key_id, secret

    def list_keys(self) -> list[dict[str, Any]]:
        """Every key: id, name, created_at, revoked_at (no hashes)."""
        m = schema.meta.c
        with self._read() as conn:
            rows = conn.execute(select(m.key, m.value).where(m.key.like(_PREFIX + "%"))).all()
        out = []
        for key, value in sorted(rows):
            record = json.loads(value)
            out.append(
                {
                    "id": key[len(_PREFIX) :],
                    "name": record["name"],
                    "created_at": record["created_at"],
                    "revoked_at": record.get("revoked_at"),
                    "substitute": record.get("substitute", True),
                }
            )
        return out

    def revoke_key(self, key_id: str) -> None:
        """Revoke a key by its id: requests with it are refused from now on."""
        m = schema.meta.c
        with self._write(data=False) as conn:
            value = conn.execute(select(m.value).where(m.key == _PREFIX + key_id)).scalar()
            if value is None:
                raise LocusNotFoundError(f"no API key {key_id!r}; see locus keys list")
            record = json.loads(value)
            if record.get("revoked_at") is None:
                record["revoked_at"] = now()
            conn.execute(delete(schema.meta).where(m.key == _PREFIX + key_id))
            conn.execute(
                schema.meta.insert().values(key=_PREFIX + key_id, value=json.dumps(record))
            )

    def verify_key(self, secret: str) -> ApiKey | None:
        """The live key `secret` is, or None (unknown or revoked)."""
        if not secret.startswith("lk-"):
            return None
        digest = _digest(secret)
        value = self.get_meta(_PREFIX + digest[:12])
        if value is None:
            return None
        record = json.loads(value)
        if record.get("revoked_at") is not None or not secrets.compare_digest(
            record["sha256"], digest
        ):
            return None
        return ApiKey(digest[:12], record["name"], bool(record.get("substitute", True)))
