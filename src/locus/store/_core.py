"""What every part of `Store` shares: the workspace paths, transactions, and the meta table.

`StoreCore` holds the engine and gives the other parts (imports, score reading, query vectors,
LLM embeddings) their transactions; `locus.store.workspace.Store` combines them.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Integer, String, Table, event, func, select, text
from sqlalchemy.dialects import postgresql, sqlite

from locus.errors import LocusStoreError
from locus.store import schema

__all__ = [
    "BUSY_TIMEOUT_S",
    "DATABASE_URL_ENV",
    "DB_NAME",
    "DEFAULT_WORKSPACE",
    "StoreCore",
    "WaitHook",
    "resolve_workspace",
]

DEFAULT_WORKSPACE = ".locus"
DB_NAME = "locus.db"
DATABASE_URL_ENV = "LOCUS_DATABASE_URL"
# the PostgreSQL advisory lock every write transaction takes ("locus" in ASCII), so that writers
# queue as they do on SQLite (BEGIN IMMEDIATE) instead of racing on read-then-insert
WRITE_LOCK = 0x6C6F637573
# how long a SQLite writer waits for another's write lock before it gives up
BUSY_TIMEOUT_S = 60
WaitHook = Callable[[str, "float | None"], None]
"""on_wait(location, limit_s): a write must wait for another process's write lock on the store
named `location`; it waits up to `limit_s` seconds (None: as long as it takes)."""
# rows per executemany, and values per IN (...) (well under SQLite's bound-parameter limit)
CHUNK = 20_000
IN_CHUNK = 900


def resolve_workspace(path: str | os.PathLike[str] | None) -> Path:
    """The workspace directory: `path`, else `$LOCUS_WORKSPACE`, else `./.locus`."""
    if path is not None and str(path) != "":
        return Path(path)
    return Path(os.environ.get("LOCUS_WORKSPACE") or DEFAULT_WORKSPACE)


def now() -> str:
    """The current UTC time, ISO 8601 to the second (the store's timestamps)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class StoreCore:
    """The engine, the workspace paths, transactions and the meta table of a `Store`."""

    def __init__(
        self,
        workspace: Path,
        engine: Engine,
        *,
        location: str | None = None,
        on_wait: WaitHook | None = None,
    ) -> None:
        """`workspace`: the directory of the artifacts (for a database server, a local copy);
        `location`: how messages name the store (default: the directory); `on_wait`: told
        when a write has to wait for another process's (`WaitHook`)."""
        self.workspace = workspace
        self._engine = engine
        self.location = str(workspace) if location is None else location
        self.on_wait = on_wait

    @property
    def spec(self) -> str:
        """What `Store.open` takes to open this store again in another process: the directory,
        or the database URL *with* its password (pass it on in the environment, never print)."""
        if self.dialect == "sqlite":
            return str(self.workspace)
        return self._engine.url.render_as_string(hide_password=False)

    @property
    def dialect(self) -> str:
        """ "sqlite" or "postgresql"."""
        return self._engine.dialect.name

    @property
    def artifacts_in_database(self) -> bool:
        """True where trained artifacts are kept in the database (a database server, shared by
        processes on several machines); False for a SQLite workspace (folders beside it)."""
        return self.dialect != "sqlite"

    def close(self) -> None:
        self._engine.dispose()

    @property
    def artifacts_dir(self) -> Path:
        return self.workspace / "artifacts"

    @property
    def db_path(self) -> Path:
        return self.workspace / DB_NAME

    # -- transactions ----------------------------------------------------------------------

    @contextmanager
    def _write(self, *, data: bool = True) -> Iterator[Connection]:
        """One write transaction; writers queue instead of failing (SQLite: BEGIN IMMEDIATE;
        PostgreSQL: a transaction-level advisory lock).

        Unless `data` is False (writes that leave LLMs, queries and scores alone: vectors,
        embeddings, artifacts, keys, meta), the transaction also raises the meta counter
        `data_version`, which keys the cached content checksums (`StoreScores.checksums`).
        Where another process holds the lock, `on_wait` is told before the wait.

        Raises:
            LocusStoreError: SQLite: another process held the lock over `BUSY_TIMEOUT_S`.
        """
        with self._engine.connect() as conn:
            conn.info["begin"] = "BEGIN IMMEDIATE"
            conn.info["waiting"] = (self.location, self._waiting)
            try:
                with conn.begin():
                    if conn.dialect.name == "postgresql":
                        key = {"key": WRITE_LOCK}
                        lock = "SELECT pg_{}advisory_xact_lock(:key)"
                        if not conn.execute(text(lock.format("try_")), key).scalar():
                            self._waiting(None)
                            conn.execute(text(lock.format("")), key)
                    if data:
                        _raise_data_version(conn)
                    yield conn
            finally:
                conn.info.pop("begin", None)
                conn.info.pop("waiting", None)

    def _waiting(self, limit_s: float | None) -> None:
        if self.on_wait is not None:
            self.on_wait(self.location, limit_s)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    # -- meta ------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """The value stored under `key` in the meta table (None if absent)."""
        with self._read() as conn:
            return conn.execute(
                select(schema.meta.c.value).where(schema.meta.c.key == key)
            ).scalar()

    def set_meta(self, key: str, value: str) -> None:
        """Store `value` under `key` in the meta table (insert or overwrite), one transaction."""
        with self._write(data=False) as conn:
            stmt = upsert(conn, schema.meta).values(key=key, value=value)
            conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": value}))

    @property
    def text_encoder(self) -> str | None:
        """Name of the text encoder the workspace's queries were encoded with (None: not yet)."""
        return self.get_meta("text_encoder")


DATA_VERSION = "data_version"


def _raise_data_version(conn: Connection) -> None:
    """meta[data_version] += 1 (from 1 where absent), inside the caller's transaction."""
    m = schema.meta
    stmt = upsert(conn, m).values(key=DATA_VERSION, value="1")
    bumped = func.cast(func.cast(m.c.value, Integer) + 1, String)
    conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": bumped}))


def upsert(conn: Connection, table: Table) -> Any:
    """`INSERT` into `table` with `ON CONFLICT` clauses (`on_conflict_do_nothing`,
    `on_conflict_do_update`, `excluded`) for the connection's dialect: SQLite and PostgreSQL
    share the syntax, so the store's writes are one code path on both."""
    name = conn.dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"the store runs on SQLite or PostgreSQL, not {name}")


