"""`locus onboard NAME --endpoint URL`: probe an endpoint, grade its answers, place the LLM."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Annotated

import typer

from locus.cli._app import (
    ArtifactOption,
    JsonOption,
    QuietOption,
    WorkspaceOption,
    app,
    open_store,
)
from locus.cli._render import fmt, print_json, progress_bars, stdout_console
from locus.errors import LocusInputError

if TYPE_CHECKING:
    from locus.pipeline.onboard import OnboardReport

PARTIAL_EXIT_CODE = 1  # placed, but some probes failed after their retries (a re-run asks them)


@app.command("onboard")
def onboard_command(
    llm_id: Annotated[str, typer.Argument(help="The name the LLM gets in the pool.")],
    endpoint: Annotated[
        str,
        typer.Option(
            "--endpoint",
            help="Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1.",
            show_default=False,
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option("--model", help="The model name the endpoint expects (default: NAME)."),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="Environment variable holding the endpoint's API key."),
    ] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="How many probe queries.")] = 32,
    strategy: Annotated[
        str,
        typer.Option(
            "--strategy",
            help="Probe choice: random (routes best, measured), balanced (over the pool's "
            "easiness: its accuracy read closer), stratified (by task), informative, mixed, "
            "anchors (see `locus probes`).",
        ),
    ] = "random",
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Requests in flight at once.")
    ] = 4,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds per request.")
    ] = 120.0,
    retries: Annotated[
        int, typer.Option("--retries", min=0, help="Retries of a failed request (backoff).")
    ] = 3,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Cap on each answer's tokens.")
    ] = None,
    unreadable: Annotated[
        str,
        typer.Option(
            "--unreadable",
            help="An answer no grader can read: skip (not scored) or wrong (scored 0, as "
            "benchmark harnesses do). Counted either way.",
        ),
    ] = "skip",
    seed: Annotated[int, typer.Option("--seed", help="For random and anchors.")] = 0,
    artifact: ArtifactOption = "default",
    workspace: WorkspaceOption = None,
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Onboard an endpoint: ask it the probe queries, grade the answers against the workspace's
    reference answers, import the scores, embed the LLM (no retraining), and show where it
    landed. Every answer is kept as it arrives: an interrupted run resumes where it stopped.

    The first line says from how many of the probes the LLM was placed. Exit status: 0 every
    probe answered; 1 placed, but some probes failed after their retries (run the same
    command again to ask only those); 2 nothing placed, e.g. fewer than 16 probes answered
    (or than --n, when smaller), with the error on one line."""
    from locus.data.llm_catalog import Endpoint
    from locus.pipeline.onboard import onboard_llm

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise LocusInputError(
                f"--api-key-env {api_key_env}: the variable is not set or empty; expected the "
                f"endpoint's API key in it; export {api_key_env}=..."
            )
    target = Endpoint(endpoint, model or llm_id, api_key_env)
    with open_store(workspace, create=False) as store:
        report = onboard_llm(
            store, llm_id, target, api_key=api_key, n=n, strategy=strategy, seed=seed,
            artifact=artifact, concurrency=concurrency, timeout_s=timeout, retries=retries,
            max_tokens=max_tokens, unreadable=unreadable, progress=progress_bars(quiet or as_json),
        )  # fmt: skip
    if as_json:
        print_json(report.as_dict())
    else:
        _print_report(report, unreadable)
    if not report.complete:
        raise typer.Exit(PARTIAL_EXIT_CODE)


def _print_report(report: OnboardReport, unreadable: str) -> None:
    out = stdout_console()
    say = lambda text: out.print(text, markup=False)  # noqa: E731
    cost = f", {report.cost_usd:.4g} USD" if report.cost_usd is not None else ""
    right, graded = report.accuracy_on_probes, report.graded
    # its binomial standard error: at 32 probes +-0.06-0.09, the noise that moves a newcomer's
    # share of the routing most (benchmarks/README, "Onboarding and newcomers")
    spread = (
        "" if right is None or not graded else f" ± {math.sqrt(right * (1 - right) / graded):.3f}"
    )
    say(
        f"{report.headline()} ({report.strategy}; {report.asked} asked now, {report.reused} "
        f"reused) in {report.seconds:.1f} s: {fmt(right)}{spread} right on its probes; "
        f"{report.prompt_tokens:,} + {report.completion_tokens:,} tokens{cost}"
    )
    if report.ungradable:
        say(
            f"{report.ungradable} answers no grader could read "
            f"({'scored wrong' if unreadable == 'wrong' else 'not scored'}), e.g. "
            f"{report.ungradable_examples[0]!r}"
        )
    if report.failed:
        first = next(iter(report.failed.items()))
        say(f"the first failed probe: {first[0]!r}: {first[1]}")
    say("nearest LLMs (embedding distance, each from its scores on the same probes; agreement):")
    for row in report.nearest:
        agreement = row["agreement_on_probes"]
        said = "-" if agreement is None else f"{agreement:.0%} of {row['shared_probes']}"
        say(f"  {row['llm_id']:<40} {row['distance_on_probes']:.3f}  {said}")
    paired = report.beside_default
    if paired is not None:
        verdict = "beyond noise" if paired["beyond_noise"] else "within noise"
        took = "; it is the router's default now" if paired["became_default"] else ""
        say(
            f"beside the router's default {paired['llm_id']} on the same {paired['probes']} "
            f"probes: {paired['gain']:+.3f} ± {paired['se']:.3f} ({verdict}, two standard "
            f"errors{took})"
        )
        if not paired["beyond_noise"]:
            say(
                "  its share of the routing rests on its level, which these probes read only "
                "roughly: more probes (--n) or outcomes (POST /v1/outcomes, the gateway's "
                "explore) settle it"
            )
    say("predicted accuracy per task (test queries) / measured on its probes:")
    for row in report.per_task:
        measured = row["measured_on_probes"]
        seen = "-" if measured is None else f"{measured:.2f} ({row['probes']})"
        say(f"  {row['task']:<40} {row['predicted']:.3f}  {seen}")
    tasks = ", ".join(f"{t} {s:.0%}" for t, s in list(report.routed_tasks.items())[:5])
    say(
        f"routing would send it {report.routing_share:.1%} of the test queries"
        + (f" ({tasks})" if tasks else "")
    )
    for text in report.routed_examples:
        say(f"  e.g. {text}")
