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

    get_importer(format_name)  # unknown format: fail before reading anything
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
    # read and validate before the workspace is touched: a bad file leaves no trace
    batch = get_importer(format_name)(path, source=source, progress=progress, **options)
    with _open_store(workspace) as store:
        report = store.write_batch(batch, kind=format_name, replace=replace, progress=progress)
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
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
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
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 16,
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


ArtifactOption = Annotated[
    str, typer.Option("--artifact", help="Name of the trained artifact in the workspace.")
]


@contextmanager
def _training_bar(enabled: bool) -> Iterator[Any]:
    """A rich bar fed by the trainer's progress(step, total, info) callback."""
    if not enabled or os.environ.get("LOCUS_NO_PROGRESS"):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("training"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        console=_stderr_console(),
    ) as bar:
        task = bar.add_task("training", total=None, info="")

        def update(step: int, total: int, info: dict[str, float]) -> None:
            parts = [f"loss {info['loss']:.4f}"] if "loss" in info else []
            if "val_routing_accuracy" in info:
                parts.append(f"val hit@1 {info['val_routing_accuracy']:.4f}")
                parts.append(f"best {info.get('best_val_routing_accuracy', float('nan')):.4f}")
            if "val_log_loss" in info:
                parts.append(f"val log-loss {info['val_log_loss']:.4f}")
            bar.update(task, completed=step, total=total, info="  ".join(parts))

        yield update


@app.command("fit")
def fit_command(
    anchors: Annotated[
        int, typer.Option("--anchors", "-A", min=1, help="Anchor evaluations per LLM.")
    ] = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Training seed.")] = 0,
    split_seed: Annotated[int, typer.Option("--split-seed", help="Query split seed.")] = 0,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1)] = 3000,
    eval_every: Annotated[
        int, typer.Option("--eval-every", min=1, help="Steps between validation checks.")
    ] = 50,
    epochs: Annotated[
        int | None,
        typer.Option("--epochs", min=1, help="Passes over the LLMs (overrides --max-steps)."),
    ] = None,
    patience: Annotated[
        int, typer.Option("--patience", min=1, help="Checks without gain before stopping.")
    ] = 6,
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", help="Keep an LLM out of training.")
    ] = None,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Train the LOCUS networks on the workspace's training queries; write an artifact."""
    import math

    from locus.nn import TrainingConfig
    from locus.pipeline import fit_workspace

    with _open_store(workspace, create=False) as store:
        steps = max_steps
        if epochs is not None:
            defaults = TrainingConfig()
            steps = epochs * math.ceil(len(store.llm_ids()) / defaults.llms_per_step)
        config = TrainingConfig(
            anchors=anchors,
            seed=seed,
            max_steps=steps,
            patience=patience,
            eval_every=eval_every,
            min_evidence=min(16, anchors),
        )
        with _training_bar(not (quiet or as_json)) as progress:
            report = fit_workspace(
                store,
                config,
                name=artifact,
                split_seed=split_seed,
                exclude_llms=exclude or (),
                progress=progress,
            )
    if as_json:
        _print_json(report.as_dict())
        return
    _stdout_console().print(
        f"trained artifact [bold]{artifact}[/] on {report.llms} LLMs, {report.train_queries:,} "
        f"training queries in {report.seconds:.0f} s; best validation hit@1 "
        f"{report.best_val_routing_accuracy:.4f} at step {report.best_step}"
    )


