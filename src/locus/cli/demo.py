"""`locus demo`: the main job, end to end, on the real MMLU-Pro results."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from locus.cli._app import QuietOption, WorkspaceOption, app, open_store
from locus.cli._render import stdout_console
from locus.cli._terminal import rule
from locus.cli.data_commands import encode_command, llms_command
from locus.cli.import_commands import import_command
from locus.cli.model_commands import evaluate_command, fit_command
from locus.cli.route_commands import route_and_render
from locus.errors import LocusError

DEMO_QUERIES = (
    "What is the derivative of sin(x) * x^2 with respect to x?",
    "Under the Fourth Amendment, when may police search a car without a warrant?",
    "Which enzyme unwinds the DNA double helix during replication?",
)


@app.command("demo")
def demo_command(
    encoder: Annotated[
        str | None,
        typer.Option(
            "--encoder",
            help="Text encoder (see locus encode; default minilm-onnx-int8). minilm-static encodes "
            "100x faster at a cost in correctness AUROC (benchmarks/README.md).",
        ),
    ] = None,
    workspace: WorkspaceOption = None,
    quiet: QuietOption = False,
) -> None:
    """The main job: import MMLU-Pro, encode, fit (or reuse), evaluate, route examples."""
    console = stdout_console()
    rule(console, "1. import the MMLU-Pro results")
    import_command("mmlu-pro", None, workspace=workspace, quiet=quiet)
    rule(console, "2. encode the queries (cached)")
    encode_command(encoder=encoder, workspace=workspace, quiet=quiet)
    example_prices(workspace)
    rule(console, "3. the pool")
    llms_command(workspace=workspace)
    rule(console, "4. train LOCUS (or reuse the artifact trained on the same data)")
    with open_store(workspace, create=False) as store:
        fresh = artifact_is_current(store)
    if fresh:
        console.print("artifact 'default' matches the workspace's data: reused")
    else:
        fit_command(workspace=workspace, quiet=quiet)
    rule(console, "5. routing accuracy on the held-out test queries")
    evaluate_command(workspace=workspace)
    rule(console, "6. route three new queries")
    route_and_render(list(DEMO_QUERIES), workspace=workspace)
    from locus.routing.decision import RouteRequest  # not at start-up: it loads routing

    rule(console, "7. the cheapest LLM within 95% of the best one's P(correct)")
    route_and_render(list(DEMO_QUERIES), RouteRequest(quality=0.95), workspace=workspace)
    rule(console, "next")
    console.print(
        "the map of the pool: [bold]locus atlas --out atlas.html[/] (one page, opens from disk); "
        "[bold]locus similar gemini-1.5-pro-002[/], [bold]locus portfolio --k 5[/], "
        "[bold]locus proxy LLM[/], [bold]locus search --profile math=0.8,law=0.3[/]"
    )


EXAMPLE_PRICES = "mmlu-pro-prices.yaml"  # in locus/data/examples: source and date inside


def example_prices(workspace: str | None) -> None:
    """Import the example price list of the MMLU-Pro pool (per-token list prices; see the
    file) unless an LLM of the workspace has a price already: the user's own are kept."""
    from importlib.resources import as_file, files

    from locus.data.llm_catalog import read_llm_catalog

    with open_store(workspace, create=False) as store:
        metadata = store.llm_metadata()
        priced = [
            llm
            for llm, fields in metadata.items()
            if any(fields.get(k) is not None for k in PRICE_FIELDS)
        ]
        if priced:
            return
        with as_file(files("locus.data.examples") / EXAMPLE_PRICES) as path:
            records = [r for r in read_llm_catalog(path) if r.llm_id in metadata]
        store.upsert_llm_metadata([(r.llm_id, r.metadata()) for r in records])
    stdout_console().print(
        f"example prices for {len(records)} LLMs (list prices of late 2024, not a quote: "
        f"locus/data/examples/{EXAMPLE_PRICES}; yours: `locus import llms FILE`)"
    )


PRICE_FIELDS = ("price_in_per_mtok", "price_out_per_mtok", "cost_per_query")


def artifact_is_current(store: Any) -> bool:
    """Whether the workspace's default artifact can be reused: written in this version's
    format (`locus.artifact.artifact_is_current`), on the same data and text encoder. Reads the
    artifact's config alone (no torch)."""
    from locus.artifact import Manifest, artifact_is_current
    from locus.artifact.layout import read_artifact_config
    from locus.pipeline.workspace_artifacts import DEFAULT_ARTIFACT, trained_artifact

    try:
        folder = trained_artifact(store, DEFAULT_ARTIFACT)
        config = read_artifact_config(folder)
        return bool(
            artifact_is_current(folder)
            and Manifest.from_dict(config.get("metadata")).data_checksums == store.checksums()
            and config["text_encoder"]["name"] == store.text_encoder
        )
    except (LocusError, KeyError, TypeError):
        return False
