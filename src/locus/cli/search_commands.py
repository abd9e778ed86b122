"""`locus identify` and `locus search`: the atlas commands that embed new evidence (they load
the artifact's LLM encoder, torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from locus.cli._app import (
    ArtifactOption,
    JsonOption,
    QuietOption,
    WorkspaceOption,
    app,
    parse_pairs,
)
from locus.cli._render import print_json, progress_bars, stdout_console
from locus.cli.atlas_commands import MetricOption, _atlas, _table


@app.command("identify")
def identify_command(
    path: Annotated[
        Path, typer.Argument(help="Scores of the unknown endpoint (query_text, score).")
    ],
    top: Annotated[int, typer.Option("--top", min=1, help="Known LLMs to list.")] = 5,
    column: Annotated[
        list[str] | None,
        typer.Option("--column", "-c", help="Map a column, CANONICAL=FILE_COLUMN."),
    ] = None,
    metric: MetricOption = "euclidean",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Which known LLM is behind an endpoint, from its scored answers alone."""
    from locus.atlas.identification import identify_endpoints
    from locus.atlas.probe_file import read_probe_evidence

    with _atlas(workspace, artifact, metric, quiet=quiet or as_json, embedder=True) as atlas:
        mapping = parse_pairs(column, "--column", "CANONICAL=FILE_COLUMN") if column else None
        evidence = read_probe_evidence(path, atlas.router.vectors_for, mapping)
        with progress_bars(quiet or as_json)("fingerprinting", total=len(evidence)) as advance:
            results = []
            for name, pair in evidence.items():
                results.extend(identify_endpoints(atlas, {name: pair}, top=top))
                advance(1)
    if as_json:
        print_json(results)
        return
    for result in results:
        _show_identification(result)


def _show_identification(result: dict[str, Any]) -> None:
    verdict = result["verdict"]
    title = f"{result['endpoint']} ({result['scores']:,} scores, {result['mode']}): " + (
        f"the same LLM as {verdict}" if verdict else "no known LLM"
    )
    matches = result["matches"]
    if result["mode"] == "shared queries":
        _table(
            title,
            ["LLM", "agreement", "shared queries", "same"],
            [
                [m["llm_id"], m["agreement"], m["shared"], "yes" if m["same"] else "no"]
                for m in matches
            ],
        )
        stdout_console().print(
            f"[dim]called the same LLM above agreement {result['threshold']:.3f}, the highest "
            "agreement of two distinct known LLMs on these queries[/]"
        )
        return
    _table(
        title,
        ["LLM", "score (lower = more alike)", "same"],
        [[m["llm_id"], m["score"], "yes" if m["same"] else "no"] for m in matches],
    )
    calibration = result["calibration"]
    stdout_console().print(
        f"[dim]{result['signal']}, threshold {result['threshold']:.2f}, chosen on the pool at "
        f"{calibration['k']} scores of new queries: own LLM found first "
        f"{calibration['identification']:.0%}, called the same {calibration['true_match']:.0%}, "
        f"another LLM called the same {calibration['false_verdict']:.0%}[/]"
    )


@app.command("search")
def search_command(
    profile: Annotated[
        str, typer.Option("--profile", help="Per-task success rates, e.g. math=0.8,law=0.3.")
    ],
    top: Annotated[int, typer.Option("--top", min=1, help="LLMs to list.")] = 10,
    queries: Annotated[
        int, typer.Option("--queries", min=16, help="Synthetic scored queries.")
    ] = 8192,
    metric: MetricOption = "euclidean",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """The real LLMs nearest to a capability profile (per-task success rates)."""
    from locus.atlas.search import parse_profile

    with _atlas(workspace, artifact, metric, quiet=quiet or as_json, embedder=True) as atlas:
        wanted = parse_profile(profile, [t for t in atlas.tasks().tolist() if t])
        rows = atlas.search(wanted, top=top, n=queries)
    if as_json:
        print_json({"profile": wanted, "matches": rows})
        return
    tasks = list(wanted)
    _table(
        "LLMs most like " + ", ".join(f"{t}={r:g}" for t, r in wanted.items()),
        ["LLM", *[f"{t} (measured)" for t in tasks], "log-likelihood", "embedding distance"],
        [
            [r["llm_id"], *[r["measured"][t] for t in tasks], r["loglik"], r["distance"]]
            for r in rows
        ],
    )
    stdout_console().print(
        "[dim]ranked by how well each LLM's measured per-task rates explain the profile "
        "(mean log-likelihood per score, higher = closer)[/]"
    )
