"""Import a file or folder into a workspace: read it with the format's importer, write it whole.

>>> from locus.store import Store                                   # doctest: +SKIP
>>> report = import_path(Store.open(), "table", "scores.csv.gz",    # doctest: +SKIP
...                      queries="queries.jsonl.gz")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from locus._progress import ProgressFactory, no_progress
from locus.data.importers import get_importer
from locus.store.imports import ImportReport
from locus.store.workspace import Store

__all__ = ["import_path"]


def import_path(
    store: Store,
    format_name: str,
    path: str | Path,
    *,
    source: str | None = None,
    namespace: str | None = None,
    replace: bool = False,
    progress: ProgressFactory = no_progress,
    **options: Any,
) -> ImportReport:
    """Read `path` as `format_name` and write it to `store` in one transaction.

    `source` defaults to the format's (or the file's) name; `namespace` (default: the source)
    identifies the queries that come without text, so per-LLM files of one benchmark without
    text join under one namespace. Queries with text join by their text anyway.

    Nothing is written when reading or validation fails, or when a score conflicts with the
    store and `replace` is False.
    """
    importer = get_importer(format_name)
    batch = importer(Path(path), source=source, namespace=namespace, progress=progress, **options)
    return store.write_batch(batch, kind=format_name, replace=replace, progress=progress)
