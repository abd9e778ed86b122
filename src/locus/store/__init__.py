"""The workspace store: SQLite (WAL) under a workspace directory; the only code that speaks SQL."""

from locus.store.imports import ImportReport
from locus.store.workspace import DEFAULT_WORKSPACE, Store, resolve_workspace

__all__ = ["DEFAULT_WORKSPACE", "ImportReport", "Store", "resolve_workspace"]
