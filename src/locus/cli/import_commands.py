"""`locus import FORMAT PATH...`: evaluation results in, one source per file or folder.

Every path is read and validated before the workspace is touched, so a bad file among several
leaves no trace; each is then written in its own transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from locus._progress import ProgressFactory
from locus.cli._app import (
    CommandInterrupted,
    JsonOption,
    QuietOption,
    WorkspaceOption,
    app,
    open_store,
    parse_pairs,
)
from locus.cli._import_plan import choose_sources, import_job, may_replace_another
from locus.cli._render import note, print_json, progress_bars, stdout_console
from locus.cli.sources_commands import stale_artifacts, tell_stale
from locus.errors import LocusInputError

if TYPE_CHECKING:
    from locus.data.batch import ImportBatch

__all__ = ["FORMATS", "import_command"]

FORMATS = (
    "auto",
    "table",
    "lm-eval",
    "inspect",
    "helm",
    "mmlu-pro",
    "embedllm",
    "routerbench",
    "scores-json",
    "llms",
)


@app.command("import")
def import_command(
    format_name: Annotated[
        str,
        typer.Argument(
            metavar="FORMAT",
            help=" | ".join(FORMATS) + " (left out before the paths: auto)",
        ),
    ],
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH...",
            help="Files or folders to import, each its own source (mmlu-pro: default = the "
            "bundled data).",
        ),
    ] = None,
    queries: Annotated[
        Path | None, typer.Option("--queries", help="table: a separate queries file.")
    ] = None,
    column: Annotated[
        list[str] | None,
        typer.Option(
            "--column",
            "-c",
            help="table or llms: map a column, CANONICAL=FILE_COLUMN.",
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="lm-eval, inspect, helm: the per-sample metric (scorer) to import, for every "
            "task (acc_norm) or one task (TASK=METRIC); repeat for several.",
        ),
    ] = None,
    task_field: Annotated[
        str | None,
        typer.Option("--task-field", help="inspect: a sample metadata field to use as task."),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="The source to write (default: the path's own, one per file or folder: its "
            "name, a short hash of the path added where another path has it).",
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            help="Identifies queries WITHOUT text by id across files (default: --source, "
            "else the format's name or a table file's name). "
            "Queries with text are identified by their text, whatever the file.",
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace this path's source with this file's scores: differing scores are "
            "overwritten, scores the file no longer has are removed. A renamed file replaces "
            "the one source of the same LLMs and queries (said, with its score count) or the "
            "source --source names; never another path's source otherwise.",
        ),
    ] = False,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Import evaluation results: a table (one file per LLM is fine), lm-eval output, inspect
    logs, HELM runs, ... (`auto`, or no format before the paths, names the format from the
    files). Nothing is written unless every path reads cleanly.

    `locus import llms FILE` imports the LLM catalog instead: names, families, parameters,
    prices and endpoints (see locus.data.llm_catalog)."""
    paths = list(paths or [])
    if format_name not in FORMATS and Path(format_name).exists():
        paths.insert(0, Path(format_name))  # `locus import *.csv`: the format read from them
        format_name = "auto"
    elif format_name not in FORMATS and any(c in format_name for c in "./\\"):
        raise LocusInputError(
            f"{format_name}: no such file or folder (and not a format: {', '.join(FORMATS)})"
        )
    if format_name == "llms":
        if len(paths) != 1 or queries is not None or namespace is not None or metric:
            raise LocusInputError(
                "import llms: expected one catalog FILE (and -c to map its columns), no "
                "--queries, --metric or --namespace"
            )
        _import_catalog(
            paths[0], workspace=workspace, as_json=as_json,
            columns=parse_pairs(column, "--column", "CATALOG_COLUMN=FILE_COLUMN such as "
                                "price_in_per_mtok=input_usd_per_1m") if column else None,
            quiet=quiet,
        )  # fmt: skip
        return
    if source is not None and len(paths) > 1:
        raise LocusInputError(
            f"--source names one source, found {len(paths)} paths; import them one at a time "
            "or drop --source (each file is then its own source)"
        )
    kept = _Kept()
    try:
        _import_paths(
            format_name, paths, kept, queries=queries, column=column, metric=metric,
            task_field=task_field, source=source, namespace=namespace, replace=replace,
            workspace=workspace, as_json=as_json, quiet=quiet,
        )  # fmt: skip
    except KeyboardInterrupt:
        for stream in kept.streams:  # its last progress line before the one saying what is kept
            if isinstance(stream, Generator):
                stream.close()
        raise CommandInterrupted(kept.interrupted()) from None


