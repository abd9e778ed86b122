"""The workspace store: SQLite (WAL) under a workspace directory, or a PostgreSQL database shared
by several processes; the only code that speaks SQL.

    workspace.py   Store: open a workspace (directory or URL), migrate, close
    _core.py       what every part of Store shares: paths, transactions, the meta table
    database.py    PostgreSQL: URLs, engines, where artifacts are copied
    schema.py      the tables, in SQLAlchemy Core (one code path for both databases)
    migrate.py     in-place schema migrations on open
    ingest.py      import a file or folder: the format's importer, then one write
    imports.py     write_batch, write_batches: an import into queries, aliases and scores
    score_writes.py  insert_scores, replace_scores: score rows written in bulk
    sources.py     sources: list them, remove one whole
    aliases.py     query identities and aliases of an import
    scores.py      the score table, per-LLM summaries and costs, counts
    checksums.py   content checksums, cached under a data version
    vectors.py     query vectors cached per (encoder, text hash)
    embeddings.py  LLM embeddings per artifact, with their evidence counts
    artifacts.py   trained artifacts kept in the database (shared stores)
    catalog.py     the LLM catalog: metadata and endpoints per LLM
    references.py  reference answers of queries; what probed endpoints answered
    keys.py        API keys of `locus serve`, stored hashed
    decisions.py   the gateway's decision log: each chat request's choice and outcome"""

from locus.store.imports import ImportReport
from locus.store.workspace import DEFAULT_WORKSPACE, Store, local_workspace_dir, resolve_workspace

__all__ = ["DEFAULT_WORKSPACE", "ImportReport", "Store", "local_workspace_dir", "resolve_workspace"]
