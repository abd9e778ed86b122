"""Trained artifacts kept in the database, for stores that processes on several machines share.

A SQLite workspace keeps each artifact as a folder in `<workspace>/artifacts/`. A database
server's store keeps it in the `artifacts` table as a tar of that folder, with its sha256; each
process works on a local copy under the store's `artifacts_dir` and fetches a new one when the
database holds another digest than the copy's (`fetch_artifact`). `locus fit` writes the folder,
then `put_artifact` publishes it in one transaction, so a replica sees the old artifact or the new
one, never half of one.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import select

from locus.errors import LocusArtifactError, LocusNotFoundError
from locus.store import schema
from locus.store._core import StoreCore, now, upsert

__all__ = ["StoreArtifacts"]


class StoreArtifacts(StoreCore):
    """`put_artifact`, `artifact_digest`, `fetch_artifact`, `artifact_names`."""

    def put_artifact(self, name: str, folder: Path) -> str:
        """Store the artifact folder under `name` (replacing any), one transaction; record the
        folder as the local copy of that version; return its digest."""
        archive = _pack(folder)
        digest = hashlib.sha256(archive).hexdigest()
        with self._write(data=False) as conn:
            stmt = upsert(conn, schema.artifacts).values(
                name=name, digest=digest, archive=archive, saved_at=now()
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["name"],
                    set_={
                        "digest": stmt.excluded.digest,
                        "archive": stmt.excluded.archive,
                        "saved_at": stmt.excluded.saved_at,
                    },
                )
            )
        _marker(folder).write_text(digest)
        return digest

    def artifact_digest(self, name: str) -> str | None:
        """The sha256 of the artifact stored under `name` (None: none is)."""
        a = schema.artifacts.c
        with self._read() as conn:
            return conn.execute(select(a.digest).where(a.name == name)).scalar()

    def artifact_names(self) -> list[str]:
        """The names of the artifacts stored in the database, sorted."""
        with self._read() as conn:
            rows = conn.execute(select(schema.artifacts.c.name).order_by(schema.artifacts.c.name))
            return [r[0] for r in rows]

    def fetch_artifact(self, name: str, folder: Path) -> bool:
        """Make `folder` a copy of the artifact stored under `name`; True when it was fetched,
        False when the folder already held that version. Processes sharing the folder take
        turns (a file lock); the folder is swapped in whole.

        Raises:
            LocusNotFoundError: the database holds no artifact `name` (run `locus fit`).
            LocusArtifactError: the stored archive is damaged (its digest does not match).
        """
        digest = self.artifact_digest(name)
        if digest is None:
            raise LocusNotFoundError(
                f"no trained artifact {name!r} in {self.location}; run `locus fit` first"
            )
        if _current(folder, digest):
            return False
        folder.parent.mkdir(parents=True, exist_ok=True)
        with _locked(folder.parent / f".{folder.name}.lock"):
            if _current(folder, digest):
                return False
            a = schema.artifacts.c
            with self._read() as conn:
                row = conn.execute(select(a.digest, a.archive).where(a.name == name)).one()
            digest, archive = row[0], bytes(row[1])
            if hashlib.sha256(archive).hexdigest() != digest:
                raise LocusArtifactError(
                    f"artifact {name!r} in {self.location} is damaged (its digest does not "
                    "match); run `locus fit` again"
                )
            staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
            try:
                _unpack(archive, staging)
                if folder.exists():
                    retired = staging.with_name(staging.name + ".old")
                    os.rename(folder, retired)
                    os.rename(staging, folder)
                    shutil.rmtree(retired, ignore_errors=True)
                else:
                    os.rename(staging, folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            _marker(folder).write_text(digest)
        return True


def _marker(folder: Path) -> Path:
    """Beside the folder, not in it (an artifact name never starts with a dot)."""
    return folder.parent / f".{folder.name}.digest"


def _current(folder: Path, digest: str) -> bool:
    marker = _marker(folder)
    return folder.is_dir() and marker.is_file() and marker.read_text().strip() == digest


def _pack(folder: Path) -> bytes:
    """The folder as a tar, entries sorted, times and owners zeroed: the same files give the
    same bytes (and digest)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            if not path.is_file():
                continue
            info = tarfile.TarInfo(path.relative_to(folder).as_posix())
            info.size = path.stat().st_size
            info.mode = 0o644
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    return buffer.getvalue()


def _unpack(archive: bytes, folder: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        for member in tar.getmembers():
            target = (folder / member.name).resolve()
            if not member.isfile() or folder.resolve() not in target.parents:
                raise LocusArtifactError(f"artifact archive entry {member.name!r} is not allowed")
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None  # a regular file
            with source, target.open("wb") as handle:
                shutil.copyfileobj(source, handle)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` between processes of this machine (none on Windows)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
