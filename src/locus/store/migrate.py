"""In-place schema migrations, run by `Store.open` in the one transaction that opens the store:
a migration that fails leaves the database exactly as it was.

Version 5 -> 6 adds the `canary_answers` table (empty); 4 -> 5 the `decisions` table.

Version 3 -> 4 adds the `query_references` and `probe_answers` tables (empty).

Version 2 -> 3 adds the `artifacts` table (trained artifacts kept in the database).

Version 1 -> 2 (query identity). Version 1 had one `queries` row per (source, query_id,
text_hash) and `scores` keyed by (llm, query, source), so the same text imported from two files
was two queries. Version 2 keeps those rows as `query_aliases`, with the **same ids** (so the
scores' query references carry over unchanged), and adds one `queries` row per identity: the text
hash, or (source, query_id) for a query without text (version 1 had no namespaces, so a source
was its own). Sources that share a text now share the query. Each identity's task and split are
the first non-null ones in import order; each alias keeps its own.

The steps are SQLAlchemy Core and plain SQL that PostgreSQL runs too: the old tables are renamed
out of the way (after dropping their indexes, whose names are global in PostgreSQL), the new ones
are created, filled, and the old ones dropped, child before parent so that foreign keys hold at
every step.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    insert,
    select,
    text,
)

from locus.store import schema
from locus.store._core import CHUNK, now

__all__ = [
    "migrate_v1_to_v2",
    "migrate_v2_to_v3",
    "migrate_v3_to_v4",
    "migrate_v4_to_v5",
    "migrate_v5_to_v6",
]

logger = logging.getLogger("locus.store")

# The version-1 tables as they are once renamed out of the way (columns read or copied only).
_v1 = MetaData()
_queries_v1 = Table(
    "queries_v1",
    _v1,
    Column("id", Integer),
    Column("source", String(200)),
    Column("query_id", String(300)),
    Column("text_hash", String(64)),
    Column("query_text", Text),
    Column("task", String(200)),
    Column("split", String(16)),
)
_scores_v1 = Table(
    "scores_v1",
    _v1,
    Column("llm", Integer),
    Column("query", Integer),
    Column("source", String(200)),
    Column("score", Float),
    Column("cost_usd", Float),
    Column("latency_ms", Float),
    Column("imported_at", String(40)),
)


def migrate_v1_to_v2(conn: Connection) -> dict[str, int]:
    """Rewrite a version-1 store as version 2 on `conn`, inside the caller's transaction.

    Returns:
        {"aliases": n, "queries": n, "scores": n}: the version-1 query rows (now aliases), the
        query identities they make, and the scores carried over.
    """
    for statement in (
        "DROP INDEX IF EXISTS ix_scores_query",
        "DROP INDEX IF EXISTS ix_queries_text_hash",
        "ALTER TABLE scores RENAME TO scores_v1",
        "ALTER TABLE queries RENAME TO queries_v1",
    ):
        conn.execute(text(statement))
    schema.metadata.create_all(
        conn, tables=[schema.queries, schema.query_aliases, schema.scores], checkfirst=False
    )

    old = conn.execute(select(_queries_v1).order_by(_queries_v1.c.id)).mappings().all()
    identities: dict[str, dict[str, Any]] = {}
    keys = []
    for row in old:
        key = schema.query_identity(row["text_hash"], row["source"], row["query_id"])
        keys.append(key)
        entry = identities.get(key)
        if entry is None:
            identities[key] = {
                "query_key": key,
                "text_hash": row["text_hash"],
                "query_text": row["query_text"],
                "task": row["task"],
                "split": row["split"],
            }
        else:
            for field in ("task", "split"):
                if entry[field] is None:
                    entry[field] = row[field]
    rows = list(identities.values())
    for start in range(0, len(rows), CHUNK):
        conn.execute(insert(schema.queries), rows[start : start + CHUNK])
    q = schema.queries.c
    query_pk = {key: pk for key, pk in conn.execute(select(q.query_key, q.id))}
    aliases = [
        {
            "id": row["id"],
            "source": row["source"],
            "query_id": row["query_id"],
            "text_hash": row["text_hash"],
            "query": query_pk[key],
            "task": row["task"],
            "split": row["split"],
        }
        for row, key in zip(old, keys, strict=True)
    ]
    for start in range(0, len(aliases), CHUNK):
        conn.execute(insert(schema.query_aliases), aliases[start : start + CHUNK])
    if conn.dialect.name == "postgresql" and aliases:
        # explicit ids do not advance a PostgreSQL serial; SQLite's rowid needs nothing
        conn.execute(
            text(
                "SELECT setval(pg_get_serial_sequence('query_aliases', 'id'), "
                "(SELECT max(id) FROM query_aliases))"
            )
        )

    old_scores = _scores_v1.c
    conn.execute(
        insert(schema.scores).from_select(
            ["llm", "alias", "source", "score", "cost_usd", "latency_ms", "imported_at"],
            select(
                old_scores.llm,
                old_scores.query,
                old_scores.source,
                old_scores.score,
                old_scores.cost_usd,
                old_scores.latency_ms,
                old_scores.imported_at,
            ),
        )
    )
    n_scores = conn.execute(select(func.count()).select_from(schema.scores)).scalar_one()
    conn.execute(text("DROP TABLE scores_v1"))
    conn.execute(text("DROP TABLE queries_v1"))

    m = schema.meta.c
    conn.execute(schema.meta.update().where(m.key == "schema_version").values(value="2"))
    conn.execute(insert(schema.meta).values(key="migrated_from_schema_1_at", value=now()))
    counts = {"aliases": len(aliases), "queries": len(rows), "scores": int(n_scores)}
    logger.info(
        "migrated the workspace from schema 1 to 2: %d query rows became aliases of %d queries; "
        "%d scores kept",
        counts["aliases"],
        counts["queries"],
        counts["scores"],
    )
    return counts


def migrate_v2_to_v3(conn: Connection) -> None:
    """Version 2 -> 3: add the (empty) `artifacts` table."""
    schema.artifacts.create(conn)
    m = schema.meta.c
    conn.execute(schema.meta.update().where(m.key == "schema_version").values(value="3"))


def migrate_v3_to_v4(conn: Connection) -> None:
    """Version 3 -> 4: add the (empty) `query_references` and `probe_answers` tables, and
    forget which files were imported, so the next import reads them again and keeps the
    reference answers they carry."""
    schema.query_references.create(conn)
    schema.probe_answers.create(conn)
    next(i for i in schema.scores.indexes if i.name == "ix_scores_priced").create(
        conn, checkfirst=True
    )
    m = schema.meta.c
    conn.execute(schema.meta.delete().where(m.key.like("import_files:%")))
    conn.execute(schema.meta.update().where(m.key == "schema_version").values(value="4"))


def migrate_v4_to_v5(conn: Connection) -> None:
    """Version 4 -> 5: add the (empty) `decisions` table, the gateway's decision log."""
    schema.decisions.create(conn)
    m = schema.meta.c
    conn.execute(schema.meta.update().where(m.key == "schema_version").values(value="5"))


def migrate_v5_to_v6(conn: Connection) -> None:
    """Version 5 -> 6: add the (empty) `canary_answers` table (`locus canary`)."""
    schema.canary_answers.create(conn)
    m = schema.meta.c
    conn.execute(schema.meta.update().where(m.key == "schema_version").values(value="6"))
