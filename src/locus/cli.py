"""The `locus` command line: parse, make one library call, render (table, --json or plot).

Errors from the library arrive as `LocusError`; they are printed on one line to stderr and the
process exits with the error's exit code (2 for bad input), the store unchanged.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from locus._progress import Advance, ProgressFactory
from locus.errors import LocusError, LocusInputError

app = typer.Typer(
    name="locus",
    help="Map a pool of LLMs from their evaluation results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

WorkspaceOption = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Workspace directory (default: $LOCUS_WORKSPACE, else ./.locus).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON to stdout for scripts.")]

FORMATS = ("table", "mmlu-pro", "embedllm", "routerbench", "scores-json")


# -- rendering helpers ---------------------------------------------------------------------


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _stdout_console() -> Any:
    from rich.console import Console

    return Console()


class _RichProgress:
    """A `ProgressFactory` drawing rich bars on stderr (silent with --quiet)."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled and not os.environ.get("LOCUS_NO_PROGRESS")

    def __call__(
        self, description: str, total: int | None = None
    ) -> AbstractContextManager[Advance]:
        return self._task(description, total)

    @contextmanager
    def _task(self, description: str, total: int | None) -> Iterator[Advance]:
        if not self._enabled:
            yield lambda n: None
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=_stderr_console(),
            transient=False,
        ) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)


def _progress(quiet: bool = False) -> ProgressFactory:
    return _RichProgress(enabled=not quiet)


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _open_store(workspace: Path | None, *, create: bool = True) -> Any:
    from locus.store import Store

    return Store.open(workspace, create=create)


