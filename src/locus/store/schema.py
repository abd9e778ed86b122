"""The workspace schema, in SQLAlchemy Core so one code path serves SQLite and PostgreSQL.

Bump `SCHEMA_VERSION` with every change and teach `Store` to migrate from the previous one; a store
written by a newer locus is refused rather than guessed at.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

__all__ = ["SCHEMA_VERSION", "metadata"]

SCHEMA_VERSION = 1

metadata = MetaData()

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

sources = Table(
    "sources",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("kind", String(64), nullable=False),
    Column("origin", Text, nullable=False),
    Column("first_imported_at", String(40), nullable=False),
    Column("last_imported_at", String(40), nullable=False),
)

llms = Table(
    "llms",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("llm_id", String(300), nullable=False, unique=True),
    Column("display_name", Text),
    Column("family", Text),
    Column("params_b", Float),
    Column("price_in_per_mtok", Float),
    Column("price_out_per_mtok", Float),
    Column("cost_per_query", Float),
    Column("endpoint", Text),
    Column("created_at", String(40), nullable=False),
)

queries = Table(
    "queries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", String(200), ForeignKey("sources.name"), nullable=False),
    Column("query_id", String(300), nullable=False),
    # "" when the query came without text: such a query can be scored but not encoded.
    Column("text_hash", String(64), nullable=False),
    Column("query_text", Text),
    Column("task", String(200)),
    Column("split", String(16)),
    UniqueConstraint("source", "query_id", "text_hash", name="uq_query_identity"),
    Index("ix_queries_text_hash", "text_hash"),
)

scores = Table(
    "scores",
    metadata,
    Column("llm", Integer, ForeignKey("llms.id"), nullable=False),
    Column("query", Integer, ForeignKey("queries.id"), nullable=False),
    Column("source", String(200), ForeignKey("sources.name"), nullable=False),
    Column("score", Float, nullable=False),
    Column("cost_usd", Float),
    Column("latency_ms", Float),
    Column("imported_at", String(40), nullable=False),
    PrimaryKeyConstraint("llm", "query", "source", name="pk_scores"),
    Index("ix_scores_query", "query"),
)

query_vectors = Table(
    "query_vectors",
    metadata,
    Column("encoder", String(300), nullable=False),
    Column("text_hash", String(64), nullable=False),
    Column("dim", Integer, nullable=False),
    # float32, little-endian, `dim` values.
    Column("vector", LargeBinary, nullable=False),
    PrimaryKeyConstraint("encoder", "text_hash", name="pk_query_vectors"),
)

llm_embeddings = Table(
    "llm_embeddings",
    metadata,
    Column("artifact", String(300), nullable=False),
    Column("llm", Integer, ForeignKey("llms.id"), nullable=False),
    Column("evidence_count", Integer, nullable=False),
    Column("dim", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),
    Column("computed_at", String(40), nullable=False),
    PrimaryKeyConstraint("artifact", "llm", name="pk_llm_embeddings"),
)

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(64), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("config", Text, nullable=False),
    Column("results", Text, nullable=False),
)