def llm_keys(conn: Connection, llm_ids: Sequence[str]) -> dict[str, int]:
    """llm_id -> `llms.id` of those of `llm_ids` that are in the store."""
    rows = conn.execute(select(schema.llms.c.llm_id, schema.llms.c.id)).all()
    wanted = set(llm_ids)
    return {llm_id: pk for llm_id, pk in rows if llm_id in wanted}


def configure_sqlite(engine: Engine) -> None:
    """WAL, foreign keys, a busy timeout, and transactions that SQLite (not pysqlite) begins."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        # up to 256 MiB of page cache (allocated as used; the default is 2 MiB): an import of
        # millions of scores touches index pages all over the store
        cursor.execute("PRAGMA cache_size = -262144")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        statement = conn.info.get("begin", "BEGIN")
        waiting = conn.info.get("waiting")
        if statement == "BEGIN" or waiting is None:
            conn.exec_driver_sql(statement)
            return
        _begin_or_wait(conn.connection.dbapi_connection, statement, *waiting)


def _begin_or_wait(
    dbapi: Any, statement: str, location: str, waiting: Callable[[float | None], None]
) -> None:
    """`statement` (BEGIN IMMEDIATE: take the write lock) on a SQLite connection; where another
    process holds the lock, `waiting(limit_s)` first, then wait for it as long as the busy
    timeout allows."""
    dbapi.execute("PRAGMA busy_timeout = 0")
    try:
        dbapi.execute(statement)
        return
    except sqlite3.OperationalError as error:
        if not _is_busy(error):
            raise
    finally:
        dbapi.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
    waiting(BUSY_TIMEOUT_S)
    try:
        dbapi.execute(statement)
    except sqlite3.OperationalError as error:
        if not _is_busy(error):
            raise
        raise LocusStoreError(
            f"workspace {location}: another process has held its write lock for over "
            f"{BUSY_TIMEOUT_S} s (an import, encode or fit still running?); run this again when "
            "it has finished"
        ) from error


def _is_busy(error: sqlite3.OperationalError) -> bool:
    return "locked" in str(error) or "busy" in str(error)


def raw_row_batches(
    conn: Connection, stmt: Any, size: int, *, literal_binds: bool = False
) -> Iterator[Sequence[Any]]:
    """The rows of `stmt` as the driver's plain tuples, `size` at a time: for reads of millions
    of rows, where SQLAlchemy's Row objects and pandas.read_sql cost more than the database.
    `literal_binds` renders bound values into the SQL (for statements with parameters)."""
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": literal_binds})
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None, "a connection that is open"
    cursor = dbapi.cursor()
    try:
        cursor.execute(str(compiled))
        while True:
            rows = cursor.fetchmany(size)
            if not rows:
                return
            yield rows
    finally:
        cursor.close()
