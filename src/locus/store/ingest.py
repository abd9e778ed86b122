"""Import a file or folder into a workspace: read it with the format's importer, name its source,
write it whole.

One source per imported file or folder, named from the path (`SourceNames`):

1. `--source NAME` (``source=``) names it outright.
2. A source already imported from this path (the same resolved path) is this path's source
   again, whatever its name: re-importing changes nothing, and a workspace written before this
   rule (sources named ``inspect``, ``lm-eval``, ...) keeps its sources.
3. Otherwise the name is the path's own: a folder's name, a file's name without its suffixes
   (``scores.csv.gz`` -> ``scores``); where another path's source has that name, a dash and
   the first 6 hex digits of the sha256 of the resolved path follow (``logs-3f9a1c``).
4. With `replace`, a path that maps to no existing source replaces the one source holding the
   same LLMs (the same set of llm_ids) and scoring some of the same queries: a corrected file
   saved under a new name. Several such sources is an error asking for `--source NAME`; none
   imports it as a new source (said). Nothing else is replaced: `--replace` never touches
   another path's source. No confirmation flag is asked for: `--replace` is the request, and
   the source it replaces is printed, with its path and score count, before it is written;
   the corrected file must score some of its queries, so another benchmark of the same LLMs
   is never taken for a correction.

The importers keep their own default source (the format's name, a table file's name) as the
namespace of queries without text, so the query identities of earlier imports are unchanged.

>>> from locus.store import Store                                   # doctest: +SKIP
>>> report = import_path(Store.open(), "table", "scores.csv.gz",    # doctest: +SKIP
...                      queries="queries.jsonl.gz")
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from locus._progress import ProgressFactory, no_progress
from locus.data.batch import ImportBatch
from locus.data.importers import get_importer
from locus.data.readers import file_stem
from locus.errors import LocusInputError
from locus.store import schema
from locus.store.imports import ImportReport
from locus.store.workspace import Store

__all__ = ["SourceChoice", "SourceNames", "import_path", "named", "path_name"]


def path_name(path: str | Path) -> str:
    """The source name a path gives before any clash: a folder's name, a file's name without
    its suffixes.

    >>> path_name("runs/llm3-fixed.csv.gz")
    'llm3-fixed'
    """
    resolved = Path(path).resolve()
    return resolved.name if resolved.is_dir() else file_stem(resolved)


def _path_hash(path: str | Path) -> str:
    return hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:6]


@dataclass(frozen=True)
class SourceChoice:
    """The source one path is written to, and why (one line for the user; "" when it is simply
    the path's own)."""

    name: str
    said: str = ""
    replaced: dict[str, Any] | None = None  # the other path's source a corrected file replaces


class SourceNames:
    """The workspace's sources as an import sees them before it writes, naming each path's source
    (the rules in this module's docstring). Names given to the paths of one import are
    remembered, so two paths of one command never share a source by accident."""

    def __init__(self, sources: pd.DataFrame, store: Store | None = None) -> None:
        self._store = store
        self._origins: dict[str, Path] = {}
        self._kinds: dict[str, str] = {}
        for row in sources.to_dict("records"):
            self._origins[str(row["name"])] = Path(str(row["origin"]))
            self._kinds[str(row["name"])] = str(row["kind"])
        self._stored = frozenset(self._origins)

    @classmethod
    def of(cls, store: Store | None) -> SourceNames:
        """The sources of `store` (None: a workspace that does not exist yet, no sources)."""
        if store is None:
            return cls(pd.DataFrame({"name": [], "kind": [], "origin": []}))
        return cls(store.sources(), store)

    def exists(self, name: str) -> bool:
        """Whether the workspace holds a source `name` (before this import)."""
        return name in self._stored

    def for_path(self, path: str | Path, *, source: str | None = None) -> str:
        """The source `path` maps to: `source`, else the source last imported from this path,
        else the path's name (with a hash suffix where another path's source has it)."""
        resolved = Path(path).resolve()
        if source is not None:
            self._origins.setdefault(source, resolved)
            return source
        mine = sorted(n for n, origin in self._origins.items() if _same_path(origin, resolved))
        base = path_name(resolved)
        if mine:
            return base if base in mine else mine[0]
        name = base if base not in self._origins else f"{base}-{_path_hash(resolved)}"
        self._origins[name] = resolved
        return name

    def choose(
        self,
        path: str | Path,
        batch: ImportBatch,
        *,
        kind: str,
        source: str | None = None,
        replace: bool = False,
    ) -> SourceChoice:
        """`for_path`, and with `replace` for a path that maps to no existing source, the one
        source holding the same LLMs and some of the same queries (rule 4).

        Raises:
            LocusInputError: several sources hold the batch's LLMs and queries (the message
                names them and asks for `--source NAME`).
        """
        name = self.for_path(path, source=source)
        if source is not None or self.exists(name):
            return SourceChoice(name)
        legacy = self._legacy_note(kind)
        if not replace or self._store is None:
            return SourceChoice(name, legacy)
        keys = [
            schema.query_identity(text_hash, batch.namespace, query_id)
            for query_id, text_hash in zip(
                batch.queries["query_id"], batch.queries["text_hash"], strict=True
            )
        ]
        alike = self._store.sources_like(batch.llms["llm_id"].tolist(), keys)
        if len(alike) > 1:
            names = ", ".join(f"{c['name']} ({c['origin']})" for c in alike)
            raise LocusInputError(
                f"--replace {path}: no source was imported from this path, and {len(alike)} "
                f"sources hold the same LLMs and queries: {names}; expected one to replace; "
                "pass --source NAME to say which"
            )
        if not alike:
            return SourceChoice(
                name,
                f"--replace: no source was imported from this path or holds the same LLMs and "
                f"queries; imported as the new source {name}",
            )
        old = alike[0]
        self._origins[old["name"]] = Path(path).resolve()
        return SourceChoice(
            old["name"],
            f"replacing source {old['name']} ({old['scores']:,} scores of {old['llms']:,} "
            f"LLM{'' if old['llms'] == 1 else 's'}, from {old['origin']}): no source was "
            "imported from this path and it holds the same LLMs and queries (pass --source NAME "
            "to replace another)",
            replaced=old,
        )

    def _legacy_note(self, kind: str) -> str:
        """A note for a new source of format `kind` beside a source named after the format (as
        earlier versions of locus named every folder's source): it may hold the same scores,
        and both are kept."""
        legacy = kind if self._kinds.get(kind) == kind else None
        if legacy is None or self._store is None:
            return ""
        rows = {str(row["name"]): row for row in self._store.sources().to_dict("records")}
        if legacy not in rows:
            return ""
        return (
            f"source {legacy} ({int(rows[legacy]['scores']):,} scores from "
            f"{rows[legacy]['origin']}, named after the format as earlier versions of locus "
            "named every folder's source) may hold these scores too; both sources are kept "
            f"and their scores averaged; if they are the same, `locus remove-source {legacy}` "
            "and import each of its folders again"
        )


def _same_path(stored: Path, resolved: Path) -> bool:
    try:
        return stored.resolve() == resolved
    except OSError:
        return False


def named(
    parts: Iterable[ImportBatch], choice: SourceChoice, path: str | Path
) -> Iterator[ImportBatch]:
    """The batches of one path under the chosen source, their origin the absolute path (what
    `locus sources` shows); each keeps the namespace its importer gave it."""
    origin = str(Path(path).absolute())
    for part in parts:
        yield dataclasses.replace(part, source=choice.name, origin=origin)


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

    `source` defaults to the path's source (this module's rules: one source per file or folder);
    `namespace` (default: `source`, else the format's or a table file's name) identifies
    the queries that come without text, so per-LLM files of one benchmark without text join
    under one namespace. Queries with text join by their text anyway. With `replace`, differing
    scores of the source are overwritten.

    Nothing is written when reading or validation fails, or when a score conflicts with the
    store and `replace` is False.
    """
    importer = get_importer(format_name)
    batch = importer(Path(path), source=source, namespace=namespace, progress=progress, **options)
    choice = SourceNames.of(store).choose(
        path, batch, kind=format_name, source=source, replace=replace
    )
    return store.write_batches(
        named([batch], choice, path), kind=format_name, replace=replace, progress=progress
    )
