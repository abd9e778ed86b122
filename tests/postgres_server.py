"""A throwaway PostgreSQL server for the tests: a fresh cluster in a temporary directory, listening
on 127.0.0.1 (a free port) and a private socket, trust auth, stopped at the end of the session.

Debian's `postgresql` package provides the binaries (`.ci/run` installs it); where they are
missing or the server cannot start, the tests that need it are skipped with the reason.
PostgreSQL refuses to run as root, so under root the cluster is run as the `postgres` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USER = "locus"


def _binaries() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """`url(database)` for a database created with `create_database`."""

    def __init__(self, port: int, socket_dir: Path) -> None:
        self.port, self.socket_dir = port, socket_dir
        self._count = 0

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        self._count += 1
        name = f"locus_test_{self._count}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextmanager
def postgres_server() -> Iterator[PostgresServer | str]:
    """The running server, or the reason it cannot run (a string)."""
    binaries = _binaries()
    if binaries is None:
        yield "PostgreSQL is not installed (apt-get install postgresql)"
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        yield "the psycopg driver is not installed (pip install 'locus[postgres]')"
        return
    prefix: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            yield "running as root and there is no postgres user to run the server as"
            return
        prefix = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="locus-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if owner is not None:
        for path in (root, sockets):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    port = free_port()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, *args], capture_output=True, text=True, timeout=120, check=False
        )

    started = False
    try:
        made = run(
            str(binaries / "initdb"), "-D", str(data), "-U", USER, "--auth=trust",
            "--encoding=UTF8", "--no-sync",
        )  # fmt: skip
        if made.returncode != 0:
            yield f"initdb failed: {made.stderr.strip()[-300:]}"
            return
        options = (
            f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        start = run(
            str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l",
            str(root / "server.log"), "-w", "-t", "60", "start",
        )  # fmt: skip
        if start.returncode != 0:
            log = (
                (root / "server.log").read_text(errors="replace")
                if (root / "server.log").exists()
                else ""
            )
            yield f"the server did not start: {(start.stderr + log).strip()[-300:]}"
            return
        started = True
        yield PostgresServer(port, sockets)
    finally:
        if started:
            run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
