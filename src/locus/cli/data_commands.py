"""`locus llms | stats | encode`: look at what was imported, and encode its queries."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from locus.cli._app import (
    JsonOption,
    QuietOption,
    RayOption,
    WorkspaceOption,
    app,
    open_store,
    ray_or_nothing,
)
from locus.cli._render import (
    fmt,
    note,
    print_json,
    progress_bars,
    stderr_console,
    stdout_console,
)
from locus.errors import LocusInputError

PRICES = ("price_in_per_mtok", "price_out_per_mtok", "cost_per_query")  # null in --json if unset


@app.command("llms")
def llms_command(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """List the LLMs of the workspace: queries scored, accuracy, best task, and the catalog
    (family, parameters, prices, endpoint) where `locus import llms` gave one. --json rows
    always hold the prices (USD per million input and output tokens, USD per query), null
    where the catalog has none."""
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
            [
                {**row, **dict.fromkeys(PRICES), **catalog.get(row["llm_id"], {})}
                for row in summary.to_dict("records")
            ]
        )
        return
    from rich.table import Table

    extra = [
        (field, title)
        for field, title in (
            ("family", "family"),
            ("params_b", "params (B)"),
            ("price_in_per_mtok", "USD/M in"),
            ("price_out_per_mtok", "USD/M out"),
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
        *[(title, "right" if field in PRICES else "left") for field, title in extra],
    ):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in summary.sort_values("accuracy", ascending=False).to_dict("records"):
        fields = catalog.get(row["llm_id"], {})
        shown = []
        for field, _ in extra:
            value = fields.get(field)
            if field == "endpoint" and value is not None:
                value = f"{value['model']} at {value['base_url']}"
            # prices as given: 0.00012 USD a query is not 0.000
            shown.append(f"{value:g}" if field in PRICES and value is not None else fmt(value))
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
def stats_command(
    workspace: WorkspaceOption = None, as_json: JsonOption = False, quiet: QuietOption = False
) -> None:
    """Counts, sources, text encoder and content checksums of the workspace (`quiet` is
    accepted like every command's: stats draws no progress bar)."""
    with open_store(workspace, create=False) as store:
        payload: dict[str, Any] = {
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


def _old_default_name() -> str:
    """The default encoder's name before it kept a long text's head and tail (2026-12-03)."""
    from locus.text import get_text_encoder

    return get_text_encoder("minilm-onnx-int8-head").name


@app.command("encode")
def encode_command(
    encoder: Annotated[
        str | None,
        typer.Option(
            "--encoder",
            help="Text encoder: minilm-onnx-int8 (the default: a long text keeps its first 64 "
            "and last 192 tokens), minilm-onnx-int8-head (cut after 256 tokens, the default "
            "before 2026-12-03), minilm-onnx (float32), minilm (torch), minilm-static, mpnet, or "
            "a sentence-transformers name or folder (default: the workspace's, else "
            "minilm-onnx-int8).",
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 16,
    ray: RayOption = None,
    ray_workers: Annotated[
        int | None,
        typer.Option(
            "--ray-workers",
            min=1,
            help="With --ray: encoders to start (default: one per GPU, else one per CPU).",
        ),
    ] = None,
    chunk_size: Annotated[
        int,
        typer.Option("--chunk-size", min=1, help="Texts per unit of work (and per store commit)."),
    ] = 512,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Encode every query text that has no vector yet (cached by encoder + text hash).

    With --ray, chunks of texts are encoded by Ray workers (on CUDA where the cluster has GPUs)
    and written here as they come back; the vectors are the ones this machine would compute.
    """
    from locus.text import get_text_encoder
    from locus.text.cache import encode_missing

    if ray_workers is not None and ray is None:
        raise LocusInputError("--ray-workers is for --ray; add --ray [ADDRESS]")
    with open_store(workspace, create=False) as store:
        previous = store.text_encoder
        spec = encoder or previous
        text_encoder = get_text_encoder(spec)
        if previous is not None and text_encoder.name != previous:
            stderr_console().print(
                f"[yellow]switching the workspace's text encoder from {previous} to "
                f"{text_encoder.name}: artifacts trained on {previous} vectors will not route "
                "until `locus fit` runs again[/]"
            )
        elif encoder is None and previous == _old_default_name():
            note(
                f"this workspace's encoder ({previous}) cuts texts after 256 tokens; the "
                "default now keeps a long text's head and tail (few-shot prompts differ at the "
                "end): `locus encode --encoder minilm-onnx-int8`, then `locus fit`",
                quiet=quiet or as_json,
            )
        with ray_or_nothing(ray) as session:
            chunk_encoder = None
            if session is not None:
                from locus.text.ray_encode import RayChunkEncoder

                chunk_encoder = RayChunkEncoder(
                    spec or text_encoder.name,
                    text_encoder.name,
                    session,
                    workers=ray_workers,
                    batch_size=batch_size,
                )
                if not (quiet or as_json):
                    stderr_console().print(
                        f"encoding on {session.describe()}, {chunk_encoder.workers} workers"
                    )
            report = encode_missing(
                store,
                text_encoder,
                chunk_size=chunk_size,
                batch_size=batch_size,
                progress=progress_bars(quiet or as_json),
                chunk_encoder=chunk_encoder,
            )
    payload = {
        **report.__dict__,
        "queries_per_second": report.queries_per_second,
        "ray": None if session is None else session.__dict__,
    }
    if as_json:
        print_json(payload)
        return
    stdout_console().print(
        f"encoded {report.encoded:,} queries with {report.encoder} ({report.dim}-d) in "
        f"{report.seconds:.1f} s ({report.queries_per_second:.0f}/s); "
        f"{report.cached:,} were cached"
    )
