"""`locus fit | embed | evaluate`: train the networks, onboard LLMs, measure routing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from locus.cli._app import ArtifactOption, JsonOption, QuietOption, WorkspaceOption, app, open_store
from locus.cli._evaluation import plot_savings, render_evaluation, render_savings
from locus.cli._render import (
    calibration_line,
    guard_line,
    note,
    print_json,
    stdout_console,
    training_bar,
)
from locus.errors import LocusInputError


@app.command("fit")
def fit_command(
    anchors: Annotated[
        int, typer.Option("--anchors", "-A", min=1, help="Anchor evaluations per LLM.")
    ] = 1024,
    min_evidence: Annotated[
        int,
        typer.Option("--min-evidence", min=1, help="Smallest evidence set seen in training."),
    ] = 16,
    seed: Annotated[int, typer.Option("--seed", help="Training seed.")] = 0,
    split_seed: Annotated[int, typer.Option("--split-seed", help="Query split seed.")] = 0,
    max_steps: Annotated[
        int | None,
        typer.Option(
            "--max-steps", min=1, help="Training steps (default 150: the cosine schedule's length)."
        ),
    ] = None,
    eval_every: Annotated[
        int | None,
        typer.Option("--eval-every", min=1, help="Steps between validation checks (default 25)."),
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option("--epochs", min=1, help="Passes over the LLMs (instead of --max-steps)."),
    ] = None,
    patience: Annotated[
        int | None,
        typer.Option("--patience", min=1, help="Checks without gain before stopping (default 4)."),
    ] = None,
    settings: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="NAME=VALUE",
            help="Any training setting, e.g. --set ranking_weight=0.5 (repeatable; the names "
            "are TrainingConfig's and NetworkConfig's fields).",
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", help="Keep an LLM out of training.")
    ] = None,
    ensemble: Annotated[
        bool,
        typer.Option(
            "--ensemble/--no-ensemble",
            help="Stack LOCUS's P(correct) with the LLMs' own votes (their nearest scored "
            "queries and per-task rates; chosen on validation, or out of fold on a small "
            "pool), or route with LOCUS alone.",
        ),
    ] = True,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Train the LOCUS networks on the workspace's training queries; write an artifact."""
    from locus._progress import no_progress
    from locus.nn.config import TrainingConfig
    from locus.pipeline import fit_workspace, steps_for_epochs

    if epochs is not None and max_steps is not None:
        raise LocusInputError("fit: give --epochs or --max-steps, not both")
    chosen = {"max_steps": max_steps, "patience": patience, "eval_every": eval_every}
    given = [f"{name}={value}" for name, value in chosen.items() if value is not None]
    config = TrainingConfig(anchors=anchors, min_evidence=min_evidence, seed=seed).with_settings(
        [*given, *(settings or [])]
    )
    with open_store(workspace, create=False) as store:
        if epochs is not None:
            steps = steps_for_epochs(epochs, len(store.llm_ids()), config.llms_per_step)
            config = config.with_settings([f"max_steps={steps}"])
        with training_bar(not (quiet or as_json)) as progress:
            report = fit_workspace(
                store,
                config,
                name=artifact,
                split_seed=split_seed,
                exclude_llms=exclude or (),
                progress=progress,
                ensemble=ensemble,
                stages=no_progress if progress is None else progress.stage,
            )
    if as_json:
        print_json(report.as_dict())
        return
    for said in report.notes:
        note(said, quiet=quiet)
    stdout_console().print(
        f"trained artifact [bold]{artifact}[/] on {report.llms} LLMs, {report.train_queries:,} "
        f"training queries in {report.seconds:.0f} s; best validation hit@1 "
        f"{report.best_val_routing_accuracy:.4f} at step {report.best_step}"
    )
    if report.calibration is not None:
        stdout_console().print(calibration_line(report.calibration), markup=False)
    if report.stack is not None:
        from locus.routing.stack import Stack

        stack = Stack.from_dict(report.stack)
        stdout_console().print(
            f"stacked with a kNN router over the training scores (votes of the "
            f"{' and '.join(map(str, stack.ks))} nearest queries), fitted on held-out "
            f"log-loss (validation, or out of fold on a small pool): {stack.describe()}",
            markup=False,
        )
    if report.thin is not None:
        sizes, fade = report.thin["sizes"], report.thin["fade"]
        names, weights = list(report.thin["features"]), report.thin["weights"]
        used = [
            model
            for reading, model in (("factor", "MF"), ("ability", "IRT"))
            if reading in names and any(row[names.index(reading)] > 0 for row in weights)
        ]
        models = (
            f" and its {' and '.join(used)} reading{'s' if len(used) > 1 else ''}" if used else ""
        )
        stdout_console().print(
            f"an LLM onboarded since with {sizes[0]}-{fade[1]} scores is read beside the fitted "
            f"LLMs' predictions{models} (weights fitted on them made thin: "
            f"{', '.join(map(str, sizes))} scores); from {fade[1]} on, by the stack",
            markup=False,
        )
    if report.guard is not None:
        stdout_console().print(guard_line(report.guard), markup=False)


