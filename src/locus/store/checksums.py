"""Content checksums of a store: sha256 of its LLMs, queries and scores, cached."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import Connection, Select, func, select

from locus.store import schema
from locus.store._core import DATA_VERSION, StoreCore, raw_row_batches
from locus.store.imports import LLM_METADATA

__all__ = ["StoreChecksums"]


class StoreChecksums(StoreCore):
    """`checksums`."""

    def checksums(self) -> dict[str, str]:
        """sha256 of the content of the llms, queries and scores (timestamps excluded).

        Two stores holding the same data have the same checksums, whatever order it came in.
        "queries" digests each alias (source, query_id, text_hash, task, split), plus its
        namespace where a query without text lives in another namespace than its source's;
        "scores" digests (llm_id, source, query_id, text_hash, score, cost_usd, latency_ms) per
        stored score. These are the rows of schema version 1, so a migrated store keeps its
        checksums.

        Digesting every score takes seconds on a large store, so the result is kept in the meta
        table under a key of the store's `data_version` counter (raised by every write that may
        change content) and its row counts and highest row ids (which also catch a writer that
        does not raise the counter), and recomputed only when that key changes.
        """
        with self._read() as conn:
            key = _content_key(conn)
            cached = conn.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == _CHECKSUMS)
            ).scalar()
            if cached is not None:
                entry = json.loads(cached)
                if entry.get("key") == key:
                    return dict(entry["checksums"])
            out = _digest_content(conn)
        self.set_meta(_CHECKSUMS, json.dumps({"key": key, "checksums": out}))
        return out


_CHECKSUMS = "content_checksums"


def _content_key(conn: Connection) -> list[Any]:
    """What the cached checksums are valid for: the data version, then per content table its
    row count and highest id (for scores, the latest import time)."""
    version = conn.execute(
        select(schema.meta.c.value).where(schema.meta.c.key == DATA_VERSION)
    ).scalar()
    key: list[Any] = [version]
    for table, column in (
        (schema.llms, schema.llms.c.id),
        (schema.queries, schema.queries.c.id),
        (schema.query_aliases, schema.query_aliases.c.id),
        (schema.scores, schema.scores.c.imported_at),
    ):
        count, highest = conn.execute(
            select(func.count(), func.max(column)).select_from(table)
        ).one()
        key += [int(count), None if highest is None else str(highest)]
    return key


def _digest_content(conn: Connection) -> dict[str, str]:
    a, q, s, m = schema.query_aliases.c, schema.queries.c, schema.scores.c, schema.llms.c
    statements: dict[str, Select[Any]] = {
        "llms": select(m.llm_id, *[m[c] for c in LLM_METADATA]).order_by(m.llm_id),
        "queries": select(a.source, a.query_id, a.text_hash, a.task, a.split, q.query_key)
        .join(schema.queries, q.id == a.query)
        .order_by(a.source, a.query_id, a.text_hash),
        "scores": select(
            m.llm_id, a.source, a.query_id, a.text_hash, s.score, s.cost_usd, s.latency_ms
        )
        .join(schema.llms, m.id == s.llm)
        .join(schema.query_aliases, a.id == s.alias)
        .order_by(m.llm_id, a.source, a.query_id, a.text_hash),
    }
    out = {}
    for name, stmt in statements.items():
        digest = hashlib.sha256()
        if name == "scores" and conn.dialect.name == "sqlite":
            _digest_scores_by_llm(conn, digest)
        elif name == "scores":
            _digest_scores(conn, stmt, digest)
        else:
            for row in conn.execute(stmt):
                values = list(row)
                if name == "queries":
                    values = _alias_content(values)
                digest.update(json.dumps(values, default=str).encode())
                digest.update(b"\n")
        out[name] = digest.hexdigest()
    return out


def _digest_scores(conn: Connection, stmt: Select[Any], digest: Any) -> None:
    """The scores' rows into `digest`, byte for byte what `json.dumps(row) + "\\n"` per row
    gives, built faster: each distinct string is JSON-encoded once, numbers as JSON writes them
    (repr), rows read through the driver's cursor and hashed 100,000 at a time (40 s -> a few
    at 7.2 M scores)."""
    encoded: dict[Any, str] = {None: "null"}

    def text(value: Any) -> str:
        found = encoded.get(value)
        if found is None:
            found = encoded[value] = json.dumps(value, default=str)
        return found

    def number(value: Any) -> str:
        if value is None:
            return "null"
        # JSON writes a finite float as its repr (stored scores and costs are finite)
        return float.__repr__(value) if type(value) is float else json.dumps(value)

    for rows in raw_row_batches(conn, stmt, 100_000):
        lines = [
            f"[{text(llm)}, {text(source)}, {text(query)}, {text(hashed)}, "
            f"{number(score)}, {number(cost)}, {number(latency)}]\n"
            for llm, source, query, hashed, score, cost, latency in rows
        ]
        digest.update("".join(lines).encode())


def _json_number(value: Any) -> str:
    """A stored number as `json.dumps` writes it (a finite float: its repr)."""
    if value is None:
        return "null"
    return float.__repr__(value) if type(value) is float else json.dumps(value)


def _sqlite_order(value: Any) -> tuple[int, Any]:
    """SQLite's ascending order of a column value: NULL first, then numbers, then text by
    its UTF-8 bytes (the BINARY collation)."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)):
        return (1, value)
    return (2, str(value).encode())


