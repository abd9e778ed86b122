"""The workspace store: SQLite (WAL) under a workspace directory, or a PostgreSQL database shared
by several processes; the only code that speaks SQL."""

from locus.store.imports import ImportReport
from locus.store.workspace import DEFAULT_WORKSPACE, Store, local_workspace_dir, resolve_workspace

__all__ = ["DEFAULT_WORKSPACE", "ImportReport", "Store", "local_workspace_dir", "resolve_workspace"]
