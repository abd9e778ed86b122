"""The atlas commands: similar, geometry, cluster, atlas, portfolio, proxy (and, in
search_commands.py, identify and search).

Each opens the workspace's pool once (`WorkspaceAtlas`), makes one library call and renders a
table, `--json`, or a picture. These read the pool in numpy; fingerprinting and capability
search embed new evidence, so they load the artifact's encoder (torch).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from locus.cli._app import ArtifactOption, JsonOption, QuietOption, WorkspaceOption, app, open_store
from locus.cli._render import fmt, print_json, progress_bars, stdout_console
from locus.errors import LocusInputError

MetricOption = Annotated[
    str, typer.Option("--metric", help="Distance between LLM embeddings: euclidean or cosine.")
]


@contextmanager
def _atlas(
    workspace: str | None,
    artifact: str,
    metric: str,
    *,
    quiet: bool,
    embedder: bool = False,
) -> Iterator[Any]:
    from locus.atlas.pool_atlas import WorkspaceAtlas

    progress = progress_bars(quiet)
    with open_store(workspace, create=False) as store:
        embed = None
        if embedder:
            with progress("loading the LLM encoder") as advance:
                from locus.pipeline.fit import load_workspace_locus

                embed = load_workspace_locus(store, artifact).embed_many
                advance(1)
        with progress("loading the pool and its test scores") as advance:
            atlas = WorkspaceAtlas(store, artifact, metric=metric, embed=embed)
            advance(1)
        yield atlas


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 or name in ("LLM", "family") else "right")
    for row in rows:
        table.add_row(*[fmt(value) for value in row])
    stdout_console().print(table)


def _neighbour_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            r["llm_id"],
            r["distance"],
            r["agreement"],
            r["shared_queries"],
            r["predicted_agreement"],
            f"{r['family']} (guessed)" if r["family_source"] == "name" else r["family"],
        ]
        for r in rows
    ]


_NEIGHBOUR_COLUMNS = ["LLM", "distance", "agreement", "shared", "predicted", "family"]


@app.command("similar")
def similar_command(
    llm_id: Annotated[str, typer.Argument(help="The LLM whose neighbours to list.")],
    k: Annotated[int, typer.Option("--k", min=1, help="How many neighbours.")] = 5,
    metric: MetricOption = "euclidean",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """The LLMs nearest to one LLM, with their measured agreement on test queries."""
    with _atlas(workspace, artifact, metric, quiet=quiet or as_json) as atlas:
        rows = atlas.similar(llm_id, k)
        shared = len(atlas.test_scores)
    if as_json:
        print_json({"llm_id": llm_id, "metric": metric, "neighbours": rows})
        return
    guessed = any(r["family_source"] == "name" for r in rows)
    _table(
        f"nearest to {llm_id} ({metric}); agreement: share of shared test queries both got "
        f"right or both wrong (of {shared:,})"
        + (
            "; family (guessed): from the LLM's name, the LLM catalog gives none" if guessed else ""
        ),
        _NEIGHBOUR_COLUMNS,
        _neighbour_rows(rows),
    )


@app.command("geometry")
def geometry_command(
    metric: MetricOption = "euclidean",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """How well embedding distance tracks measured disagreement, over every pair of LLMs."""
    with _atlas(workspace, artifact, metric, quiet=quiet or as_json) as atlas:
        report = atlas.geometry(metric)
    if as_json:
        print_json(report.as_dict())
        return
    console = stdout_console()
    console.print(
        f"distance ({metric}) against disagreement on test queries, {report.pairs:,} pairs: "
        f"Pearson {report.pearson:.3f}, Spearman {report.spearman:.3f}, Kendall "
        f"{report.kendall:.3f}"
    )
    curve = ", ".join(f"{v:.3f}" for v in report.neighbour_agreement[:10])
    console.print(
        f"agreement with the k-th nearest neighbour, k = 1..{len(report.neighbour_agreement[:10])}"
        f": {curve} (any two LLMs: {report.mean_agreement:.3f})"
    )


@app.command("cluster")
def cluster_command(
    k: Annotated[int | None, typer.Option("--k", min=1, help="Number of clusters.")] = None,
    threshold: Annotated[
        float | None, typer.Option("--threshold", min=0.0, help="Cut the hierarchy here.")
    ] = None,
    method: Annotated[
        str, typer.Option("--method", help="hierarchical (average linkage) or kmeans.")
    ] = "hierarchical",
    dendrogram: Annotated[
        Path | None, typer.Option("--dendrogram", help="Write the dendrogram as a PNG here.")
    ] = None,
    metric: MetricOption = "euclidean",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Cluster the LLMs (k chosen by silhouette unless --k or --threshold), against families."""
    with _atlas(workspace, artifact, metric, quiet=quiet or as_json) as atlas:
        clustering = atlas.clusters(k=k, threshold=threshold, method=method)
        ari = atlas.family_agreement(clustering)
        guessed = sum(f.guessed for f in atlas.family)
        source = (
            "LLM catalog" if not guessed
            else "LLM names (guessed: the catalog gives none)" if guessed == len(atlas.family)
            else f"LLM catalog ({guessed} of {len(atlas.family)} guessed from their names)"
        )  # fmt: skip
        members = [[atlas.llm_ids[i] for i in group] for group in clustering.members()]
        if dendrogram is not None:
            from locus.atlas.clusters import hierarchical
            from locus.atlas.plots import dendrogram_png

            tree = clustering.linkage
            if tree is None:
                tree = hierarchical(atlas.embeddings, k=1, metric=metric).linkage
            assert tree is not None
            dendrogram_png(tree, atlas.llm_ids, dendrogram)
    payload = {
        "method": clustering.method,
        "k": clustering.k,
        "clusters": members,
        "family_ari": ari,
        "families_from": source,
        "dendrogram": None if dendrogram is None else str(dendrogram),
    }
    if as_json:
        print_json(payload)
        return
    console = stdout_console()
    for c, group in enumerate(members):
        console.print(f"[bold]cluster {c}[/] ({len(group)}): " + ", ".join(group))
    console.print(
        f"{clustering.k} clusters ({clustering.method}); adjusted Rand index against the "
        f"families of the {source}: {fmt(ari)}"
    )
    if dendrogram is not None:
        console.print(f"dendrogram: {dendrogram}")


