"""`Store`: a workspace directory holding `locus.db` (SQLite, WAL) and `artifacts/`, or a
PostgreSQL database (`locus.store.database`) holding the same tables and the artifacts too.

The store package is the only code that speaks SQL. Every write is one transaction: an import
either lands whole or changes nothing, and readers in other processes keep seeing the last
committed state while a write runs (SQLite WAL). `Store` is assembled from one part per concern:

- `_core`: transactions and the meta table (`get_meta`, `set_meta`, `text_encoder`);
- `imports`: `write_batch` (scores), with `aliases` (query identities and aliases);
- `scores`: `score_table`, `llm_summary`, `llm_costs`, `counts`, `disagreeing_cells`,
  `checksums`, `sources`, `llm_ids`;
- `vectors`: query vectors (`texts_without_vectors`, `put_vectors`, `find_vectors`,
  `get_vectors`, `vector_dim`, `vector_count`);
- `embeddings`: LLM embeddings (`replace_embeddings`, `embeddings`);
- `references`: reference answers of queries and the answers of probed endpoints
  (`references`, `put_probe_answer`, `probe_answers`);
- `catalog`: LLM metadata and endpoints (`upsert_llm_metadata`; read with `llm_metadata`);
- `decisions`: the gateway's decision log (`put_decision`, `decision`, `decisions`,
  `set_decision_outcome`, `trim_decisions`);
- `keys`: API keys of the service, hashed (`create_key`, `list_keys`, `revoke_key`,
  `verify_key`);
- `artifacts`: trained artifacts kept in a database server's store (`put_artifact`,
  `fetch_artifact`, `artifact_digest`, `artifact_names`);
- `migrate`: schema migrations, run by `open` (this module).

    >>> from locus.store import Store
    >>> with Store.open("/tmp/locus-doc-ws") as store:
    ...     store.counts()["llms"] >= 0
    True
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sqlalchemy import create_engine, select
from sqlalchemy.exc import DBAPIError, OperationalError

from locus.errors import LocusStoreError
from locus.store import schema
from locus.store._core import (
    DATABASE_URL_ENV,
    DB_NAME,
    DEFAULT_WORKSPACE,
    WaitHook,
    configure_sqlite,
    now,
    resolve_workspace,
)
from locus.store.artifacts import StoreArtifacts
from locus.store.catalog import StoreCatalog
from locus.store.checksums import StoreChecksums
from locus.store.database import database_cache_dir, database_engine, is_database_url
from locus.store.decisions import StoreDecisions
from locus.store.embeddings import StoreEmbeddings
from locus.store.imports import ImportReport, StoreImports
from locus.store.keys import StoreKeys
from locus.store.migrate import (
    migrate_v1_to_v2,
    migrate_v2_to_v3,
    migrate_v3_to_v4,
    migrate_v4_to_v5,
    migrate_v5_to_v6,
)
from locus.store.references import StoreReferences
from locus.store.schema import SCHEMA_VERSION
from locus.store.scores import StoreScores
from locus.store.sources import StoreSources
from locus.store.vectors import StoreVectors

__all__ = [
    "DEFAULT_WORKSPACE",
    "ImportReport",
    "Store",
    "local_workspace_dir",
    "resolve_workspace",
]

logger = logging.getLogger("locus.store")


class Store(
    StoreImports,
    StoreSources,
    StoreScores,
    StoreChecksums,
    StoreVectors,
    StoreEmbeddings,
    StoreCatalog,
    StoreReferences,
    StoreKeys,
    StoreDecisions,
    StoreArtifacts,
):
    """The workspace store. Open with `Store.open(path)`; use as a context manager.

    Args (of `open`):
        path: workspace directory (created if absent, unless `create=False`).
        create: create the directory and database when missing.
    """

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        on_wait: WaitHook | None = None,
    ) -> Store:
        """Open (or create) the workspace at `path`: a directory (SQLite), or a PostgreSQL URL
        (`postgresql://user:password@host/db`). Without `path`: `$LOCUS_DATABASE_URL`, else
        `$LOCUS_WORKSPACE`, else `./.locus`. `on_wait(location, limit_s)` is called when a
        write must wait for another process's write lock (another import, say).

        Older schemas are migrated to the current one in place, in one transaction.

        Raises:
            LocusStoreError: the path is a file, the database is missing (`create=False`),
                unreachable, foreign or damaged, written by a newer locus, or its migration
                failed.
        """
        if path is None or str(path) == "":
            path = os.environ.get(DATABASE_URL_ENV) or None
        if path is not None and is_database_url(str(path)):
            return cls._open_database(str(path), create=create, on_wait=on_wait)
        workspace = resolve_workspace(path)
        if workspace.exists() and not workspace.is_dir():
            raise LocusStoreError(
                f"workspace {workspace}: expected a directory, found a file; pass another "
                "--workspace (or set LOCUS_WORKSPACE) or move the file away"
            )
        db_path = workspace / DB_NAME
        if not db_path.exists():
            if not create:
                raise LocusStoreError(
                    f"workspace {workspace}: no {DB_NAME} there; import data first "
                    "(locus import ...) or pass the right --workspace"
                )
            try:
                workspace.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise LocusStoreError(
                    f"workspace {workspace}: cannot create the directory ({error.strerror}); "
                    "pass a writable --workspace"
                ) from error
        engine = create_engine(f"sqlite:///{db_path}", future=True)
        configure_sqlite(engine)
        return cls._opened(cls(workspace, engine, on_wait=on_wait), create=True)

    @classmethod
    def _open_database(cls, url: str, *, create: bool, on_wait: WaitHook | None) -> Store:
        """A store on a database server; its artifacts live in the database, with a local copy
        under `database_cache_dir(url)`."""
        engine, location = database_engine(url)
        store = cls(database_cache_dir(url), engine, location=location, on_wait=on_wait)
        return cls._opened(store, create=create)

    @classmethod
    def _opened(cls, store: Store, *, create: bool) -> Store:
        try:
            store._initialise(create=create)
        except DBAPIError as error:
            store.close()
            if isinstance(error, OperationalError) and store.dialect != "sqlite":
                raise LocusStoreError(
                    f"workspace {store.location}: cannot reach the database "
                    f"({_first_line(error.orig)}); check the URL, the server and its credentials"
                ) from error
            what = DB_NAME if store.dialect == "sqlite" else "the database"
            raise LocusStoreError(
                f"workspace {store.location}: {what} is not a locus database or is damaged "
                f"({_first_line(error.orig)}); pass another --workspace"
            ) from error
        except BaseException:
            store.close()
            raise
        return store

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _initialise(self, *, create: bool) -> None:
        # Read first: opening an existing workspace must not wait for a running import's lock.
        version = self._schema_version()
        if version == SCHEMA_VERSION:
            return
        self._refuse_newer(version)
        if version is None and not create:
            raise LocusStoreError(
                f"workspace {self.location}: no locus store in this database yet; import data "
                "first (locus import ...) or pass the right --workspace"
            )
        # creating or migrating keeps the content, and its checksums (see `checksums`)
        with self._write(data=False) as conn:
            # another process may have created or migrated the store meanwhile
            row = None
            if conn.dialect.has_table(conn, "meta"):
                row = conn.execute(
                    select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
                ).scalar()
            version = None if row is None else int(row)
            if version == SCHEMA_VERSION:
                return
            self._refuse_newer(version)
            if version is None:
                schema.metadata.create_all(conn)
                conn.execute(
                    schema.meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION))
                )
                conn.execute(schema.meta.insert().values(key="created_at", value=now()))
                return
            if version not in (1, 2, 3, 4, 5):
                raise LocusStoreError(
                    f"workspace {self.location}: schema version {version} is not one this "
                    f"locus can read or migrate (1 to {SCHEMA_VERSION}); open it with the "
                    "locus that wrote it"
                )
            logger.info(
                "workspace %s: schema version %d found; migrating to %d in place",
                self.location,
                version,
                SCHEMA_VERSION,
            )
            try:
                if version == 1:
                    migrate_v1_to_v2(conn)
                if version <= 2:
                    migrate_v2_to_v3(conn)
                if version <= 3:
                    migrate_v3_to_v4(conn)
                if version <= 4:
                    migrate_v4_to_v5(conn)
                migrate_v5_to_v6(conn)
            except DBAPIError as error:
                raise LocusStoreError(
                    f"workspace {self.location}: migrating the database from schema version "
                    f"{version} to {SCHEMA_VERSION} failed ({error.orig}); the database is "
                    "unchanged; keep using the locus that wrote it, or import the data into a "
                    "new --workspace"
                ) from error

    def _schema_version(self) -> int | None:
        with self._read() as conn:
            if not conn.dialect.has_table(conn, "meta"):
                return None
            value = conn.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
            ).scalar()
        return None if value is None else int(value)

    def _refuse_newer(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise LocusStoreError(
                f"workspace {self.location}: schema version {version} was written by a newer "
                f"locus; this one reads up to {SCHEMA_VERSION}; upgrade locus"
            )


def local_workspace_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The local directory of the workspace `Store.open(path)` would open (same precedence): the
    workspace itself, or a database store's local directory (`database_cache_dir`)."""
    if path is None or str(path) == "":
        path = os.environ.get(DATABASE_URL_ENV) or None
    if path is not None and is_database_url(str(path)):
        return database_cache_dir(str(path))
    return resolve_workspace(path)


def _first_line(error: object) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