class _Kept:
    """What an import wrote so far, to say truthfully what Ctrl-C left: each path is written in
    its own transaction (`Store.write_batches`), so an interrupted one is rolled back whole
    and the paths written before it stay."""

    def __init__(self) -> None:
        self.written: list[Path] = []
        self.writing: Path | None = None
        self.started = False  # the workspace was opened for writing
        self.streams: list[Iterator[Any]] = []  # files read as they are written

    def interrupted(self) -> str:
        if not self.started:
            return "import interrupted while reading the files; nothing was imported"
        if self.writing is None:
            return "import interrupted after its last write; every path was imported and is kept"
        said = (
            f"import interrupted while writing {self.writing}: its transaction was rolled "
            "back, so nothing of it was written"
        )
        if len(self.written) == 1:
            said += f"; {self.written[0]}, imported before it, is kept"
        elif self.written:
            names = ", ".join(map(str, self.written))
            said += f"; the {len(self.written)} paths imported before it are kept: {names}"
        return said


def _import_paths(
    format_name: str,
    paths: list[Path],
    kept: _Kept,
    *,
    queries: Path | None,
    column: list[str] | None,
    metric: list[str] | None,
    task_field: str | None,
    source: str | None,
    namespace: str | None,
    replace: bool,
    workspace: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """The import proper (`import_command`'s arguments), noting in `kept` what is written."""
    progress = progress_bars(quiet or as_json)
    if not paths:
        if format_name != "mmlu-pro":
            raise LocusInputError(f"import {format_name}: expected a PATH to import, found none")
        paths = [_mmlu_pro_path(workspace, progress)]
    jobs = [
        import_job(
            format_name, path, queries, column, metric, task_field, namespace, quiet or as_json
        )
        for path in paths
    ]
    from locus.data.file_stamps import import_fingerprint
    from locus.data.importers import get_importer
    from locus.store.ingest import named

    # read and validate everything before the workspace is touched: a bad file leaves no trace
    # a batch, a lazy stream of batches (one table file), or None (unchanged since last time)
    batches: list[tuple[str, Path, Any, str, str]] = []
    for name, path, options in jobs:
        inputs = [path] + [v for v in options.values() if isinstance(v, Path)]
        key, files = import_fingerprint(name, inputs, {"source": source, **options})
        if not replace and _unchanged_since_last_import(workspace, key, files):
            batches.append((name, path, None, key, files))
            continue
        if (
            name == "table"
            and len(jobs) == 1
            and not may_replace_another(workspace, path, source, replace)
        ):
            # one table file: read in parts as it is written (bounded memory, one transaction)
            from locus.data.importers.long_table import iter_import_table

            stream = iter_import_table(
                path, source=source, progress=progress, chunk_rows=STREAM_ROWS, **options
            )
            # the first part is read now: a bad file fails before the workspace is touched
            kept.streams.append(stream)
            read: Any = itertools.chain([next(stream)], stream)
        else:
            read = get_importer(name)(path, source=source, progress=progress, **options)
        batches.append((name, path, read, key, files))
    reports: list[dict[str, Any]] = []
    with open_store(workspace) as store:
        kept.started = True
        choices = choose_sources(store, batches, source, replace)
        for (name, path, batch, key, files), choice in zip(batches, choices, strict=True):
            if batch is None:
                reports.append(
                    {
                        "path": str(path),
                        "changed": False,
                        "skipped": "files unchanged since the last import",
                    }
                )
                if not as_json:
                    stdout_console().print(
                        f"already imported: {path} (its files are unchanged since the last "
                        "import of them; --replace reads them again)"
                    )
                continue
            assert choice is not None  # a batch read has its source chosen
            notes: list[str] = []
            parts = batch if isinstance(batch, itertools.chain) else [batch]
            if choice.said and not as_json:
                if choice.replaced is not None:
                    stdout_console().print(f"{path}: {choice.said}", markup=False)
                else:
                    note(f"{path}: {choice.said}", quiet=quiet)
            kept.writing = path
            report = store.write_batches(
                _noted(named(parts, choice, path), path, notes, quiet or as_json), kind=name,
                replace=replace, whole_source=replace, progress=progress,
            )  # fmt: skip
            kept.writing = None
            kept.written.append(path)
            store.set_meta(key, files)
            replaced = {"replaced_source": choice.replaced} if choice.replaced else {}
            said = [choice.said] if choice.said and choice.replaced is None else []
            reports.append({**report.as_dict(), "format": name, "notes": said + notes, **replaced})
            if not as_json:
                _print_report(report)
        changed = any(r.get("changed") for r in reports)
        stale = stale_artifacts(store) if changed else []
        sparse = _sparse_note(store) if changed else None
    if sparse is not None:
        for found in reports:
            found["notes"] = [*found.get("notes", []), sparse]
        if not as_json:
            note(sparse, quiet=quiet)
    if as_json:
        print_json(reports[0] if len(reports) == 1 else reports)
        return
    tell_stale(stale, quiet=quiet)


STREAM_ROWS = 500_000  # rows of a table file read and written at a time


def _noted(
    parts: Iterable[ImportBatch], path: Path, notes: list[str], quiet: bool
) -> Iterator[ImportBatch]:
    """The batches, each one's notes printed (unless `quiet`) and kept in `notes`, each
    distinct note once (the parts of one file may each say how its scores were read)."""
    for part in parts:
        for said in part.notes:
            if said in notes:
                continue
            notes.append(said)
            note(f"{path.name}: {said}", quiet=quiet)
        yield part


def _print_report(report: Any) -> None:
    verb = "imported" if report.changed else "already imported (nothing changed)"
    stdout_console().print(
        f"{verb}: {report.origin} as source [bold]{report.source}[/]: "
        f"{report.llms_in_file:,} LLMs, {report.queries_in_file:,} queries, "
        f"{report.scores_in_file:,} scores; new: {report.new_llms:,} LLMs, "
        f"{report.new_queries:,} queries, {report.new_scores:,} scores"
        + (f", replaced {report.replaced_scores:,}" if report.replaced_scores else "")
        + (f", removed {report.removed_scores:,}" if report.removed_scores else "")
        + _shared_note(report)
    )


def _import_catalog(
    path: Path,
    *,
    workspace: str | None,
    as_json: bool,
    columns: dict[str, str] | None = None,
    quiet: bool = False,
) -> None:
    from locus.data.llm_catalog import read_llm_catalog

    notes: list[str] = []
    records = read_llm_catalog(path, columns, notes)
    if not as_json:
        for said in notes:
            note(f"{path.name}: {said}", quiet=quiet)
    with open_store(workspace) as store:
        counts = store.upsert_llm_metadata([(r.llm_id, r.metadata()) for r in records])
    served = sum(r.endpoint is not None for r in records)
    if as_json:
        print_json({"llms": len(records), "with_endpoint": served, **counts})
        return
    stdout_console().print(
        f"{path}: {len(records)} LLMs ({counts['new']} new, {counts['updated']} updated), "
        f"{served} with an endpoint"
    )


def _unchanged_since_last_import(workspace: str | None, key: str, files: str) -> bool:
    from locus.errors import LocusStoreError

    try:
        with open_store(workspace, create=False) as store:
            return bool(store.get_meta(key) == files)
    except LocusStoreError:  # no workspace yet (or not one): nothing was imported
        return False


# scores above which the workspace's overlap is not counted after an import (a scan of every
# score: seconds at a few million)
OVERLAP_MAX_SCORES = 5_000_000


def _sparse_note(store: Any) -> str | None:
    """One line where the workspace's LLMs share few of their queries (a production log),
    else None (`locus.offpolicy.Overlap`)."""
    from locus.offpolicy import Overlap

    counts = store.cell_counts(max_scores=OVERLAP_MAX_SCORES)
    found = None if counts is None else Overlap.from_counts(*counts)
    return found.describe() if found is not None and found.sparse else None


def _shared_note(report: Any) -> str:
    shared = int(report.new_aliases) - int(report.new_queries)
    if shared <= 0:
        return ""
    # scores that disagree with another source's are reported by the store's warning
    return (
        f"; {shared:,} of its queries have the text of a query already known (in the workspace "
        "or earlier in the file), so their scores join that query"
    )


def _mmlu_pro_path(workspace: str | None, progress: ProgressFactory) -> Path:
    from locus.data.fetch import locate_or_fetch_mmlu_pro
    from locus.store import local_workspace_dir

    return locate_or_fetch_mmlu_pro(
        downloads=local_workspace_dir(workspace) / "downloads" / "mmlu_pro", progress=progress
    )
