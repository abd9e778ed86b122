"""Stores on a database server (PostgreSQL): URLs, engines, and where artifacts are copied.

A workspace is a directory (SQLite) or a PostgreSQL URL, `postgresql://user:password@host/db`,
passed as `--workspace` or set as `$LOCUS_DATABASE_URL`. The database must exist (created by
whoever runs the server); locus creates its tables in it. libpq's environment (`PGPASSWORD`,
`PGHOST`, ...) and `?host=/path/to/socket` work as for `psql`. Messages name the store by its
URL with the password hidden.

    >>> is_database_url("postgresql://locus@db.internal/locus"), is_database_url(".locus")
    (True, False)
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from locus.errors import LocusStoreError

__all__ = ["ARTIFACT_CACHE_ENV", "database_cache_dir", "database_engine", "is_database_url"]

ARTIFACT_CACHE_ENV = "LOCUS_ARTIFACT_CACHE"
# schemes accepted, and the driver each one is run with (psycopg 3: `pip install locus[postgres]`)
_SCHEMES = {
    "postgres": "postgresql+psycopg",
    "postgresql": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}


def is_database_url(value: str) -> bool:
    """True when `value` is a URL (`scheme://...`) rather than a workspace directory; schemes
    other than PostgreSQL's are refused when opened, not taken for a directory name."""
    scheme, sep, _ = value.partition("://")
    return bool(sep) and bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme))


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise LocusStoreError(
            f"workspace {url.split('@')[-1]!r}: not a database URL ({error}); expected "
            "postgresql://user:password@host:5432/database"
        ) from error
    driver = _SCHEMES.get(parsed.drivername.lower())
    if driver is None:
        raise LocusStoreError(
            f"workspace {parsed.render_as_string(hide_password=True)}: the store runs on "
            f"SQLite (a directory) or PostgreSQL ({', '.join(sorted(_SCHEMES))}://), not "
            f"{parsed.drivername}"
        )
    if not parsed.database:
        raise LocusStoreError(
            f"workspace {parsed.render_as_string(hide_password=True)}: no database named; "
            "expected postgresql://user:password@host:5432/database"
        )
    return parsed.set(drivername=driver)


def database_engine(url: str) -> tuple[Engine, str]:
    """(engine, the URL as messages show it: password hidden) for a PostgreSQL URL.

    Raises:
        LocusStoreError: not a PostgreSQL URL, no database named, or no driver installed.
    """
    parsed = _parse(url)
    location = parsed.render_as_string(hide_password=True)
    try:
        import psycopg  # noqa: F401
    except ImportError as error:
        raise LocusStoreError(
            f"workspace {location}: PostgreSQL needs the psycopg driver; install it with "
            "pip install 'locus[postgres]'"
        ) from error
    engine = create_engine(
        parsed,
        future=True,
        # a replica outlives database restarts: test pooled connections before use
        pool_pre_ping=True,
        connect_args={"connect_timeout": 10, "application_name": "locus"},
    )
    return engine, location


def database_cache_dir(url: str) -> Path:
    """The local directory of a database store's artifact copies: `$LOCUS_ARTIFACT_CACHE`, else
    `~/.cache/locus/databases/<host>-<database>-<hash of the URL without password>`."""
    configured = os.environ.get(ARTIFACT_CACHE_ENV)
    if configured:
        return Path(configured)
    parsed = _parse(url)
    query = "&".join(f"{k}={v}" for k, v in sorted(parsed.query.items()))
    identity = f"{parsed.username}@{parsed.host}:{parsed.port}/{parsed.database}?{query}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{parsed.host or 'local'}-{parsed.database}")
    return Path.home() / ".cache" / "locus" / "databases" / f"{name}-{digest}"