@app.command("embed")
def embed_command(
    llm_ids: Annotated[
        list[str] | None,
        typer.Argument(help="LLMs to (re)embed from their stored scores.", show_default=False),
    ] = None,
    all_llms: Annotated[bool, typer.Option("--all", help="Every LLM of the workspace.")] = False,
    include_test: Annotated[
        bool, typer.Option("--include-test", help="Also use scores on test-split queries.")
    ] = False,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Onboard or refine LLMs: embeddings from the scores the workspace holds, no retraining."""
    from locus.pipeline import embed_workspace_llms

    if bool(llm_ids) == all_llms:
        raise LocusInputError(
            "embed: expected LLM ids or --all, found " + ("both" if all_llms else "neither")
        )
    with open_store(workspace, create=False) as store:
        reports = embed_workspace_llms(
            store, None if all_llms else llm_ids, name=artifact, include_test=include_test
        )
    if as_json:
        print_json([r.as_dict() for r in reports])
        return
    console = stdout_console()
    for r in reports:
        moved = "new to the pool" if r.new else f"moved {r.moved:.4f}, cosine {r.cosine_moved:.4f}"
        console.print(
            f"embedded {r.llm_id} from {r.evidence:,} scores in {r.seconds * 1000:.1f} ms ({moved})"
        )


@app.command("evaluate")
def evaluate_command(
    split: Annotated[str, typer.Option("--split", help="val or test.")] = "test",
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="With per-query costs: write the accuracy-cost frontier to this PNG.",
        ),
    ] = None,
    folds: Annotated[
        int | None,
        typer.Option(
            "--folds",
            help="Route every query once, by a router fitted without it: k-fold over the "
            "queries, each fold a whole `locus fit` (its artifact's settings), nothing saved. "
            "For a pool whose test split is too small to measure (under a few hundred "
            "queries); takes k fits.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="--folds: how the folds are drawn.")] = 0,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
) -> None:
    """Routing hit@1/3/5 and correctness metrics on a split (or every query, --folds), next
    to baselines, per task; with per-query costs, what each decision rule costs and keeps."""
    from locus._progress import no_progress
    from locus.pipeline import evaluate_workspace

    if folds is not None and (split != "test" or plot is not None):
        raise LocusInputError("--folds routes every query: give it without --split or --plot")
    with open_store(workspace, create=False) as store:
        if folds is None:
            result = evaluate_workspace(store, name=artifact, split=split)
        else:
            from locus.pipeline.evaluate_folds import evaluate_folds  # fits: the train extra

            with training_bar(not (quiet or as_json)) as progress:
                result = evaluate_folds(
                    store, folds=folds, name=artifact, seed=seed, progress=progress,
                    stages=no_progress if progress is None else progress.stage,
                )  # fmt: skip
    if plot is not None:
        if result.savings is None:
            raise LocusInputError(
                "--plot draws accuracy against cost: the workspace needs per-query costs (a "
                "cost_usd column, and an artifact fitted with them) or a price for every LLM "
                "(`locus import llms`: price_in_per_mtok and price_out_per_mtok, or "
                "cost_per_query)"
            )
        plot_savings(result, plot)
    if as_json:
        print_json(result.as_dict())
        return
    render_evaluation(result)
    if result.savings is not None:
        render_savings(result.savings)
    if plot is not None:
        stdout_console().print(f"wrote {plot}")


@app.command("outcomes")
def outcomes_command(
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """Production outcomes (`POST /v1/outcomes`, or a file imported as source `outcomes`)
    against the fit: per LLM, their count and rate beside the P(correct) the fit predicted
    for them, overall and over the last 50, and the drift test over them in the order they
    came: an alarm where an LLM answers worse than predicted beyond chance (its endpoint may
    have changed behind its name)."""
    from rich.table import Table

    from locus.pipeline.outcomes import outcome_report

    with open_store(workspace, create=False) as store:
        report = outcome_report(store, name=artifact)
    if as_json:
        print_json(report)
        return
    console = stdout_console()
    if not report["outcomes"]:
        console.print("no outcomes yet: post them to a running `locus serve` (POST /v1/outcomes)")
        return
    table = Table(title=f"{report['outcomes']:,} outcomes against the fit's P(correct)")
    for column in ("LLM", "outcomes", "rate", "predicted", "last 50", "predicted", "drift"):
        table.add_column(column, justify="left" if column in ("LLM", "drift") else "right")
    for llm, state in report["llms"].items():
        drift = (
            f"ALARM from outcome {state['since'] + 1} (at {state['alarm_at']})"
            if state["alarm"]
            else f"none (statistic {state['statistic']:.1f} of 9.9)"
        )
        table.add_row(
            llm, f"{state['outcomes']:,}", f"{state['rate']:.3f}", f"{state['predicted']:.3f}",
            f"{state['recent_rate']:.3f}", f"{state['recent_predicted']:.3f}", drift,
        )  # fmt: skip
    console.print(table)
    if report["unknown"]:
        console.print(f"{report['unknown']:,} outcomes of LLMs the artifact does not hold")
    if report["alarms"]:
        console.print(
            f"drift alarm: {', '.join(report['alarms'])} answer worse than the fit predicts; "
            "a served gateway discounts their evidence from before the change (on_drift); "
            "re-probe them (`locus onboard`) or re-fit once they settle"
        )


@app.command("probes")
def probes_command(
    n: Annotated[int, typer.Option("--n", min=1, help="How many probe queries.")] = 32,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            help="random (routes the new LLM best: benchmarks/README), balanced (spread over "
            "how easy the pool finds each query: its accuracy read 15-40% closer), stratified "
            "(random within each task, every task in proportion), informative (queries the "
            "pool disagrees on, spread over the query space), mixed (the two in turn), or "
            "anchors (the fit's order).",
        ),
    ] = "random",
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write them as JSON lines (query_id, query_text, task)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="For random and anchors.")] = 0,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
) -> None:
    """The queries to evaluate a new LLM on, before onboarding it (`locus import`, then
    `locus embed NAME`): chosen among the workspace's training queries."""
    from locus.pipeline.probes import choose_probes

    with open_store(workspace, create=False) as store:
        probes = choose_probes(store, n, strategy=strategy, seed=seed)
    if out is not None:
        import json

        out.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in probes))
    if as_json:
        print_json(probes)
        return
    tasks: dict[str, int] = {}
    for probe in probes:
        tasks[str(probe["task"])] = tasks.get(str(probe["task"]), 0) + 1
    spread = ", ".join(f"{task} {count}" for task, count in sorted(tasks.items()))
    stdout_console().print(
        f"{len(probes)} probes ({strategy}) over {len(tasks)} tasks: {spread}"
        + (f"; written to {out}" if out is not None else ""),
        markup=False,
    )
    if out is None:
        for probe in probes[:10]:
            stdout_console().print(
                f"  {' '.join(str(probe['query_text']).split())[:100]}", markup=False
            )
