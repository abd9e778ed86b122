"""What `locus import` decides before it writes anything: each path's format (detected for
`auto`) and importer options from the command's flags, whether `--replace` may replace another
path's source, and each read path's source. A path that cannot be planned fails the import
before the workspace is touched.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from locus.cli._app import open_store, parse_pairs
from locus.cli._render import note
from locus.errors import LocusInputError

if TYPE_CHECKING:
    from locus.store.ingest import SourceChoice

__all__ = ["choose_sources", "import_job", "may_replace_another"]

METRIC_FORMATS = ("lm-eval", "inspect", "helm")


def import_job(
    format_name: str,
    path: Path,
    queries: Path | None,
    column: list[str] | None,
    metric: list[str] | None,
    task_field: str | None,
    namespace: str | None,
    quiet: bool,
) -> tuple[str, Path, dict[str, Any]]:
    """(format, path, importer options) of one path, the format detected for `auto` (said in
    a note unless `quiet`)."""
    from locus.data.importers import detect_format, get_importer

    name = format_name
    if format_name == "auto":
        name, found = detect_format(path)
        note(f"{path}: {found}: importing as {name}", quiet=quiet)
    else:
        get_importer(name)  # an unknown format fails before anything is read
    options: dict[str, Any] = {}
    if name == "table":
        if queries is not None:
            options["queries"] = queries
        if column:
            options["columns"] = parse_pairs(
                column, "--column", "CANONICAL=FILE_COLUMN such as score=correct"
            )
    elif queries is not None or column:
        raise LocusInputError(
            f"--queries and --column apply to the 'table' format only, found them with "
            f"{name!r}; drop them"
        )
    if metric:
        if name not in METRIC_FORMATS:
            raise LocusInputError(
                f"--metric applies to {', '.join(METRIC_FORMATS)}, found it with {name!r}"
            )
        plain = [m for m in metric if "=" not in m]
        options["metric"] = (
            plain[0]
            if len(plain) == 1 and len(metric) == 1
            else parse_pairs(metric, "--metric", "METRIC or TASK=METRIC")
        )
    if task_field is not None:
        if name != "inspect":
            raise LocusInputError(f"--task-field applies to 'inspect' logs, found {name!r}")
        options["task_field"] = task_field
    if namespace is not None:
        options["namespace"] = namespace
    return name, path, options


def may_replace_another(
    workspace: str | None, path: Path, source: str | None, replace: bool
) -> bool:
    """Whether `--replace` of `path` may replace another path's source (one holding the same
    LLMs and queries, `SourceNames.choose`): the file is then read whole, not in parts, since
    the choice needs its LLMs and queries before anything is written."""
    if not replace or source is not None:
        return False
    from locus.errors import LocusStoreError
    from locus.store.ingest import SourceNames

    try:
        with open_store(workspace, create=False) as store:
            names = SourceNames.of(store)
            return not names.exists(names.for_path(path))
    except LocusStoreError:  # no workspace yet: nothing to replace
        return False


def choose_sources(
    store: Any, batches: list[tuple[str, Path, Any, str, str]], source: str | None, replace: bool
) -> list[SourceChoice | None]:
    """Each read path's source (`SourceNames.choose`; None for a path skipped as unchanged),
    chosen before anything is written: a path whose source cannot be chosen, or two paths
    that would write one source, fail the import whole."""
    from locus.store.ingest import SourceChoice, SourceNames

    names = SourceNames.of(store)
    choices: list[SourceChoice | None] = []
    by_name: dict[str, Path] = {}
    for name, path, batch, _, _ in batches:
        if batch is None:
            names.for_path(path, source=source)  # its name stays its own
            choices.append(None)
            continue
        if isinstance(batch, itertools.chain):  # a table read in parts: the path names it
            choice = SourceChoice(names.for_path(path, source=source))
        else:
            choice = names.choose(path, batch, kind=name, source=source, replace=replace)
        if choice.name in by_name:
            raise LocusInputError(
                f"{path} and {by_name[choice.name]} would both be written to source "
                f"{choice.name}; expected one source per path; import them one at a time"
            )
        by_name[choice.name] = path
        choices.append(choice)
    return choices