@app.command("atlas")
def atlas_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML page to write.")] = Path(
        "atlas.html"
    ),
    png: Annotated[
        Path | None,
        typer.Option(
            "--png",
            help="Also write the map as a PNG here: the page's default view (the projection "
            "that keeps the most true neighbours) and colouring, names where they fit, the "
            "others numbered and keyed at the side.",
        ),
    ] = None,
    metric: MetricOption = "euclidean",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Write the map of the pool: one self-contained interactive HTML page (opens from disk)."""
    from locus.atlas.html import write_atlas_html
    from locus.atlas.page import atlas_payload

    with _atlas(workspace, artifact, metric, quiet=quiet or as_json) as atlas:
        with progress_bars(quiet or as_json)("projecting (t-SNE, PCA)") as advance:
            payload = atlas_payload(atlas)
            advance(1)
        if png is not None:
            from locus.atlas.plots import page_map_png

            page_map_png(payload, atlas.accuracy, png)
    write_atlas_html(payload, out)
    colour = payload["colour_by"][0]
    summary = {
        "html": str(out),
        "png": None if png is None else str(png),
        "llms": len(payload["llms"]),
        "neighbours_kept": payload["projection_kept"],
        "neighbours_k": payload["projection_k"],
        "projection": next(iter(payload["projections"])),
        "colour_by": colour,
        "colour_note": payload["colour_notes"].get(colour),
    }
    if as_json:
        print_json(summary)
        return
    kept = ", ".join(f"{name} {share:.0%}" for name, share in payload["projection_kept"].items())
    console = stdout_console()
    console.print(
        f"wrote {out} ({len(payload['llms'])} LLMs; share of {payload['projection_k']} true "
        f"nearest neighbours each map keeps: {kept})" + (f" and {png}" if png else "")
    )
    note = summary["colour_note"]
    console.print(f"colour: {colour}" + (f": {note}" if note else ""))


@app.command("portfolio")
def portfolio_command(
    k: Annotated[int | None, typer.Option("--k", min=1, help="LLMs in the portfolio.")] = None,
    method: Annotated[str, typer.Option("--method", help="k-center or k-medoids.")] = "k-center",
    max_params: Annotated[
        float | None,
        typer.Option("--max-params", min=0.0, help="Budget: total parameters, e.g. 150e9."),
    ] = None,
    max_usd: Annotated[
        float | None,
        typer.Option("--max-usd", min=0.0, help="Budget: total USD per query of the members."),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Write hit@1 against portfolio size (PNG) here."),
    ] = None,
    draws: Annotated[int, typer.Option("--draws", min=2, help="Random portfolios.")] = 100,
    metric: MetricOption = "euclidean",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """A few LLMs that cover the pool, chosen from embeddings alone, and what routing keeps."""
    from locus.atlas.portfolio import random_portfolios

    budgets = sum(v is not None for v in (k, max_params, max_usd))
    if budgets != 1:
        raise LocusInputError("portfolio: expected exactly one of --k, --max-params and --max-usd")
    with _atlas(workspace, artifact, metric, quiet=quiet or as_json) as atlas:
        extra: dict[str, Any] = {}
        if k is not None:
            members = atlas.portfolio(k, method)
            label = method
        else:
            chosen = atlas.budget_portfolio(max_params=max_params, max_usd=max_usd)
            members, label = chosen.members, "budget coverage"
            extra = {
                "budget": chosen.budget,
                "spent": chosen.spent,
                "unit": ("parameters" if max_params is not None else "USD per query"),
            }
        hit = atlas.portfolio_accuracy(members)
        full = atlas.full_pool_accuracy()
        mean, sd = random_portfolios(atlas.test_proba, atlas.test_scores, len(members), draws=draws)
        if plot is not None:
            from locus.atlas.plots import portfolio_curves_png

            portfolio_curves_png(atlas, plot, draws)
        names = [atlas.llm_ids[i] for i in members]
    payload = {
        "method": label,
        "members": names,
        "hit@1": hit,
        "full_pool_hit@1": full,
        "random_hit@1": {"mean": mean, "sd": sd, "draws": draws},
        **extra,
        "plot": None if plot is None else str(plot),
    }
    if as_json:
        print_json(payload)
        return
    console = stdout_console()
    console.print(f"[bold]{len(names)} LLMs[/] ({label}): " + ", ".join(names))
    if extra:
        console.print(f"spent {extra['spent']:,.6g} of {extra['budget']:,.6g} {extra['unit']}")
    console.print(
        f"routing hit@1 on test queries: {hit:.4f} among them, {full:.4f} with the full pool "
        f"({len(atlas.llm_ids)} LLMs), {mean:.4f} ± {sd:.4f} for {draws} random portfolios "
        f"of {len(names)}"
    )


@app.command("proxy")
def proxy_command(
    llm_id: Annotated[str, typer.Argument(help="The LLM to find substitutes for.")],
    k: Annotated[int, typer.Option("--k", min=1, help="How many substitutes.")] = 5,
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help="predicted: the gateway's fallback order (the LLMs the predictor sends its "
            "queries to instead; the atlas page's order); distance: nearest by embedding.",
        ),
    ] = "predicted",
    metric: MetricOption = "euclidean",
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Substitutes for an LLM that is down, and how much routing keeps with stand-ins."""
    with _atlas(workspace, artifact, metric, quiet=quiet or as_json) as atlas:
        rows = atlas.proxies(llm_id, k, by=by)
        retention = atlas.retention()
    if as_json:
        print_json({"llm_id": llm_id, "by": by, "proxies": rows, "retention": retention.as_dict()})
        return
    order = "fallback order (by predicted success)" if by == "predicted" else "nearest first"
    _table(f"substitutes for {llm_id}, {order}", _NEIGHBOUR_COLUMNS, _neighbour_rows(rows))
    stdout_console().print(
        f"proxy retention on {retention.queries:,} test queries: each routed LLM replaced by its "
        f"nearest neighbour: hit@1 {retention.nearest_hit:.4f} against {retention.hit:.4f} "
        f"({_kept_words(retention.nearest_retention)}); by the query's next best: "
        f"{retention.next_best_hit:.4f} ({_kept_words(retention.next_best_retention)}). "
        f"Fallback order: {retention.better}."
    )


def _kept_words(share: float) -> str:
    """A retention in words: never 'keeps more than everything'."""
    if share != share:  # NaN
        return "no routed answer to compare"
    if share > 1.0:
        return (
            f"the stand-ins score {share - 1:.1%} higher than the routed LLMs on these queries: "
            "the router's own choices are not the best here"
        )
    return f"keeps {share:.1%}"
