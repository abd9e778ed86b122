"""`locus import | llms | stats | encode`: get evaluation results in and look at them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from locus._progress import ProgressFactory
from locus.cli._app import JsonOption, QuietOption, WorkspaceOption, app
from locus.cli._render import fmt, print_json, progress_bars, stderr_console, stdout_console
from locus.errors import LocusInputError

FORMATS = ("table", "mmlu-pro", "embedllm", "routerbench", "scores-json", "llms")


def open_store(workspace: str | None, *, create: bool = True) -> Any:
    from locus.store import Store

    return Store.open(workspace, create=create)


def _import_catalog(path: Path, *, workspace: str | None, as_json: bool) -> None:
    from locus.data.llm_catalog import read_llm_catalog

    records = read_llm_catalog(path)
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
        str | None, typer.Option("--source", help="Provenance name (default from the file).")
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            help="Identifies queries WITHOUT text by id across files (default: the source). "
            "Queries with text are identified by their text, whatever the file.",
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite stored scores that differ.")
    ] = False,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Import evaluation results into the workspace (one transaction: all or nothing).

    `locus import llms FILE` imports the LLM catalog instead: names, families, parameters,
    prices and endpoints (see locus.data.llm_catalog)."""
    if format_name == "llms":
        if path is None or queries is not None or column or namespace is not None:
            raise LocusInputError(
                "import llms: expected one catalog FILE and no --queries, --column or --namespace"
            )
        _import_catalog(path, workspace=workspace, as_json=as_json)
        return
    from locus.data.importers import get_importer

    importer = get_importer(format_name)  # unknown format: fail before reading anything
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
    if namespace is not None:
        options["namespace"] = namespace
    progress = progress_bars(quiet or as_json)
    if path is None:
        if format_name != "mmlu-pro":
            raise LocusInputError(f"import {format_name}: expected a PATH to import, found none")
        path = _mmlu_pro_path(workspace, progress)
    from locus.data.file_stamps import import_fingerprint

    inputs = [path] + [v for v in options.values() if isinstance(v, Path)]
    key, files = import_fingerprint(format_name, inputs, {"source": source, **options})
    if not replace and _unchanged_since_last_import(workspace, key, files):
        if as_json:
            print_json({"changed": False, "skipped": "files unchanged since the last import"})
        else:
            stdout_console().print(
                f"already imported: {path} (its files are unchanged since the last import of "
                "them; --replace reads them again)"
            )
        return
    # read and validate before the workspace is touched: a bad file leaves no trace
    batch = importer(path, source=source, progress=progress, **options)
    with open_store(workspace) as store:
        report = store.write_batch(batch, kind=format_name, replace=replace, progress=progress)
        store.set_meta(key, files)
    if as_json:
        print_json(report.as_dict())
        return
    verb = "imported" if report.changed else "already imported (nothing changed)"
    stdout_console().print(
        f"{verb}: {report.origin} as source [bold]{report.source}[/]: "
        f"{report.llms_in_file:,} LLMs, {report.queries_in_file:,} queries, "
        f"{report.scores_in_file:,} scores; new: {report.new_llms:,} LLMs, "
        f"{report.new_queries:,} queries, {report.new_scores:,} scores"
        + (f", replaced {report.replaced_scores:,}" if report.replaced_scores else "")
        + _shared_note(report)
    )


def _unchanged_since_last_import(workspace: str | None, key: str, files: str) -> bool:
    from locus.errors import LocusStoreError

    try:
        with open_store(workspace, create=False) as store:
            return bool(store.get_meta(key) == files)
    except LocusStoreError:  # no workspace yet (or not one): nothing was imported
        return False


def _shared_note(report: Any) -> str:
    shared = int(report.new_aliases) - int(report.new_queries)
    if shared <= 0:
        return ""
    # scores that disagree with another source's are reported by the store's warning
    return (
        f"; {shared:,} of the file's query ids share their text with another id (in this file "
        "or already in the workspace), so each such text is one query"
    )


def _mmlu_pro_path(workspace: str | None, progress: ProgressFactory) -> Path:
    from locus.data.fetch import locate_or_fetch_mmlu_pro
    from locus.store import local_workspace_dir

    return locate_or_fetch_mmlu_pro(
        downloads=local_workspace_dir(workspace) / "downloads" / "mmlu_pro", progress=progress
    )


