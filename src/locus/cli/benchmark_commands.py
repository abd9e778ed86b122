"""`locus benchmark SUITE`: LOCUS and the baseline routers on the same evidence, one command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from locus.cli._app import JsonOption, QuietOption, WorkspaceOption, app
from locus.cli._render import print_json, progress_bars, stderr_console, stdout_console
from locus.cli.data_commands import open_store
from locus.errors import LocusInputError

SUITES = {
    "anchors": "seen LLMs, unseen queries, A scores of evidence per LLM",
    "efficiency": "the evidence each method needs to match LOCUS at 128 and 256 (from anchors)",
}


@app.command("benchmark")
def benchmark_command(
    suite: Annotated[str, typer.Argument(help=f"Suite: {', '.join(SUITES)}.")],
    seeds: Annotated[
        list[int] | None, typer.Option("--seed", help="Training seed (repeat; default 0 1 2).")
    ] = None,
    evidence: Annotated[
        list[str] | None,
        typer.Option(
            "--evidence",
            help="Scores per LLM, a number or 'all' (repeat; default 16 ... 1024 and all).",
        ),
    ] = None,
    methods: Annotated[
        list[str] | None,
        typer.Option("--method", help="Method to run (repeat; default: all of them)."),
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option("--pool", help="Name in the output files (default: the workspace's name)."),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Folder for <suite>-<pool>.json and .png.")
    ] = Path("benchmark-results"),
    split_seed: Annotated[int, typer.Option("--split-seed", help="Hash split of queries.")] = 0,
    workspace: WorkspaceOption = None,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Fit every method on the same evidence and score it on the same test queries.

    Fitted routers are cached in the workspace (benchmark-cache/): a re-run, or a new method,
    refits only what changed.
    """
    from locus.benchmark import (
        DEFAULT_EVIDENCE,
        METHODS,
        anchors_table,
        efficiency_from_anchors,
        efficiency_table,
        plot_anchors,
        run_anchors,
        write_suite_json,
    )
    from locus.pipeline import workspace_table

    if suite not in SUITES:
        raise LocusInputError(
            f"unknown suite {suite!r}; expected one of {', '.join(SUITES)} "
            "(onboarding and cost are not built yet)"
        )
    chosen = list(methods or METHODS)
    with open_store(workspace, create=False) as store:
        data = workspace_table(store, split_seed=split_seed)
        cache = Path(store.workspace) / "benchmark-cache" / "anchors"
        name = pool or Path(store.workspace).resolve().name.lstrip(".") or "pool"
    result = run_anchors(
        data,
        seeds=seeds or [0, 1, 2],
        evidence=evidence or list(DEFAULT_EVIDENCE),
        methods=chosen,
        cache_dir=cache,
        progress=progress_bars(quiet or as_json),
    )
    if suite == "efficiency":
        efficiency = efficiency_from_anchors(result)
        json_path = write_suite_json(efficiency, out / f"efficiency-{name}.json", name)
        if as_json:
            print_json(efficiency)
            return
        console = stdout_console()
        console.print(
            f"efficiency on {name}: evidence per LLM each method needs to match LOCUS's mean "
            f"test figure at 128 and 256 scores per LLM (seeds "
            f"{', '.join(map(str, result['seeds']))})"
        )
        console.print(efficiency_table(efficiency), markup=False)
        console.print(f"\nwrote {json_path}")
        return
    json_path = write_suite_json(result, out / f"anchors-{name}.json", name)
    png_path = None
    try:
        png_path = plot_anchors(result, out / f"anchors-{name}.png", title=f"{name}, anchors")
    except LocusInputError as error:
        stderr_console().print(f"no plot: {error}")
    if as_json:
        print_json(result)
        return
    console = stdout_console()
    console.print(
        f"anchors on {name}: {result['llms']} LLMs, {result['queries']['test']:,} test queries, "
        f"seeds {', '.join(map(str, result['seeds']))}; oracle {result['oracle']:.4f}; "
        f"{result['wall_seconds']:.0f} s"
    )
    for metric in ("hit@1", "headroom", "auroc", "ece"):
        console.print(f"\n{metric} (mean ± sd), by scores per LLM:")
        console.print(anchors_table(result, metric), markup=False)
    console.print(f"\nwrote {json_path}" + (f" and {png_path}" if png_path else ""))
