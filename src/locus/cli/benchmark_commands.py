"""`locus benchmark SUITE`: LOCUS and the baseline routers on the same evidence, one command."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
from locus.cli._render import print_json, progress_bars, stderr_console, stdout_console
from locus.errors import LocusInputError

if TYPE_CHECKING:
    from locus.pipeline import WorkspaceTable
    from locus.ray_cluster import RaySession

SUITES = {
    "anchors": "seen LLMs, unseen queries, A scores of evidence per LLM",
    "efficiency": "the evidence each method needs to match LOCUS at 128 and 256 (from anchors)",
    "onboarding": "families held out of training, onboarded from k of their scores",
    "cost": "accuracy against USD as the decision rules sweep, k-fold (needs per-query costs)",
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
    ks: Annotated[
        list[int] | None,
        typer.Option("--k", help="onboarding: scores per new LLM (repeat; default 8 ... 256)."),
    ] = None,
    holdout_share: Annotated[
        float,
        typer.Option("--holdout-share", min=0.01, max=0.9, help="onboarding: share of LLMs out."),
    ] = 0.2,
    strategies: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            help="onboarding: probe order (repeat): random (default), balanced, stratified, "
            "anchors, informative, mixed.",
        ),
    ] = None,
    draw: Annotated[
        str,
        typer.Option(
            "--draw",
            help="anchors/efficiency: 'shared' (every LLM's A scores on the same A queries) or "
            "'per-llm' (each LLM its own random A).",
        ),
    ] = "shared",
    pool: Annotated[
        str | None,
        typer.Option("--pool", help="Name in the output files (default: the workspace's name)."),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Folder for <suite>-<pool>.json and .png.")
    ] = Path("benchmark-results"),
    split_seed: Annotated[int, typer.Option("--split-seed", help="Hash split of queries.")] = 0,
    queries: Annotated[
        int | None,
        typer.Option(
            "--queries",
            min=10,
            help="Each seed on its own random subsample of this many queries (a small pool "
            "drawn from a large one; output name <pool>-<N>q).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Processes for the slow fits, one thread each (anchors/efficiency default: "
            "the cores, at most 4; cost: 1, fits in sequence); figures move only by "
            "floating-point order.",
        ),
    ] = None,
    folds: Annotated[
        int,
        typer.Option(
            "--folds", min=2, help="cost: k-fold over queries, every query tested once per seed."
        ),
    ] = 5,
    cost_model: Annotated[
        str,
        typer.Option(
            "--cost-model",
            help="cost: what a router expects an LLM to cost on a query: 'knn' (its costs on "
            "the nearest training queries) or 'mean' (its mean cost per query).",
        ),
    ] = "knn",
    ray: RayOption = None,
    workspace: WorkspaceOption = None,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Fit every method on the same evidence and score it on the same test queries.

    Fitted routers are cached in the workspace (benchmark-cache/): a re-run, or a new method,
    refits only what changed. With --ray (anchors, efficiency, cost), the slow fits run first
    as Ray tasks of one CPU each, the fitted routers sent back into the cache: the figures are
    those of --workers (every fit on one thread).
    """
    if ray is not None and suite == "onboarding":
        raise LocusInputError(
            "--ray runs the anchors, efficiency and cost suites; onboarding fits in sequence"
        )
    with ray_or_nothing(ray) as session:
        if session is not None and not (quiet or as_json):
            stderr_console().print(f"fitting on {session.describe()}")
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
            raise LocusInputError(f"unknown suite {suite!r}; expected one of {', '.join(SUITES)}")
        with open_store(workspace, create=False) as store:
            data = workspace_table(store, split_seed=split_seed)
            cache_root = Path(store.workspace) / "benchmark-cache"
            name = pool or Path(store.workspace).resolve().name.lstrip(".") or "pool"
        if queries is not None:
            data.subsample(queries, 0)  # a bad size fails here, before any fit
            name = f"{name}-{queries}q"
        if suite == "onboarding":
            _onboarding(
                data, name, seeds, ks, methods, holdout_share, queries, cache_root, out, quiet,
                as_json, strategies,
            )  # fmt: skip
            return
        if suite == "cost":
            _cost(
                data, name, seeds, methods, folds, cost_model, queries, cache_root, out, quiet,
                as_json, workers, session,
            )  # fmt: skip
            return
        chosen = list(methods or METHODS)
        cache = cache_root / "anchors"
        result = run_anchors(
            data,
            seeds=seeds or [0, 1, 2],
            evidence=evidence or list(DEFAULT_EVIDENCE),
            methods=chosen,
            cache_dir=cache,
            draw=draw,
            queries=queries,
            workers=workers or min(4, os.cpu_count() or 1),
            ray=session,
            progress=progress_bars(quiet or as_json),
        )
        if draw != "shared":
            name = f"{name}-{draw}"
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
        json_path, png_path = _save(result, out, f"anchors-{name}", name, plot_anchors)
        if as_json:
            print_json(result)
            return
        console = stdout_console()
        console.print(
            f"anchors on {name}: {result['llms']} LLMs, "
            f"{result['queries']['test']:,} test queries, "
            f"seeds {', '.join(map(str, result['seeds']))}; oracle {result['oracle']:.4f}; "
            f"{result['wall_seconds']:.0f} s"
        )
        for metric in ("hit@1", "guarded_hit@1", "moved", "headroom", "auroc", "ece"):
            console.print(f"\n{metric} (mean ± sd), by scores per LLM:")
            console.print(anchors_table(result, metric), markup=False)
        _wrote(json_path, png_path)