def _parse_columns(pairs: list[str]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for pair in pairs:
        canonical, sep, name = pair.partition("=")
        if not sep or not canonical.strip() or not name.strip():
            raise LocusInputError(
                f"--column {pair!r}: expected CANONICAL=FILE_COLUMN such as score=correct"
            )
        mapping[canonical.strip()] = name.strip()
    return mapping


# -- commands ------------------------------------------------------------------------------


@app.command("import")
def import_command(
    format_name: Annotated[str, typer.Argument(metavar="FORMAT", help=" | ".join(FORMATS))],
    path: Annotated[
        Path | None,
        typer.Argument(help="File or folder to import (mmlu-pro: default = bundled data)."),
    ] = None,
    queries: Annotated[
        Path | None, typer.Option("--queries", help="table: a separate queries file.")
    ] = None,
    column: Annotated[
        list[str] | None,
        typer.Option("--column", "-c", help="table: map a column, CANONICAL=FILE_COLUMN."),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Query-id namespace (default from the file).")
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite stored scores that differ.")
    ] = False,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Import evaluation results into the workspace (one transaction: all or nothing)."""
    from locus.data.importers import get_importer
    from locus.store.ingest import import_path

    get_importer(format_name)  # unknown format: fail before touching anything
    options: dict[str, Any] = {}
    if format_name == "table":
        if queries is not None:
            options["queries"] = queries
        if column:
            options["columns"] = _parse_columns(column)
    elif queries is not None or column:
        raise LocusInputError(
            f"--queries and --column apply to the 'table' format only, found them with "
            f"{format_name!r}; drop them"
        )
    progress = _progress(quiet or as_json)
    if path is None:
        if format_name != "mmlu-pro":
            raise LocusInputError(f"import {format_name}: expected a PATH to import, found none")
        path = _mmlu_pro_path(workspace, progress)
    with _open_store(workspace) as store:
        report = import_path(
            store, format_name, path, source=source, replace=replace, progress=progress, **options
        )
    if as_json:
        _print_json(report.as_dict())
        return
    verb = "imported" if report.changed else "already imported (nothing changed)"
    _stdout_console().print(
        f"{verb}: {report.origin} as source [bold]{report.source}[/]: "
        f"{report.llms_in_file:,} LLMs, {report.queries_in_file:,} queries, "
        f"{report.scores_in_file:,} scores; new: {report.new_llms:,} LLMs, "
        f"{report.new_queries:,} queries, {report.new_scores:,} scores"
        + (f", replaced {report.replaced_scores:,}" if report.replaced_scores else "")
    )


def _mmlu_pro_path(workspace: Path | None, progress: ProgressFactory) -> Path:
    from locus.data.fetch import locate_or_fetch_mmlu_pro
    from locus.store import resolve_workspace

    return locate_or_fetch_mmlu_pro(
        downloads=resolve_workspace(workspace) / "downloads" / "mmlu_pro", progress=progress
    )


@app.command("llms")
def llms_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """List the LLMs of the workspace: queries scored, accuracy, best task."""
    with _open_store(workspace, create=False) as store:
        summary = store.llm_summary()
    if as_json:
        _print_json(summary.to_dict("records"))
        return
    from rich.table import Table

    table = Table(title=f"{len(summary)} LLMs")
    for name, justify in (
        ("LLM", "left"),
        ("queries", "right"),
        ("accuracy", "right"),
        ("tasks", "right"),
        ("best task", "left"),
        ("its accuracy", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in summary.sort_values("accuracy", ascending=False).to_dict("records"):
        table.add_row(
            row["llm_id"],
            _fmt(row["queries_scored"]),
            _fmt(row["accuracy"]),
            _fmt(row["tasks"]),
            _fmt(row["best_task"]),
            _fmt(row["best_task_accuracy"]),
        )
    _stdout_console().print(table)


@app.command("stats")
def stats_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """Counts, sources, text encoder and content checksums of the workspace."""
    with _open_store(workspace, create=False) as store:
        payload = {
            "workspace": str(store.workspace),
            "counts": store.counts(),
            "text_encoder": store.text_encoder,
            "sources": store.sources().to_dict("records"),
            "checksums": store.checksums(),
        }
    if as_json:
        _print_json(payload)
        return
    console = _stdout_console()
    console.print(f"workspace {payload['workspace']}")
    for name, count in payload["counts"].items():
        console.print(f"  {name:<15} {count:>12,}")
    console.print(f"  text encoder    {payload['text_encoder'] or '- (run locus encode)'}")
    for row in payload["sources"]:
        console.print(f"  source {row['name']} ({row['kind']}) from {row['origin']}")
    for name, digest in payload["checksums"].items():
        console.print(f"  sha256({name}) {digest[:16]}")


@app.command("encode")
def encode_command(
    encoder: Annotated[
        str | None,
        typer.Option(
            "--encoder",
            help="Text encoder: sentence-transformers name or folder (default: the workspace's,"
            " else all-MiniLM-L6-v2).",
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 64,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Encode every query text that has no vector yet (cached by encoder + text hash)."""
    from locus.text import get_text_encoder
    from locus.text.cache import encode_missing

    with _open_store(workspace, create=False) as store:
        text_encoder = get_text_encoder(encoder or store.text_encoder)
        report = encode_missing(
            store, text_encoder, batch_size=batch_size, progress=_progress(quiet or as_json)
        )
    payload = {**report.__dict__, "queries_per_second": report.queries_per_second}
    if as_json:
        _print_json(payload)
        return
    _stdout_console().print(
        f"encoded {report.encoded:,} queries with {report.encoder} ({report.dim}-d) in "
        f"{report.seconds:.1f} s ({report.queries_per_second:.0f}/s); "
        f"{report.cached:,} were cached"
    )


@app.command("demo")
def demo_command(
    workspace: WorkspaceOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """The main job: import the real MMLU-Pro results, encode the queries, show the pool."""
    console = _stdout_console()
    console.rule("1. import MMLU-Pro results")
    import_command("mmlu-pro", None, workspace=workspace, quiet=quiet)
    console.rule("2. encode queries")
    encode_command(workspace=workspace, quiet=quiet)
    console.rule("3. the pool")
    llms_command(workspace=workspace)


def main() -> None:
    """Entry point: run the app, turning `LocusError` into one line on stderr and an exit code."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    try:
        app()
    except LocusError as error:
        message = " ".join(str(error).split("\n"))
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(error.exit_code) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted; nothing half-written was kept\n")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
