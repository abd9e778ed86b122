"""`locus benchmark SUITE`: LOCUS and the baseline routers on the same evidence, one command."""

from __future__ import annotations

import os
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
from locus.cli.benchmark_suites import (
    cost_suite,
    newcomers_suite,
    onboarding_suite,
    publish,
    stream_suite,
    training_settings,
)
from locus.errors import LocusInputError

if TYPE_CHECKING:
    pass

SUITES = {
    "anchors": "seen LLMs, unseen queries, A scores of evidence per LLM",
    "efficiency": "the evidence each method needs to match LOCUS at 128 and 256 (from anchors)",
    "onboarding": "families held out of training, onboarded from k of their scores",
    "cost": "accuracy against USD as the decision rules sweep, k-fold (needs per-query costs)",
    "newcomers": "one LLM at a time left out of the fit, onboarded from k scores as locus onboard "
    "does: the pool's hit@1 with it, its predicted accuracy, MF / IRT / kNN beside it",
    "stream": "a production replay of the fitted router's test queries, one LLM's outcome seen "
    "per query: locus with outcomes against Thompson, epsilon-greedy and LinUCB; a swapped "
    "endpoint; off-policy estimates against the truth",
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
        typer.Option(
            "--method",
            help="Method to run (repeat; default: all of them); newcomers: the baselines "
            "onboarded beside LOCUS (mf, irt, knn); stream: the policies (locus, locus-static, "
            "thompson, epsilon-greedy, linucb).",
        ),
    ] = None,
    ks: Annotated[
        list[int] | None,
        typer.Option(
            "--k",
            help="onboarding, newcomers: scores per new LLM (repeat; default 8 ... 256, "
            "newcomers 16 ... 128).",
        ),
    ] = None,
    newcomers: Annotated[
        list[str] | None,
        typer.Option(
            "--newcomer",
            help="newcomers: an LLM to leave out and onboard: best, worst or an llm_id "
            "(repeat; default best and worst).",
        ),
    ] = None,
    random_newcomers: Annotated[
        int,
        typer.Option("--random", min=0, help="newcomers: this many more, drawn at random."),
    ] = 5,
    settings: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="LOCUS training setting NAME=VALUE for the suite's LOCUS fits (repeat; read as "
            "locus fit --set reads it), e.g. max_steps=300 for a quick run.",
        ),
    ] = None,
    holdout_share: Annotated[
        float,
        typer.Option("--holdout-share", min=0.01, max=0.9, help="onboarding: share of LLMs out."),
    ] = 0.2,
    strategies: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            help="onboarding (repeat), newcomers (one): probe order: random (default), "
            "balanced, stratified, anchors, informative, mixed.",
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
    explore: Annotated[
        float,
        typer.Option(
            "--explore",
            min=0.0,
            max=1.0,
            help="stream: the share of requests explored, by locus and epsilon-greedy alike.",
        ),
    ] = 0.05,
    swap_at: Annotated[
        int | None,
        typer.Option(
            "--swap-at",
            min=1,
            help="stream: the request from which the most-routed LLM answers as the weakest "
            "[200, or half the stream where it is shorter].",
        ),
    ] = None,
    artifact: Annotated[
        str, typer.Option("--artifact", help="stream: the fitted artifact replayed.")
    ] = "default",
    scenarios: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            help="stream: no change, swap (the most-routed LLM answers as the weakest from "
            "--swap-at) or drift (the same, ever more often) (repeat; default: all three).",
        ),
    ] = None,
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
    if suite == "stream":
        stream_suite(
            workspace, artifact, pool, seeds, methods, explore, swap_at, out, quiet, as_json,
            scenarios,
        )  # fmt: skip
        return
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
        trained = training_settings(settings)  # a bad setting fails here, before any fit
        if suite == "newcomers":
            newcomers_suite(
                data, name, seeds, ks, newcomers, random_newcomers, methods, strategies,
                trained, cache_root, out, quiet, as_json,
            )  # fmt: skip
            return
        if suite == "onboarding":
            onboarding_suite(
                data, name, seeds, ks, methods, holdout_share, queries, cache_root, out, quiet,
                as_json, strategies, trained,
            )  # fmt: skip
            return
        if suite == "cost":
            cost_suite(
                data, name, seeds, methods, folds, cost_model, queries, cache_root, out, quiet,
                as_json, workers, session, trained,
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
            locus_settings=trained,
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

        def tables(found: dict[str, Any]) -> str:
            return "\n".join(
                f"\n{metric} (mean ± sd), by scores per LLM:\n{anchors_table(found, metric)}"
                for metric in ("hit@1", "guarded_hit@1", "moved", "headroom", "auroc", "ece")
            )

        publish(
            result, out, f"anchors-{name}", name, plot_anchors, as_json,
            f"anchors on {name}: {result['llms']} LLMs, {result['queries']['test']:,} test "
            f"queries, seeds {', '.join(map(str, result['seeds']))}; oracle "
            f"{result['oracle']:.4f}; {result['wall_seconds']:.0f} s",
            tables,
        )  # fmt: skip