def _onboarding(
    data: WorkspaceTable,
    name: str,
    seeds: list[int] | None,
    ks: list[int] | None,
    methods: list[str] | None,
    holdout_share: float,
    queries: int | None,
    cache_root: Path,
    out: Path,
    quiet: bool,
    as_json: bool,
    strategies: list[str] | None = None,
) -> None:
    from locus.benchmark.onboarding import DEFAULT_K, ONBOARDING_METHODS, run_onboarding
    from locus.benchmark.report import onboarding_table, plot_onboarding

    result = run_onboarding(
        data,
        seeds=seeds or [0, 1, 2],
        ks=ks or list(DEFAULT_K),
        methods=methods or list(ONBOARDING_METHODS),
        holdout_share=holdout_share,
        queries=queries,
        cache_dir=cache_root / "onboarding",
        strategies=strategies or ["random"],
        progress=progress_bars(quiet or as_json),
    )
    json_path, png_path = _save(result, out, f"onboarding-{name}", name, plot_onboarding)
    if as_json:
        print_json(result)
        return
    console = stdout_console()
    held = {seed: len(llms) for seed, llms in result["held_out"].items()}
    console.print(
        f"onboarding on {name}: {result['llms']} LLMs, held out by family per seed "
        f"({', '.join(f'seed {s}: {n}' for s, n in held.items())}); "
        f"{result['wall_seconds']:.0f} s"
    )
    for metric in ("held_out_auroc", "held_out_log_loss", "hit@1"):
        console.print(f"\n{metric} (mean ± sd), by scores per onboarded LLM:")
        console.print(onboarding_table(result, metric), markup=False)
    _wrote(json_path, png_path)


def _cost(
    data: WorkspaceTable,
    name: str,
    seeds: list[int] | None,
    methods: list[str] | None,
    folds: int,
    cost_model: str,
    queries: int | None,
    cache_root: Path,
    out: Path,
    quiet: bool,
    as_json: bool,
    workers: int | None = None,
    ray: RaySession | None = None,
) -> None:
    from locus.benchmark.cost import COST_METHODS, run_cost
    from locus.benchmark.report import cost_table, plot_cost

    result = run_cost(
        data,
        seeds=seeds or [0, 1, 2],
        methods=methods or list(COST_METHODS),
        folds=folds,
        cost_model=cost_model,
        queries=queries,
        cache_dir=cache_root / "anchors",
        workers=workers or 1,
        ray=ray,
        progress=progress_bars(quiet or as_json),
    )
    json_path, png_path = _save(result, out, f"cost-{name}", name, plot_cost)
    if as_json:
        print_json(result)
        return
    console = stdout_console()
    console.print(
        f"cost on {name}: {result['llms']} LLMs, "
        f"{result['queries']['scored_and_priced_by_every_llm']:,} queries each tested once per "
        f"seed ({result['folds']} folds x {len(result['seeds'])} seeds); "
        f"{result['wall_seconds']:.0f} s"
    )
    console.print(cost_table(result), markup=False)
    for entry in result["skipped"]:
        methods = entry["methods"]
        which = "every method" if methods == result["methods"] else ", ".join(methods)
        console.print(
            f"skipped: the budget of {entry['budget_share']:.0%} of the strong LLM's cost "
            f"({entry['budget_usd']:.3g} USD per query), seed {entry['seed']}, {which}: "
            f"{entry['reason']}",
            markup=False,
        )
    _wrote(json_path, png_path)


def _save(
    result: dict[str, Any], out: Path, stem: str, pool: str, plot: Callable[..., Path]
) -> tuple[Path, Path | None]:
    """`out/<stem>.json` and, where matplotlib is installed, `out/<stem>.png`."""
    from locus.benchmark.report import write_suite_json

    json_path = write_suite_json(result, out / f"{stem}.json", pool)
    try:
        return json_path, plot(result, out / f"{stem}.png", f"{pool}, {result['suite']}")
    except LocusInputError as error:
        stderr_console().print(f"no plot: {error}")
        return json_path, None


def _wrote(json_path: Path, png_path: Path | None) -> None:
    stdout_console().print(f"\nwrote {json_path}" + (f" and {png_path}" if png_path else ""))
