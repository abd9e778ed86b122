"""The workspace schema, in SQLAlchemy Core so one code path serves SQLite and PostgreSQL.

Bump `SCHEMA_VERSION` with every change and teach `Store` to migrate from the previous one
(`locus.store.migrate`); a store written by a newer locus is refused rather than guessed at.

Version 6 adds `canary_answers`: what each LLM's endpoint answered to the workspace's canary
probes at temperature 0, its baseline and its latest check (`locus canary`).

Version 5 adds `decisions`: the gateway's decision log (what each chat request was routed to,
with the probability of that choice, and its outcome once posted; `locus decisions`).

Version 4 adds `query_references` (a query's reference answer and its grader, per alias: each
source keeps the answer it gave), the partial index `ix_scores_priced`, and `probe_answers`
(what an endpoint answered to the probes `locus onboard` sent it, kept the moment each answer
arrives, so no paid answer is lost).

Version 3 adds `artifacts`: trained artifacts kept in the database itself, so that processes on
several machines sharing one PostgreSQL store share its models too (a SQLite workspace keeps its
artifacts as folders beside the database and leaves the table empty).

Queries (version 2): `queries` holds one row per query *identity* (its normalised text, or
(namespace, query_id) without text); `query_aliases` holds each source's own
(source, query_id, text_hash) and points at its query; `scores` are keyed by (LLM, alias), so each
source's scores are kept exactly as imported and two sources scoring one query never overwrite
each other.
"""

from __future__ import annotations

import json

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

__all__ = ["SCHEMA_VERSION", "metadata", "query_identity"]

SCHEMA_VERSION = 6

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
    # `query_identity(...)`: the text hash for a query with text (one query across all sources),
    # ["<namespace>", "<query_id>"] as JSON for one without.
    Column("query_key", String(1000), nullable=False),
    # "" when the query came without text: such a query can be scored but not encoded.
    Column("text_hash", String(64), nullable=False),
    Column("query_text", Text),
    # The first non-null task / split seen for this query; each alias keeps its own.
    Column("task", String(200)),
    Column("split", String(16)),
    UniqueConstraint("query_key", name="uq_queries_query_key"),
)

query_aliases = Table(
    "query_aliases",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("source", String(200), ForeignKey("sources.name"), nullable=False),
    Column("query_id", String(300), nullable=False),
    Column("text_hash", String(64), nullable=False),
    Column("query", Integer, ForeignKey("queries.id"), nullable=False),
    Column("task", String(200)),
    Column("split", String(16)),
    UniqueConstraint("source", "query_id", "text_hash", name="uq_query_aliases_source_id_text"),
    Index("ix_query_aliases_query", "query"),
)

scores = Table(
    "scores",
    metadata,
    Column("llm", Integer, ForeignKey("llms.id"), nullable=False),
    Column("alias", Integer, ForeignKey("query_aliases.id"), nullable=False),
    Column("source", String(200), ForeignKey("sources.name"), nullable=False),
    Column("score", Float, nullable=False),
    Column("cost_usd", Float),
    Column("latency_ms", Float),
    Column("imported_at", String(40), nullable=False),
    PrimaryKeyConstraint("llm", "alias", name="pk_scores_llm_alias"),
    Index("ix_scores_alias", "alias"),
)
# the scores that carry a cost, for the per-LLM mean costs routing reads on start: without it
# that read scanned every score (13 s at 7.2 M scores, none priced); partial, so a pool
# without costs keeps an empty index (schema 4)
Index(
    "ix_scores_priced",
    scores.c.llm,
    scores.c.alias,
    sqlite_where=scores.c.cost_usd.is_not(None),
    postgresql_where=scores.c.cost_usd.is_not(None),
)


query_references = Table(
    "query_references",
    metadata,
    Column("alias", Integer, ForeignKey("query_aliases.id"), primary_key=True),
    Column("answer", Text, nullable=False),
    # a name of `locus.data.graders.GRADERS`
    Column("grader", String(32), nullable=False),
)

probe_answers = Table(
    "probe_answers",
    metadata,
    # not a key of `llms`: the LLM being onboarded is not in the pool until its scores are
    Column("llm_id", String(300), nullable=False),
    Column("text_hash", String(64), nullable=False),
    Column("answer", Text, nullable=False),
    # None: no grader could read the answer (counted, never scored as wrong)
    Column("score", Float),
    Column("upstream_model", String(300)),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("cost_usd", Float),
    Column("latency_ms", Float),
    Column("asked_at", String(40), nullable=False),
    PrimaryKeyConstraint("llm_id", "text_hash", name="pk_probe_answers"),
)

decisions = Table(
    "decisions",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("asked_at", String(40), nullable=False),
    Column("llm_id", String(300), nullable=False),  # the LLM that answered
    # the probability that routing chose it (exploration's draw included); None: pinned, or
    # a fallback answered
    Column("propensity", Float),
    Column("p_correct", Float),  # the router's P(correct) for it
    Column("ranked", Text),  # JSON [[llm_id, P(correct)], ...] of the first candidates
    Column("text_hash", String(64)),
    Column("text", Text),  # the routed text, where the server keeps texts
    Column("explored", Integer, nullable=False),
    Column("latency_ms", Float),  # to the answer (a stream: to its first token)
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("cost_usd", Float),
    Column("outcome", Float),
    Column("outcome_at", String(40)),
    Index("ix_decisions_asked_at", "asked_at"),
)


canary_answers = Table(
    "canary_answers",
    metadata,
    Column("llm_id", String(300), nullable=False),
    Column("text_hash", String(64), nullable=False),
    Column("round", String(16), nullable=False),  # "baseline" or "latest"
    Column("answer", Text, nullable=False),
    Column("upstream_model", String(300)),  # the model the endpoint said answered
    Column("asked_at", String(40), nullable=False),
    PrimaryKeyConstraint("llm_id", "text_hash", "round", name="pk_canary_answers"),
)


def query_identity(text_hash: str, namespace: str, query_id: str) -> str:
    """The `queries.query_key` of a query: its text hash, or (namespace, id) when it has no text.

    >>> query_identity("", "mmlu", "q1")
    '["mmlu", "q1"]'
    """
    if text_hash:
        return text_hash
    return json.dumps([namespace, query_id], ensure_ascii=False)


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

artifacts = Table(
    "artifacts",
    metadata,
    Column("name", String(300), primary_key=True),
    # sha256 of `archive`: a process compares it with its local copy's to know it is current
    Column("digest", String(64), nullable=False),
    # the artifact folder as an uncompressed tar (weights are float arrays: tar-gzip saves ~7%)
    Column("archive", LargeBinary, nullable=False),
    Column("saved_at", String(40), nullable=False),
)