@app.command("embed")
def embed_command(
    llm_id: Annotated[str, typer.Argument(help="The LLM to (re)embed from its stored scores.")],
    include_test: Annotated[
        bool, typer.Option("--include-test", help="Also use scores on test-split queries.")
    ] = False,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Onboard an LLM: its embedding from the scores the workspace holds, no retraining."""
    from locus.pipeline import embed_workspace_llm

    with _open_store(workspace, create=False) as store:
        result = embed_workspace_llm(store, llm_id, name=artifact, include_test=include_test)
    if as_json:
        _print_json(result)
        return
    moved = "new to the pool" if result["new"] else f"moved {result['moved']:.4f}"
    _stdout_console().print(
        f"embedded {llm_id} from {result['evidence']:,} scores in "
        f"{result['seconds'] * 1000:.1f} ms ({moved})"
    )


@app.command("route")
def route_command(
    query: Annotated[str | None, typer.Argument(help="Query text to route.")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Route each line of this file.")
    ] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Candidates to show.")] = 3,
    cost_weight: Annotated[
        float, typer.Option("--cost-weight", min=0.0, help="USD traded per unit P(correct).")
    ] = 0.0,
    max_cost: Annotated[
        float | None, typer.Option("--max-cost", min=0.0, help="Max USD per query.")
    ] = None,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send each query to the LLM most likely to answer it correctly."""
    _route_and_render(
        _route_texts(query, file),
        workspace=workspace,
        artifact=artifact,
        top=top,
        cost_weight=cost_weight,
        max_cost=max_cost,
        as_json=as_json,
    )


def _route_and_render(
    texts: list[str],
    *,
    workspace: Path | None,
    artifact: str = "default",
    top: int = 3,
    cost_weight: float = 0.0,
    max_cost: float | None = None,
    as_json: bool = False,
) -> None:
    """Load the text encoder and the artifact once, route every text, print the choices."""
    from locus.pipeline import route_workspace
    from locus.text import get_text_encoder

    with _open_store(workspace, create=False) as store:
        encoder = get_text_encoder(store.text_encoder)
        decisions = route_workspace(
            store,
            texts,
            name=artifact,
            text_encoder=encoder,
            top=top,
            cost_weight=cost_weight,
            max_cost=max_cost,
        )
    if as_json:
        _print_json(
            [{"query": text, **d.as_dict()} for text, d in zip(texts, decisions, strict=True)]
        )
        return
    console = _stdout_console()
    for text, decision in zip(texts, decisions, strict=True):
        shown = text if len(text) <= 70 else text[:67] + "..."
        others = ", ".join(f"{llm} {p:.2f}" for llm, p in decision.runners_up)
        console.print(
            f"[bold]{decision.llm_id}[/] P(correct) {decision.p_correct:.2f}"
            + (f"  ${decision.cost_usd:.6f}" if decision.cost_usd is not None else "")
            + (f"  (then {others})" if others else "")
            + f"\n  {shown!r}"
        )


def _route_texts(query: str | None, file: Path | None) -> list[str]:
    if (query is None) == (file is None):
        raise LocusInputError(
            "route: expected a query text or --file, found "
            + ("both" if query is not None else "neither")
        )
    if query is not None:
        if not query.strip():
            raise LocusInputError("route: the query text is empty; expected some text to route")
        return [query]
    assert file is not None
    try:
        lines = [line for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as error:
        raise LocusInputError(
            f"{file}: cannot read ({error}); expected a UTF-8 text file"
        ) from error
    if not lines:
        raise LocusInputError(f"{file}: no non-empty lines; expected one query per line")
    return lines


@app.command("evaluate")
def evaluate_command(
    split: Annotated[str, typer.Option("--split", help="val or test.")] = "test",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Routing hit@1/3/5 and correctness metrics on a split, next to baselines, per task."""
    from locus.pipeline import evaluate_workspace

    with _open_store(workspace, create=False) as store:
        result = evaluate_workspace(store, name=artifact, split=split)
    if as_json:
        _print_json(result)
        return
    _render_evaluation(result)


def _render_evaluation(result: dict[str, Any]) -> None:
    from rich.table import Table

    console = _stdout_console()
    routing, correct, base = result["routing"], result["correctness"], result["baselines"]
    console.print(
        f"{result['split']} split: {result['queries']:,} queries, {result['llms']} LLMs "
        f"(artifact {result['artifact']})"
    )
    summary = Table(show_header=True)
    summary.add_column("router")
    summary.add_column("hit@1", justify="right")
    summary.add_row("LOCUS", f"{routing['hit@1']:.4f}")
    summary.add_row(
        f"best single LLM ({base['best_single_llm_id']})", f"{base['best_single_llm']:.4f}"
    )
    summary.add_row("best LLM per task", f"{base['best_llm_per_task']:.4f}")
    summary.add_row("random LLM", f"{base['random']:.4f}")
    summary.add_row("oracle", f"{base['oracle']:.4f}")
    console.print(summary)
    console.print(
        f"hit@3 {routing['hit@3']:.4f}  hit@5 {routing['hit@5']:.4f}  |  correctness: accuracy "
        f"{correct['accuracy']:.4f}  AUROC {correct['auroc']:.4f}  Brier {correct['brier']:.4f}  "
        f"ECE {correct['ece']:.4f}"
    )
    if result["per_task"]:
        tasks = Table(title="per task")
        for column in ("task", "queries", "LOCUS hit@1", "best single", "oracle"):
            tasks.add_column(column, justify="left" if column == "task" else "right")
        for task, row in result["per_task"].items():
            tasks.add_row(
                task,
                f"{row['queries']:,}",
                f"{row['hit@1']:.4f}",
                f"{row['best_single_llm']:.4f}",
                f"{row['oracle']:.4f}",
            )
        console.print(tasks)


_DEMO_QUERIES = (
    "What is the derivative of sin(x) * x^2 with respect to x?",
    "Under the Fourth Amendment, when may police search a car without a warrant?",
    "Which enzyme unwinds the DNA double helix during replication?",
)


@app.command("demo")
def demo_command(
    workspace: WorkspaceOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """The main job: import MMLU-Pro, encode, fit (or reuse), evaluate, route examples."""
    from locus.pipeline import DEFAULT_ARTIFACT, load_workspace_locus

    console = _stdout_console()
    console.rule("1. import the MMLU-Pro results")
    import_command("mmlu-pro", None, workspace=workspace, quiet=quiet)
    console.rule("2. encode the queries (cached)")
    encode_command(workspace=workspace, quiet=quiet)
    console.rule("3. the pool")
    llms_command(workspace=workspace)
    console.rule("4. train LOCUS (or reuse the artifact trained on the same data)")
    with _open_store(workspace, create=False) as store:
        try:
            model = load_workspace_locus(store, DEFAULT_ARTIFACT)
            fresh = model.metadata.get("data_checksums") == store.checksums()
        except LocusError:
            fresh = False
    if fresh:
        console.print("artifact 'default' matches the workspace's data: reused")
    else:
        fit_command(workspace=workspace, quiet=quiet)
    console.rule("5. routing accuracy on the held-out test queries")
    evaluate_command(workspace=workspace)
    console.rule("6. route three new queries")
    _route_and_render(list(_DEMO_QUERIES), workspace=workspace)


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