@app.command("llms")
def llms_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """List the LLMs of the workspace: queries scored, accuracy, best task, and the catalog
    (family, parameters, prices, endpoint) where `locus import llms` gave one."""
    from locus.data.llm_catalog import Endpoint

    with open_store(workspace, create=False) as store:
        summary = store.llm_summary()
        catalog = store.llm_metadata()
    for fields in catalog.values():
        endpoint = Endpoint.from_json(fields.pop("endpoint", None))
        if endpoint is not None:
            fields["endpoint"] = {
                "base_url": endpoint.base_url,
                "model": endpoint.model,
                "api_key_env": endpoint.api_key_env,
            }
    if as_json:
        print_json(
            [{**row, **catalog.get(row["llm_id"], {})} for row in summary.to_dict("records")]
        )
        return
    from rich.table import Table

    extra = [
        (field, title)
        for field, title in (
            ("family", "family"),
            ("params_b", "params (B)"),
            ("cost_per_query", "USD/query"),
            ("endpoint", "endpoint"),
        )
        if any(field in fields for fields in catalog.values())
    ]
    table = Table(title=f"{len(summary)} LLMs")
    for name, justify in (
        ("LLM", "left"),
        ("queries", "right"),
        ("accuracy", "right"),
        ("tasks", "right"),
        ("best task", "left"),
        ("its accuracy", "right"),
        *[(title, "left") for _, title in extra],
    ):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in summary.sort_values("accuracy", ascending=False).to_dict("records"):
        fields = catalog.get(row["llm_id"], {})
        shown = []
        for field, _ in extra:
            value = fields.get(field)
            if field == "endpoint" and value is not None:
                value = f"{value['model']} at {value['base_url']}"
            shown.append(fmt(value))
        table.add_row(
            row["llm_id"],
            fmt(row["queries_scored"]),
            fmt(row["accuracy"]),
            fmt(row["tasks"]),
            fmt(row["best_task"]),
            fmt(row["best_task_accuracy"]),
            *shown,
        )
    stdout_console().print(table)


@app.command("stats")
def stats_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """Counts, sources, text encoder and content checksums of the workspace."""
    with open_store(workspace, create=False) as store:
        payload = {
            "workspace": store.location,
            "counts": store.counts(),
            "text_encoder": store.text_encoder,
            "sources": store.sources().to_dict("records"),
            "checksums": store.checksums(),
        }
    if as_json:
        print_json(payload)
        return
    console = stdout_console()
    console.print(f"workspace {payload['workspace']}")
    for name, count in payload["counts"].items():
        console.print(f"  {name:<22} {count:>12,}")
    console.print(f"  text encoder           {payload['text_encoder'] or '- (run locus encode)'}")
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
            help="Text encoder: minilm-onnx-int8 (the default), minilm-onnx (float32), minilm "
            "(torch), minilm-static, mpnet, or a sentence-transformers name or folder (default: "
            "the workspace's, else minilm-onnx-int8).",
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 16,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Encode every query text that has no vector yet (cached by encoder + text hash)."""
    from locus.text import get_text_encoder
    from locus.text.cache import encode_missing

    with open_store(workspace, create=False) as store:
        previous = store.text_encoder
        text_encoder = get_text_encoder(encoder or previous)
        if previous is not None and text_encoder.name != previous:
            stderr_console().print(
                f"[yellow]switching the workspace's text encoder from {previous} to "
                f"{text_encoder.name}: artifacts trained on {previous} vectors will not route "
                "until `locus fit` runs again[/]"
            )
        report = encode_missing(
            store, text_encoder, batch_size=batch_size, progress=progress_bars(quiet or as_json)
        )
    payload = {**report.__dict__, "queries_per_second": report.queries_per_second}
    if as_json:
        print_json(payload)
        return
    stdout_console().print(
        f"encoded {report.encoded:,} queries with {report.encoder} ({report.dim}-d) in "
        f"{report.seconds:.1f} s ({report.queries_per_second:.0f}/s); "
        f"{report.cached:,} were cached"
    )