def _digest_scores_by_llm(conn: Connection, digest: Any) -> None:
    """What `_digest_scores` writes, in SQLite's order, without SQLite sorting every score:
    LLMs in order, each LLM's scores read on their own (the primary key's range) and put in
    its aliases' order here, each alias's JSON written once. Sorting 80 M joined rows in the
    database took most of a fit's minutes; this reads each row once, in key order."""
    a, s, m = schema.query_aliases.c, schema.scores.c, schema.llms.c
    rank: dict[int, int] = {}
    fragment: dict[int, str] = {}
    aliases = conn.execute(select(a.id, a.source, a.query_id, a.text_hash)).all()
    ordered = sorted(aliases, key=lambda r: tuple(_sqlite_order(v) for v in r[1:]))
    for position, (alias, source, query_id, text_hash) in enumerate(ordered):
        rank[alias] = position
        fragment[alias] = ", ".join(
            json.dumps(v, default=str) for v in (source, query_id, text_hash)
        )
    tails: dict[tuple[Any, Any, Any], str] = {}

    def tail(score: Any, cost: Any, latency: Any) -> str:
        # stored numbers are REAL (floats) or NULL: one key per value, no 1 == 1.0 mix-up
        key = (score, cost, latency)
        found = tails.get(key)
        if found is None:
            found = tails[key] = (
                f", {_json_number(score)}, {_json_number(cost)}, {_json_number(latency)}]\n"
            )
        return found

    llms = conn.execute(select(m.id, m.llm_id)).all()
    for llm, llm_id in sorted(llms, key=lambda r: _sqlite_order(r[1])):
        stmt = select(s.alias, s.score, s.cost_usd, s.latency_ms).where(s.llm == llm)
        rows = [row for batch in raw_row_batches(conn, stmt, 500_000, literal_binds=True)
                for row in batch]  # fmt: skip
        rows.sort(key=lambda row: rank[row[0]])
        prefix = f"[{json.dumps(llm_id, default=str)}, "
        digest.update(
            "".join([prefix + fragment[al] + tail(sc, co, la) for al, sc, co, la in rows]).encode()
        )


def _alias_content(values: list[object]) -> list[object]:
    """(source, query_id, text_hash, task, split, query_key) -> the checksummed alias row."""
    source, query_id, text_hash, task, split, query_key = values
    row = [source, query_id, text_hash, task, split]
    if not text_hash and query_key != schema.query_identity("", str(source), str(query_id)):
        row.append(json.loads(str(query_key))[0])
    return row
