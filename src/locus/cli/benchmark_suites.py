"""The suites of `locus benchmark` that run on their own: onboarding (families held out),
newcomers (one LLM left out at a time), cost and stream (a production replay); each runs the
library suite, writes its JSON (and plot), and prints its table or the JSON."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from locus.cli._app import open_store
from locus.cli._render import print_json, progress_bars, stderr_console, stdout_console
from locus.errors import LocusInputError

if TYPE_CHECKING:
    from locus.pipeline import WorkspaceTable
    from locus.ray_cluster import RaySession

__all__ = [
    "cost_suite",
    "newcomers_suite",
    "onboarding_suite",
    "publish",
    "save_outputs",
    "stream_suite",
    "training_settings",
    "wrote",
]


def training_settings(pairs: list[str] | None) -> dict[str, Any] | None:
    """`--set NAME=VALUE` pairs as the LOCUS settings a suite's fits override (read as
    `locus fit --set` reads them; None: the defaults).

    Raises:
        LocusInputError: an unknown name or an unreadable value.
    """
    from locus.nn.config import TrainingConfig

    default = TrainingConfig().to_dict()
    chosen = TrainingConfig().with_settings(pairs or []).to_dict()
    return {k: v for k, v in chosen.items() if v != default[k]} or None


def onboarding_suite(
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
    locus_settings: dict[str, Any] | None = None,
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
        locus_settings=locus_settings,
        progress=progress_bars(quiet or as_json),
    )
    saved = save_outputs(result, out, f"onboarding-{name}", name, plot_onboarding, as_json)
    if saved is None:
        return
    json_path, png_path = saved
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
    wrote(json_path, png_path)


def newcomers_suite(
    data: WorkspaceTable,
    name: str,
    seeds: list[int] | None,
    ks: list[int] | None,
    newcomers: list[str] | None,
    random_newcomers: int,
    baselines: list[str] | None,
    strategies: list[str] | None,
    locus_settings: dict[str, Any] | None,
    cache_root: Path,
    out: Path,
    quiet: bool,
    as_json: bool,
) -> None:
    from locus.benchmark.newcomers import NEWCOMER_BASELINES, NEWCOMER_K, run_newcomers
    from locus.benchmark.report import newcomers_table, plot_newcomers

    if strategies and len(strategies) > 1:
        raise LocusInputError("newcomers: one --strategy at a time")
    result = run_newcomers(
        data,
        newcomers=newcomers or ["best", "worst"],
        random=random_newcomers,
        ks=ks or list(NEWCOMER_K),
        seeds=seeds or [0, 1, 2],
        strategy=(strategies or ["random"])[0],
        baselines=baselines if baselines is not None else list(NEWCOMER_BASELINES),
        cache_dir=cache_root / "newcomers",
        locus_settings=locus_settings,
        progress=progress_bars(quiet or as_json),
    )
    publish(
        result, out, f"newcomers-{name}", name, plot_newcomers, as_json,
        f"newcomers on {name}: {len(result['newcomers'])} of {result['llms']} LLMs, each left "
        f"out of the fit and onboarded from k {result['strategy']} probes, seeds "
        f"{', '.join(map(str, result['seeds']))}; {result['wall_seconds']:.0f} s",
        newcomers_table,
    )  # fmt: skip


def cost_suite(
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
    locus_settings: dict[str, Any] | None = None,
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
        locus_settings=locus_settings,
        progress=progress_bars(quiet or as_json),
    )
    saved = save_outputs(result, out, f"cost-{name}", name, plot_cost, as_json)
    if saved is None:
        return
    json_path, png_path = saved
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
    wrote(json_path, png_path)


def stream_suite(
    workspace: str | None,
    artifact: str,
    name: str | None,
    seeds: list[int] | None,
    policies: list[str] | None,
    explore: float,
    swap_at: int | None,
    out: Path,
    quiet: bool,
    as_json: bool,
    scenarios: list[str] | None = None,
) -> None:
    from locus.benchmark.stream import POLICIES, SCENARIOS, load_stream, run_stream
    from locus.benchmark.stream_report import plot_stream, stream_table

    with open_store(workspace, create=False) as store:
        pool = name or Path(store.workspace).resolve().name.lstrip(".") or "pool"
        stream = load_stream(store, artifact)
        result = run_stream(
            stream,
            seeds=seeds or [0, 1, 2],
            explore=explore,
            swap_at=swap_at,
            policies=policies or list(POLICIES),
            scenarios=scenarios or list(SCENARIOS),
            progress=progress_bars(quiet or as_json),
        )
    publish(
        result, out, f"stream-{pool}", pool, plot_stream, as_json,
        f"stream on {pool}: each test query asked once, only the chosen LLM's outcome seen; "
        f"seeds {', '.join(map(str, result['seeds']))}; {result['seconds']:.0f} s",
        stream_table,
    )  # fmt: skip


def publish(
    result: dict[str, Any],
    out: Path,
    stem: str,
    pool: str,
    plot: Callable[..., Path],
    as_json: bool,
    headline: str,
    table: Callable[[dict[str, Any]], str],
) -> None:
    """A suite's result out: its JSON and plot written (`save_outputs`), then the JSON, or
    `headline`, its `table` and the files written."""
    saved = save_outputs(result, out, stem, pool, plot, as_json)
    if saved is None:
        return
    console = stdout_console()
    console.print(headline)
    console.print(table(result), markup=False)
    wrote(*saved)


def save_outputs(
    result: dict[str, Any],
    out: Path,
    stem: str,
    pool: str,
    plot: Callable[..., Path],
    as_json: bool = False,
) -> tuple[Path, Path | None] | None:
    """`out/<stem>.json` and, where matplotlib is installed, `out/<stem>.png`: their paths, or
    None where `as_json` printed the result instead (nothing more to show)."""
    from locus.benchmark.report import write_suite_json

    json_path = write_suite_json(result, out / f"{stem}.json", pool)
    try:
        png_path = plot(result, out / f"{stem}.png", f"{pool}, {result['suite']}")
    except LocusInputError as error:
        stderr_console().print(f"no plot: {error}")
        png_path = None
    if as_json:
        print_json(result)
        return None
    return json_path, png_path


def wrote(json_path: Path, png_path: Path | None) -> None:
    stdout_console().print(f"\nwrote {json_path}" + (f" and {png_path}" if png_path else ""))
