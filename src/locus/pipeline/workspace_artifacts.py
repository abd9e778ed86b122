"""Where a workspace keeps its artifacts: `<workspace>/artifacts/<name>/`, by checked name.

With a PostgreSQL store the database holds each artifact too (`locus.store.artifacts`), so that
every process sharing the store reads the newest one: `trained_artifact` fetches it first and
`publish_artifact` puts it there after a fit.

    >>> from locus.store import Store                                    # doctest: +SKIP
    >>> with Store.open(".locus") as store:  # doctest: +SKIP
    ...     trained_artifact(store, DEFAULT_ARTIFACT)
"""

from __future__ import annotations

from pathlib import Path

from locus.errors import LocusInputError, LocusNotFoundError
from locus.store import Store

__all__ = ["DEFAULT_ARTIFACT", "artifact_path", "publish_artifact", "trained_artifact"]

DEFAULT_ARTIFACT = "default"


def artifact_path(store: Store, name: str) -> Path:
    """`<workspace>/artifacts/<name>`, with the name checked."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise LocusInputError(f"artifact name {name!r}: expected a plain name such as 'default'")
    return store.artifacts_dir / name


def trained_artifact(store: Store, name: str) -> Path:
    """`artifact_path`, which must hold a trained artifact; where the store keeps artifacts in
    the database, the local copy is fetched first when the database holds a newer one.

    Raises:
        LocusNotFoundError: nothing trained under that name (run `locus fit`).
    """
    path = artifact_path(store, name)
    if store.artifacts_in_database:
        store.fetch_artifact(name, path)
    elif not path.exists():
        raise LocusNotFoundError(
            f"no trained artifact {name!r} in {store.artifacts_dir}; run `locus fit` first"
        )
    return path


def publish_artifact(store: Store, name: str) -> None:
    """After the artifact folder `name` is written: where the store keeps artifacts in the
    database, store it there for every process sharing the store (a SQLite workspace's folder
    is already where its readers look)."""
    if store.artifacts_in_database:
        store.put_artifact(name, artifact_path(store, name))
